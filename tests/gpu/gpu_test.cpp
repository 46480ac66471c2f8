// GPU tests (ctest label `gpu`): the examples and the naive kernels end to end on a real device,
// the cubin reader against the driver, and the resource rule against real launches and the
// occupancy API. Each skips with the reason where there is no driver or device.
#include <gtest/gtest.h>

#include "cuda/driver.h"
#include "cuda/nvrtc.h"
#include "db/store.h"
#include "pruner/cubin.h"
#include "pruner/occupancy.h"
#include "pruner/rules.h"
#include "test_util.h"
#include "tuner/common/tuning_job.h"
#include "tuner/measure/device_info.h"
#include "tuner/run/pipeline.h"

namespace gputune {
namespace {

#define REQUIRE_GPU()                                                                 \
  do {                                                                                \
    const auto& d = cuda::Driver::instance();                                         \
    if (!d.available()) GTEST_SKIP() << "no CUDA device: " << d.unavailable_reason(); \
  } while (0)

// Tunes `samples` random configurations of `job` (the GPU suite stays short; benchmarks run
// whole spaces) into dir/g.db with a fresh cubin cache.
tuner::RunReport tune_sample(Job job, std::size_t samples, int repeats, const test::TempDir& dir,
                             tuner::RunOptions& opt) {
  job.budget.max_configurations = samples;
  job.strategy = "random";
  job.measure.repeats = repeats;
  opt.db_path = (dir / "g.db").string();
  opt.cache_dir = dir / "cache";
  return tuner::run_job(job, opt);
}

class Examples : public ::testing::TestWithParam<std::string> {};

TEST_P(Examples, TunesEndToEndAndEveryCorrectVariantIsVerified) {
  REQUIRE_GPU();
  test::TempDir dir;
  Job job = load_job(test::examples_dir() / (GetParam() + ".json"));
  tuner::RunOptions opt;
  auto rep = tune_sample(job, 40, 5, dir, opt);
  EXPECT_EQ(rep.exit_code, tuner::kExitOk) << rep.message;
  EXPECT_TRUE(rep.timed);
  ASSERT_EQ(rep.best.size(), job.contexts.size());
  db::Store store(opt.db_path);
  auto ms = store.measurements(rep.run_id);
  size_t correct = 0;
  for (auto& m : ms) {
    EXPECT_NE(m.status, db::Status::kCorrectness) << m.params_json << ": " << m.reason;
    if (m.status == db::Status::kCorrect) {
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
                         ::testing::Values("vector_add", "matmul", "transpose", "convolution",
                                           "sgemm"));

TEST(GpuResources, CubinReaderAgreesWithTheDriver) {
  REQUIRE_GPU();
  auto info = tuner::query_device(0);
  cuda::PrimaryContext ctx(0);
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
    auto c = cuda::compile_variant(v, info.limits.arch());
    ASSERT_TRUE(c.ok) << c.log;
    auto r = pruner::read_cubin_resources(c.cubin, c.lowered_name);
    cuda::Module m(c.cubin, c.lowered_name);
    EXPECT_EQ(r.registers, m.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS)) << "smem " << smem;
    EXPECT_EQ(r.static_smem, m.attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)) << "smem " << smem;
    EXPECT_EQ(r.local_bytes, m.attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)) << "smem " << smem;
    EXPECT_EQ(r.max_threads, m.attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK))
        << "smem " << smem;
    // Occupancy as the driver computes it.
    for (int threads : {64, 128, 256}) {
      int blocks = 0;
      const auto& d = cuda::Driver::instance();
      d.check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, m.function(), threads, 0),
              "occupancy");
      auto o = pruner::compute_occupancy(r, threads, 0, info.limits);
      EXPECT_EQ(o.blocks_per_sm, blocks) << "threads " << threads << " smem " << smem;
    }
  }
}

