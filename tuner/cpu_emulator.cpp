// CPU emulation of CUDA kernels of the naive subset: see cpu_emulator.h.
#include "tuner/cpu_emulator.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <sstream>

#ifndef GPUTUNE_HOST_CXX
#define GPUTUNE_HOST_CXX "c++"
#endif

namespace gputune::tuner {

namespace fs = std::filesystem;

namespace {

// The CUDA prelude for the host compiler. Threads are fibers on one OS thread, so `static
// thread_local` storage is shared by the threads of a block (as __shared__ is) and atomics are
// plain read-modify-writes.
constexpr const char* kRuntime = R"RT(
#pragma once
#include <sys/mman.h>
#include <ucontext.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>
struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };
// Vector types with CUDA's sizes and alignment (a misaligned vector load faults on a GPU).
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
namespace gt {
inline thread_local uint3 tid{0, 0, 0}, bid{0, 0, 0};
inline thread_local const char* fault = nullptr;       // the first fault of this launch
inline thread_local unsigned long long vector_loads = 0;  // vector loads of this launch
template <class V> V vector_load(const V* p) {
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(V) && !fault)
    fault = "misaligned address: a vector load from an address that is not a multiple of its size";
  ++vector_loads;
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline thread_local dim3 bdim{1, 1, 1}, gdim{1, 1, 1};
// Dynamic shared memory (`extern __shared__ T a[];`): refilled with 0xff bytes (NaN for floats)
// before each block, so a read of an element no thread of the block wrote shows in the results;
// it ends (16-byte aligned) right before an inaccessible page, so using more than the launch gave
// stops the check, as an out-of-range global access does.
inline thread_local unsigned char* dyn_smem = nullptr;
inline unsigned char* dyn_alloc(unsigned long long smem) {
  static thread_local void* base = nullptr;
  static thread_local std::size_t total = 0;
  if (base) munmap(base, total);
  const std::size_t page = 4096, bytes = (smem + 15) / 16 * 16, data = (bytes + page - 1) / page * page;
  total = data + page;
  base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) { base = nullptr; return nullptr; }
  mprotect(static_cast<char*>(base) + data, page, PROT_NONE);
  return static_cast<unsigned char*>(base) + data - bytes;
}
// cp.async (gt_cp_async in pipelined variants): each copy's value is read when it is issued
// and written to shared memory only at the gt_cp_wait that covers its group, so a buffer read
// before its wait (or never waited for) shows in the results as on a GPU it may.
struct Copy { void* dst; std::array<unsigned char, 16> bytes; std::size_t n; };
struct Fiber {
  ucontext_t ctx; std::vector<char> stack; bool done = false, waiting = false; uint3 t;
  std::vector<Copy> open; std::vector<std::vector<Copy>> groups;
};
inline thread_local std::vector<Fiber>* fibers = nullptr;
inline thread_local Fiber* current = nullptr;
inline thread_local ucontext_t scheduler;
inline thread_local const std::function<void()>* body = nullptr;
inline void trampoline() { (*body)(); current->done = true; }
inline void sync() { current->waiting = true; swapcontext(&current->ctx, &scheduler); }
// Returns nullptr or an error message.
inline const char* launch(const unsigned* g, const unsigned* b, unsigned long long smem,
                          const std::function<void()>& f) {
  static thread_local std::vector<Fiber> pool;
  dyn_smem = dyn_alloc(smem);
  if (!dyn_smem) return "cannot map the dynamic shared memory of the launch";
  const unsigned n = b[0] * b[1] * b[2];
  if (pool.size() < n) pool.resize(n);
  body = &f;
  fault = nullptr;
  vector_loads = 0;
  gdim = dim3{g[0], g[1], g[2]};
  bdim = dim3{b[0], b[1], b[2]};
  for (unsigned bz = 0; bz < g[2]; ++bz)
    for (unsigned by = 0; by < g[1]; ++by)
      for (unsigned bx = 0; bx < g[0]; ++bx) {
        bid = uint3{bx, by, bz};
        std::memset(dyn_smem, 0xff, smem);
        for (unsigned i = 0; i < n; ++i) {
          Fiber& fb = pool[i];
          fb.done = fb.waiting = false;
          fb.open.clear();
          fb.groups.clear();
          fb.t = uint3{i % b[0], (i / b[0]) % b[1], i / (b[0] * b[1])};
          if (fb.stack.empty()) fb.stack.resize(256 * 1024);
          getcontext(&fb.ctx);
          fb.ctx.uc_stack.ss_sp = fb.stack.data();
          fb.ctx.uc_stack.ss_size = fb.stack.size();
          fb.ctx.uc_link = &scheduler;
          makecontext(&fb.ctx, trampoline, 0);
        }
        for (;;) {
          unsigned done = 0, waiting = 0;
          for (unsigned i = 0; i < n; ++i) {
            Fiber& fb = pool[i];
            if (fb.done) { ++done; continue; }
            fb.waiting = false;
            tid = fb.t;
            current = &fb;
            swapcontext(&scheduler, &fb.ctx);
            if (fault) return fault;
            if (fb.done) ++done; else ++waiting;
          }
          if (done == n) break;
          if (done != 0) return "__syncthreads reached by some threads of a block while others exited";
        }
      }
  return nullptr;
}
template <class T> T ldg(const T* p) { return *p; }
template <class T> void cp_async(T* dst, const T* src, bool ok) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "cp.async copies 4, 8, 16 bytes");
  if (reinterpret_cast<std::uintptr_t>(dst) % sizeof(T) && !fault)
    fault = "misaligned address: a cp.async to an address that is not a multiple of its size";
  Copy c{dst, {}, sizeof(T)};
  if (ok) {
    if constexpr (sizeof(T) == 16) {
      const T v = vector_load(src);
      std::memcpy(c.bytes.data(), &v, sizeof v);
    } else {
      std::memcpy(c.bytes.data(), src, sizeof(T));
    }
  }
  current->open.push_back(c);
}
inline void cp_commit() { current->groups.push_back(std::move(current->open)); current->open.clear(); }
inline void cp_wait(std::size_t keep) {
  auto& g = current->groups;
  while (g.size() > keep) {
    for (const Copy& c : g.front()) std::memcpy(c.dst, c.bytes.data(), c.n);
    g.erase(g.begin());
  }
}
}  // namespace gt
// Calling a kernel with cuLaunchKernel's parameter array, its types deduced from the kernel.
namespace gt {
// Layout shared with CpuModule::build, which reads the array gt_params_<i> returns.
struct Param { int pointer; unsigned long long bytes; char kind; };
template <class E> constexpr char kind_of() {
  return std::is_floating_point_v<E> ? 'f' : std::is_integral_v<E> ? 'i' : 'o';
}
template <class T> constexpr Param param_info() {
  if constexpr (std::is_pointer_v<T>) {
    using E = std::remove_cv_t<std::remove_all_extents_t<std::remove_pointer_t<T>>>;
    if constexpr (std::is_void_v<E>) return {1, 0, 'o'}; else return {1, sizeof(E), kind_of<E>()};
  } else {
    return {0, sizeof(T), kind_of<T>()};
  }
}
template <class... P> const Param* signature(void (*)(P...), std::size_t* n) {
  static const Param info[] = {param_info<P>()..., Param{0, 0, 'o'}};
  *n = sizeof...(P);
  return info;
}
template <class... P, std::size_t... I>
void call(void (*f)(P...), void** a, std::index_sequence<I...>) {
  f(*static_cast<std::remove_cv_t<P>*>(a[I])...);
}
template <class... P> void call(void (*f)(P...), void** a) {
  call(f, a, std::index_sequence_for<P...>{});
}
}  // namespace gt
#define GT_CP_ASYNC_EMULATED 1
template <class T> void gt_cp_async(T* dst, const T* src, bool ok) { ::gt::cp_async(dst, src, ok); }
inline void gt_cp_commit() { ::gt::cp_commit(); }
template <int N> void gt_cp_wait() { ::gt::cp_wait(N); }
#define threadIdx (::gt::tid)
#define blockIdx (::gt::bid)
#define blockDim (::gt::bdim)
#define gridDim (::gt::gdim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static thread_local
#define __constant__ static
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
inline void __syncthreads() { ::gt::sync(); }
template <class T> T __ldg(const T* p) { return *p; }
inline float2 __ldg(const float2* p) { return ::gt::vector_load(p); }
inline float4 __ldg(const float4* p) { return ::gt::vector_load(p); }
inline int2 __ldg(const int2* p) { return ::gt::vector_load(p); }
inline int4 __ldg(const int4* p) { return ::gt::vector_load(p); }
// Warp shuffles between block-wide barriers: every thread of the block must reach them (as in
// the generated split reductions, which shuffle outside any bounds check); lanes are the linear
// thread index modulo 32, as on a GPU.
namespace gt {
inline thread_local std::vector<std::array<unsigned char, 16>> lanes;
template <class T> T shuffle_xor(T v, unsigned mask) {
  static_assert(sizeof(T) <= 16, "shuffle of a value wider than 16 bytes");
  const unsigned n = bdim.x * bdim.y * bdim.z, t = tid.x + bdim.x * (tid.y + bdim.y * tid.z);
  if (lanes.size() < n) lanes.resize(n);
  std::memcpy(lanes[t].data(), &v, sizeof v);
  ::gt::sync();
  const unsigned from = (t & ~31u) | ((t & 31u) ^ (mask & 31u));
  T r = v;
  if (from < n) std::memcpy(&r, lanes[from].data(), sizeof r);
  ::gt::sync();
  return r;
}
}  // namespace gt
template <class T> T __shfl_xor_sync(unsigned, T v, int mask, int = 32) {
  return ::gt::shuffle_xor(v, static_cast<unsigned>(mask));
}
template <class T> T atomicAdd(T* p, T v) { T o = *p; *p = o + v; return o; }
template <class T> T atomicSub(T* p, T v) { T o = *p; *p = o - v; return o; }
template <class T> T atomicMax(T* p, T v) { T o = *p; *p = o < v ? v : o; return o; }
template <class T> T atomicMin(T* p, T v) { T o = *p; *p = v < o ? v : o; return o; }
template <class T> T atomicExch(T* p, T v) { T o = *p; *p = v; return o; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float a) { return std::exp(a); }
inline float __logf(float a) { return std::log(a); }
inline float __sinf(float a) { return std::sin(a); }
inline float __cosf(float a) { return std::cos(a); }
inline float __saturatef(float a) { return a < 0.f ? 0.f : a > 1.f ? 1.f : a; }
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }
using std::max;
using std::min;
)RT";

