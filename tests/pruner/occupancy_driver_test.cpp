// Issue #45: occupancy exactly as the driver computes it. The toolkit's cuda_occupancy.h is the
// CPU-side reference implementation of cuOccupancyMaxActiveBlocksPerMultiprocessor; this test
// feeds it and pruner::compute_occupancy the same device tables and the same function, and
// sweeps registers x threads, static and dynamic shared memory, carve-outs and named barriers on
// every architecture the tables know. On the H100 the pruner counted 25 blocks of 64 threads where
// the driver counts 24 (registers are limited per SM sub-partition, not only per SM):
// TheRegisterLimitIsPerSubPartition holds that case.
#include <cuda_occupancy.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pruner/occupancy.h"

namespace gputune::pruner {
namespace {

const std::vector<std::string> kArchs = {"sm_70", "sm_72", "sm_75",  "sm_80",  "sm_86", "sm_87",
                                         "sm_89", "sm_90", "sm_100", "sm_103", "sm_120"};

cudaOccDeviceProp props_of(const DeviceLimits& d) {
  cudaOccDeviceProp p;
  p.computeMajor = d.cc_major;
  p.computeMinor = d.cc_minor;
  p.maxThreadsPerBlock = d.max_threads_per_block;
  p.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  p.regsPerBlock = d.regs_per_block;
  p.regsPerMultiprocessor = d.regs_per_sm;
  p.warpSize = d.warp_size;
  p.sharedMemPerBlock = static_cast<size_t>(d.smem_per_block);
  p.sharedMemPerMultiprocessor = static_cast<size_t>(d.smem_per_sm);
  p.numSms = 132;
  p.sharedMemPerBlockOptin = static_cast<size_t>(d.smem_per_block_optin);
  p.reservedSharedMemPerBlock = static_cast<size_t>(d.smem_reserved_per_block);
  return p;
}

/// The driver's count for a function launched as gputune launches it: opted in to the launch's
/// dynamic shared memory when static + dynamic exceed the default per block.
int driver_blocks(const DeviceLimits& d, const Resources& r, int threads, int dynamic,
                  int carveout = kDefaultCarveout) {
  cudaOccDeviceProp p = props_of(d);
  cudaOccFuncAttributes f;
  f.maxThreadsPerBlock = r.max_threads > 0 ? r.max_threads : d.max_threads_per_block;
  f.numRegs = r.registers;
  f.sharedSizeBytes = static_cast<size_t>(r.static_smem);
  f.partitionedGCConfig = PARTITIONED_GC_OFF;
  f.shmemLimitConfig = needs_smem_opt_in(r.static_smem, dynamic, d) ? FUNC_SHMEM_LIMIT_OPTIN
                                                                    : FUNC_SHMEM_LIMIT_DEFAULT;
  f.maxDynamicSharedSizeBytes = static_cast<size_t>(dynamic);
  f.numBlockBarriers = r.barriers;
  cudaOccDeviceState s;
  s.carveoutConfig = carveout;
  cudaOccResult out;
  out.activeBlocksPerMultiprocessor = -1;
  cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&out, &p, &f, &s, threads,
                                                           static_cast<size_t>(dynamic));
  EXPECT_EQ(e, CUDA_OCC_SUCCESS) << d.arch() << " threads " << threads;
  return out.activeBlocksPerMultiprocessor;
}

int our_blocks(const DeviceLimits& d, const Resources& r, int threads, int dynamic,
               int carveout = kDefaultCarveout) {
  const Occupancy o = compute_occupancy(r, threads, dynamic, d, carveout);
  if (!o.feasible) return 0;
  EXPECT_EQ(o.active_warps, o.blocks_per_sm * ((threads + 31) / 32));
  return o.blocks_per_sm;
}

Resources res(int registers, int static_smem = 0, int barriers = 1) {
  Resources r;
  r.registers = registers;
  r.static_smem = static_smem;
  r.barriers = barriers;
  return r;
}

std::vector<int> thread_counts() {
  std::vector<int> t{1, 31, 33, 65, 96, 100, 160, 224, 288, 352, 416, 480, 544, 1000, 1023};
  for (int n = 32; n <= 1024; n += 32) t.push_back(n);
  return t;
}

TEST(OccupancyAsTheDriver, RegistersTimesThreadsOnEveryArchitecture) {
  int compared = 0, nonzero = 0;
  for (const auto& arch : kArchs) {
    const DeviceLimits d = limits_for_arch(arch);
    for (int regs = 0; regs <= 255; ++regs) {
      for (int threads : thread_counts()) {
        const Resources r = res(regs);
        const int want = driver_blocks(d, r, threads, 0);
        ASSERT_EQ(our_blocks(d, r, threads, 0), want)
            << arch << ": " << regs << " registers x " << threads << " threads";
        ++compared;
        nonzero += want > 0;
      }
    }
  }
  // The sweep reaches both sides of every limit: launches that fit and launches that cannot.
  EXPECT_GT(nonzero, compared / 2);
  EXPECT_LT(nonzero, compared);
}

TEST(OccupancyAsTheDriver, StaticAndDynamicSharedMemoryAndCarveOuts) {
  int compared = 0, zero = 0;
  for (const auto& arch : kArchs) {
    const DeviceLimits d = limits_for_arch(arch);
    const int optin = d.smem_per_block_optin;
    for (int st : {0, 4, 100, 1024, 4096, 40 * 1024, 48 * 1024}) {
      std::vector<int> dyns{0,         1,          1000,           4096,
                            8 * 1024,  16 * 1024,  48 * 1024 - st, 48 * 1024 - st + 4,
                            64 * 1024, 100 * 1024, 130 * 1024,     164 * 1024,
                            200 * 1024};
      for (int off : {-132, -4, 0, 4, 128}) dyns.push_back(optin - st + off);
      for (int dyn : dyns) {
        if (dyn < 0) continue;
        for (int threads : {32, 128, 256, 1024}) {
          for (int regs : {32, 64}) {
            for (int carveout : {kDefaultCarveout, 0, 10, 25, 50, 60, 100}) {
              const Resources r = res(regs, st);
              const int want = driver_blocks(d, r, threads, dyn, carveout);
              ASSERT_EQ(our_blocks(d, r, threads, dyn, carveout), want)
                  << arch << ": static " << st << " + dynamic " << dyn << " bytes, " << threads
                  << " threads, " << regs << " registers, carve-out " << carveout;
              ++compared;
              zero += want == 0;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(zero, 0);  // over the opt-in limit on every architecture
  EXPECT_LT(zero, compared / 2);
}

TEST(OccupancyAsTheDriver, NamedBarriersAndLaunchBounds) {
  for (const auto& arch : kArchs) {
    const DeviceLimits d = limits_for_arch(arch);
    for (int barriers : {0, 1, 2, 3, 6, 16}) {
      for (int threads : {32, 64, 96, 256}) {
        Resources r = res(16, 0, barriers);
        EXPECT_EQ(our_blocks(d, r, threads, 0), driver_blocks(d, r, threads, 0))
            << arch << ": " << barriers << " barriers, " << threads << " threads";
      }
    }
    // __launch_bounds__ caps the block; the calculator does not look at it, the launch fails.
    Resources lb = res(32);
    lb.max_threads = 128;
    EXPECT_EQ(our_blocks(d, lb, 128, 0), driver_blocks(d, lb, 128, 0)) << arch;
    EXPECT_FALSE(compute_occupancy(lb, 256, 0, d).feasible) << arch;
  }
  // Six barriers on sm_90: 64 barriers per SM hold 10 blocks, fewer than the warps allow.
  const Occupancy o = compute_occupancy(res(16, 0, 6), 64, 0, limits_for_arch("sm_90"));
  EXPECT_EQ(o.blocks_per_sm, 10);
  EXPECT_EQ(o.limiter, "barriers");
}

// The H100's case: 40 registers, 64 threads. Per SM 65536 / 1280 = 51 warps (25 blocks); per
// sub-partition 16384 / 1280 = 12 warps, 48 per SM: 24 blocks, as the driver said.
TEST(OccupancyAsTheDriver, TheRegisterLimitIsPerSubPartition) {
  const DeviceLimits d = limits_for_arch("sm_90");
  const Occupancy o = compute_occupancy(res(40), 64, 0, d);
  EXPECT_EQ(o.blocks_per_sm, 24);
  EXPECT_EQ(o.limiter, "registers");
  EXPECT_EQ(driver_blocks(d, res(40), 64, 0), 24);
  // The per-block hardware check counts warps in multiples of four: 9 warps of 176 registers
  // (5632 per warp) are 50,688 registers, but 12 x 5632 = 67,584 > 65,536, so the launch fails.
  const Occupancy big = compute_occupancy(res(176), 288, 0, d);
  EXPECT_FALSE(big.feasible);
  EXPECT_NE(big.infeasible_reason.find("12 warps"), std::string::npos) << big.infeasible_reason;
  EXPECT_EQ(driver_blocks(d, res(176), 288, 0), 0);
}

// A smaller carve-out leaves room for fewer blocks: 50% of 228 KiB is 114 KiB, rounded up to
// the 132 KiB configuration: 4 blocks of 33 KiB (32 KiB + the 1 KiB reserve).
TEST(OccupancyAsTheDriver, CarveOutRoundsUpToAConfiguration) {
  const DeviceLimits d = limits_for_arch("sm_90");
  EXPECT_EQ(compute_occupancy(res(16, 32 * 1024), 128, 0, d, 50).blocks_per_sm, 4);
  EXPECT_EQ(compute_occupancy(res(16, 32 * 1024), 128, 0, d).blocks_per_sm, 6);
  // A carve-out too small for one block takes the next configuration that holds it.
  EXPECT_EQ(compute_occupancy(res(16, 32 * 1024), 128, 0, d, 0).blocks_per_sm, 1);
  EXPECT_FALSE(compute_occupancy(res(16), 128, 0, d, 101).feasible);
}

}  // namespace
}  // namespace gputune::pruner
