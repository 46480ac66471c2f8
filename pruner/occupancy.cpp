#include "pruner/occupancy.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <tuple>

namespace gputune::pruner {

DeviceLimits limits_for_arch(int major, int minor) {
  DeviceLimits d;
  d.cc_major = major;
  d.cc_minor = minor;
  // Shared memory sizes an SM can be configured to, per cuda_occupancy.h
  // (cudaOccAlignUpShmemSizeVoltaPlus).
  const std::vector<int> up_to_100{0, 8, 16, 32, 64, 100};
  const std::vector<int> up_to_164{0, 8, 16, 32, 64, 100, 132, 164};
  const std::vector<int> up_to_228{0, 8, 16, 32, 64, 100, 132, 164, 196, 228};
  const int cc = major * 10 + minor;
  switch (cc) {
    case 70:
    case 72:
      d.max_threads_per_sm = 2048, d.max_blocks_per_sm = 32, d.smem_per_sm = 98304,
      d.smem_per_block_optin = 98304, d.smem_reserved_per_block = 0, d.smem_alloc_unit = 256;
      d.smem_configs_kib = {0, 8, 16, 32, 64, 96};
      break;
    case 75:
      d.max_threads_per_sm = 1024, d.max_blocks_per_sm = 16, d.smem_per_sm = 65536,
      d.smem_per_block_optin = 65536, d.smem_reserved_per_block = 0, d.smem_alloc_unit = 256;
      d.smem_configs_kib = {32, 64};
      break;
    case 80:
      d.max_threads_per_sm = 2048, d.max_blocks_per_sm = 32, d.smem_per_sm = 167936,
      d.smem_per_block_optin = 166912, d.smem_configs_kib = up_to_164;
      break;
    case 87:  // Orin: A100's shared memory with 48 warps and 16 blocks per SM
      d.max_threads_per_sm = 1536, d.max_blocks_per_sm = 16, d.smem_per_sm = 167936,
      d.smem_per_block_optin = 166912, d.smem_configs_kib = up_to_164;
      break;
    case 86:
      d.max_threads_per_sm = 1536, d.max_blocks_per_sm = 16, d.smem_per_sm = 102400,
      d.smem_per_block_optin = 101376, d.smem_configs_kib = up_to_100;
      break;
    case 89:
      d.max_threads_per_sm = 1536, d.max_blocks_per_sm = 24, d.smem_per_sm = 102400,
      d.smem_per_block_optin = 101376, d.smem_configs_kib = up_to_100;
      break;
    case 90:
    case 100:
    case 103:
      d.max_threads_per_sm = 2048, d.max_blocks_per_sm = 32, d.smem_per_sm = 233472,
      d.smem_per_block_optin = 232448, d.smem_configs_kib = up_to_228;
      break;
    case 120:
    case 121:  // 24 blocks per SM as cuda_occupancy.h counts them (the guide's table says 32)
      d.max_threads_per_sm = 1536, d.max_blocks_per_sm = 24, d.smem_per_sm = 102400,
      d.smem_per_block_optin = 101376, d.smem_configs_kib = up_to_100;
      break;
    default:
      throw std::invalid_argument(
          "unknown compute capability " + std::to_string(major) + "." + std::to_string(minor) +
          " (known: 7.0, 7.2, 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 10.3, 12.0, 12.1)");
  }
  // From Hopper on, named barriers limit blocks per SM: two per block slot, one on the consumer
  // parts (cudaOccMaxBlocksPerSMBlockBarrierLimit); before, they do not count.
  d.barriers_per_sm = major >= 9 ? d.max_blocks_per_sm * (major == 12 ? 1 : 2) : 0;
  return d;
}

DeviceLimits limits_for_arch(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0 || arch.size() < 5)
    throw std::invalid_argument("'" + arch + "' is not an architecture like sm_90");
  std::string digits = arch.substr(3);
  while (!digits.empty() && !std::isdigit(static_cast<unsigned char>(digits.back())))
    digits.pop_back();  // sm_90a
  int v = std::stoi(digits);
  return limits_for_arch(v / 10, v % 10);
}