// A misaligned vector access stops the program with the kernel's line, as it faults on a GPU:
// __ldg's vector loads report it themselves; a plain `*reinterpret_cast<const float4*>(p)` (a
// vector load from shared memory) is checked by the compiler's alignment sanitizer, turned on
// for the kernels that dereference such a cast (it costs a quarter more compile time).
constexpr const char* kAlignmentCheck = " -fsanitize=alignment -fno-sanitize-recover=alignment";
bool casts_pointers(const std::string& source) {
  return source.find("*reinterpret_cast<") != std::string::npos;
}

std::string strip_extern_c(std::string s) {
  for (size_t p; (p = s.find("extern \"C\"")) != std::string::npos;) s.erase(p, 10);
  return s;
}

/// `extern __shared__ T a[];` becomes a macro for the launch's dynamic shared memory (valid at
/// namespace and at function scope); returns the names, to be #undef'd after the kernel.
std::string dynamic_shared(std::string s, std::vector<std::string>& names) {
  static const std::regex decl(
      R"(extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_][\w:]*(?:\s+[A-Za-z_]\w*)?)\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_]\w*)\s*\[\s*\]\s*;)");
  std::string out;
  auto it = std::sregex_iterator(s.begin(), s.end(), decl);
  size_t last = 0;
  for (; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out += s.substr(last, static_cast<size_t>(m.position(0)) - last);
    names.push_back(m[2]);
    out += "\n#undef " + m[2].str() + "\n#define " + m[2].str() + " (reinterpret_cast<" +
           m[1].str() + "*>(::gt::dyn_smem))\n";
    last = static_cast<size_t>(m.position(0) + m.length(0));
  }
  return out + s.substr(last);
}

