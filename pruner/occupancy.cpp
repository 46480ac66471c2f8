#include "pruner/occupancy.h"

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace gputune::pruner {

DeviceLimits limits_for_arch(int major, int minor) {
  DeviceLimits d;
  d.cc_major = major;
  d.cc_minor = minor;
  int cc = major * 10 + minor;
  switch (cc) {
    case 70:
    case 72:
      d.max_threads_per_sm = 2048, d.max_blocks_per_sm = 32, d.smem_per_sm = 98304,
      d.smem_per_block_optin = 98304, d.smem_reserved_per_block = 0, d.smem_alloc_unit = 256;
      break;
    case 75:
      d.max_threads_per_sm = 1024, d.max_blocks_per_sm = 16, d.smem_per_sm = 65536,
      d.smem_per_block_optin = 65536, d.smem_reserved_per_block = 0, d.smem_alloc_unit = 256;
      break;
    case 80:
    case 87:
      d.max_threads_per_sm = 2048, d.max_blocks_per_sm = 32, d.smem_per_sm = 167936,
      d.smem_per_block_optin = 166912;
      break;
    case 86:
      d.max_threads_per_sm = 1536, d.max_blocks_per_sm = 16, d.smem_per_sm = 102400,
      d.smem_per_block_optin = 101376;
      break;
    case 89:
      d.max_threads_per_sm = 1536, d.max_blocks_per_sm = 24, d.smem_per_sm = 102400,
      d.smem_per_block_optin = 101376;
      break;
    case 90:
    case 100:
    case 103:
      d.max_threads_per_sm = 2048, d.max_blocks_per_sm = 32, d.smem_per_sm = 233472,
      d.smem_per_block_optin = 232448;
      break;
    case 120:
    case 121:
      d.max_threads_per_sm = 1536, d.max_blocks_per_sm = 32, d.smem_per_sm = 102400,
      d.smem_per_block_optin = 101376;
      break;
    default:
      throw std::invalid_argument(
          "unknown compute capability " + std::to_string(major) + "." + std::to_string(minor) +
          " (known: 7.0, 7.2, 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 10.3, 12.0, 12.1)");
  }
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
}  // namespace

Occupancy compute_occupancy(const Resources& r, std::int64_t threads, std::int64_t dynamic_smem,
                            const DeviceLimits& d) {
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
  std::int64_t warps = (threads + d.warp_size - 1) / d.warp_size;
  std::int64_t regs_per_warp =
      round_up(static_cast<std::int64_t>(r.registers) * d.warp_size, d.reg_alloc_unit);
  if (regs_per_warp * warps > d.regs_per_block)
    return fail(std::to_string(r.registers) + " registers x " + std::to_string(threads) +
                " threads > " + std::to_string(d.regs_per_block) + " registers per block");
  std::int64_t smem = r.static_smem + dynamic_smem;
  if (smem > d.smem_per_block_optin)
    return fail(std::to_string(smem) + " bytes of shared memory > " +
                std::to_string(d.smem_per_block_optin) + " per block");
  if (r.static_smem > d.smem_per_block)
    return fail(std::to_string(r.static_smem) + " bytes of static shared memory > " +
                std::to_string(d.smem_per_block) + " (static allocations cannot opt in)");

  std::int64_t max_warps = d.max_threads_per_sm / d.warp_size;
  std::int64_t by_warps = max_warps / warps;
  std::int64_t by_regs =
      regs_per_warp > 0 ? (d.regs_per_sm / regs_per_warp) / warps : d.max_blocks_per_sm;
  std::int64_t smem_block = round_up(smem + d.smem_reserved_per_block, d.smem_alloc_unit);
  std::int64_t by_smem = smem > 0 ? d.smem_per_sm / smem_block : d.max_blocks_per_sm;
  std::int64_t blocks = std::min<std::int64_t>({d.max_blocks_per_sm, by_warps, by_regs, by_smem});
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
                            const DeviceLimits& d) {
  if (std::string why = launch_shape_problem(grid, block, d); !why.empty()) {
    Occupancy o;
    o.feasible = false;
    o.infeasible_reason = std::move(why);
    return o;
  }
  return compute_occupancy(r, block[0] * block[1] * block[2], dynamic_smem, d);
}

}  // namespace gputune::pruner
