// GPU tests (ctest label `gpu`): the examples end to end on a real device, and the cubin reader
// against the driver. Each skips with the reason where there is no driver or device.
#include <gtest/gtest.h>

#include "db/store.h"
#include "pruner/cubin.h"
#include "pruner/occupancy.h"
#include "test_util.h"
#include "tuner/compile.h"
#include "tuner/cuda_driver.h"
#include "tuner/pipeline.h"

namespace gputune {
namespace {

#define REQUIRE_GPU()                                                                 \
  do {                                                                                \
    const auto& d = tuner::Driver::instance();                                        \
    if (!d.available()) GTEST_SKIP() << "no CUDA device: " << d.unavailable_reason(); \
  } while (0)

class Examples : public ::testing::TestWithParam<std::string> {};

TEST_P(Examples, TunesEndToEndAndEveryCorrectVariantIsVerified) {
  REQUIRE_GPU();
  test::TempDir dir;
  Job job = load_job(test::examples_dir() / (GetParam() + ".json"));
  job.budget.max_configurations = 40;  // keep the GPU suite short; benchmarks run whole spaces
  job.strategy = "random";
  job.measure.repeats = 5;
  tuner::RunOptions opt;
  opt.db_path = (dir / "g.db").string();
  opt.cache_dir = dir / "cache";
  auto rep = tuner::run_job(job, opt);
  EXPECT_EQ(rep.exit_code, tuner::kExitOk) << rep.message;
  EXPECT_TRUE(rep.timed);
  ASSERT_EQ(rep.best.size(), job.contexts.size());
  db::Store store(opt.db_path);
  auto ms = store.measurements(rep.run_id);
  size_t correct = 0;
  for (auto& m : ms) {
    EXPECT_NE(m.status, "correctness") << m.params_json << ": " << m.reason;
    if (m.status == "correct") {
      ++correct;
      ASSERT_TRUE(m.time_ms);
      EXPECT_GT(*m.time_ms, 0);
      EXPECT_FALSE(m.samples_ms.empty());
    }
  }
  EXPECT_GT(correct, 0u);
  EXPECT_EQ(store.winners(job.kernel_name).size(), job.contexts.size());
}

INSTANTIATE_TEST_SUITE_P(Gpu, Examples,
                         ::testing::Values("vector_add", "matmul", "transpose", "convolution"));

TEST(GpuResources, CubinReaderAgreesWithTheDriver) {
  REQUIRE_GPU();
  auto info = tuner::query_device(0);
  tuner::PrimaryContext ctx(0);
  for (int smem : {0, 100, 4096}) {
    Variant v;
    v.kernel_name = "k";
    v.source = R"(extern "C" __global__ void __launch_bounds__(256) k(float* p, int n) {
      float loc[32];
      for (int i = 0; i < 32; i++) loc[i] = p[i * n + threadIdx.x];
#if SMEM > 0
      __shared__ float s[SMEM / 4];
      s[threadIdx.x % (SMEM / 4)] = loc[n % 32];
      __syncthreads();
      p[threadIdx.x] = s[(threadIdx.x + 1) % (SMEM / 4)];
#else
      p[threadIdx.x] = loc[n % 32];
#endif
    })";
    v.options = {"-DSMEM=" + std::to_string(smem)};
    auto c = tuner::compile_variant(v, info.limits.arch());
    ASSERT_TRUE(c.ok) << c.log;
    auto r = pruner::read_cubin_resources(c.cubin, c.lowered_name);
    tuner::Module m(c.cubin, c.lowered_name);
    EXPECT_EQ(r.registers, m.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS)) << "smem " << smem;
    EXPECT_EQ(r.static_smem, m.attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)) << "smem " << smem;
    EXPECT_EQ(r.local_bytes, m.attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)) << "smem " << smem;
    EXPECT_EQ(r.max_threads, m.attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK))
        << "smem " << smem;
    // Occupancy as the driver computes it.
    for (int threads : {64, 128, 256}) {
      int blocks = 0;
      const auto& d = tuner::Driver::instance();
      d.check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, m.function(), threads, 0),
              "occupancy");
      auto o = pruner::compute_occupancy(r, threads, 0, info.limits);
      EXPECT_EQ(o.blocks_per_sm, blocks) << "threads " << threads << " smem " << smem;
    }
  }
}

}  // namespace
}  // namespace gputune
