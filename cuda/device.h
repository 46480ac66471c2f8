/** \file cuda/device.h
 * Owns: what the driver says about a device: its name, memory, clocks, compute capability and
 * the launch and resource limits it reports (cuDeviceGetAttribute), as plain numbers.
 * Consumes: the driver (cuda/driver.h). Produces: DeviceAttributes; the tuner turns them into
 * the pruner's DeviceLimits over its per-architecture tables (tuner/measure/device_info.h).
 * Must not: use the pruner's types or tables, touch the database, or parse jobs. */
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace gputune::cuda {

/// A device as the driver describes it. A dimension limit of 0: the driver reported none.
struct DeviceAttributes {
  int index = 0;
  std::string name;
  std::int64_t total_mem = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_block = 0, max_threads_per_sm = 0, max_blocks_per_sm = 0;
  int warp_size = 0;
  int regs_per_sm = 0, regs_per_block = 0;
  int smem_per_sm = 0, smem_per_block = 0, smem_per_block_optin = 0, smem_reserved_per_block = 0;
  std::array<int, 3> max_block_dim{}, max_grid_dim{};
  int l2_bytes = 0;
  int clock_khz = 0, mem_clock_khz = 0, mem_bus_bits = 0;
};

/// Device `index`'s attributes. Throws CudaError (no driver, index out of range, a failed query).
DeviceAttributes device_attributes(int index);

}  // namespace gputune::cuda