namespace {
std::int64_t round_up(std::int64_t x, std::int64_t unit) { return (x + unit - 1) / unit * unit; }

/// The bytes of shared memory an SM is configured to for `bytes`: the next size the hardware
/// offers (cudaOccAlignUpShmemSizeVoltaPlus); -1 when none is large enough.
std::int64_t smem_config_at_least(std::int64_t bytes, const DeviceLimits& d) {
  for (int kib : d.smem_configs_kib)
    if (std::int64_t{kib} * 1024 >= bytes) return std::int64_t{kib} * 1024;
  return -1;
}

/// Shared memory per SM for blocks of `per_block` allocated bytes: the carve-out the function
/// prefers (the most by default), or the next configuration that holds one block when that is
/// too little (cudaOccMaxBlocksPerSMSmemLimit).
std::int64_t smem_per_sm_for(std::int64_t per_block, int carveout_percent, const DeviceLimits& d) {
  std::int64_t preferred = d.smem_per_sm;
  if (carveout_percent >= 0)
    preferred = smem_config_at_least(carveout_percent * std::int64_t{d.smem_per_sm} / 100, d);
  if (preferred >= per_block) return preferred;
  return smem_config_at_least(per_block, d);
}
}  // namespace

bool needs_smem_opt_in(std::int64_t static_smem, std::int64_t dynamic_smem, const DeviceLimits& d) {
  return static_smem + dynamic_smem > d.smem_per_block;
}