// Issue #3's rule 1 on the device: a configuration the resource rule keeps launches, one it
// removes fails to launch, and where it launches, the pruner's blocks per SM are the occupancy
// API's. Registers (an unrolled array of K floats, no launch bounds), static and dynamic shared
// memory and threads are swept across the limits: 255 registers x 1024 threads, 48 KB without
// opt-in, the opt-in maximum, the per-block reserve.
TEST(GpuResources, TheResourceRuleAgreesWithLaunchesAndTheOccupancyApi) {
  REQUIRE_GPU();
  auto info = tuner::query_device(0);
  cuda::PrimaryContext ctx(0);
  const auto& d = cuda::Driver::instance();
  const int n = 1024;
  const int optin = info.limits.smem_per_block_optin;
  cuda::DeviceBuffer p(sizeof(float) * (160 * n + n));
  auto error_name = [&](CUresult rc) {
    const char* name = nullptr;
    d.cuGetErrorName(rc, &name);
    return std::string(name ? name : "unknown error");
  };
  int launched_count = 0, refused_count = 0;
  for (int k : {4, 64, 160}) {
    for (int static_bytes : {4, 40 * 1024}) {
      Variant v;
      v.kernel_name = "k";
      v.source = R"(extern "C" __global__ void k(float* p, int n) {
        extern __shared__ float dyn[];
        __shared__ float st[STATIC_BYTES / 4];
        float acc[K];
#pragma unroll
        for (int i = 0; i < K; i++) acc[i] = p[i * n + threadIdx.x];
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
          for (int i = 0; i < K; i++) acc[i] = acc[i] * acc[(i + 1) % K] + 1.0f;
        st[threadIdx.x % (STATIC_BYTES / 4)] = acc[0];
        dyn[threadIdx.x] = acc[K - 1];
        __syncthreads();
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < K; i++) s += acc[i];
        p[threadIdx.x] = s + st[(threadIdx.x + 1) % (STATIC_BYTES / 4)] + dyn[threadIdx.x];
      })";
      v.options = {"-DK=" + std::to_string(k), "-DSTATIC_BYTES=" + std::to_string(static_bytes)};
      auto c = cuda::compile_variant(v, info.limits.arch());
      ASSERT_TRUE(c.ok) << c.log;
      auto r = pruner::read_cubin_resources(c.cubin, c.lowered_name);
      cuda::Module m(c.cubin, c.lowered_name);
      for (int threads : {128, 384, 512, 1024}) {
        // Every thread writes dyn[threadIdx.x]: at least threads floats of dynamic memory. The
        // last three sit at the opt-in limit per block: 4 bytes under, exactly at, 4 bytes over.
        const int at_limit = optin - r.static_smem;
        for (int dyn : {4 * threads, 8 * 1024, 100 * 1024, at_limit - 4, at_limit, at_limit + 4}) {
          if (dyn < 4 * threads) continue;
          pruner::RuleInput in;
          in.inspected = true;
          in.res = r;
          in.block = {threads, 1, 1};
          in.dynamic_smem = dyn;
          in.cubin_hash = "h";
          in.geometry = "g";
          auto rule = pruner::apply_rules({in}, info.limits, {.max_spill_bytes = -1});
          const auto& decision = rule.decisions.at(0);
          const std::string what = "K " + std::to_string(k) + " (" + std::to_string(r.registers) +
                                   " registers), static " + std::to_string(static_bytes) +
                                   ", dynamic " + std::to_string(dyn) + ", threads " +
                                   std::to_string(threads);
          CUresult set = d.cuFuncSetAttribute(m.function(),
                                              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn);
          CUdeviceptr ptr = p.get();
          int nn = n;
          void* params[] = {&ptr, &nn};
          CUresult launch = set == CUDA_SUCCESS ? d.cuLaunchKernel(m.function(), 1, 1, 1, threads,
                                                                   1, 1, static_cast<unsigned>(dyn),
                                                                   nullptr, params, nullptr)
                                                : set;
          if (launch == CUDA_SUCCESS) launch = d.cuCtxSynchronize();
          const bool launched = launch == CUDA_SUCCESS;
          EXPECT_EQ(decision.kept, launched)
              << what << ": rule says " << (decision.kept ? "kept" : decision.reason)
              << ", driver says " << error_name(launch);
          if (launched) {
            ++launched_count;
            int blocks = 0;
            d.check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, m.function(), threads,
                                                                  static_cast<size_t>(dyn)),
                    "occupancy");
            EXPECT_EQ(decision.occupancy.blocks_per_sm, blocks) << what;
          } else {
            ++refused_count;
          }
        }
      }
    }
  }
  // The sweep crosses the limits both ways.
  EXPECT_GT(launched_count, 20);
  EXPECT_GT(refused_count, 5);
}

