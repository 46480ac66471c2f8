// CPU emulation of CUDA kernels of the naive subset: see cpu_emulator.h.
#include "tuner/cpu_emulator.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <sstream>

#include "tuner/command_line.h"
#include "tuner/stop_signals.h"

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
#include <cassert>
#include <csignal>
#include <cstdarg>
#include <cstdlib>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
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
// The alignment sanitizer's report (a vector access through a cast pointer, e.g. a float4 load
// from shared memory): recorded as this launch's fault with the kernel's line, and the launch
// stops when the thread next yields. These are the handlers the sanitizer's checks call (the
// layout of their data is the sanitizer ABI's, the same in GCC and Clang); defined here, they
// take the place of the runtime library's, which would print and go on, or end the process.
struct UbsanLocation { const char* file; unsigned line, column; };
struct UbsanType { unsigned short kind, info; char name[1]; };
struct UbsanMismatch { UbsanLocation loc; const UbsanType* type; unsigned char log_align, check; };
inline thread_local char fault_text[512];
inline void type_mismatch(const UbsanMismatch* d, const void* p) {
  if (fault) return;
  const char* what = d->check == 0 ? "a load of" : d->check == 1 ? "a store to" : "an access to";
  if (!p) {
    std::snprintf(fault_text, sizeof fault_text, "%s:%u: %s a null pointer of type %s",
                  d->loc.file, d->loc.line, what, d->type->name);
  } else {
    std::snprintf(fault_text, sizeof fault_text,
                  "misaligned address: %s:%u: %s %s at %p, which is not a multiple of %u bytes "
                  "(a GPU faults there too)",
                  d->loc.file, d->loc.line, what, d->type->name, p, 1u << d->log_align);
  }
  fault = fault_text;
}
}  // namespace gt
extern "C" __attribute__((visibility("hidden"))) void __ubsan_handle_type_mismatch_v1(
    gt::UbsanMismatch* d, void* p) { gt::type_mismatch(d, p); }
extern "C" __attribute__((visibility("hidden"))) void __ubsan_handle_type_mismatch_v1_abort(
    gt::UbsanMismatch* d, void* p) { gt::type_mismatch(d, p); }
