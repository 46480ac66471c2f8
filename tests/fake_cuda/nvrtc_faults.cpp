// NVRTC failures on demand, for tests: an LD_PRELOAD library that stands in front of the real
// libnvrtc (gputune links it dynamically) and makes some calls fail as NVRTC fails when it runs
// out of memory. It owns nothing else and never changes what a call that succeeds returns.
//   - NVRTC_FAULTS_OOM_EVERY=N: every Nth nvrtcCompileProgram of the process returns
//     NVRTC_ERROR_OUT_OF_MEMORY without compiling (the others compile as usual);
//   - NVRTC_FAULTS_CREATE_OOM_AT=N: the Nth nvrtcCreateProgram of the process returns
//     NVRTC_ERROR_OUT_OF_MEMORY.
// Real exhaustion cannot be provoked reliably (an address-space limit fails LLVM's allocations
// wherever they happen, often as std::bad_alloc or an abort outside NVRTC's API); this tests the
// code that handles NVRTC's failure status.
#include <dlfcn.h>
#include <nvrtc.h>

#include <atomic>
#include <cstdlib>

namespace {

long knob(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atol(v) : 0;
}

template <class F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

std::atomic<long> g_compiles{0}, g_creates{0};

}  // namespace

extern "C" {

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int n, const char* const* options) {
  static const auto next =
      real<nvrtcResult (*)(nvrtcProgram, int, const char* const*)>("nvrtcCompileProgram");
  const long every = knob("NVRTC_FAULTS_OOM_EVERY");
  if (every > 0 && ++g_compiles % every == 0) return NVRTC_ERROR_OUT_OF_MEMORY;
  return next(prog, n, options);
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name, int n,
                               const char* const* headers, const char* const* include_names) {
  static const auto next =
      real<nvrtcResult (*)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                           const char* const*)>("nvrtcCreateProgram");
  const long at = knob("NVRTC_FAULTS_CREATE_OOM_AT");
  if (at > 0 && ++g_creates == at) return NVRTC_ERROR_OUT_OF_MEMORY;
  return next(prog, src, name, n, headers, include_names);
}

}  // extern "C"
