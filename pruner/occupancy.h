/** \file pruner/occupancy.h
 * Owns: device limits (per compute capability, or read from a driver by tuner/) and theoretical
 * occupancy of one variant on one device, as the CUDA occupancy calculator computes it, plus the
 * resource-feasibility check (would this launch fail for resources, or for its shape?).
 * Consumes: Resources (cubin.h), block size, dynamic shared memory, DeviceLimits. Produces:
 * Occupancy. Must not: include cuda.h, launch anything, or touch the database. */
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

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

/// Theoretical occupancy. The dynamic shared memory is the launch's.
Occupancy compute_occupancy(const Resources& r, std::int64_t threads_per_block,
                            std::int64_t dynamic_smem, const DeviceLimits& d);

/// Why cuLaunchKernel refuses this grid and block for their shape alone (a dimension below 1 or
/// beyond the device's per-dimension limit, e.g. gridDim.y 70000 > 65535), or "" when it does not.
std::string launch_shape_problem(const std::array<std::int64_t, 3>& grid,
                                 const std::array<std::int64_t, 3>& block, const DeviceLimits& d);

/// The same as compute_occupancy for a whole launch: infeasible also for launch_shape_problem.
Occupancy compute_occupancy(const Resources& r, const std::array<std::int64_t, 3>& grid,
                            const std::array<std::int64_t, 3>& block, std::int64_t dynamic_smem,
                            const DeviceLimits& d);

}  // namespace gputune::pruner