namespace gt {
inline thread_local dim3 bdim{1, 1, 1}, gdim{1, 1, 1};
// Dynamic shared memory (`extern __shared__ T a[];`): refilled with 0xff bytes (NaN for floats)
// before each block, so a read of an element no thread of the block wrote shows in the results;
// it ends (16-byte aligned) right before an inaccessible page, so using more than the launch gave
// stops the check, as an out-of-range global access does.
inline thread_local unsigned char* dyn_smem = nullptr;
inline thread_local unsigned long long dyn_bytes = 0;
inline unsigned char* dyn_alloc(unsigned long long smem) {
  static thread_local void* base = nullptr;
  static thread_local std::size_t total = 0;
  if (base) munmap(base, total);
  const std::size_t page = 4096, bytes = (smem + 15) / 16 * 16, data = (bytes + page - 1) / page * page;
  total = data + page;
  base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) { base = nullptr; return nullptr; }
  mprotect(static_cast<char*>(base) + data, page, PROT_NONE);
  dyn_bytes = bytes;
  return static_cast<unsigned char*>(base) + data - bytes;
}
// A thread's stack, with an inaccessible page below it: a thread that overflows it faults.
class Stack {
 public:
  static constexpr std::size_t kBytes = 256 * 1024, kGuard = 4096;
  Stack() = default;
  Stack(Stack&& o) noexcept : base_(o.base_) { o.base_ = nullptr; }
  Stack& operator=(Stack&& o) noexcept { std::swap(base_, o.base_); return *this; }
  ~Stack() { if (base_) munmap(base_, kBytes + kGuard); }
  bool empty() const { return base_ == nullptr; }
  void allocate() {
    void* p = mmap(nullptr, kBytes + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    base_ = static_cast<char*>(p);
    mprotect(base_, kGuard, PROT_NONE);
  }
  char* data() const { return base_ + kGuard; }
  bool in_guard(const void* a) const {
    const char* p = static_cast<const char*>(a);
    return base_ && p >= base_ && p < base_ + kGuard;
  }

 private:
  char* base_ = nullptr;
};
// cp.async (gt_cp_async in pipelined variants): each copy's value is read when it is issued
// and written to shared memory only at the gt_cp_wait that covers its group, so a buffer read
// before its wait (or never waited for) shows in the results as on a GPU it may.
struct Copy { void* dst; std::array<unsigned char, 16> bytes; std::size_t n; };
// A warp-level operation a thread waits in (__shfl*_sync, votes, __reduce*_sync, __syncwarp):
// what it brought, and (once its warp is released) what it gets back.
enum class WarpKind { Sync, Index, Up, Down, Xor, Ballot, Any, All, Add, Min, Max, Active };
struct WarpOp {
  WarpKind kind = WarpKind::Sync;
  unsigned mask = 0;
  int arg = 0, width = 32;
  bool is_signed = false;
  std::array<unsigned char, 16> value{}, result{};
};
enum class Wait { None, Block, Warp };
struct Fiber {
  ucontext_t ctx; Stack stack; bool done = false; Wait wait = Wait::None; uint3 t;
  int predicate = 0, block_result = 0;  // __syncthreads_count/_and/_or
  WarpOp op;
  std::vector<Copy> open; std::vector<std::vector<Copy>> groups;
};
inline thread_local std::vector<Fiber> pool;  // the threads of a block
inline thread_local Fiber* current = nullptr;
inline thread_local ucontext_t scheduler;
inline thread_local const std::function<void()>* body = nullptr;
inline void trampoline() { (*body)(); current->done = true; }
inline void sync() { current->wait = Wait::Block; swapcontext(&current->ctx, &scheduler); }
// Code that must not be left half-way because it holds the C library's locks (malloc, stdio):
// the launch's time limit, if it expires inside, takes effect as the outermost such section
// ends (the signal handler, in cpu_emulator.cpp, reads this thread's Deferral).
struct Deferral { volatile sig_atomic_t depth, signal; };
inline thread_local Deferral deferral{0, 0};
struct Uninterrupted {
  Uninterrupted() { deferral.depth = deferral.depth + 1; }
  ~Uninterrupted() {
    deferral.depth = deferral.depth - 1;
    if (deferral.depth == 0 && deferral.signal) {
      const int s = deferral.signal;
      deferral.signal = 0;
      raise(s);
    }
  }
  Uninterrupted(const Uninterrupted&) = delete;
  Uninterrupted& operator=(const Uninterrupted&) = delete;
};
// Ends the calling thread's part in the launch with `why` as the launch's fault (as a failed
// device assert or __trap stops a kernel): the scheduler sees the fault and returns it.
[[noreturn]] inline void stop_thread(const char* why) {
  if (!fault) fault = why;
  current->done = true;
  swapcontext(&current->ctx, &scheduler);
  std::abort();  // never resumed: the next launch makes every thread's context anew
}
inline thread_local char stop_text[512];
// What kernels call of the C library, as on a GPU (device printf, malloc, free), made safe to
// stop by the time limit.
namespace device_api {
inline int printf(const char* format, ...) {
  Uninterrupted u;
  va_list ap;
  va_start(ap, format);
  const int r = std::vprintf(format, ap);
  va_end(ap);
  return r;
}
inline void* malloc(std::size_t n) { Uninterrupted u; return std::malloc(n); }
inline void free(void* p) { Uninterrupted u; std::free(p); }
}  // namespace device_api
inline thread_local const char* stuck = nullptr;  // why the threads of a block cannot go on
inline thread_local char stuck_text[200];
// Releases every thread waiting in a warp-level operation whose mask's threads all wait in one
// (threads past the end of a partial warp are not waited for); returns how many it released.
// A thread named in a waiting thread's mask that has exited sets `stuck`.
inline unsigned release_warps(unsigned n) {
  unsigned released = 0;
  std::array<bool, 32> go{};
  for (unsigned base = 0; base < n; base += 32) {
    const unsigned lanes = std::min(32u, n - base);
    for (unsigned l = 0; l < lanes; ++l) {
      const Fiber& f = pool[base + l];
      go[l] = f.wait == Wait::Warp;
      for (unsigned m = 0; go[l] && m < lanes; ++m) {
        if (!(f.op.mask >> m & 1u)) continue;
        const Fiber& g = pool[base + m];
        if (g.done) {
          std::snprintf(stuck_text, sizeof stuck_text,
                        "a warp-level operation of thread %u names thread %u in its mask, which has "
                        "exited (undefined on a GPU)", base + l, base + m);
          stuck = stuck_text;
          return 0;
        }
        go[l] = g.wait == Wait::Warp;
      }
    }
    for (unsigned l = 0; l < lanes; ++l) {
      if (!go[l]) continue;
      WarpOp& op = pool[base + l].op;
      const int w = op.width >= 1 && op.width <= 32 ? op.width : 32;
      const unsigned lo = l / w * w;  // the first lane of this thread's group of `w`
      long src = -1;
      switch (op.kind) {
        case WarpKind::Index: src = lo + static_cast<unsigned>(op.arg) % w; break;
        case WarpKind::Up: src = l - lo >= static_cast<unsigned>(op.arg) ? l - op.arg : l; break;
        case WarpKind::Down: src = l - lo + op.arg < static_cast<unsigned>(w) ? l + op.arg : l; break;
        case WarpKind::Xor: {
          const unsigned x = l ^ static_cast<unsigned>(op.arg);
          src = x < lo + w ? x : l;  // later groups are out of reach: its own value
          break;
        }
        default: break;
      }
      if (src >= 0) {  // a shuffle: a source that takes no part gives an undefined value (0xff)
        if (static_cast<unsigned>(src) < lanes && go[src]) op.result = pool[base + src].op.value;
        else op.result.fill(0xff);
        continue;
      }
      unsigned acc = 0, ballot = 0, taking_part = 0;
      for (unsigned m = 0; m < lanes; ++m) {
        if (!(op.mask >> m & 1u) || !go[m]) continue;
        unsigned v = 0;
        std::memcpy(&v, pool[base + m].op.value.data(), sizeof v);
        const bool first = taking_part == 0;
        taking_part |= 1u << m;
        if (v != 0) ballot |= 1u << m;
        const bool less = op.is_signed ? static_cast<int>(v) < static_cast<int>(acc) : v < acc;
        const bool more = op.is_signed ? static_cast<int>(v) > static_cast<int>(acc) : v > acc;
        if (op.kind == WarpKind::Add) acc += v;
        if (op.kind == WarpKind::Min && (first || less)) acc = v;
        if (op.kind == WarpKind::Max && (first || more)) acc = v;
      }
      unsigned r = acc;
      if (op.kind == WarpKind::Ballot) r = ballot;
      if (op.kind == WarpKind::Any) r = ballot != 0;
      if (op.kind == WarpKind::All) r = ballot == taking_part;
      if (op.kind == WarpKind::Active)  // the lanes that reached __activemask in this round
        for (unsigned m = 0; m < lanes; ++m)
          if (go[m] && pool[base + m].op.kind == WarpKind::Active && pool[base + m].op.arg == op.arg)
            r |= 1u << m;
      std::memcpy(op.result.data(), &r, sizeof r);
    }
    for (unsigned l = 0; l < lanes; ++l)
      if (go[l]) { pool[base + l].wait = Wait::None; ++released; }
  }
  return released;
}
template <class T> T warp_op(WarpKind kind, unsigned mask, const T& v, int arg, int width) {
  static_assert(sizeof(T) <= 16, "a warp-level operation on a value wider than 16 bytes");
  WarpOp& op = current->op;
  op.kind = kind;
  op.mask = mask;
  op.arg = arg;
  op.width = width;
  op.is_signed = std::is_signed_v<T>;
  op.value.fill(0);
  std::memcpy(op.value.data(), &v, sizeof v);
  current->wait = Wait::Warp;
  swapcontext(&current->ctx, &scheduler);
  T r;
  std::memcpy(&r, op.result.data(), sizeof r);
  return r;
}
inline int block_op(int predicate) {  // __syncthreads_count: the number of nonzero predicates
  current->predicate = predicate != 0;
  sync();
  return current->block_result;
}
// Returns nullptr or an error message.
inline const char* launch(const unsigned* g, const unsigned* b, unsigned long long smem,
                          const std::function<void()>& f) {
  fault = nullptr;
  dyn_smem = dyn_alloc(smem);
  if (!dyn_smem) return "cannot map the dynamic shared memory of the launch";
  const unsigned n = b[0] * b[1] * b[2];
  if (pool.size() < n) { Uninterrupted u; pool.resize(n); }
  body = &f;
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
          fb.done = false;
          fb.wait = Wait::None;
          fb.open.clear();
          fb.groups.clear();
          fb.t = uint3{i % b[0], (i / b[0]) % b[1], i / (b[0] * b[1])};
          if (fb.stack.empty()) fb.stack.allocate();
          if (fb.stack.empty()) return "cannot map a thread's stack";
          getcontext(&fb.ctx);
          fb.ctx.uc_stack.ss_sp = fb.stack.data();
          fb.ctx.uc_stack.ss_size = Stack::kBytes;
          fb.ctx.uc_link = &scheduler;
          makecontext(&fb.ctx, trampoline, 0);
        }
        for (;;) {  // run every thread until it waits or ends; then release what can go on
          for (unsigned i = 0; i < n; ++i) {
            Fiber& fb = pool[i];
            if (fb.done || fb.wait != Wait::None) continue;
            tid = fb.t;
            current = &fb;
            swapcontext(&scheduler, &fb.ctx);
            if (fault) return fault;
          }
          unsigned done = 0, at_warp = 0, count = 0;
          for (unsigned i = 0; i < n; ++i) {
            done += pool[i].done;
            at_warp += pool[i].wait == Wait::Warp;
            count += pool[i].wait == Wait::Block && pool[i].predicate;
          }
          if (done == n) break;
          if (at_warp) {
            stuck = nullptr;
            if (release_warps(n) > 0) continue;
            if (stuck) return stuck;
            return "threads wait in a warp-level operation for threads of their mask that wait at "
                   "__syncthreads";
          }
          if (done != 0) return "__syncthreads reached by some threads of a block while others exited";
          for (unsigned i = 0; i < n; ++i) {
            pool[i].wait = Wait::None;
            pool[i].block_result = static_cast<int>(count);
            pool[i].predicate = 0;
          }
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
  Uninterrupted u;
  current->open.push_back(c);
}
inline void cp_commit() {
  Uninterrupted u;
  current->groups.push_back(std::move(current->open));
  current->open.clear();
}
inline void cp_wait(std::size_t keep) {
  Uninterrupted u;
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
// A failed assert in a kernel stops the launch (cudaErrorAssert on a GPU). Defined here, the C
// library's __assert_fail (which <cassert>'s assert calls) is this chunk's own (-Bsymbolic).
extern "C" void __assert_fail(const char* e, const char* file, unsigned line, const char*) noexcept {
  std::snprintf(::gt::stop_text, sizeof ::gt::stop_text,
                "%s:%u: block (%u,%u,%u), thread (%u,%u,%u): assertion `%s` failed", file, line,
                ::gt::bid.x, ::gt::bid.y, ::gt::bid.z, ::gt::tid.x, ::gt::tid.y, ::gt::tid.z, e);
  ::gt::stop_thread(::gt::stop_text);
}
[[noreturn]] inline void __trap() {
  std::snprintf(::gt::stop_text, sizeof ::gt::stop_text,
                "block (%u,%u,%u), thread (%u,%u,%u) called __trap()", ::gt::bid.x, ::gt::bid.y,
                ::gt::bid.z, ::gt::tid.x, ::gt::tid.y, ::gt::tid.z);
  ::gt::stop_thread(::gt::stop_text);
}
template <class T> T __ldg(const T* p) { return *p; }
inline float2 __ldg(const float2* p) { return ::gt::vector_load(p); }
inline float4 __ldg(const float4* p) { return ::gt::vector_load(p); }
inline int2 __ldg(const int2* p) { return ::gt::vector_load(p); }
inline int4 __ldg(const int4* p) { return ::gt::vector_load(p); }
// Warp-level intrinsics: a thread waits in one until every thread its mask names (that exists:
// a partial warp's missing lanes are not waited for) waits in one too, as on a GPU since Volta.
// Lanes are the linear thread index modulo 32. A shuffle from a thread that takes no part gives
// 0xff bytes (NaN for floats): undefined on a GPU, visible here.
constexpr int warpSize = 32;
template <class T> T __shfl_sync(unsigned m, T v, int src, int w = 32) {
  return ::gt::warp_op(::gt::WarpKind::Index, m, v, src, w);
}
template <class T> T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) {
  return ::gt::warp_op(::gt::WarpKind::Up, m, v, static_cast<int>(d), w);
}
template <class T> T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) {
  return ::gt::warp_op(::gt::WarpKind::Down, m, v, static_cast<int>(d), w);
}
template <class T> T __shfl_xor_sync(unsigned m, T v, int x, int w = 32) {
  return ::gt::warp_op(::gt::WarpKind::Xor, m, v, x, w);
}
inline unsigned __ballot_sync(unsigned m, int p) {
  return ::gt::warp_op(::gt::WarpKind::Ballot, m, static_cast<unsigned>(p != 0), 0, 32);
}
inline int __any_sync(unsigned m, int p) {
  return static_cast<int>(::gt::warp_op(::gt::WarpKind::Any, m, static_cast<unsigned>(p != 0), 0, 32));
}
inline int __all_sync(unsigned m, int p) {
  return static_cast<int>(::gt::warp_op(::gt::WarpKind::All, m, static_cast<unsigned>(p != 0), 0, 32));
}
inline void __syncwarp(unsigned m = 0xffffffffu) { ::gt::warp_op(::gt::WarpKind::Sync, m, 0u, 0, 32); }
inline unsigned __reduce_add_sync(unsigned m, unsigned v) { return ::gt::warp_op(::gt::WarpKind::Add, m, v, 0, 32); }
inline int __reduce_add_sync(unsigned m, int v) { return ::gt::warp_op(::gt::WarpKind::Add, m, v, 0, 32); }
inline unsigned __reduce_min_sync(unsigned m, unsigned v) { return ::gt::warp_op(::gt::WarpKind::Min, m, v, 0, 32); }
inline int __reduce_min_sync(unsigned m, int v) { return ::gt::warp_op(::gt::WarpKind::Min, m, v, 0, 32); }
inline unsigned __reduce_max_sync(unsigned m, unsigned v) { return ::gt::warp_op(::gt::WarpKind::Max, m, v, 0, 32); }
inline int __reduce_max_sync(unsigned m, int v) { return ::gt::warp_op(::gt::WarpKind::Max, m, v, 0, 32); }
// The threads of this thread's warp that reach this __activemask (its line) together: on a GPU,
// those converged there; here, those of the warp that call it in the same round (it waits for
// nobody, and the threads on another path get their own mask).
inline unsigned __activemask(int line = __builtin_LINE()) {
  return ::gt::warp_op(::gt::WarpKind::Active, 0u, 0u, line, 32);
}
inline int __syncthreads_count(int p) { return ::gt::block_op(p); }
inline int __syncthreads_and(int p) {
  return ::gt::block_op(p) == static_cast<int>(::gt::bdim.x * ::gt::bdim.y * ::gt::bdim.z);
}
inline int __syncthreads_or(int p) { return ::gt::block_op(p) != 0; }
inline void __threadfence() {}
inline void __threadfence_block() {}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
template <class T> T atomicAdd(T* p, T v) { T o = *p; *p = o + v; return o; }
template <class T> T atomicSub(T* p, T v) { T o = *p; *p = o - v; return o; }
template <class T> T atomicMax(T* p, T v) { T o = *p; *p = o < v ? v : o; return o; }
template <class T> T atomicMin(T* p, T v) { T o = *p; *p = v < o ? v : o; return o; }
template <class T> T atomicExch(T* p, T v) { T o = *p; *p = v; return o; }
template <class T> T atomicCAS(T* p, T cmp, T v) { T o = *p; if (o == cmp) *p = v; return o; }
template <class T> T atomicAnd(T* p, T v) { T o = *p; *p = o & v; return o; }
template <class T> T atomicOr(T* p, T v) { T o = *p; *p = o | v; return o; }
template <class T> T atomicXor(T* p, T v) { T o = *p; *p = o ^ v; return o; }
inline unsigned atomicInc(unsigned* p, unsigned v) { unsigned o = *p; *p = o >= v ? 0 : o + 1; return o; }
inline unsigned atomicDec(unsigned* p, unsigned v) { unsigned o = *p; *p = o == 0 || o > v ? v : o - 1; return o; }
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

