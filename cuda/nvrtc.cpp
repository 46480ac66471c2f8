// NVRTC compilation of variants, alone and in a pool of workers (cuda/nvrtc.h).
#include "cuda/nvrtc.h"

#include <nvrtc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "cuda/cache_admin.h"
#include "variants/hash.h"

namespace gputune::cuda {

namespace {

/// Owns an nvrtcProgram; destroys it on scope exit without throwing. A program NVRTC could not
/// create (out of memory) is a compile failure of that variant, as nvrtc.h promises: `error()`.
class NvrtcProgram {
 public:
  NvrtcProgram(const std::string& source, const std::string& name) {
    nvrtcResult rc = nvrtcCreateProgram(&prog_, source.c_str(), name.c_str(), 0, nullptr, nullptr);
    if (rc != NVRTC_SUCCESS) {
      prog_ = nullptr;
      error_ = std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(rc);
    }
  }
  const std::string& error() const { return error_; }
  NvrtcProgram(const NvrtcProgram&) = delete;
  ~NvrtcProgram() {
    if (prog_) nvrtcDestroyProgram(&prog_);
  }
  nvrtcProgram get() const { return prog_; }

 private:
  nvrtcProgram prog_ = nullptr;
  std::string error_;
};

std::string program_log(nvrtcProgram p) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n <= 1) return {};
  std::string log(n, '\0');
  nvrtcGetProgramLog(p, log.data());
  log.resize(n - 1);
  return log;
}

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_options(const Variant& v, const std::string& arch) {
  std::vector<std::string> o = {"--gpu-architecture=" + arch, "--ptxas-options=-v"};
  o.insert(o.end(), v.options.begin(), v.options.end());
  return o;
}

CompiledVariant compile_variant(const Variant& v, const std::string& arch) {
  CompiledVariant c;
  auto t0 = std::chrono::steady_clock::now();
  NvrtcProgram prog(v.source, v.kernel_name + ".cu");
  if (!prog.error().empty()) {
    c.log = prog.error();
    return c;
  }
  std::string expr = v.kernel_name;
  nvrtcAddNameExpression(prog.get(), expr.c_str());
  auto opts = nvrtc_options(v, arch);
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  nvrtcResult rc = nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());
  c.log = program_log(prog.get());
  c.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (rc != NVRTC_SUCCESS) {
    if (c.log.empty()) c.log = nvrtcGetErrorString(rc);
    return c;
  }
  const char* lowered = nullptr;
  if (nvrtcGetLoweredName(prog.get(), expr.c_str(), &lowered) == NVRTC_SUCCESS && lowered)
    c.lowered_name = lowered;
  else
    c.lowered_name = v.kernel_name;
  size_t n = 0;
  if ((rc = nvrtcGetCUBINSize(prog.get(), &n)) != NVRTC_SUCCESS || n == 0) {
    c.log += std::string("\nnvrtcGetCUBINSize: ") + nvrtcGetErrorString(rc) +
             " (the architecture must be a real sm_XX to get a cubin)";
    return c;
  }
  c.cubin.resize(n);
  nvrtcGetCUBIN(prog.get(), c.cubin.data());
  c.cubin_hash = sha256_hex(c.cubin);
  c.ok = true;
  return c;
}

CompiledVariant compile_cached(const Variant& v, const std::string& arch, const CubinCache& cache) {
  const std::string key = CubinCache::key(v, arch);
  std::optional<CompiledVariant> hit = cache.get(key);
  CompiledVariant c = hit ? std::move(*hit) : compile_variant(v, arch);
  c.key = key;
  if (!hit) cache.put(c);
  return c;
}

int compile_threads_for(unsigned cores, long long available_bytes) {
  long long n = std::clamp<long long>(cores, 1, 64);
  if (available_bytes >= 0) n = std::min(n, std::max(1LL, available_bytes / kCompileWorkerBytes));
  return static_cast<int>(n);
}

namespace {
long long mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long long kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return -1;
}
}  // namespace

namespace {
std::atomic<int> g_compile_nice{10};
}  // namespace

void set_compile_nice(int steps) {
  if (steps < 0 || steps > 19)
    throw std::invalid_argument("--compile-nice " + std::to_string(steps) +
                                ": give nice steps from 0 (compile at normal priority) to 19");
  g_compile_nice = steps;
}

int compile_nice() { return g_compile_nice; }

void lower_compile_thread_priority() {
  const int steps = g_compile_nice;
  if (steps == 0) return;
  const auto tid = static_cast<id_t>(gettid());
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (!(now == -1 && errno != 0) && setpriority(PRIO_PROCESS, tid, std::min(19, now + steps)) == 0)
    return;
  static std::once_flag said;
  const int err = errno;
  std::call_once(said, [err] {
    std::fprintf(stderr,
                 "gputune: compile threads keep the normal priority (setpriority: %s); they "
                 "compete with measuring for the cores\n",
                 std::strerror(err));
  });
}

int default_compile_threads() {
  return compile_threads_for(std::thread::hardware_concurrency(), mem_available_bytes());
}

std::vector<CompiledVariant> compile_all(
    const std::vector<Variant>& variants, const std::string& arch, const CubinCache& cache,
    int threads, const std::function<void(size_t, CompiledVariant&)>& on_done,
    const std::function<bool()>& should_stop) {
  return compile_all(
      variants.size(), [&](size_t i) { return variants[i]; }, arch, cache, threads, on_done,
      should_stop);
}

std::vector<CompiledVariant> compile_all(
    size_t count, const std::function<Variant(size_t)>& make, const std::string& arch,
    const CubinCache& cache, int threads,
    const std::function<void(size_t, CompiledVariant&)>& on_done,
    const std::function<bool()>& should_stop) {
  std::vector<CompiledVariant> out(count);
  std::atomic<size_t> next{0};
  if (threads <= 0) threads = default_compile_threads();
  threads =
      static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), std::max<size_t>(count, 1)));
  std::mutex err_mu;
  std::exception_ptr first_error;
  std::atomic<bool> failed{false};  // a throwing make(i) ends the compile: no worker starts another
  auto worker = [&] {
    for (size_t i; !failed && (i = next.fetch_add(1)) < count;) {
      if (should_stop && should_stop()) {
        out[i].log = "not compiled: the run was interrupted";
        continue;
      }
      try {
        out[i] = compile_cached(make(i), arch, cache);
        if (on_done) on_done(i, out[i]);
      } catch (...) {
        failed = true;
        std::lock_guard<std::mutex> lock(err_mu);
        if (!first_error) first_error = std::current_exception();
      }
    }
  };
  // Every worker on a thread of its own, at compile priority; the caller keeps its own.
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      lower_compile_thread_priority();
      worker();
    });
  for (auto& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
  return out;
}

}  // namespace gputune::cuda
