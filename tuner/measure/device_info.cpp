// A device as the tuner sees it: the driver's attributes over the pruner's tables
// (tuner/measure/device_info.h).
#include "tuner/measure/device_info.h"

#include <stdexcept>

#include "cuda/driver.h"
#include "pruner/occupancy.h"
#include "variants/job.h"

namespace gputune::tuner {

DeviceInfo device_info(const cuda::DeviceAttributes& a) {
  DeviceInfo info;
  info.index = a.index;
  info.name = a.name;
  info.total_mem = a.total_mem;
  pruner::DeviceLimits l;
  try {
    l = pruner::limits_for_arch(a.cc_major,
                                a.cc_minor);  // granularities the driver does not report
  } catch (const std::invalid_argument&) {
    l.cc_major = a.cc_major, l.cc_minor = a.cc_minor;
  }
  l.sm_count = a.sm_count;
  l.max_threads_per_block = a.max_threads_per_block;
  l.max_threads_per_sm = a.max_threads_per_sm;
  l.max_blocks_per_sm = a.max_blocks_per_sm;
  l.warp_size = a.warp_size;
  l.regs_per_sm = a.regs_per_sm;
  l.regs_per_block = a.regs_per_block;
  l.smem_per_sm = a.smem_per_sm;
  l.smem_per_block = a.smem_per_block;
  l.smem_per_block_optin = a.smem_per_block_optin;
  l.smem_reserved_per_block = a.smem_reserved_per_block;
  for (size_t i = 0; i < 3; ++i) {  // a driver that reports none keeps the tables' values
    if (a.max_block_dim[i] > 0) l.max_block_dim[i] = a.max_block_dim[i];
    if (a.max_grid_dim[i] > 0) l.max_grid_dim[i] = a.max_grid_dim[i];
  }
  info.limits = l;
  info.l2_bytes = a.l2_bytes;
  info.clock_khz = a.clock_khz;
  info.mem_clock_khz = a.mem_clock_khz;
  info.mem_bus_bits = a.mem_bus_bits;
  return info;
}

DeviceInfo query_device(int index) { return device_info(cuda::device_attributes(index)); }

DeviceInfo job_device(const Job& job, const std::string& source, const std::string& field) {
  const int n = cuda::Driver::instance().device_count();
  if (job.device_index < 0 || job.device_index >= n)
    throw JobError(source.empty() ? job.file.string() : source, field,
                   "there is no CUDA device " + std::to_string(job.device_index) +
                       ": this machine has " + cuda::describe_devices() +
                       " (CUDA_VISIBLE_DEVICES, when set, numbers the ones it names from 0)",
                   n == 1  ? std::string("use 0, the only device")
                   : n > 1 ? "use an index from 0 to " + std::to_string(n - 1)
                           : std::string("run where there is a GPU"));
  return query_device(job.device_index);
}

}  // namespace gputune::tuner