// A misaligned vector access stops the launch with the kernel's line, as it faults on a GPU:
// __ldg's vector loads report it themselves; a plain `*reinterpret_cast<const float4*>(p)` or
// `((float4*)p)[i]` (a vector access to shared memory) is checked by the compiler's alignment
// sanitizer, turned on for the kernels that cast pointers (it costs a quarter more compile time),
// whose report the prelude's handler turns into the launch's fault (gt::type_mismatch).
constexpr const char* kAlignmentCheck = " -fsanitize=alignment -fsanitize-recover=alignment";
bool casts_pointers(const std::string& source) {
  // reinterpret_cast<T*>(p) however it is used (*, ->, []), or a C cast to a vector pointer;
  // not __ldg(reinterpret_cast<...>(p)), whose load checks itself.
  static const std::regex ldg(R"(__ldg\s*\(\s*reinterpret_cast)");
  static const std::regex cast(
      R"(reinterpret_cast\s*<|\(\s*(?:const\s+)?(?:volatile\s+)?[A-Za-z_]\w*[234]\s*\*\s*\))");
  return std::regex_search(std::regex_replace(source, ldg, "__ldg("), cast);
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

// The host compilers now running, each the leader of a process group of its own (the shell and
// the compiler's own processes), so that interrupt_cpu_launches() ends them at once: with SIGTERM,
// on which the compiler driver deletes its temporary files, as on a terminal's Ctrl-C.
constexpr size_t kCompilerSlots = 256;
std::atomic<pid_t> g_compilers[kCompilerSlots];

void stop_compilers() noexcept {
  for (auto& slot : g_compilers)
    if (const pid_t pid = slot.load(); pid > 0) kill(-pid, SIGTERM);
}

/// Runs `cmd` with /bin/sh; its output (stdout and stderr) when it succeeds.
std::string run_compiler(const std::string& cmd) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw EmulatorError("cannot run the host compiler (pipe: " + std::string(strerror(errno)) +
                        "): " + cmd);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&files, pipe_fds[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  const sigset_t mask = spawn_signal_mask();  // not this process's blocked stop signals
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  std::string shell = "/bin/sh", dash_c = "-c", command = cmd;
  char* argv[] = {shell.data(), dash_c.data(), command.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &files, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    throw EmulatorError("cannot run the host compiler (" + std::string(strerror(rc)) + "): " + cmd);
  }
  std::atomic<pid_t>* slot = nullptr;
  for (auto& s : g_compilers) {
    pid_t free_slot = 0;
    if (s.compare_exchange_strong(free_slot, pid)) {
      slot = &s;
      break;
    }
  }
  if (cpu_launches_interrupted()) kill(-pid, SIGTERM);  // interrupted while it started
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (slot) slot->store(0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw EmulatorError("host compiler failed (" + cmd + "):\n" + out.substr(0, 4000));
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

// --- Faults and time limits of a launch ---------------------------------------------------
// A launch runs with this thread's FaultTrap armed: a fault in the kernel's code, or the
// expiry of the thread's CPU-time timer, jumps back to CpuModule::launch (siglongjmp out of the
// handler, which runs on an alternate stack so that a thread stack overflow is caught too).
// Signals that arrive while no launch of this thread is running go to the handler installed
// before ours (the default: the process ends as it would have without us).

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid  // glibc before 2.38 lacks the name
#endif

constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
int timer_signal() { return SIGRTMIN + 2; }

/// The prelude's gt::Deferral: while `depth` > 0 the kernel is inside C library code that holds
/// a lock, and an expired time limit is left in `signal` for the prelude to raise again.
struct Deferral {
  volatile sig_atomic_t depth, signal;
};

struct FaultTrap {
  sigjmp_buf env;
  volatile sig_atomic_t armed = 0;
  volatile sig_atomic_t signal = 0;
  void* volatile address = nullptr;
  Deferral* volatile deferral = nullptr;  ///< the launched kernel's library's, of this thread
};

/// This thread's trap while one of its launches runs (constant-initialised: safe in a handler).
thread_local FaultTrap* t_trap = nullptr;

// interrupt_cpu_launches(): the flag, and the threads inside a launch (their kernel thread ids;
// 0 is a free slot) that it sends the timer signal to. Lock-free atomics: safe in a handler.
std::atomic<int> g_interrupted{0};
constexpr int kLaunchSlots = 256;
std::atomic<pid_t> g_launching[kLaunchSlots];

/// Holds a slot of g_launching for this thread while it launches (none when all are taken: an
/// interrupt then reaches the launch at its end, or at its time limit).
class LaunchSlot {
 public:
  LaunchSlot() {
    const pid_t tid = gettid();
    for (auto& s : g_launching) {
      pid_t free = 0;
      if (s.compare_exchange_strong(free, tid)) {
        slot_ = &s;
        return;
      }
    }
  }
  LaunchSlot(const LaunchSlot&) = delete;
  LaunchSlot& operator=(const LaunchSlot&) = delete;
  ~LaunchSlot() {
    if (slot_) slot_->store(0);
  }

 private:
  std::atomic<pid_t>* slot_ = nullptr;
};

struct sigaction g_previous[NSIG];

void on_signal(int sig, siginfo_t* info, void* uc) {
  if (FaultTrap* t = t_trap; t && t->armed) {
    if (Deferral* d = t->deferral; sig == timer_signal() && d && d->depth > 0) {
      d->signal = sig;  // jumping out would leave a lock of the C library held for good
      return;
    }
    t->armed = 0;
    t->signal = sig;
    t->address = info ? info->si_addr : nullptr;
    siglongjmp(t->env, 1);
  }
  if (sig == timer_signal()) return;  // a timer that expired just after its launch ended
  const struct sigaction& prev = g_previous[sig];
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, uc);
  } else if (prev.sa_handler == SIG_IGN) {
    return;
  } else if (prev.sa_handler != SIG_DFL && !(prev.sa_flags & SA_SIGINFO)) {
    prev.sa_handler(sig);
  } else {
    signal(sig, SIG_DFL);  // as if we were never there: the pending signal ends the process
    raise(sig);
  }
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int sig : kFaultSignals) sigaction(sig, &sa, &g_previous[sig]);
    sigaction(timer_signal(), &sa, &g_previous[timer_signal()]);
  });
}

