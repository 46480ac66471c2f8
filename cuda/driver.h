/** \file cuda/driver.h
 * Owns: the CUDA Driver API, loaded at run time with dlopen("libcuda.so.1") so gputune starts on
 * machines without a driver; RAII wrappers for the primary context, modules, device buffers and
 * events; CudaError with the call and the code. A device's attributes: cuda/device.h.
 * Consumes: nothing but the driver. Produces: handles for tuner/ (measuring) and select/
 * (launching a tuned kernel).
 * Must not: touch the database, parse jobs, or use the pruner's types. cuda.h is included by
 * cuda/ and by the code that launches through it (tuner/, select/kernel.cpp), never by an
 * installed header. */
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace gputune::cuda {

class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& what, CUresult code) : std::runtime_error(what), code(code) {}
  CUresult code;
  /// Errors after which the context is unusable (illegal address, launch failure, ...).
  bool sticky() const;
};

/// A sticky error ended the process's CUDA context: CUDA cannot go on in this process (the
/// driver's documentation: "the process must be terminated and relaunched"; on an H200 a reset
/// primary context could not be retained again: the retain failed with the same error). `what()`
/// is the error; the tuner stores the variant that caused it and the run goes on in a new
/// process (HangWatch::stop_after_lost_context, run_restarting, the daemon's worker restart).
class ContextLost : public CudaError {
 public:
  explicit ContextLost(const CudaError& e) : CudaError(e) {}
  /// The reason stored for the variant that caused it.
  std::string stored_reason() const {
    return std::string(what()) +
           " (the CUDA context is lost: CUDA cannot go on in this process, so the run goes on in "
           "a new one)";
  }
};

/// Function table of the driver. `instance()` loads it once; check `available()`.
struct Driver {
#define GPUTUNE_CU_FN(name) decltype(&::name) name = nullptr
  GPUTUNE_CU_FN(cuInit);
  GPUTUNE_CU_FN(cuDriverGetVersion);
  GPUTUNE_CU_FN(cuDeviceGetCount);
  GPUTUNE_CU_FN(cuDeviceGet);
  GPUTUNE_CU_FN(cuDeviceGetName);
  GPUTUNE_CU_FN(cuDeviceGetAttribute);
  GPUTUNE_CU_FN(cuDeviceTotalMem);
  GPUTUNE_CU_FN(cuDevicePrimaryCtxRetain);
  GPUTUNE_CU_FN(cuDevicePrimaryCtxRelease);
  GPUTUNE_CU_FN(cuCtxSetCurrent);
  GPUTUNE_CU_FN(cuCtxSynchronize);
  GPUTUNE_CU_FN(cuModuleLoadData);
  GPUTUNE_CU_FN(cuModuleUnload);
  GPUTUNE_CU_FN(cuModuleGetFunction);
  GPUTUNE_CU_FN(cuFuncGetAttribute);
  GPUTUNE_CU_FN(cuFuncSetAttribute);
  GPUTUNE_CU_FN(cuLaunchKernel);
  GPUTUNE_CU_FN(cuMemAlloc);
  GPUTUNE_CU_FN(cuMemFree);
  GPUTUNE_CU_FN(cuMemcpyHtoD);
  GPUTUNE_CU_FN(cuMemcpyDtoH);
  GPUTUNE_CU_FN(cuMemcpyDtoD);
  GPUTUNE_CU_FN(cuMemsetD8);
  GPUTUNE_CU_FN(cuEventCreate);
  GPUTUNE_CU_FN(cuEventDestroy);
  GPUTUNE_CU_FN(cuEventRecord);
  GPUTUNE_CU_FN(cuEventSynchronize);
  GPUTUNE_CU_FN(cuEventQuery);
  GPUTUNE_CU_FN(cuEventElapsedTime);
  GPUTUNE_CU_FN(cuGetErrorName);
  GPUTUNE_CU_FN(cuGetErrorString);
  GPUTUNE_CU_FN(cuOccupancyMaxActiveBlocksPerMultiprocessor);
#undef GPUTUNE_CU_FN

  /// Loads libcuda.so.1 and cuInit(0) once (thread-safe). Never throws.
  static const Driver& instance();
  /// instance(), or CudaError "CUDA driver unavailable: <why>" (CUDA_ERROR_NOT_INITIALIZED) when
  /// it cannot be used: what every call into the driver goes through.
  static const Driver& usable();
  bool available() const { return ok_; }
  /// Why the driver is not usable (library missing, cuInit failed, no device).
  const std::string& unavailable_reason() const { return why_; }
  int device_count() const { return devices_; }
  int version() const { return version_; }

  /// Throws CudaError "call: NAME (description) [context]" unless rc is CUDA_SUCCESS.
  void check(CUresult rc, const char* call, const std::string& context = {}) const;

 private:
  bool ok_ = false;
  std::string why_;
  int devices_ = 0;
  int version_ = 0;
  void* handle_ = nullptr;
};

/// The devices the driver reports, for messages: "2 CUDA devices: 0 NVIDIA H200, 1 NVIDIA H200".
std::string describe_devices();

/// The device's primary context, retained for this object's life and made current on the
/// constructing thread. Use from one thread.
class PrimaryContext {
 public:
  explicit PrimaryContext(int device);
  PrimaryContext(const PrimaryContext&) = delete;
  ~PrimaryContext();
  void make_current() const;
  CUdevice device() const { return dev_; }

 private:
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
};

class Module {
 public:
  Module(const std::string& cubin, const std::string& kernel);
  Module(Module&& o) noexcept : mod_(o.mod_), fn_(o.fn_) { o.mod_ = nullptr; }
  Module(const Module&) = delete;
  ~Module();
  CUfunction function() const { return fn_; }
  int attribute(CUfunction_attribute a) const;

 private:
  CUmodule mod_ = nullptr;
  CUfunction fn_ = nullptr;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  CUdeviceptr get() const { return ptr_; }
  size_t size() const { return bytes_; }
  void upload(const void* src, size_t bytes);
  void download(void* dst, size_t bytes) const;
  /// Forgets the pointer without freeing (after a context reset freed everything).
  void abandon() { ptr_ = 0; }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

class Event {
 public:
  Event();
  Event(const Event&) = delete;
  Event(Event&& o) noexcept : ev_(o.ev_) { o.ev_ = nullptr; }
  ~Event();
  CUevent get() const { return ev_; }
  void abandon() { ev_ = nullptr; }

 private:
  CUevent ev_ = nullptr;
};

}  // namespace gputune::cuda
