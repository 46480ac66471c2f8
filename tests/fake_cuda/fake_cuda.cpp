// A fake CUDA driver (libcuda.so.1) for testing gputune's GPU path on machines without a GPU.
//
// It implements the driver entry points gputune loads, with host memory for device memory and a
// C++ implementation of one kernel, `vector_add` (configs/examples/vector_add.cu), so that a whole
// `gputune run` can verify and time variants. Its behaviour depends on the launch geometry, which
// is how tests tell configurations apart:
//   - time: a deterministic fake clock advances by a cost that is lowest for 128 threads per block
//     and 2 elements per thread (the expected winner);
//   - blockDim.x == 1024: the launch faults (CUDA_ERROR_ILLEGAL_ADDRESS, sticky for the rest of
//     the process: on a real GPU (an H200, driver of CUDA 13) a reset primary context could not
//     be retained again), as a crashing kernel would; FAKE_CUDA_FAULT_BLOCK=N moves the fault to
//     blockDim.x == N (0: no launch faults), for tests whose subject is not faults;
//   - blockDim.x == 512 with 8 elements per thread: a wrong result (c = a, b ignored);
//   - FAKE_CUDA_LAUNCH_FAIL_BLOCK=N: a launch with blockDim.x == N fails at once with
//     CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, which is not sticky: the process goes on;
//   - FAKE_CUDA_CRASH_BLOCK=N: a launch with blockDim.x == N aborts the process (a crashing
//   driver);
//   - FAKE_CUDA_HANG_BLOCK=N: a launch with blockDim.x == N never returns (a hung kernel); with
//     FAKE_CUDA_HANG_MARK=PATH it first creates PATH, so a test knows the hang has begun;
//   - FAKE_CUDA_SLOW_MS=M: every launch takes M real milliseconds;
//   - FAKE_CUDA_TIME_SCALE=F: the fake clock's costs are multiplied by F (a slower "driver");
//   - FAKE_CUDA_TOTAL_MEM=BYTES: the device has that much memory (default 80 GiB), and an
//     allocation beyond it fails with CUDA_ERROR_OUT_OF_MEMORY;
//   - FAKE_CUDA_ALLOCS=N: only the first N allocations succeed (memory another process takes).
//   - FAKE_CUDA_ANY_KERNEL=1: a kernel of any other name loads too; its launch writes nothing
//     (every variant then agrees with the reference) and costs the fake clock by its block shape
//     (lowest at 256 threads), so that a whole naive-kernel run can be timed for orchestration
//     (bench/run_stream_bench.sh), never for what the kernel computes.
//   - FAKE_CUDA_LAUNCH_LOG=PATH: each vector_add launch appends one line to PATH, "pid
//     blockDim.x elements-per-thread", so a test can read which configurations each process ran
//     and in which order;
//   - FAKE_CUDA_BUSY_FILE=PATH: at exit, the real seconds spent inside launches and copies (the
//     fake GPU's busy time) are written to PATH, so a benchmark can say how long it sat idle.
// It never stands in for a GPU measurement: the tests that use it check orchestration only.
#include <cuda.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>