/// Per thread: the alternate signal stack and the CPU-time timer (RAII; freed at thread exit).
class ThreadTrapResources {
 public:
  ThreadTrapResources() {
    alt_.resize(std::max<size_t>(64 * 1024, static_cast<size_t>(SIGSTKSZ)));
    stack_t ss{};
    ss.ss_sp = alt_.data();
    ss.ss_size = alt_.size();
    if (sigaltstack(&ss, nullptr) != 0) alt_.clear();
    struct sigevent sev {};
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = timer_signal();
    sev.sigev_notify_thread_id = static_cast<int>(gettid());
    has_timer_ = timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer_) == 0;
  }
  ThreadTrapResources(const ThreadTrapResources&) = delete;
  ThreadTrapResources& operator=(const ThreadTrapResources&) = delete;
  ~ThreadTrapResources() {
    if (has_timer_) timer_delete(timer_);
    if (!alt_.empty()) {
      stack_t ss{};
      ss.ss_flags = SS_DISABLE;
      sigaltstack(&ss, nullptr);
    }
  }
  /// Starts (seconds > 0) or stops (0) the timer; false when this thread has none.
  bool set_timer(double seconds) {
    if (!has_timer_) return false;
    itimerspec its{};
    const auto whole = static_cast<time_t>(seconds);
    its.it_value.tv_sec = whole;
    its.it_value.tv_nsec = static_cast<long>((seconds - static_cast<double>(whole)) * 1e9);
    return timer_settime(timer_, 0, &its, nullptr) == 0;
  }

 private:
  std::vector<char> alt_;
  timer_t timer_{};
  bool has_timer_ = false;
};

