// select::Kernel without a GPU: every failure is a value (kNoDriver, kCompile, ...), and a
// configuration compiled ahead (KernelOptions.as_device) lands in the cubin cache under the key
// the tuner gives the same variant, so that either one's compile is the other's cache hit.
#include "select/kernel.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "cuda/nvrtc.h"
#include "tables.h"
#include "test_util.h"
#include "variants/instantiate.h"
#include "variants/job.h"
#include "variants/space.h"

namespace gputune {
namespace {

namespace fs = std::filesystem;
using select::Error;

const select::Device kH100{"NVIDIA H100 80GB HBM3", "sm_90"};

#define REQUIRE_NO_GPU()                                                             \
  do {                                                                               \
    if (select::gpu_device()) GTEST_SKIP() << "a CUDA device is present (gpu_test)"; \
  } while (0)

TEST(SelectKernel, WithoutADriverEveryCallIsNoDriverAsAValue) {
  REQUIRE_NO_GPU();
  auto table = select::Table::from(test::matmul_table()).value_or_throw();
  auto device = select::gpu_device();
  ASSERT_FALSE(device);
  EXPECT_EQ(device.error().code, Error::Code::kNoDriver);
  auto kernel = select::Kernel::load(table, "matmul", {{2048}});
  ASSERT_FALSE(kernel);
  EXPECT_EQ(kernel.error().code, Error::Code::kNoDriver) << kernel.error().message;
  EXPECT_NE(kernel.error().message.find("no CUDA driver or device"), std::string::npos);
  auto buffer = select::Buffer::allocate(1024);
  ASSERT_FALSE(buffer);
  EXPECT_EQ(buffer.error().code, Error::Code::kNoDriver);
  EXPECT_THROW(std::move(kernel).value_or_throw(), select::SelectError);  // only when asked
}

TEST(SelectKernel, ChoosingErrorsComeThroughAsTheyAre) {
  auto table = select::Table::from(test::matmul_table()).value_or_throw();
  select::KernelOptions o;
  o.as_device = kH100;
  auto unknown = select::Kernel::load(table, "conv", {{2048}}, o);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, Error::Code::kUnknownKernel);
  auto bad = select::Kernel::load(table, "matmul", {{0}}, o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, Error::Code::kBadInput);
  o.as_device->arch = "";
  auto no_arch = select::Kernel::load(table, "matmul", {{2048}}, o);
  ASSERT_FALSE(no_arch);
  EXPECT_EQ(no_arch.error().code, Error::Code::kBadInput);
}

TEST(SelectKernel, ABadSourceIsACompileErrorWithNvrtcsLog) {
  test::TempDir dir;
  test::write_file(dir / "broken.cu", "extern \"C\" __global__ void matmul(float* C) { oops; }\n");
  auto table = select::Table::from(test::matmul_table()).value_or_throw();
  select::KernelOptions o;
  o.as_device = kH100;
  o.source_file = (dir / "broken.cu").string();
  o.cache_dir = (dir / "cache").string();
  auto kernel = select::Kernel::load(table, "matmul", {{2048}}, o);
  ASSERT_FALSE(kernel);
  EXPECT_EQ(kernel.error().code, Error::Code::kCompile) << kernel.error().message;
  EXPECT_NE(kernel.error().message.find("oops"), std::string::npos) << kernel.error().message;

  o.source_file = (dir / "missing.cu").string();
  auto missing = select::Kernel::load(table, "matmul", {{2048}}, o);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Error::Code::kBadFile);

  auto data = test::matmul_table();
  data.kernels[0].source.clear();
  auto sourceless = select::Table::from(std::move(data)).value_or_throw();
  o.source_file.clear();
  auto none = select::Kernel::load(sourceless, "matmul", {{2048}}, o);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, Error::Code::kBadFile);
  EXPECT_NE(none.error().message.find("KernelOptions.source_file"), std::string::npos);
}

// The variant compiled for 2048 (never tuned: the nearest context, 4096, gives the tiled
// configuration) is in the cache under the key the tuner computes for it from the job file.
TEST(SelectKernel, CompilesAheadIntoTheCacheUnderTheTunersKey) {
  test::TempDir dir;
  auto table = select::Table::from(test::matmul_table()).value_or_throw();
  select::KernelOptions o;
  o.as_device = kH100;
  o.cache_dir = (dir / "cache").string();
  auto kernel = select::Kernel::load(table, "matmul", {{2048}}, o);
  if (!kernel) {  // without a GPU: compiled, then no driver to load it
    EXPECT_EQ(kernel.error().code, Error::Code::kNoDriver) << kernel.error().message;
  }

  const Job job = load_job(test::examples_dir() / "matmul.json");
  const Space space = build_space(job);
  const long winner = space.find("32,8,2,2,16,1,4");
  ASSERT_GE(winner, 0);
  const Variant v = instantiate(job, load_kernel_source(job),
                                space.config(static_cast<size_t>(winner)), job.contexts.back());
  const std::string key = cuda::CubinCache::key(v, "sm_90");
  EXPECT_TRUE(fs::exists(dir / "cache" / key.substr(0, 2) / (key + ".cubin"))) << key;
}

}  // namespace
}  // namespace gputune