namespace {

bool g_init = false;
CUresult g_sticky = CUDA_SUCCESS;
double g_clock_ms = 0;
std::map<void*, size_t> g_allocations;  // pointer -> bytes
size_t g_allocated = 0, g_allocation_count = 0;

/// FAKE_CUDA_TOTAL_MEM, else 80 GiB.
size_t total_memory() {
  const char* v = std::getenv("FAKE_CUDA_TOTAL_MEM");
  return v ? static_cast<size_t>(std::atoll(v)) : size_t{80} << 30;
}

struct FakeModule {
  std::string image;
};
struct FakeFunction {
  std::string name;
};

bool any_kernel() { return std::getenv("FAKE_CUDA_ANY_KERNEL") != nullptr; }

/// Real time spent in launches and copies, written to FAKE_CUDA_BUSY_FILE at exit.
struct Busy {
  double seconds = 0;
  ~Busy() {
    if (const char* path = std::getenv("FAKE_CUDA_BUSY_FILE"))
      if (FILE* f = std::fopen(path, "w")) {
        std::fprintf(f, "%.6f\n", seconds);
        std::fclose(f);
      }
  }
} g_busy;

/// Adds the real time of its scope to g_busy.
struct BusyScope {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~BusyScope() {
    g_busy.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};
struct FakeEvent {
  double t = 0;
};

CUresult guard() {
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED;
  return g_sticky;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int) {
  if (std::getenv("FAKE_CUDA_NO_DEVICE")) return CUDA_ERROR_NO_DEVICE;
  g_init = true;
  return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* n) {
  *n = 1;
  return guard();
}
CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice) {
  std::strncpy(name, "Fake GPU (gputune test driver)", static_cast<size_t>(len));
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = 132;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      *v = 64;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      *v = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      *v = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      *v = 2048;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      *v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      *v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      *v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      *v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      *v = 233472;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      *v = 49152;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *v = 232448;
      break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      *v = 50 * 1024 * 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      *v = 1980000;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      *v = 2619000;
      break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      *v = 5120;
      break;
    default:
      *v = 0;
  }
  return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice) {
  *bytes = total_memory();
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) {
  static int dummy;
  *c = reinterpret_cast<CUcontext>(&dummy);
  return guard();
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) { return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext) { return guard(); }
CUresult cuCtxSynchronize() { return guard(); }
CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  if (CUresult rc = guard()) return rc;
  if (std::memcmp(image,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return CUDA_ERROR_INVALID_IMAGE;
  *m = reinterpret_cast<CUmodule>(new FakeModule{});
  return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule m) {
  delete reinterpret_cast<FakeModule*>(m);
  return g_sticky;
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  if (CUresult rc = guard()) return rc;
  if (std::string(name) == "vector_add") {
    static FakeFunction fn{"vector_add"};
    *f = reinterpret_cast<CUfunction>(&fn);
    return CUDA_SUCCESS;
  }
  if (!any_kernel()) return CUDA_ERROR_NOT_FOUND;
  static FakeFunction other{"other"};
  *f = reinterpret_cast<CUfunction>(&other);
  return CUDA_SUCCESS;
}
CUresult cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction) {
  if (CUresult rc = guard()) return rc;
  *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS                ? 16
       : a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024
                                                      : 0;
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) { return guard(); }

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned, unsigned, unsigned bx, unsigned by,
                        unsigned bz, unsigned, CUstream, void** params, void**) {
  BusyScope busy;
  if (CUresult rc = guard()) return rc;
  if (reinterpret_cast<FakeFunction*>(f)->name != "vector_add") {  // FAKE_CUDA_ANY_KERNEL
    if (const char* ms = std::getenv("FAKE_CUDA_SLOW_MS"); ms && std::atol(ms) > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(ms)));
    const double threads = static_cast<double>(bx) * by * bz;
    g_clock_ms += 1.0 + 0.1 * std::fabs(std::log2(threads) - 8.0);
    return CUDA_SUCCESS;
  }
  auto* c = *reinterpret_cast<float**>(params[0]);
  auto* a = *reinterpret_cast<float**>(params[1]);
  auto* b = *reinterpret_cast<float**>(params[2]);
  int n = *reinterpret_cast<int*>(params[3]);
  long tile = std::lround(std::ceil(static_cast<double>(n) / (static_cast<double>(gx) * bx)));
  auto knob = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::atol(v) : -1L;
  };
  if (const char* path = std::getenv("FAKE_CUDA_LAUNCH_LOG"))
    if (FILE* log = std::fopen(path, "a")) {
      std::fprintf(log, "%ld %u %ld\n", static_cast<long>(getpid()), bx, tile);
      std::fclose(log);
    }
  if (static_cast<long>(bx) == knob("FAKE_CUDA_LAUNCH_FAIL_BLOCK"))
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  if (static_cast<long>(bx) == knob("FAKE_CUDA_CRASH_BLOCK")) std::abort();
  if (static_cast<long>(bx) == knob("FAKE_CUDA_HANG_BLOCK")) {
    if (const char* mark = std::getenv("FAKE_CUDA_HANG_MARK"))
      if (FILE* f = std::fopen(mark, "w")) std::fclose(f);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (long ms = knob("FAKE_CUDA_SLOW_MS"); ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  static const long fault_block = [] {
    const char* v = std::getenv("FAKE_CUDA_FAULT_BLOCK");
    return v ? std::atol(v) : 1024L;
  }();
  if (fault_block > 0 && bx == static_cast<unsigned>(fault_block)) {
    g_sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return CUDA_SUCCESS;  // like a real fault: reported by the next synchronising call
  }
  bool wrong = bx == 512 && tile == 8;
  for (int j = 0; j < n; ++j) c[j] = wrong ? a[j] : a[j] + b[j];
  const char* scale = std::getenv("FAKE_CUDA_TIME_SCALE");
  g_clock_ms += (scale ? std::atof(scale) : 1.0) *
                (1.0 + 0.1 * std::fabs(std::log2(bx) - 7.0) +
                 0.05 * std::fabs(static_cast<double>(tile) - 2.0) + 1e-9 * n);
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  if (CUresult rc = guard()) return rc;
  const char* allocs = std::getenv("FAKE_CUDA_ALLOCS");
  if (allocs && g_allocation_count >= static_cast<size_t>(std::atoll(allocs)))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (g_allocated + bytes > total_memory()) return CUDA_ERROR_OUT_OF_MEMORY;
  void* m = std::malloc(bytes);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  g_allocations[m] = bytes;
  g_allocated += bytes;
  ++g_allocation_count;
  *p = reinterpret_cast<CUdeviceptr>(m);
  return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  void* m = reinterpret_cast<void*>(p);
  if (auto it = g_allocations.find(m); it != g_allocations.end()) {
    g_allocated -= it->second;
    g_allocations.erase(it);
    std::free(m);
  }
  return g_sticky;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  BusyScope busy;
  if (CUresult rc = guard()) return rc;
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  BusyScope busy;
  if (CUresult rc = guard()) return rc;
  std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  BusyScope busy;
  if (CUresult rc = guard()) return rc;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
  BusyScope busy;
  if (CUresult rc = guard()) return rc;
  std::memset(reinterpret_cast<void*>(p), v, n);
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent* e, unsigned) {
  if (CUresult rc = guard()) return rc;
  *e = reinterpret_cast<CUevent>(new FakeEvent{});
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent e) {
  delete reinterpret_cast<FakeEvent*>(e);
  return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream) {
  if (CUresult rc = guard()) return rc;
  reinterpret_cast<FakeEvent*>(e)->t = g_clock_ms;
  return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(CUevent) { return guard(); }
CUresult cuEventQuery(CUevent) { return guard(); }
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  if (CUresult rc = guard()) return rc;
  *ms = static_cast<float>(reinterpret_cast<FakeEvent*>(b)->t - reinterpret_cast<FakeEvent*>(a)->t);
  return CUDA_SUCCESS;
}
#undef cuEventElapsedTime  // cuda.h maps it to _v2; drivers before 12.8 export only this name
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  return cuEventElapsedTime_v2(ms, a, b);
}
CUresult cuGetErrorName(CUresult e, const char** s) {
  *s = e == CUDA_ERROR_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS"
       : e == CUDA_ERROR_NO_DEVICE     ? "CUDA_ERROR_NO_DEVICE"
       : e == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY"
                                       : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult, const char** s) {
  *s = "fake driver error";
  return CUDA_SUCCESS;
}
// NVRTC itself dlopens libcuda.so.1 and asks for export tables; the fake has none.
CUresult cuGetExportTable(const void** table, const CUuuid*) {
  *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction, int, size_t) {
  *n = 1;
  return guard();
}

}  // extern "C"