std::string fault_message(int sig, const void* address, double limit) {
  char at[32];
  std::snprintf(at, sizeof at, "%p", address);
  if (sig == timer_signal()) {
    char s[32];
    std::snprintf(s, sizeof s, "%g", limit);
    return std::string("stopped after ") + s +
           " s of CPU time: a kernel that never returns (a loop whose condition never changes), "
           "or a problem too large for the emulator (give a smaller --size or a larger "
           "--timeout)";
  }
  switch (sig) {
    case SIGSEGV:
      return std::string("segmentation fault at ") + at +
             ": the kernel accessed memory outside its arguments and shared memory (an index "
             "out of range, a bad pointer, or a thread stack beyond the emulator's 256 KiB)";
    case SIGBUS:
      return std::string("bus error at ") + at + ": the kernel accessed memory it may not";
    case SIGFPE:
      return "arithmetic fault: an integer division or remainder by zero (on a GPU its result is "
             "undefined)";
    case SIGILL:
      return "illegal instruction: the kernel's code reached undefined behaviour (the host "
             "compiler traps there, e.g. a non-void function that returns nothing)";
    default:
      return "signal " + std::to_string(sig);
  }
}

}  // namespace

void interrupt_cpu_launches() noexcept {
  g_interrupted.store(1);
  stop_compilers();
  const pid_t pid = getpid();
  for (auto& s : g_launching)
    if (const pid_t tid = s.load(); tid != 0) syscall(SYS_tgkill, pid, tid, timer_signal());
}

