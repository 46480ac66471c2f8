/** \file tuner/device_query.cpp
 * Owns: query_device (declared in cuda_driver.h): a device's DeviceInfo from the driver's
 * attributes over the pruner's per-architecture tables. Apart from cuda_driver.cpp because it
 * uses the pruner: gputune_cuda (the NVRTC + driver layer gputune::select links) stays free of
 * the pruner and its libclang; this file is gputune_tuner's.
 * Must not: touch the database or parse jobs. */
#include <stdexcept>

#include "pruner/occupancy.h"
#include "tuner/cuda_driver.h"

namespace gputune::tuner {

namespace {
const Driver& drv() {
  const Driver& d = Driver::instance();
  if (!d.available())
    throw CudaError("CUDA driver unavailable: " + d.unavailable_reason(),
                    CUDA_ERROR_NOT_INITIALIZED);
  return d;
}
int attr(CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  drv().check(drv().cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
  return v;
}
}  // namespace

DeviceInfo query_device(int index) {
  const Driver& d = drv();
  if (index < 0 || index >= d.device_count())
    throw CudaError("device index " + std::to_string(index) + " out of range (" +
                        std::to_string(d.device_count()) + " devices)",
                    CUDA_ERROR_INVALID_DEVICE);
  CUdevice dev;
  d.check(d.cuDeviceGet(&dev, index), "cuDeviceGet");
  DeviceInfo info;
  info.index = index;
  char name[256] = {};
  d.check(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
  info.name = name;
  size_t mem = 0;
  d.check(d.cuDeviceTotalMem(&mem, dev), "cuDeviceTotalMem");
  info.total_mem = static_cast<std::int64_t>(mem);
  int major = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  int minor = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  pruner::DeviceLimits l;
  try {
    l = pruner::limits_for_arch(major, minor);  // granularities the driver does not report
  } catch (const std::invalid_argument&) {
    l.cc_major = major, l.cc_minor = minor;
  }
  l.sm_count = attr(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  l.max_threads_per_block = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  l.max_threads_per_sm = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  l.max_blocks_per_sm = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  l.warp_size = attr(dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  l.regs_per_sm = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  l.regs_per_block = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  l.smem_per_sm = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  l.smem_per_block = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  l.smem_per_block_optin = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  l.smem_reserved_per_block = attr(dev, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  const CUdevice_attribute block_dim[] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                                          CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                          CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
  const CUdevice_attribute grid_dim[] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                                         CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                         CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
  for (int a = 0; a < 3; ++a) {  // a driver that reports none keeps the tables' values
    if (int v = attr(dev, block_dim[a]); v > 0) l.max_block_dim[static_cast<size_t>(a)] = v;
    if (int v = attr(dev, grid_dim[a]); v > 0) l.max_grid_dim[static_cast<size_t>(a)] = v;
  }
  info.limits = l;
  info.l2_bytes = attr(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info.clock_khz = attr(dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  info.mem_clock_khz = attr(dev, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  info.mem_bus_bits = attr(dev, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  return info;
}

}  // namespace gputune::tuner
