// select::Kernel on a real GPU (ctest label `gpu`; skips without a driver or device): matmul,
// tuned on this GPU at 1000 and 4096, launched at 2048 (never tuned) through the library, and
// the result checked against a dot product on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "select/kernel.h"
#include "tables.h"
#include "test_util.h"

namespace gputune {
namespace {

TEST(SelectKernelOnGpu, LaunchesMatmulAtAnUntunedSizeAndMatchesTheCpu) {
  auto gpu = select::gpu_device();
  if (!gpu) GTEST_SKIP() << "no CUDA device: " << gpu.error().message;
  auto table = select::Table::from(test::matmul_table(gpu->name, gpu->arch)).value_or_throw();
  const int n = 2048;
  test::TempDir dir;
  select::KernelOptions o;
  o.cache_dir = (dir / "cache").string();
  auto kernel = select::Kernel::load(table, "matmul", {{n}}, o);
  ASSERT_TRUE(kernel) << kernel.error().message;
  EXPECT_EQ(kernel->choice().how, select::How::kNearest) << kernel->choice().explain();

  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size(), -1.0f);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>(i % 17) / 17.0f, b[i] = static_cast<float>(i % 13) / 13.0f - 0.5f;
  auto A = select::Buffer::from(a), B = select::Buffer::from(b);
  auto C = select::Buffer::allocate(c.size() * sizeof(float));
  ASSERT_TRUE(A && B && C);
  auto launched = kernel->launch(*C, *A, *B, n);
  ASSERT_TRUE(launched) << launched.error().message;
  auto done = kernel->synchronize();
  ASSERT_TRUE(done) << done.error().message;
  ASSERT_TRUE(C->download(c));
  for (auto [r, col] : {std::pair{0, 0}, {1, 2047}, {1000, 1001}, {2047, 17}, {2047, 2047}}) {
    double want = 0;
    for (int k = 0; k < n; ++k)
      want += static_cast<double>(a[static_cast<size_t>(r) * n + k]) *
              b[static_cast<size_t>(k) * n + col];
    EXPECT_NEAR(c[static_cast<size_t>(r) * n + col], want, 1e-3 + 1e-4 * std::abs(want))
        << r << "," << col;
  }
}

}  // namespace
}  // namespace gputune