bool cpu_launches_interrupted() noexcept { return g_interrupted.load() != 0; }

void allow_cpu_launches() noexcept { g_interrupted.store(0); }

struct CpuModule::Impl {
  fs::path dir;
  std::vector<void*> handles;
  using Launch = const char* (*)(const unsigned*, const unsigned*, void**, unsigned long long);
  std::vector<Launch> launchers;
  using Count = unsigned long long (*)();
  std::vector<Count> vector_loads;  ///< per kernel: its library's count of the last launch
  using Smem = const void* (*)(unsigned long long*);
  std::vector<Smem> dyn_smem;  ///< per kernel: its library's dynamic shared memory
  using Overflow = int (*)(const void*);
  std::vector<Overflow> stack_overflow;  ///< per kernel: is an address a thread stack's guard
  using Pending = const char* (*)();
  std::vector<Pending> pending_fault;  ///< per kernel: the fault its library recorded last launch
  using DeferralOf = Deferral* (*)();
  std::vector<DeferralOf> deferral;           ///< per kernel: its library's Deferral of this thread
  double time_limit = 0;                      ///< CPU seconds per launch (0: none)
  std::vector<std::vector<CpuParam>> params;  ///< per kernel: as it declares them
  ~Impl() {
    for (void* h : handles) dlclose(h);
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

std::string CpuModule::compiler() {
  if (const char* c = std::getenv("GPUTUNE_HOST_CXX"); c && *c) return c;
  return shell_quote(GPUTUNE_HOST_CXX);  // a path (the variable may add options)
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
    if (!d.empty()) includes += " -I" + shell_quote(d);
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(kernels.size())));
  // Kernels go into one library per compiler job, each kernel in a namespace of its own. A
  // kernel that includes headers gets a translation unit to itself: a header with an include
  // guard or `#pragma once` is read once per unit, so the next kernel of the unit would not see
  // what it declares (NVRTC compiles each variant on its own, too).
  static const std::regex include_line(R"((^|\n)[ \t]*#[ \t]*include\b)");
  std::vector<std::vector<size_t>> chunks;
  std::vector<size_t> plain;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (std::regex_search(kernels[i].source, include_line))
      chunks.push_back({i});
    else
      plain.push_back(i);
  }
  const size_t per = (plain.size() + static_cast<size_t>(jobs) - 1) / static_cast<size_t>(jobs);
  for (size_t from = 0; from < plain.size(); from += per)
    chunks.emplace_back(
        plain.begin() + static_cast<std::ptrdiff_t>(from),
        plain.begin() + static_cast<std::ptrdiff_t>(std::min(plain.size(), from + per)));
  std::vector<std::string> commands;
  std::vector<fs::path> libs;
  for (size_t c = 0; c < chunks.size(); ++c) {
    fs::path src = m.impl_->dir / ("chunk" + std::to_string(c) + ".cpp");
    fs::path lib = m.impl_->dir / ("chunk" + std::to_string(c) + ".so");
    std::ofstream o(src);
    o << "#include \"gt_cpu_cuda.h\"\n";
    bool check_alignment = false;
    for (size_t i : chunks[c]) {
      const CpuKernel& k = kernels[i];
      check_alignment |= casts_pointers(k.source);
      std::vector<std::string> dyn;
      const std::string text = dynamic_shared(strip_extern_c(k.source), dyn);
      for (const auto& [name, value] : k.defines) o << "#define " << name << " " << value << "\n";
      const std::string file =
          k.file_name.empty() ? "kernel" + std::to_string(i) + ".cu" : k.file_name;
      o << "namespace gt_k" << i
        << " {\nusing ::gt::device_api::printf;\nusing ::gt::device_api::malloc;\n"
           "using ::gt::device_api::free;\n#line 1 "
        << quoted(file) << "\n"
        << text << "\n}\n";
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
    o << "extern \"C\" unsigned long long gt_vector_loads() { return ::gt::vector_loads; }\n"
         "extern \"C\" const void* gt_dyn_smem(unsigned long long* n) {\n"
         "  *n = ::gt::dyn_bytes;\n  return ::gt::dyn_smem;\n}\n"
         "extern \"C\" const char* gt_pending_fault() { return ::gt::fault; }\n"
         "extern \"C\" ::gt::Deferral* gt_deferral() { return &::gt::deferral; }\n"
         "extern \"C\" int gt_stack_overflow(const void* a) {\n"
         "  for (const auto& f : ::gt::pool) if (f.stack.in_guard(a)) return 1;\n"
         "  return 0;\n}\n";
    o.close();
    libs.push_back(lib);
    // Stack-clash protection probes each page of a large frame, so an overflow hits the guard.
    // -Bsymbolic: the chunk's own handlers (__assert_fail, the sanitizer's) take the calls.
    std::string cmd =
        compiler() + " -std=c++17 -O1 -w -shared -fPIC -Wl,-Bsymbolic -fstack-clash-protection" +
        (check_alignment ? kAlignmentCheck : "") + " -I" + shell_quote(m.impl_->dir.string()) +
        includes + " -o " + shell_quote(lib.string()) + " " + shell_quote(src.string());
    commands.push_back(std::move(cmd));
  }
  // `jobs` compilers at a time. An interrupt ends them too (stop_compilers): their failure is its
  // doing, not the kernels'.
  std::atomic<size_t> next{0};
  std::vector<std::future<void>> work;
  for (int j = 0; j < jobs; ++j)
    work.push_back(std::async(std::launch::async, [&] {
      for (size_t c; (c = next++) < commands.size();) run_compiler(commands[c]);
    }));
  try {
    for (auto& w : work) w.get();
  } catch (const EmulatorError&) {
    if (cpu_launches_interrupted()) throw EmulatorInterrupted("interrupted while compiling");
    throw;
  }
  if (cpu_launches_interrupted()) throw EmulatorInterrupted("interrupted while compiling");
  m.impl_->launchers.resize(kernels.size());
  m.impl_->vector_loads.resize(kernels.size());
  m.impl_->dyn_smem.resize(kernels.size());
  m.impl_->stack_overflow.resize(kernels.size());
  m.impl_->pending_fault.resize(kernels.size());
  m.impl_->deferral.resize(kernels.size());
  m.impl_->params.resize(kernels.size());
  for (size_t c = 0; c < libs.size(); ++c) {
    void* h = dlopen(libs[c].c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw EmulatorError(std::string("cannot load the emulated kernels: ") + dlerror());
    m.impl_->handles.push_back(h);
    for (size_t i : chunks[c]) {
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
      // The chunk's queries of its prelude's state (one per library, shared by its kernels).
      auto query = [h]<class F>(F& into, const char* name) {
        void* f = dlsym(h, name);
        if (!f) throw EmulatorError(std::string("missing ") + name + " in the emulated kernels");
        into = reinterpret_cast<F>(f);
      };
      query(m.impl_->vector_loads[i], "gt_vector_loads");
      query(m.impl_->dyn_smem[i], "gt_dyn_smem");
      query(m.impl_->stack_overflow[i], "gt_stack_overflow");
      query(m.impl_->pending_fault[i], "gt_pending_fault");
      query(m.impl_->deferral[i], "gt_deferral");
    }
  }
  // The libraries stay mapped: their files, and the folder, are no longer needed.
  std::error_code ec;
  fs::remove_all(m.impl_->dir, ec);
  m.impl_->dir.clear();
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
  install_handlers();
  static thread_local ThreadTrapResources resources;
  static thread_local FaultTrap trap;
  const double limit = impl_->time_limit;
  const char* err = nullptr;
  // A launch that ended by a jump may have left its library's count of sections raised.
  Deferral* deferral = impl_->deferral[i]();
  deferral->depth = 0;
  deferral->signal = 0;
  trap.deferral = deferral;
  t_trap = &trap;
  const LaunchSlot slot;  // from here on an interrupt sends this thread the timer signal
  if (sigsetjmp(trap.env, 1) == 0) {
    if (limit > 0) resources.set_timer(limit);
    trap.armed = 1;
    if (cpu_launches_interrupted()) raise(timer_signal());  // before the slot was taken
    err = impl_->launchers[i](grid.data(), block.data(), args, dynamic_smem);
    trap.armed = 0;
    if (limit > 0) resources.set_timer(0);
    t_trap = nullptr;
  } else {  // the handler jumped here: trap.armed is 0 again
    if (limit > 0) resources.set_timer(0);
    t_trap = nullptr;
    const int sig = trap.signal;
    if (sig == timer_signal() && cpu_launches_interrupted())
      throw EmulatorInterrupted("interrupted");
    // A fault the kernel's code recorded first is the cause: a misaligned vector access the
    // sanitizer reported may still fault as the instruction runs (an aligned SSE load).
    if (const char* first = impl_->pending_fault[i]())
      throw EmulatorFault(first, sig, trap.address, false);
    if (sig == SIGSEGV && impl_->stack_overflow[i](trap.address))
      throw EmulatorFault(
          "a thread's stack overflowed: the emulator gives each thread 256 KiB (a large local "
          "array? on a GPU it would live in local memory)",
          sig, trap.address, false);
    if (sig == SIGSEGV) {  // the page after the dynamic shared memory (dyn_alloc's layout)
      const auto [smem, bytes] = dynamic_shared_memory(i);
      const auto* at = static_cast<const unsigned char*>(trap.address);
      const auto* end = static_cast<const unsigned char*>(smem) + bytes;
      if (smem && at >= end && at < end + 4096)
        throw EmulatorFault("accesses dynamic shared memory at byte " +
                                std::to_string(at - static_cast<const unsigned char*>(smem)) +
                                ", past the " + std::to_string(dynamic_smem) +
                                " bytes the launch gives",
                            sig, trap.address, false);
    }
    throw EmulatorFault(fault_message(sig, trap.address, limit), sig, trap.address,
                        sig == timer_signal());
  }
  if (err) throw EmulatorError(err);
  return LaunchStats{impl_->vector_loads[i]()};
}

void CpuModule::set_time_limit(double seconds) {
  if (impl_) impl_->time_limit = std::max(0.0, seconds);
}

std::pair<const void*, unsigned long long> CpuModule::dynamic_shared_memory(size_t i) const {
  if (!impl_ || i >= impl_->dyn_smem.size()) throw EmulatorError("no such emulated kernel");
  unsigned long long n = 0;
  const void* p = impl_->dyn_smem[i](&n);
  return {p, n};
}

}  // namespace gputune::tuner
