#include "pruner/occupancy.h"

#include <gtest/gtest.h>

#include "pruner/rules.h"

namespace gputune::pruner {
namespace {

Resources regs(int r, int smem = 0) {
  Resources res;
  res.registers = r;
  res.static_smem = smem;
  return res;
}

// Expected values follow the CUDA occupancy calculator for compute capability 9.0.
TEST(Occupancy, LimitedByWarps) {
  auto o = compute_occupancy(regs(32), 1024, 0, limits_for_arch("sm_90"));
  EXPECT_TRUE(o.feasible);
  EXPECT_EQ(o.blocks_per_sm, 2);
  EXPECT_DOUBLE_EQ(o.occupancy, 1.0);
}

TEST(Occupancy, LimitedByRegisters) {
  // 64 regs x 256 threads: 16384 regs per block -> 4 blocks of 8 warps = 32 of 64 warps.
  auto o = compute_occupancy(regs(64), 256, 0, limits_for_arch("sm_90"));
  EXPECT_EQ(o.blocks_per_sm, 4);
  EXPECT_DOUBLE_EQ(o.occupancy, 0.5);
  EXPECT_EQ(o.limiter, "registers");
  // Allocation granularity: 33 regs round up to 40 per thread per warp (256-register units).
  auto g = compute_occupancy(regs(33), 256, 0, limits_for_arch("sm_90"));
  EXPECT_EQ(g.blocks_per_sm, 65536 / (40 * 32) / 8);  // 51 warps -> 6 blocks
}

TEST(Occupancy, LimitedBySharedMemoryWithReserve) {
  // 48 KiB static + 1 KiB reserve per block: floor(228 KiB / 49 KiB) = 4 blocks.
  auto o = compute_occupancy(regs(16, 48 * 1024), 128, 0, limits_for_arch("sm_90"));
  EXPECT_EQ(o.blocks_per_sm, 4);
  EXPECT_EQ(o.limiter, "shared memory");
  // Dynamic shared memory above 48 KiB is feasible (opt-in) up to 227 KiB.
  auto big = compute_occupancy(regs(16), 128, 200 * 1024, limits_for_arch("sm_90"));
  EXPECT_TRUE(big.feasible);
  EXPECT_EQ(big.blocks_per_sm, 1);
}

TEST(Occupancy, LimitedByBlocks) {
  auto o = compute_occupancy(regs(16), 32, 0, limits_for_arch("sm_90"));
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_DOUBLE_EQ(o.occupancy, 0.5);
  auto a = compute_occupancy(regs(16), 32, 0, limits_for_arch("sm_86"));
  EXPECT_EQ(a.blocks_per_sm, 16);
  EXPECT_DOUBLE_EQ(a.occupancy, 16.0 / 48.0);
}

TEST(Occupancy, InfeasibleLaunchesAreExplained) {
  auto d = limits_for_arch("sm_90");
  auto t = compute_occupancy(regs(16), 2048, 0, d);
  EXPECT_FALSE(t.feasible);
  EXPECT_NE(t.infeasible_reason.find("threads"), std::string::npos);
  auto r = compute_occupancy(regs(255), 1024, 0, d);
  EXPECT_FALSE(r.feasible);
  EXPECT_NE(r.infeasible_reason.find("registers"), std::string::npos);
  auto s = compute_occupancy(regs(16), 128, 300 * 1024, d);
  EXPECT_FALSE(s.feasible);
  Resources lb = regs(16);
  lb.max_threads = 128;
  EXPECT_FALSE(compute_occupancy(lb, 256, 0, d).feasible);
  EXPECT_TRUE(compute_occupancy(lb, 128, 0, d).feasible);
}

// cuLaunchKernel refuses a grid or block beyond a per-dimension limit whatever its resources:
// blockDim.z <= 64 and gridDim.y, z <= 65535 although a block may have 1024 threads and a grid
// 2^31 - 1 blocks along x. The rules remove such variants as launch failures (rule 1).
TEST(Occupancy, LaunchShapesBeyondThePerDimensionLimitsAreRefused) {
  const DeviceLimits d = limits_for_arch("sm_90");
  EXPECT_EQ(launch_shape_problem({2147483647, 65535, 65535}, {1024, 1, 1}, d), "");
  EXPECT_EQ(launch_shape_problem({1, 1, 1}, {1, 1, 64}, d), "");
  EXPECT_EQ(launch_shape_problem({1, 1, 1}, {1, 1024, 1}, d), "");
  EXPECT_EQ(launch_shape_problem({1, 1, 1}, {16, 1, 65}, d),
            "block.z 65 > 64, the most a block may have along z");
  EXPECT_EQ(launch_shape_problem({1, 70000, 1}, {256, 1, 1}, d),
            "grid.y 70000 > 65535, the most a grid may have along y");
  EXPECT_EQ(launch_shape_problem({2147483648, 1, 1}, {256, 1, 1}, d),
            "grid.x 2147483648 > 2147483647, the most a grid may have along x");
  EXPECT_EQ(launch_shape_problem({4, 1, 0}, {256, 1, 1}, d),
            "grid.z is 0: every dimension must be at least 1");
  // 16 x 1 x 65 = 1040 threads: the shape is what the launch fails for.
  const Occupancy o = compute_occupancy(regs(16), {1, 1, 1}, {16, 1, 65}, 0, d);
  EXPECT_FALSE(o.feasible);
  EXPECT_EQ(o.infeasible_reason, "block.z 65 > 64, the most a block may have along z");
  // 8 x 8 x 16 = 1024 threads fits every limit; its occupancy is that of 1024 threads.
  const Occupancy fits = compute_occupancy(regs(16), {100, 100, 1}, {8, 8, 16}, 0, d);
  EXPECT_TRUE(fits.feasible);
  EXPECT_EQ(fits.active_warps, compute_occupancy(regs(16), 1024, 0, d).active_warps);

  RuleInput in;
  in.inspected = true;
  in.res = regs(16);
  in.grid = {1, 70000, 1};
  in.block = {256, 1, 1};
  RuleInput ok = in;
  ok.grid = {70000, 1, 1};
  const PruneResult r = apply_rules({in, ok}, d, PruneOptions{});
  EXPECT_FALSE(r.decisions[0].kept);
  EXPECT_EQ(r.decisions[0].rule, "resources");
  EXPECT_EQ(r.decisions[0].reason, "grid.y 70000 > 65535, the most a grid may have along y");
  EXPECT_TRUE(r.decisions[1].kept) << r.decisions[1].reason;
}

TEST(Occupancy, ArchitectureTable) {
  EXPECT_EQ(limits_for_arch("sm_90a").smem_per_sm, 233472);
  EXPECT_EQ(limits_for_arch("sm_75").max_threads_per_sm, 1024);
  EXPECT_EQ(limits_for_arch("sm_80").arch(), "sm_80");
  EXPECT_THROW(limits_for_arch("sm_11"), std::invalid_argument);
  EXPECT_THROW(limits_for_arch("hopper"), std::invalid_argument);
}

}  // namespace
}  // namespace gputune::pruner
