// A device's attributes from the driver (cuda/device.h).
#include "cuda/device.h"

#include "cuda/driver.h"

namespace gputune::cuda {

namespace {
int attr(CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  const Driver& d = Driver::usable();
  d.check(d.cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
  return v;
}
}  // namespace

DeviceAttributes device_attributes(int index) {
  const Driver& d = Driver::usable();
  if (index < 0 || index >= d.device_count())
    throw CudaError("device index " + std::to_string(index) + " out of range (" +
                        std::to_string(d.device_count()) + " devices)",
                    CUDA_ERROR_INVALID_DEVICE);
  CUdevice dev;
  d.check(d.cuDeviceGet(&dev, index), "cuDeviceGet");
  DeviceAttributes a;
  a.index = index;
  char name[256] = {};
  d.check(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
  a.name = name;
  size_t mem = 0;
  d.check(d.cuDeviceTotalMem(&mem, dev), "cuDeviceTotalMem");
  a.total_mem = static_cast<std::int64_t>(mem);
  a.cc_major = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  a.cc_minor = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  a.sm_count = attr(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  a.max_threads_per_block = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  a.max_threads_per_sm = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  a.max_blocks_per_sm = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  a.warp_size = attr(dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  a.regs_per_sm = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  a.regs_per_block = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  a.smem_per_sm = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  a.smem_per_block = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  a.smem_per_block_optin = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  a.smem_reserved_per_block = attr(dev, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  const CUdevice_attribute block_dim[] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                                          CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                          CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
  const CUdevice_attribute grid_dim[] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                                         CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                         CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
  for (size_t i = 0; i < 3; ++i) {
    a.max_block_dim[i] = attr(dev, block_dim[i]);
    a.max_grid_dim[i] = attr(dev, grid_dim[i]);
  }
  a.l2_bytes = attr(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  a.clock_khz = attr(dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  a.mem_clock_khz = attr(dev, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  a.mem_bus_bits = attr(dev, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  return a;
}

}  // namespace gputune::cuda