// Rule 1 for launch shapes on the device: a grid or block the rule refuses for a dimension beyond
// its limit (blockDim.z 64, gridDim.y and z 65535) is refused by cuLaunchKernel, and one at the
// limit launches; the device's limits are the driver's attributes.
TEST(GpuResources, TheLaunchShapeRuleAgreesWithTheDriver) {
  REQUIRE_GPU();
  auto info = tuner::query_device(0);
  EXPECT_EQ(info.limits.max_block_dim, (std::array<std::int64_t, 3>{1024, 1024, 64}));
  EXPECT_EQ(info.limits.max_grid_dim, (std::array<std::int64_t, 3>{2147483647, 65535, 65535}));
  cuda::PrimaryContext ctx(0);
  const auto& d = cuda::Driver::instance();
  Variant v;
  v.kernel_name = "s";
  v.source = R"(extern "C" __global__ void s(int* p) {
    if (blockIdx.x + blockIdx.y + blockIdx.z + threadIdx.x + threadIdx.y + threadIdx.z == 0) p[0] = 1;
  })";
  auto c = cuda::compile_variant(v, info.limits.arch());
  ASSERT_TRUE(c.ok) << c.log;
  cuda::Module m(c.cubin, c.lowered_name);
  cuda::DeviceBuffer p(sizeof(int));
  using Dims = std::array<std::int64_t, 3>;
  const std::pair<Dims, Dims> shapes[] = {
      {{1, 65535, 1}, {32, 1, 1}}, {{1, 65536, 1}, {32, 1, 1}}, {{1, 1, 65535}, {32, 1, 1}},
      {{1, 1, 65536}, {32, 1, 1}}, {{1, 1, 1}, {1, 1, 64}},     {{1, 1, 1}, {1, 1, 65}},
      {{1, 1, 1}, {1, 1024, 1}},   {{1, 1, 1}, {2, 1024, 1}},   {{70000, 1, 1}, {32, 1, 1}}};
  int refused = 0;
  for (const auto& [grid, block] : shapes) {
    pruner::RuleInput in;
    in.inspected = true;
    in.res = pruner::read_cubin_resources(c.cubin, c.lowered_name);
    in.grid = grid;
    in.block = block;
    auto rule = pruner::apply_rules({in}, info.limits, {.max_spill_bytes = -1});
    CUdeviceptr ptr = p.get();
    void* params[] = {&ptr};
    auto u = [](std::int64_t x) { return static_cast<unsigned>(x); };
    CUresult launch =
        d.cuLaunchKernel(m.function(), u(grid[0]), u(grid[1]), u(grid[2]), u(block[0]), u(block[1]),
                         u(block[2]), 0, nullptr, params, nullptr);
    if (launch == CUDA_SUCCESS) launch = d.cuCtxSynchronize();
    const auto& decision = rule.decisions.at(0);
    EXPECT_EQ(decision.kept, launch == CUDA_SUCCESS)
        << "grid " << grid[0] << "x" << grid[1] << "x" << grid[2] << ", block " << block[0] << "x"
        << block[1] << "x" << block[2] << ": rule says "
        << (decision.kept ? "kept" : decision.reason) << ", driver returned " << launch;
    refused += launch != CUDA_SUCCESS;
  }
  EXPECT_EQ(refused, 4);
}

// Issue #4 on the device: a sample of each shipped naive kernel's generated variants through the
// real pipeline, each verified against the default configuration's outputs.
class NaiveJobs : public ::testing::TestWithParam<std::string> {};

TEST_P(NaiveJobs, GeneratedVariantsComputeWhatTheNaiveKernelComputes) {
  REQUIRE_GPU();
  test::TempDir dir;
  Job job =
      tuner::load_tuning_job(test::source_dir() / "configs" / "naive" / (GetParam() + ".json"));
  tuner::RunOptions opt;
  auto rep = tune_sample(job, 16, 3, dir, opt);
  EXPECT_EQ(rep.exit_code, tuner::kExitOk) << rep.message;
  db::Store store(opt.db_path);
  size_t correct = 0;
  for (auto& m : store.measurements(rep.run_id)) {
    EXPECT_NE(m.status, db::Status::kCorrectness) << m.params_json << ": " << m.reason;
    EXPECT_NE(m.status, db::Status::kRuntime) << m.params_json << ": " << m.reason;
    if (m.status == db::Status::kCorrect) ++correct;
  }
  EXPECT_GT(correct, 1u);
}

INSTANTIATE_TEST_SUITE_P(Gpu, NaiveJobs,
                         ::testing::Values("mm", "mm2d", "mm_acc", "mv", "tmv", "outer",
                                           "transpose", "conv1d", "conv2d", "jacobi", "reduction"));

}  // namespace
}  // namespace gputune
