#include "cuda/driver.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

namespace gputune::cuda {

bool CudaError::sticky() const {
  switch (code) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
      return true;
    default:
      return false;
  }
}

const Driver& Driver::instance() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* lib = "libcuda.so.1";
    d.handle_ = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!d.handle_) {
      d.why_ = std::string("the CUDA driver library (") + lib + ") was not found: " + dlerror();
      return;
    }
    bool missing = false;
    std::string missing_name;
    auto load = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(d.handle_, name));
      if (!fn && !missing) missing = true, missing_name = name;
    };
    load(d.cuInit, "cuInit");
    load(d.cuDriverGetVersion, "cuDriverGetVersion");
    load(d.cuDeviceGetCount, "cuDeviceGetCount");
    load(d.cuDeviceGet, "cuDeviceGet");
    load(d.cuDeviceGetName, "cuDeviceGetName");
    load(d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
    load(d.cuDeviceTotalMem, "cuDeviceTotalMem_v2");
    load(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    load(d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    load(d.cuCtxSetCurrent, "cuCtxSetCurrent");
    load(d.cuCtxSynchronize, "cuCtxSynchronize");
    load(d.cuModuleLoadData, "cuModuleLoadData");
    load(d.cuModuleUnload, "cuModuleUnload");
    load(d.cuModuleGetFunction, "cuModuleGetFunction");
    load(d.cuFuncGetAttribute, "cuFuncGetAttribute");
    load(d.cuFuncSetAttribute, "cuFuncSetAttribute");
    load(d.cuLaunchKernel, "cuLaunchKernel");
    load(d.cuMemAlloc, "cuMemAlloc_v2");
    load(d.cuMemFree, "cuMemFree_v2");
    load(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    load(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    load(d.cuMemcpyDtoD, "cuMemcpyDtoD_v2");
    load(d.cuMemsetD8, "cuMemsetD8_v2");
    load(d.cuEventCreate, "cuEventCreate");
    load(d.cuEventDestroy, "cuEventDestroy_v2");
    load(d.cuEventRecord, "cuEventRecord");
    load(d.cuEventSynchronize, "cuEventSynchronize");
    load(d.cuEventQuery, "cuEventQuery");
    d.cuEventElapsedTime =
        reinterpret_cast<decltype(d.cuEventElapsedTime)>(dlsym(d.handle_, "cuEventElapsedTime_v2"));
    if (!d.cuEventElapsedTime)
      load(d.cuEventElapsedTime, "cuEventElapsedTime");  // drivers before 12.8
    load(d.cuGetErrorName, "cuGetErrorName");
    load(d.cuGetErrorString, "cuGetErrorString");
    load(d.cuOccupancyMaxActiveBlocksPerMultiprocessor,
         "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (missing) {
      d.why_ = std::string("the CUDA driver library lacks ") + missing_name + " (driver too old?)";
      return;
    }
    CUresult rc = d.cuInit(0);
    if (rc != CUDA_SUCCESS) {
      const char* name = nullptr;
      d.cuGetErrorName(rc, &name);
      d.why_ = std::string("cuInit failed: ") + (name ? name : "unknown error") +
               (rc == CUDA_ERROR_NO_DEVICE ? " (no CUDA device found)" : "");
      return;
    }
    d.cuDriverGetVersion(&d.version_);
    d.cuDeviceGetCount(&d.devices_);
    if (d.devices_ == 0) {
      d.why_ = "no CUDA device found";
      return;
    }
    d.ok_ = true;
  });
  return d;
}

void Driver::check(CUresult rc, const char* call, const std::string& context) const {
  if (rc == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* desc = nullptr;
  if (cuGetErrorName) cuGetErrorName(rc, &name);
  if (cuGetErrorString) cuGetErrorString(rc, &desc);
  throw CudaError(std::string(call) + ": " + (name ? name : "CUDA error " + std::to_string(rc)) +
                      (desc ? std::string(" (") + desc + ")" : "") +
                      (context.empty() ? "" : " [" + context + "]"),
                  rc);
}

const Driver& Driver::usable() {
  const Driver& d = instance();
  if (!d.available())
    throw CudaError("CUDA driver unavailable: " + d.unavailable_reason(),
                    CUDA_ERROR_NOT_INITIALIZED);
  return d;
}

std::string describe_devices() {
  const Driver& d = Driver::instance();  // a message, not a call: no driver is an answer
  if (!d.available()) return "no CUDA device: " + d.unavailable_reason();
  const int n = d.device_count();
  std::string out = std::to_string(n) + (n == 1 ? " CUDA device" : " CUDA devices");
  for (int i = 0; i < n; ++i) {
    CUdevice dev;
    char name[256] = {};
    if (d.cuDeviceGet(&dev, i) != CUDA_SUCCESS ||
        d.cuDeviceGetName(name, sizeof name, dev) != CUDA_SUCCESS)
      std::snprintf(name, sizeof name, "(its name cannot be read)");
    out += std::string(i ? ", " : ": ") + std::to_string(i) + " " + name;
  }
  return out;
}

PrimaryContext::PrimaryContext(int device) {
  const Driver& d = Driver::usable();
  d.check(d.cuDeviceGet(&dev_, device), "cuDeviceGet");
  d.check(d.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  make_current();
}

PrimaryContext::~PrimaryContext() {
  if (!ctx_) return;
  CUresult rc = Driver::instance().cuDevicePrimaryCtxRelease(dev_);
  if (rc != CUDA_SUCCESS)
    std::fprintf(stderr, "gputune: warning: releasing the CUDA context failed (%d)\n", rc);
}

void PrimaryContext::make_current() const {
  const Driver& d = Driver::usable();
  d.check(d.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
}

Module::Module(const std::string& cubin, const std::string& kernel) {
  const Driver& d = Driver::usable();
  d.check(d.cuModuleLoadData(&mod_, cubin.data()), "cuModuleLoadData", kernel);
  CUresult rc = d.cuModuleGetFunction(&fn_, mod_, kernel.c_str());
  if (rc != CUDA_SUCCESS) {
    d.cuModuleUnload(mod_);
    mod_ = nullptr;
    d.check(rc, "cuModuleGetFunction", kernel);
  }
}

Module::~Module() {
  if (mod_) Driver::instance().cuModuleUnload(mod_);
}

int Module::attribute(CUfunction_attribute a) const {
  int v = 0;
  const Driver& d = Driver::usable();
  d.check(d.cuFuncGetAttribute(&v, a, fn_), "cuFuncGetAttribute");
  return v;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  const Driver& d = Driver::usable();
  d.check(d.cuMemAlloc(&ptr_, bytes == 0 ? 1 : bytes), "cuMemAlloc",
          std::to_string(bytes) + " bytes");
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) Driver::instance().cuMemFree(ptr_);
    ptr_ = o.ptr_, bytes_ = o.bytes_;
    o.ptr_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) Driver::instance().cuMemFree(ptr_);
}

void DeviceBuffer::upload(const void* src, size_t bytes) {
  if (bytes == 0) return;
  const Driver& d = Driver::usable();
  d.check(d.cuMemcpyHtoD(ptr_, src, bytes), "cuMemcpyHtoD");
}

void DeviceBuffer::download(void* dst, size_t bytes) const {
  if (bytes == 0) return;
  const Driver& d = Driver::usable();
  d.check(d.cuMemcpyDtoH(dst, ptr_, bytes), "cuMemcpyDtoH");
}

Event::Event() {
  const Driver& d = Driver::usable();
  d.check(d.cuEventCreate(&ev_, CU_EVENT_DEFAULT), "cuEventCreate");
}

Event::~Event() {
  if (ev_) Driver::instance().cuEventDestroy(ev_);
}

}  // namespace gputune::cuda
