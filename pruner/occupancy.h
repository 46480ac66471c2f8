/** \file pruner/occupancy.h
 * Owns: device limits (per compute capability, or read from a driver by tuner/) and theoretical
 * occupancy of one variant on one device, computed step for step as the toolkit's
 * cuda_occupancy.h (the driver's own calculator) computes it: registers allocated per warp and
 * limited per SM sub-partition, shared memory per block with the driver's reserve rounded to its
 * allocation unit against the carve-out the function prefers, warps, blocks and named barriers
 * per SM; plus the resource-feasibility check (would this launch fail for resources, or for its
 * shape?). tests/pruner/occupancy_driver_test.cpp compares it with cuda_occupancy.h for every
 * architecture of the tables.
 * Consumes: Resources (cubin.h), block size, dynamic shared memory, DeviceLimits. Produces:
 * Occupancy. Must not: include cuda.h, launch anything, or touch the database. */
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pruner/cubin.h"

namespace gputune::pruner {

struct DeviceLimits {
  int cc_major = 9, cc_minor = 0;
  int sm_count = 0;  ///< 0 when unknown (no device)
  int max_threads_per_block = 1024;
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int warp_size = 32;
  int regs_per_sm = 65536;
  int regs_per_block = 65536;
  int max_regs_per_thread = 255;
  int reg_alloc_unit = 256;    ///< registers, allocated per warp
  int smem_per_sm = 233472;    ///< bytes
  int smem_per_block = 49152;  ///< without opt-in
  int smem_per_block_optin = 232448;
  int smem_reserved_per_block = 1024;
  int smem_alloc_unit = 128;
  /// Register files per SM: registers are allocated per warp inside one sub-partition, so a warp
  /// that needs more than what is left of its sub-partition's quarter does not fit.
  int sub_partitions = 4;
  /// Hardware barriers per SM (a block takes as many as its kernel names: bar.sync 0..N-1); 0
  /// where they do not limit blocks per SM (before compute capability 9.0).
  int barriers_per_sm = 64;
  /// The shared memory sizes (KiB) an SM can be configured to (the carve-out is rounded up to one).
  std::vector<int> smem_configs_kib{0, 8, 16, 32, 64, 100, 132, 164, 196, 228};
  /// Per-dimension launch limits (the same on every GPU since compute capability 3.0).
  std::array<std::int64_t, 3> max_block_dim{1024, 1024, 64};
  std::array<std::int64_t, 3> max_grid_dim{2147483647, 65535, 65535};
  std::string arch() const { return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor); }
};

/// Limits for a compute capability from NVIDIA's published tables (CUDA Programming Guide,
/// "Technical Specifications per Compute Capability"). Throws std::invalid_argument if unknown.
DeviceLimits limits_for_arch(int cc_major, int cc_minor);
/// Parses "sm_90" / "sm_86"; throws std::invalid_argument.
DeviceLimits limits_for_arch(const std::string& arch);

struct Occupancy {
  bool feasible = true;
  std::string infeasible_reason;  ///< which resource exceeds which limit
  int blocks_per_sm = 0;
  int active_warps = 0;
  double occupancy = 0;  ///< active warps / max warps per SM
  std::string limiter;   ///< warps, registers, shared memory, blocks
};

/// The shared-memory carve-out a function asks for (CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_
/// CARVEOUT, percent of the most shared memory per SM), or kDefaultCarveout: the most shared
/// memory, as a function gputune launches asks for.
inline constexpr int kDefaultCarveout = -1;

/// Theoretical occupancy. The dynamic shared memory is the launch's; the function is launched as
/// gputune launches it: opted in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = the launch's
/// dynamic shared memory) when static and dynamic shared memory exceed the default per block.
Occupancy compute_occupancy(const Resources& r, std::int64_t threads_per_block,
                            std::int64_t dynamic_smem, const DeviceLimits& d,
                            int carveout_percent = kDefaultCarveout);

/// Whether a launch with this much static and dynamic shared memory must opt in to more than the
/// default shared memory per block (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES) to run.
bool needs_smem_opt_in(std::int64_t static_smem, std::int64_t dynamic_smem, const DeviceLimits& d);

/// Why cuLaunchKernel refuses this grid and block for their shape alone (a dimension below 1 or
/// beyond the device's per-dimension limit, e.g. gridDim.y 70000 > 65535), or "" when it does not.
std::string launch_shape_problem(const std::array<std::int64_t, 3>& grid,
                                 const std::array<std::int64_t, 3>& block, const DeviceLimits& d);

/// The same as compute_occupancy for a whole launch: infeasible also for launch_shape_problem.
Occupancy compute_occupancy(const Resources& r, const std::array<std::int64_t, 3>& grid,
                            const std::array<std::int64_t, 3>& block, std::int64_t dynamic_smem,
                            const DeviceLimits& d, int carveout_percent = kDefaultCarveout);

}  // namespace gputune::pruner