Occupancy compute_occupancy(const Resources& r, std::int64_t threads, std::int64_t dynamic_smem,
                            const DeviceLimits& d, int carveout_percent) {
  Occupancy o;
  auto fail = [&](std::string why) {
    o.feasible = false;
    o.infeasible_reason = std::move(why);
    return o;
  };
  int max_threads = r.max_threads > 0 ? std::min(r.max_threads, d.max_threads_per_block)
                                      : d.max_threads_per_block;
  if (threads < 1) return fail("block has no threads");
  if (threads > max_threads)
    return fail(std::to_string(threads) + " threads per block > limit " +
                std::to_string(max_threads) + (r.max_threads > 0 ? " (__launch_bounds__)" : ""));
  if (carveout_percent > 100) return fail("a carve-out is a percentage from 0 to 100");

  // Registers: allocated per warp in units of reg_alloc_unit, inside one sub-partition's share of
  // the register file. The per-block check assumes warps spread over every sub-partition, so it
  // rounds the warps up to a multiple of the sub-partitions (the hardware check).
  const std::int64_t warps = (threads + d.warp_size - 1) / d.warp_size;
  const std::int64_t regs_per_warp =
      round_up(static_cast<std::int64_t>(r.registers) * d.warp_size, d.reg_alloc_unit);
  const std::int64_t regs_assumed = regs_per_warp * round_up(warps, d.sub_partitions);
  if (r.registers > d.max_regs_per_thread)
    return fail(std::to_string(r.registers) + " registers per thread > " +
                std::to_string(d.max_regs_per_thread));
  if (regs_per_warp * warps > d.regs_per_block || regs_assumed > d.regs_per_block)
    return fail(std::to_string(r.registers) + " registers x " + std::to_string(threads) +
                " threads > " + std::to_string(d.regs_per_block) + " registers per block" +
                (regs_per_warp * warps <= d.regs_per_block
                     ? " (counted, as the hardware counts them, for " +
                           std::to_string(round_up(warps, d.sub_partitions)) + " warps)"
                     : ""));
  std::int64_t by_regs = std::numeric_limits<std::int64_t>::max();
  if (regs_per_warp > 0) {
    const std::int64_t warps_per_partition = d.regs_per_sm / d.sub_partitions / regs_per_warp;
    by_regs = warps_per_partition * d.sub_partitions / warps;
  }

  // Shared memory: static + the driver's reserve + dynamic, rounded to the allocation unit,
  // against the per-block limit (opted in when needed, as gputune launches) and the SM's share.
  const std::int64_t smem = r.static_smem + dynamic_smem;
  if (r.static_smem > d.smem_per_block)
    return fail(std::to_string(r.static_smem) + " bytes of static shared memory > " +
                std::to_string(d.smem_per_block) + " (static allocations cannot opt in)");
  const std::int64_t smem_block = round_up(smem + d.smem_reserved_per_block, d.smem_alloc_unit);
  const std::int64_t block_limit =
      (needs_smem_opt_in(r.static_smem, dynamic_smem, d) ? d.smem_per_block_optin
                                                         : d.smem_per_block) +
      d.smem_reserved_per_block;
  if (smem_block > block_limit)
    return fail(std::to_string(smem) + " bytes of shared memory > " +
                std::to_string(d.smem_per_block_optin) + " per block");
  std::int64_t by_smem = std::numeric_limits<std::int64_t>::max();
  if (smem_block > 0) {
    const std::int64_t per_sm = smem_per_sm_for(smem_block, carveout_percent, d);
    by_smem = per_sm > 0 ? per_sm / smem_block : 0;
  }

  const std::int64_t max_warps = d.max_threads_per_sm / d.warp_size;
  const std::int64_t by_warps = max_warps / warps;
  const std::int64_t by_barriers = r.barriers > 0 && d.barriers_per_sm > 0
                                       ? d.barriers_per_sm / r.barriers
                                       : std::numeric_limits<std::int64_t>::max();
  const std::int64_t blocks =
      std::min<std::int64_t>({d.max_blocks_per_sm, by_warps, by_regs, by_smem, by_barriers});
  if (blocks == by_barriers) o.limiter = "barriers";
  if (blocks == d.max_blocks_per_sm) o.limiter = "blocks";
  if (blocks == by_smem) o.limiter = "shared memory";
  if (blocks == by_regs) o.limiter = "registers";
  if (blocks == by_warps) o.limiter = "warps";
  if (blocks < 1) return fail("no block fits on an SM (limited by " + o.limiter + ")");
  o.blocks_per_sm = static_cast<int>(blocks);
  o.active_warps = static_cast<int>(blocks * warps);
  o.occupancy = static_cast<double>(o.active_warps) / static_cast<double>(max_warps);
  return o;
}

std::string launch_shape_problem(const std::array<std::int64_t, 3>& grid,
                                 const std::array<std::int64_t, 3>& block, const DeviceLimits& d) {
  static constexpr const char* kAxis[] = {"x", "y", "z"};
  for (int a = 0; a < 3; ++a) {
    for (const auto& [what, dims, limit] :
         {std::tuple{"block", &block, d.max_block_dim[a]}, {"grid", &grid, d.max_grid_dim[a]}}) {
      const std::int64_t n = (*dims)[a];
      if (n < 1)
        return std::string(what) + "." + kAxis[a] + " is " + std::to_string(n) +
               ": every dimension must be at least 1";
      if (n > limit)
        return std::string(what) + "." + kAxis[a] + " " + std::to_string(n) + " > " +
               std::to_string(limit) + ", the most a " + what + " may have along " + kAxis[a];
    }
  }
  return {};
}

Occupancy compute_occupancy(const Resources& r, const std::array<std::int64_t, 3>& grid,
                            const std::array<std::int64_t, 3>& block, std::int64_t dynamic_smem,
                            const DeviceLimits& d, int carveout_percent) {
  if (std::string why = launch_shape_problem(grid, block, d); !why.empty()) {
    Occupancy o;
    o.feasible = false;
    o.infeasible_reason = std::move(why);
    return o;
  }
  return compute_occupancy(r, block[0] * block[1] * block[2], dynamic_smem, d, carveout_percent);
}

}  // namespace gputune::pruner
