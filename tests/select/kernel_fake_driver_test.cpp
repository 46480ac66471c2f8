// select::Kernel's whole path on the fake driver (tests/fake_cuda: host memory, vector_add in
// C++): the GPU as the driver names it, the choice for an input never tuned, NVRTC's cubin
// loaded, buffers, the launch with the choice's geometry, the result; a second load served from
// this process's memory; arguments that do not fit the job refused as values. Orchestration only:
// the real kernel runs in gpu_test. Run with LD_LIBRARY_PATH at the fake driver (ctest sets it).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "select/kernel.h"
#include "tables.h"
#include "test_util.h"

namespace gputune {
namespace {

using select::Error;

TEST(SelectKernelOnFakeDriver, LaunchesTheChoiceForAnUntunedSize) {
  auto gpu = select::gpu_device();
  ASSERT_TRUE(gpu) << gpu.error().message << " (run with LD_LIBRARY_PATH at tests/fake_cuda)";
  ASSERT_EQ(gpu->name, "Fake GPU (gputune test driver)");
  ASSERT_EQ(gpu->arch, "sm_90");
  auto table = select::Table::from(test::vector_add_table(gpu->name, gpu->arch)).value_or_throw();

  const int n = 1 << 22;  // 4M: between the tuned 1M and 16M, a tie in log size: the larger's
  test::TempDir dir;
  select::KernelOptions o;
  o.cache_dir = (dir / "cache").string();
  auto kernel = select::Kernel::load(table, "vector_add", {{n}}, o);
  ASSERT_TRUE(kernel) << kernel.error().message;
  EXPECT_EQ(kernel->choice().how, select::How::kNearest);
  EXPECT_EQ(kernel->choice().config, "256,4");
  EXPECT_EQ(kernel->choice().block[0], 256);
  EXPECT_EQ(kernel->choice().grid[0], n / 1024);
  EXPECT_FALSE(kernel->cached());

  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int i = 0; i < n; ++i) a[i] = static_cast<float>(i % 1000), b[i] = 0.5f * (i % 7);
  auto A = select::Buffer::from(a), B = select::Buffer::from(b);
  auto C = select::Buffer::allocate(c.size() * sizeof(float));
  ASSERT_TRUE(A && B && C);
  auto launched = kernel->launch(*C, *A, *B, n);
  ASSERT_TRUE(launched) << launched.error().message;
  ASSERT_TRUE(kernel->synchronize());
  ASSERT_TRUE(C->download(c));
  for (int i : {0, 1, 4095, n / 2, n - 1}) EXPECT_EQ(c[i], a[i] + b[i]) << i;

  // The same configuration again (another untuned size, nearest 16M): no compile, no module load.
  auto again = select::Kernel::load(table, "vector_add", {{1 << 23}}, o);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->choice().config, "256,4");
  EXPECT_TRUE(again->cached());
}

TEST(SelectKernelOnFakeDriver, ArgumentsThatDoNotFitTheJobAreRefused) {
  auto gpu = select::gpu_device();
  ASSERT_TRUE(gpu) << gpu.error().message;
  auto table = select::Table::from(test::vector_add_table(gpu->name, gpu->arch)).value_or_throw();
  auto kernel = select::Kernel::load(table, "vector_add", {{1 << 20}});
  ASSERT_TRUE(kernel) << kernel.error().message;
  EXPECT_EQ(kernel->choice().how, select::How::kMeasured);
  auto buf = select::Buffer::allocate(4 << 20);
  ASSERT_TRUE(buf);

  auto three = kernel->launch(*buf, *buf, *buf);
  ASSERT_FALSE(three);
  EXPECT_EQ(three.error().code, Error::Code::kLaunch);
  EXPECT_NE(three.error().message.find("takes 4 argument(s) (c, a, b, n); 3 given"),
            std::string::npos)
      << three.error().message;
  auto wide = kernel->launch(*buf, *buf, *buf, std::int64_t{1 << 20});
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.error().message.find("argument 3 (n)"), std::string::npos) << wide.error().message;
  std::vector<char> big(8 << 20);
  EXPECT_FALSE(buf->upload(big.data(), big.size()));
  select::Buffer taken = std::move(buf.value());
  EXPECT_NE(taken.address(), 0u);
  EXPECT_EQ(buf->address(), 0u);  // moved from: empty, refuses copies
  EXPECT_FALSE(buf->upload(big.data(), 1));
}

}  // namespace
}  // namespace gputune
