#pragma once
/** \file tuner/emulator/emulator_runtime.h
 * The CPU emulator's CUDA prelude (tuner/emulator/cpu_emulator.h): what a kernel of the naive
 * subset needs to compile as C++ for the host: threadIdx/blockIdx/blockDim/gridDim, __syncthreads,
 * __shared__, atomics, warp intrinsics, the vector types. Threads are fibers on one OS thread, so
 * `static thread_local` storage is shared by the threads of a block (as __shared__ is) and atomics
 * are plain read-modify-writes. Not part of gputune's own build: cmake/embed_text.cmake embeds this
 * file in the binary, and the emulator writes it beside each kernel it compiles (as gt_cpu_cuda.h)
 * for the host compiler.
 * Owns: the prelude's CUDA names and its fault reporting (gt::fault) for an emulated kernel.
 * Must not: include any gputune header: it is compiled with the user's kernel, not with gputune.
 */
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
};
// Vector types with CUDA's sizes and alignment (a misaligned vector load faults on a GPU).
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
namespace gt {
inline thread_local uint3 tid{0, 0, 0}, bid{0, 0, 0};
inline thread_local const char* fault = nullptr;          // the first fault of this launch
inline thread_local unsigned long long vector_loads = 0;  // vector loads of this launch
// The read-only path's loads of this launch (__ldg): where, how many bytes, the bytes loaded. The
// launcher compares them with memory before and after the launch: on a GPU a __ldg of what the
// launch writes may return the old value (the read-only cache does not see the launch's stores).
// At most the capacity reserved at launch (no allocation inside a kernel); later loads go unseen.
struct LdgRecord {
  const void* p;
  unsigned size;
  unsigned char v[16];
};
inline constexpr std::size_t kLdgLogMost = std::size_t{1} << 20;
inline thread_local std::vector<LdgRecord> ldg_log;
inline void log_ldg(const void* p, unsigned size) {
  if (size > sizeof(LdgRecord::v) || ldg_log.size() >= ldg_log.capacity()) return;
  LdgRecord& r = ldg_log.emplace_back();
  r.p = p;
  r.size = size;
  std::memcpy(r.v, p, size);
}
template <class V>
V vector_load(const V* p) {
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
struct UbsanLocation {
  const char* file;
  unsigned line, column;
};
struct UbsanType {
  unsigned short kind, info;
  char name[1];
};
struct UbsanMismatch {
  UbsanLocation loc;
  const UbsanType* type;
  unsigned char log_align, check;
};
inline thread_local char fault_text[512];
inline void type_mismatch(const UbsanMismatch* d, const void* p) {
  if (fault) return;
  const char* what = d->check == 0 ? "a load of" : d->check == 1 ? "a store to" : "an access to";
  if (!p) {
    std::snprintf(fault_text, sizeof fault_text, "%s:%u: %s a null pointer of type %s", d->loc.file,
                  d->loc.line, what, d->type->name);
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
    gt::UbsanMismatch* d, void* p) {
  gt::type_mismatch(d, p);
}
extern "C" __attribute__((visibility("hidden"))) void __ubsan_handle_type_mismatch_v1_abort(
    gt::UbsanMismatch* d, void* p) {
  gt::type_mismatch(d, p);
}
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
  const std::size_t page = 4096, bytes = (smem + 15) / 16 * 16,
                    data = (bytes + page - 1) / page * page;
  total = data + page;
  base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    base = nullptr;
    return nullptr;
  }
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
  Stack& operator=(Stack&& o) noexcept {
    std::swap(base_, o.base_);
    return *this;
  }
  ~Stack() {
    if (base_) munmap(base_, kBytes + kGuard);
  }
  bool empty() const { return base_ == nullptr; }
  void allocate() {
    void* p =
        mmap(nullptr, kBytes + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
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
struct Copy {
  void* dst;
  std::array<unsigned char, 16> bytes;
  std::size_t n;
};
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
  ucontext_t ctx;
  Stack stack;
  bool done = false;
  Wait wait = Wait::None;
  uint3 t;
  int predicate = 0, block_result = 0;  // __syncthreads_count/_and/_or
  WarpOp op;
  std::vector<Copy> open;
  std::vector<std::vector<Copy>> groups;
};
inline thread_local std::vector<Fiber> pool;  // the threads of a block
inline thread_local Fiber* current = nullptr;
inline thread_local ucontext_t scheduler;
inline thread_local const std::function<void()>* body = nullptr;
inline void trampoline() {
  (*body)();
  current->done = true;
}
inline void sync() {
  current->wait = Wait::Block;
  swapcontext(&current->ctx, &scheduler);
}
// Code that must not be left half-way because it holds the C library's locks (malloc, stdio):
// the launch's time limit, if it expires inside, takes effect as the outermost such section
// ends (the signal handler, in cpu_emulator.cpp, reads this thread's Deferral).
struct Deferral {
  volatile sig_atomic_t depth, signal;
};
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
inline void* malloc(std::size_t n) {
  Uninterrupted u;
  return std::malloc(n);
}
inline void free(void* p) {
  Uninterrupted u;
  std::free(p);
}
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
          std::snprintf(
              stuck_text, sizeof stuck_text,
              "a warp-level operation of thread %u names thread %u in its mask, which has "
              "exited (undefined on a GPU)",
              base + l, base + m);
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
        case WarpKind::Index:
          src = lo + static_cast<unsigned>(op.arg) % w;
          break;
        case WarpKind::Up:
          src = l - lo >= static_cast<unsigned>(op.arg) ? l - op.arg : l;
          break;
        case WarpKind::Down:
          src = l - lo + op.arg < static_cast<unsigned>(w) ? l + op.arg : l;
          break;
        case WarpKind::Xor: {
          const unsigned x = l ^ static_cast<unsigned>(op.arg);
          src = x < lo + w ? x : l;  // later groups are out of reach: its own value
          break;
        }
        default:
          break;
      }
      if (src >= 0) {  // a shuffle: a source that takes no part gives an undefined value (0xff)
        if (static_cast<unsigned>(src) < lanes && go[src])
          op.result = pool[base + src].op.value;
        else
          op.result.fill(0xff);
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
          if (go[m] && pool[base + m].op.kind == WarpKind::Active &&
              pool[base + m].op.arg == op.arg)
            r |= 1u << m;
      std::memcpy(op.result.data(), &r, sizeof r);
    }
    for (unsigned l = 0; l < lanes; ++l)
      if (go[l]) {
        pool[base + l].wait = Wait::None;
        ++released;
      }
  }
  return released;
}
template <class T>
T warp_op(WarpKind kind, unsigned mask, const T& v, int arg, int width) {
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
  if (pool.size() < n) {
    Uninterrupted u;
    pool.resize(n);
  }
  body = &f;
  vector_loads = 0;
  ldg_log.clear();
  if (ldg_log.capacity() < kLdgLogMost) {
    Uninterrupted u;
    ldg_log.reserve(kLdgLogMost);
  }
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
          if (done != 0)
            return "__syncthreads reached by some threads of a block while others exited";
          for (unsigned i = 0; i < n; ++i) {
            pool[i].wait = Wait::None;
            pool[i].block_result = static_cast<int>(count);
            pool[i].predicate = 0;
          }
        }
      }
  return nullptr;
}
template <class T>
T ldg(const T* p) {
  return *p;
}
template <class T>
void cp_async(T* dst, const T* src, bool ok) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16,
                "cp.async copies 4, 8, 16 bytes");
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
struct Param {
  int pointer;
  unsigned long long bytes;
  char kind;
};
template <class E>
constexpr char kind_of() {
  return std::is_floating_point_v<E> ? 'f' : std::is_integral_v<E> ? 'i' : 'o';
}
template <class T>
constexpr Param param_info() {
  if constexpr (std::is_pointer_v<T>) {
    using E = std::remove_cv_t<std::remove_all_extents_t<std::remove_pointer_t<T>>>;
    if constexpr (std::is_void_v<E>)
      return {1, 0, 'o'};
    else
      return {1, sizeof(E), kind_of<E>()};
  } else {
    return {0, sizeof(T), kind_of<T>()};
  }
}
template <class... P>
const Param* signature(void (*)(P...), std::size_t* n) {
  static const Param info[] = {param_info<P>()..., Param{0, 0, 'o'}};
  *n = sizeof...(P);
  return info;
}
template <class... P, std::size_t... I>
void call(void (*f)(P...), void** a, std::index_sequence<I...>) {
  f(*static_cast<std::remove_cv_t<P>*>(a[I])...);
}
template <class... P>
void call(void (*f)(P...), void** a) {
  call(f, a, std::index_sequence_for<P...>{});
}
}  // namespace gt
#define GT_CP_ASYNC_EMULATED 1
template <class T>
void gt_cp_async(T* dst, const T* src, bool ok) {
  ::gt::cp_async(dst, src, ok);
}
inline void gt_cp_commit() { ::gt::cp_commit(); }
template <int N>
void gt_cp_wait() {
  ::gt::cp_wait(N);
}
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
extern "C" void __assert_fail(const char* e, const char* file, unsigned line,
                              const char*) noexcept {
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
template <class T>
T __ldg(const T* p) {
  const T v = *p;
  ::gt::log_ldg(p, sizeof(T));
  return v;
}
template <class V>
V gt_ldg_vector(const V* p) {
  const V v = ::gt::vector_load(p);
  ::gt::log_ldg(p, sizeof(V));
  return v;
}
inline float2 __ldg(const float2* p) { return gt_ldg_vector(p); }
inline float4 __ldg(const float4* p) { return gt_ldg_vector(p); }
inline int2 __ldg(const int2* p) { return gt_ldg_vector(p); }
inline int4 __ldg(const int4* p) { return gt_ldg_vector(p); }
// Warp-level intrinsics: a thread waits in one until every thread its mask names (that exists:
// a partial warp's missing lanes are not waited for) waits in one too, as on a GPU since Volta.
// Lanes are the linear thread index modulo 32. A shuffle from a thread that takes no part gives
// 0xff bytes (NaN for floats): undefined on a GPU, visible here.
constexpr int warpSize = 32;
template <class T>
T __shfl_sync(unsigned m, T v, int src, int w = 32) {
  return ::gt::warp_op(::gt::WarpKind::Index, m, v, src, w);
}
template <class T>
T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) {
  return ::gt::warp_op(::gt::WarpKind::Up, m, v, static_cast<int>(d), w);
}
template <class T>
T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) {
  return ::gt::warp_op(::gt::WarpKind::Down, m, v, static_cast<int>(d), w);
}
template <class T>
T __shfl_xor_sync(unsigned m, T v, int x, int w = 32) {
  return ::gt::warp_op(::gt::WarpKind::Xor, m, v, x, w);
}
inline unsigned __ballot_sync(unsigned m, int p) {
  return ::gt::warp_op(::gt::WarpKind::Ballot, m, static_cast<unsigned>(p != 0), 0, 32);
}
inline int __any_sync(unsigned m, int p) {
  return static_cast<int>(
      ::gt::warp_op(::gt::WarpKind::Any, m, static_cast<unsigned>(p != 0), 0, 32));
}
inline int __all_sync(unsigned m, int p) {
  return static_cast<int>(
      ::gt::warp_op(::gt::WarpKind::All, m, static_cast<unsigned>(p != 0), 0, 32));
}
inline void __syncwarp(unsigned m = 0xffffffffu) {
  ::gt::warp_op(::gt::WarpKind::Sync, m, 0u, 0, 32);
}
inline unsigned __reduce_add_sync(unsigned m, unsigned v) {
  return ::gt::warp_op(::gt::WarpKind::Add, m, v, 0, 32);
}
inline int __reduce_add_sync(unsigned m, int v) {
  return ::gt::warp_op(::gt::WarpKind::Add, m, v, 0, 32);
}
inline unsigned __reduce_min_sync(unsigned m, unsigned v) {
  return ::gt::warp_op(::gt::WarpKind::Min, m, v, 0, 32);
}
inline int __reduce_min_sync(unsigned m, int v) {
  return ::gt::warp_op(::gt::WarpKind::Min, m, v, 0, 32);
}
inline unsigned __reduce_max_sync(unsigned m, unsigned v) {
  return ::gt::warp_op(::gt::WarpKind::Max, m, v, 0, 32);
}
inline int __reduce_max_sync(unsigned m, int v) {
  return ::gt::warp_op(::gt::WarpKind::Max, m, v, 0, 32);
}
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
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
template <class T>
T atomicAdd(T* p, T v) {
  T o = *p;
  *p = o + v;
  return o;
}
template <class T>
T atomicSub(T* p, T v) {
  T o = *p;
  *p = o - v;
  return o;
}
template <class T>
T atomicMax(T* p, T v) {
  T o = *p;
  *p = o < v ? v : o;
  return o;
}
template <class T>
T atomicMin(T* p, T v) {
  T o = *p;
  *p = v < o ? v : o;
  return o;
}
template <class T>
T atomicExch(T* p, T v) {
  T o = *p;
  *p = v;
  return o;
}
template <class T>
T atomicCAS(T* p, T cmp, T v) {
  T o = *p;
  if (o == cmp) *p = v;
  return o;
}
template <class T>
T atomicAnd(T* p, T v) {
  T o = *p;
  *p = o & v;
  return o;
}
template <class T>
T atomicOr(T* p, T v) {
  T o = *p;
  *p = o | v;
  return o;
}
template <class T>
T atomicXor(T* p, T v) {
  T o = *p;
  *p = o ^ v;
  return o;
}
inline unsigned atomicInc(unsigned* p, unsigned v) {
  unsigned o = *p;
  *p = o >= v ? 0 : o + 1;
  return o;
}
inline unsigned atomicDec(unsigned* p, unsigned v) {
  unsigned o = *p;
  *p = o == 0 || o > v ? v : o - 1;
  return o;
}
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float a) { return std::exp(a); }
inline float __logf(float a) { return std::log(a); }
inline float __sinf(float a) { return std::sin(a); }
inline float __cosf(float a) { return std::cos(a); }
inline float __saturatef(float a) { return a < 0.f ? 0.f : a > 1.f ? 1.f : a; }
inline float rsqrtf(float a) { return 1.0f / std::sqrt(a); }
using std::max;
using std::min;
