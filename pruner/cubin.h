/** \file pruner/cubin.h
 * Owns: reading a kernel's resource usage from a cubin (CUDA ELF) without a GPU: registers per
 * thread, static shared memory, the per-block system reserve, local memory (stack frame), the
 * __launch_bounds__ thread limit, the named barriers, the size of each parameter, and spill counts
 * from a ptxas log. Consumes: cubin bytes and the kernel's (lowered) symbol name. Produces:
 * Resources. Runs after tuner/compile; occupancy.h runs after it. Must not: include cuda.h, create
 * a CUDA context, or touch the database. */
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gputune::pruner {

struct Resources {
  int registers = 0;             ///< per thread
  int static_smem = 0;           ///< bytes, user-declared __shared__ (what ptxas reports as smem)
  int reserved_smem = 0;         ///< bytes the system reserves per block inside the cubin (sm_90)
  int local_bytes = 0;           ///< stack frame per thread (spills and local arrays)
  int max_threads = 0;           ///< __launch_bounds__ / maxntid product; 0 when not set
  int param_bytes = 0;           ///< kernel parameter block size
  int barriers = 0;              ///< named barriers the kernel uses (EIATTR_NUM_BARRIERS)
  std::vector<int> param_sizes;  ///< bytes of each parameter in order (EIATTR_KPARAM_INFO)
  int spill_stores = -1;         ///< bytes, from the ptxas log; -1 when unknown
  int spill_loads = -1;
  bool operator==(const Resources&) const = default;
};

class CubinError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads the resources of `kernel` (its symbol name in the cubin). Throws CubinError for a file
/// that is not a CUDA ELF or a kernel that is not in it (the message lists the kernels present).
Resources read_cubin_resources(std::string_view cubin, const std::string& kernel);

/// Names of the kernels (.text.<name> sections) in a cubin.
std::vector<std::string> cubin_kernels(std::string_view cubin);

/// Fills spill_stores/spill_loads (and registers when 0) from a ptxas -v log for `kernel`.
void apply_ptxas_log(Resources& r, const std::string& log, const std::string& kernel);

}  // namespace gputune::pruner