std::string run_compiler(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) throw EmulatorError("cannot run the host compiler: " + cmd);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  if (rc != 0) throw EmulatorError("host compiler failed (" + cmd + "):\n" + out.substr(0, 4000));
  return out;
}

/// `s` as a C string literal (for #line).
std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c == '\n' ? ' ' : c;
  }
  return q + "\"";
}

/// `s` as one word for the shell.
std::string shell_word(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

struct CpuModule::Impl {
  fs::path dir;
  std::vector<void*> handles;
  using Launch = const char* (*)(const unsigned*, const unsigned*, void**, unsigned long long);
  std::vector<Launch> launchers;
  using Count = unsigned long long (*)();
  std::vector<Count> vector_loads;  ///< per kernel: its library's count of the last launch
  std::vector<std::vector<CpuParam>> params;  ///< per kernel: as it declares them
  ~Impl() {
    for (void* h : handles) dlclose(h);
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

std::string CpuModule::compiler() {
  if (const char* c = std::getenv("GPUTUNE_HOST_CXX"); c && *c) return c;
  return GPUTUNE_HOST_CXX;
}

CpuModule CpuModule::build(const std::vector<CpuKernel>& kernels, int jobs,
                           const std::vector<std::string>& include_dirs) {
  CpuModule m;
  m.impl_ = std::make_unique<Impl>();
  std::string tmpl = (fs::temp_directory_path() / "gputune-cpu-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw EmulatorError("cannot create a temporary folder in " + tmpl);
  m.impl_->dir = tmpl;
  std::ofstream(m.impl_->dir / "gt_cpu_cuda.h") << kRuntime;
  std::string includes;
  for (const std::string& d : include_dirs)
    if (!d.empty()) includes += " -I" + shell_word(d);
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(kernels.size())));
  std::vector<std::future<void>> work;
  std::vector<fs::path> libs;
  size_t per =
      (kernels.size() + static_cast<size_t>(jobs) - 1) / static_cast<size_t>(std::max(jobs, 1));
  for (int c = 0; c < jobs; ++c) {
    size_t from = static_cast<size_t>(c) * per, to = std::min(kernels.size(), from + per);
    if (from >= to) break;
    fs::path src = m.impl_->dir / ("chunk" + std::to_string(c) + ".cpp");
    fs::path lib = m.impl_->dir / ("chunk" + std::to_string(c) + ".so");
    std::ofstream o(src);
    o << "#include \"gt_cpu_cuda.h\"\n";
    bool check_alignment = false;
    for (size_t i = from; i < to; ++i) {
      const CpuKernel& k = kernels[i];
      check_alignment |= casts_pointers(k.source);
      std::vector<std::string> dyn;
      const std::string text = dynamic_shared(strip_extern_c(k.source), dyn);
      for (const auto& [name, value] : k.defines) o << "#define " << name << " " << value << "\n";
      const std::string file =
          k.file_name.empty() ? "kernel" + std::to_string(i) + ".cu" : k.file_name;
      o << "namespace gt_k" << i << " {\n#line 1 " << quoted(file) << "\n" << text << "\n}\n";
      for (const std::string& n : dyn) o << "#undef " << n << "\n";
      for (const auto& d : k.defines) o << "#undef " << d.first << "\n";
      const std::string fn = "&gt_k" + std::to_string(i) + "::" + k.name;
      o << "extern \"C\" const char* gt_launch_" << i
        << "(const unsigned* g, const unsigned* b, void** a, unsigned long long smem) {\n"
           "  return ::gt::launch(g, b, smem, [&] { ::gt::call("
        << fn << ", a); });\n}\n"
        << "extern \"C\" const ::gt::Param* gt_params_" << i
        << "(std::size_t* n) { return ::gt::signature(" << fn << ", n); }\n";
    }
    o << "extern \"C\" unsigned long long gt_vector_loads() { return ::gt::vector_loads; }\n";
    o.close();
    libs.push_back(lib);
    std::string cmd = compiler() + " -std=c++17 -O1 -w -shared -fPIC" +
                      (check_alignment ? kAlignmentCheck : "") + " -I" + m.impl_->dir.string() +
                      includes + " -o " + lib.string() + " " + src.string();
    work.push_back(std::async(std::launch::async, [cmd] { run_compiler(cmd); }));
  }
  for (auto& w : work) w.get();
  m.impl_->launchers.resize(kernels.size());
  m.impl_->vector_loads.resize(kernels.size());
  m.impl_->params.resize(kernels.size());
  for (size_t c = 0; c < libs.size(); ++c) {
    void* h = dlopen(libs[c].c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw EmulatorError(std::string("cannot load the emulated kernels: ") + dlerror());
    m.impl_->handles.push_back(h);
    size_t from = c * per, to = std::min(kernels.size(), from + per);
    for (size_t i = from; i < to; ++i) {
      void* f = dlsym(h, ("gt_launch_" + std::to_string(i)).c_str());
      void* sig = dlsym(h, ("gt_params_" + std::to_string(i)).c_str());
      if (!f || !sig) throw EmulatorError("missing launcher for kernel " + std::to_string(i));
      m.impl_->launchers[i] = reinterpret_cast<Impl::Launch>(f);
      struct Param {  // ::gt::Param of the prelude
        int pointer;
        unsigned long long bytes;
        char kind;
      };
      size_t n = 0;
      const auto* p = reinterpret_cast<const Param* (*)(size_t*)>(sig)(&n);
      for (size_t j = 0; j < n; ++j) {
        const CpuParam::Kind kind = p[j].kind == 'f'   ? CpuParam::Kind::Floating
                                    : p[j].kind == 'i' ? CpuParam::Kind::Integer
                                                       : CpuParam::Kind::Other;
        m.impl_->params[i].push_back({p[j].pointer != 0, p[j].bytes, kind});
      }
      void* count = dlsym(h, "gt_vector_loads");
      if (!count) throw EmulatorError("missing vector-load counter in the emulated kernels");
      m.impl_->vector_loads[i] = reinterpret_cast<Impl::Count>(count);
    }
  }
  return m;
}

CpuModule::CpuModule(CpuModule&&) noexcept = default;
CpuModule& CpuModule::operator=(CpuModule&&) noexcept = default;
CpuModule::~CpuModule() = default;

size_t CpuModule::size() const { return impl_ ? impl_->launchers.size() : 0; }

const std::vector<CpuParam>& CpuModule::params(size_t i) const {
  if (!impl_ || i >= impl_->params.size()) throw EmulatorError("no such emulated kernel");
  return impl_->params[i];
}

LaunchStats CpuModule::launch(size_t i, std::array<unsigned, 3> grid, std::array<unsigned, 3> block,
                              void** args, unsigned long long dynamic_smem) const {
  if (!impl_ || i >= impl_->launchers.size()) throw EmulatorError("no such emulated kernel");
  if (const char* err = impl_->launchers[i](grid.data(), block.data(), args, dynamic_smem))
    throw EmulatorError(err);
  return LaunchStats{impl_->vector_loads[i]()};
}

}  // namespace gputune::tuner
