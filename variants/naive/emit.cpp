// Variants of a naive kernel: the space it allows and the source of each point. See naive.h.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <regex>
#include <sstream>

#include "variants/expr.h"
#include "variants/naive/naive.h"

namespace gputune::naive {

NaiveError::~NaiveError() = default;
NaiveSourceError::~NaiveSourceError() = default;

std::string cache_name(Cache c) {
  switch (c) {
    case Cache::Global:
      return "global";
    case Cache::ReadOnly:
      return "readonly";
    case Cache::Shared:
      return "shared";
    case Cache::Registers:
      return "registers";
  }
  return "global";
}

namespace {
constexpr LaunchBounds kLaunchBounds[] = {LaunchBounds::Threads, LaunchBounds::None,
                                          LaunchBounds::TwoBlocks};
}

std::string launch_bounds_name(LaunchBounds b) {
  switch (b) {
    case LaunchBounds::None:
      return "none";
    case LaunchBounds::TwoBlocks:
      return "two_blocks";
    case LaunchBounds::Threads:
      break;
  }
  return "threads";
}

namespace {

/// The cp.async helpers of pipelined variants (Choice::stages): on sm_80+ an asynchronous copy
/// from global to shared memory (a source size of 0 zero-fills: the element is out of range),
/// the commit of a group of them and the wait for all but the N most recent groups; elsewhere
/// (older GPUs, the traffic model's parse) a plain copy. The CPU emulator brings its own
/// (GT_CP_ASYNC_EMULATED), which holds each copy back until the wait that covers it, so a read
/// of a buffer before its wait shows in the results.
constexpr const char* kCpAsync = R"(#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <class T>
__device__ __forceinline__ void gt_cp_async(T* dst, const T* src, bool ok) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  if constexpr (sizeof(T) == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0) : "memory");
  else if constexpr (sizeof(T) == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 8 : 0) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 4 : 0) : "memory");
}
__device__ __forceinline__ void gt_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void gt_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
#elif !defined(GT_CP_ASYNC_EMULATED)
template <class T>
__device__ __forceinline__ void gt_cp_async(T* dst, const T* src, bool ok) { *dst = ok ? *src : T(); }
__device__ __forceinline__ void gt_cp_commit() {}
template <int N>
__device__ __forceinline__ void gt_cp_wait() {}
#endif
)";

int element_bytes(const std::string& t) {
  static const std::map<std::string, int> sizes = {{"float", 4},       {"double", 8},
                                                   {"int", 4},         {"unsigned int", 4},
                                                   {"char", 1},        {"unsigned char", 1},
                                                   {"short", 2},       {"unsigned short", 2},
                                                   {"long long", 8},   {"unsigned long long", 8},
                                                   {"long", 8},        {"unsigned long", 8},
                                                   {"signed char", 1}, {"bool", 1}};
  auto it = sizes.find(t);
  return it == sizes.end() ? 0 : it->second;
}

std::string literal_text(const Text& t) {
  std::string s;
  for (const Piece& p : t) {
    if (p.kind == Piece::Access)
      s += p.text + "[" + literal_text(p.index) + "]";
    else if (p.kind == Piece::ThreadIndex)
      s += p.dim == 0 ? "<idx>" : "<idy>";
    else
      s += p.text;
  }
  return s;
}

/// How one access site can be staged in shared memory: the tile's dimensions, slowest first.
struct TilePlan {
  bool ok = false;
  std::string reason;
  std::vector<std::string> dims;  ///< "y", "x", "loop"
  bool paddable = false;          ///< a thread dimension is the slow one: a pitch pad helps
  bool contiguous = false;  ///< consecutive elements of the fast dimension are adjacent in memory
                            ///< (unit coefficient) and 4-byte float/int: vector loads apply
  int bytes = 0;
  int loop = -1;
  std::string key;  ///< sites with the same key share one tile
};

TilePlan plan_site(const NaiveKernel& k, const AccessSite& s) {
  TilePlan p;
  const Param& prm = k.params[s.param];
  p.bytes = element_bytes(prm.element);
  p.loop = s.loop;
  auto no = [&](std::string why) {
    p.reason = "line " + std::to_string(s.line) + ": " + why;
    return p;
  };
  if (s.store || prm.written) return no("written");
  if (s.loop < 0) return no("not inside a loop every thread runs alike: no reuse to stage");
  if (s.conditional)
    return no("read under a condition: staging would load what the kernel may skip");
  if (!p.bytes) return no("element type '" + prm.element + "' has no known size");
  for (const std::string& d : s.depends)
    if (d == "opaque" || d == "thread" || d == "access" || d == "call" || d.rfind("local:", 0) == 0)
      return no("the subscript is not affine in idx, idy and loop counters");
  std::string inner = "loop:" + std::to_string(s.loop);
  if (!s.depends.count(inner)) return no("the subscript does not change with the innermost loop");
  bool x = s.depends.count("x"), y = s.depends.count("y");
  if (x && y) return no("the subscript depends on idx, idy and the loop: a 3-D tile");
  for (size_t g = 0; g < k.guard.size(); ++g) {
    const auto& gd = k.guard_depends[g];
    for (const std::string& d : gd)
      if (d.rfind("local:", 0) == 0 || d == "thread" || d == "access" || d == "call")
        return no("the bounds check uses a local variable");
    bool gx = gd.count("x"), gy = gd.count("y");
    if (gx && gy && (x || y)) return no("a bounds check couples idx and idy");
  }
  // Reuse or coalescing: a dimension of the block the subscript ignores reads the same element.
  bool reuse = (k.dims == 2 && !(x && y)) || (!x && !y);
  auto unit = [&](const std::string& v) {
    auto it = s.unit.find(v);
    return it != s.unit.end() && it->second == 1;
  };
  bool coalesced_x = x && unit("x");
  if (!reuse && coalesced_x) return no("coalesced and not reused: nothing to gain");
  std::string thread = x ? "x" : y ? "y" : "";
  if (thread.empty()) {
    p.dims = {"loop"};
  } else if (unit("loop") || !unit(thread)) {
    p.dims = {thread, "loop"};
    p.paddable = true;
  } else {
    p.dims = {"loop", thread};
  }
  const std::string fast = p.dims.back() == "loop" ? inner : p.dims.back();
  p.contiguous = unit(fast) && (prm.element == "float" || prm.element == "int");
  p.ok = true;
  return p;
}

/// Whether the store of site `site` can go through a shared tile: written by a whole statement
/// once per thread, at (idx, idy) affine, with consecutive elements along idy rather than idx, so
/// that a tile [idx][idy] written by the threads is read back by consecutive threads along idy.
std::string store_refusal(const NaiveKernel& k, int site) {
  const AccessSite& s = k.accesses[site];
  const Param& prm = k.params[s.param];
  std::string at = "line " + std::to_string(s.line) + ": ";
  if (k.dims != 2) return at + "a 1-D kernel has no second thread dimension to coalesce along";
  if (!s.whole_store) return at + "not a plain `a[i] = v;` statement";
  if (prm.read) return at + "the array is read as well as written";
  if (s.loop >= 0) return at + "written inside a loop";
  if (s.conditional) return at + "written under a condition";
  if (!element_bytes(prm.element))
    return at + "element type '" + prm.element + "' has no known size";
  for (const std::string& d : s.depends)
    if (d != "x" && d != "y") return at + "the subscript is not affine in idx and idy alone";
  for (size_t i = 0; i < k.accesses.size(); ++i)
    if (static_cast<int>(i) != site && k.accesses[i].param == s.param)
      return at + "the array is written at more than one place";
  for (const auto& gd : k.guard_depends)
    for (const std::string& d : gd)
      if (d != "x" && d != "y") return at + "the bounds check uses a local";
  auto unit = [&](const char* v) {
    auto it = s.unit.find(v);
    return it != s.unit.end() && it->second == 1;
  };
  if (unit("x")) return at + "coalesced already: consecutive idx write consecutive elements";
  if (!unit("y") || !s.depends.count("x"))
    return at + "neither idx nor idy writes consecutive elements: a tile cannot coalesce it";
  return "";
}

/// The site `a[i] = v` of a written array whose stores a tile can coalesce, or -1.
int staged_store_site(const NaiveKernel& k, const std::string& array) {
  for (size_t i = 0; i < k.accesses.size(); ++i)
    if (k.params[k.accesses[i].param].name == array && k.accesses[i].store &&
        store_refusal(k, static_cast<int>(i)).empty())
      return static_cast<int>(i);
  return -1;
}

/// The Access piece of site `site` in a piece list, or nullptr.
const Piece* access_in(const Text& t, int site) {
  for (const Piece& p : t) {
    if (p.kind != Piece::Access) continue;
    if (p.id == site) return &p;
    if (const Piece* r = access_in(p.index, site)) return r;
  }
  return nullptr;
}
/// The Access piece of site `site` in a statement list (texts, loop bounds, addresses), or nullptr.
const Piece* access_in(const std::vector<Stmt>& list, int site) {
  for (const Stmt& s : list)
    for (const Text* t : {&s.text, &s.lo, &s.hi, &s.address})
      if (const Piece* r = access_in(*t, site)) return r;
  for (const Stmt& s : list)
    if (const Piece* r = access_in(s.body, site)) return r;
  return nullptr;
}

/// Why array `param` cannot be kept in registers for the thread's whole work ("" when it can):
/// every access of it reads or writes one element per output (the same subscript, affine in
/// idx/idy and unassigned scalars, outside conditions), and some access sits inside a loop, so
/// the register saves a load (and a store) per iteration. Each merged output loads its element
/// once before the work and, when the kernel writes the array, stores it once after: scalar
/// replacement, which the compiler cannot do itself while another pointer may alias the array.
void reductions(const std::vector<Stmt>& list, std::vector<const Stmt*>& out);

std::string register_refusal(const NaiveKernel& k, int param) {
  const Param& prm = k.params[static_cast<size_t>(param)];
  const std::vector<Stmt> pre(k.body.begin(), k.body.begin() + static_cast<long>(k.pre_guard));
  int first = -1;
  bool in_loop = false;
  for (size_t i = 0; i < k.accesses.size(); ++i) {
    const AccessSite& s = k.accesses[i];
    if (s.param != param) continue;
    const std::string at = "line " + std::to_string(s.line) + ": ";
    if (access_in(pre, static_cast<int>(i))) return at + "accessed before the bounds check";
    if (s.conditional) return at + "accessed under a condition";
    for (const std::string& d : s.depends) {
      if (d.rfind("loop:", 0) == 0)
        return at + "the subscript changes with a loop: a register would hold one element of many";
      if (d != "x" && d != "y") return at + "the subscript is not affine in idx and idy alone";
    }
    const Piece* piece = access_in(k.body, static_cast<int>(i));
    if (!piece) return at + "the access is not in the work";
    if (std::any_of(piece->index.begin(), piece->index.end(), [](const Piece& p) {
          return p.kind != Piece::Lit && p.kind != Piece::ThreadIndex;
        }))
      return at + "the subscript reads memory or a local";
    for (const Param& q : k.params)
      if (q.assigned && !q.pointer &&
          std::regex_search(literal_text(piece->index), std::regex("\\b" + q.name + "\\b")))
        return at + "the subscript uses '" + q.name + "', which the kernel assigns to";
    if (first < 0) {
      first = static_cast<int>(i);
    } else {
      const AccessSite& f = k.accesses[static_cast<size_t>(first)];
      const bool same =
          !s.sym.empty() && !f.sym.empty()
              ? s.sym == f.sym
              : literal_text(piece->index) == literal_text(access_in(k.body, first)->index);
      if (!same)
        return at + "another element than line " + std::to_string(f.line) +
               " (one register per output holds one element)";
    }
    in_loop = in_loop || s.loop >= 0;
  }
  if (first < 0) return "not accessed";
  const AccessSite& f = k.accesses[static_cast<size_t>(first)];
  if (!in_loop) return "no access inside a loop: a register would save nothing";
  if (prm.written) {
    std::vector<const Stmt*> sums;
    reductions(k.body, sums);
    for (const Stmt* r : sums)
      if (r->target == param) return "updated with atomicAdd: other threads add to it too";
    if (!f.depends.count("x") || (k.dims == 2 && !f.depends.count("y")))
      return "line " + std::to_string(f.line) + ": written at a subscript that ignores " +
             std::string(f.depends.count("x") ? "idy" : "idx") +
             ": several threads would keep the same element";
  }
  return "";
}

/// Whether a read can come `vector` elements at a time straight from global memory once a
/// thread's merged outputs come in runs of consecutive idx: consecutive idx read consecutive
/// 4-byte elements (unit idx coefficient), the subscript affine in idx, idy and loop counters,
/// outside conditions, on a 1-D pointer the kernel never writes. Alignment is checked at run time.
bool vector_global_site(const NaiveKernel& k, const AccessSite& s) {
  const Param& prm = k.params[static_cast<size_t>(s.param)];
  if (s.store || prm.written || s.conditional || prm.row > 0) return false;
  if (prm.element != "float" && prm.element != "int") return false;
  for (const std::string& d : s.depends)
    if (d != "x" && d != "y" && d.rfind("loop:", 0) != 0) return false;
  auto it = s.unit.find("x");
  return it != s.unit.end() && it->second == 1;
}

/// Whether a store can go out `vector` elements at a time once a thread's merged outputs come in
/// runs of consecutive idx: a plain `a[i] = v;` statement outside loops and conditions, the only
/// access of an array the kernel never reads, consecutive idx writing consecutive 4-byte elements
/// and, in a 2-D kernel, every row its own elements (the subscript uses idy).
bool vector_store_site(const NaiveKernel& k, int site) {
  const AccessSite& s = k.accesses[static_cast<size_t>(site)];
  const Param& prm = k.params[static_cast<size_t>(s.param)];
  if (!s.store || !s.whole_store || s.loop >= 0 || s.conditional || prm.read || prm.row > 0)
    return false;
  if (prm.element != "float" && prm.element != "int") return false;
  for (size_t i = 0; i < k.accesses.size(); ++i)
    if (static_cast<int>(i) != site && k.accesses[i].param == s.param) return false;
  for (const std::string& d : s.depends)
    if (d != "x" && d != "y") return false;
  if (k.dims == 2 && !s.depends.count("y")) return false;
  auto it = s.unit.find("x");
  return it != s.unit.end() && it->second == 1;
}

/// The loop statement with id `loop`, or nullptr.
const Stmt* find_loop(const std::vector<Stmt>& list, int loop) {
  for (const Stmt& s : list) {
    if (s.kind == Stmt::Loop && s.loop == loop) return &s;
    if (const Stmt* r = find_loop(s.body, loop)) return r;
  }
  return nullptr;
}

/// Whether a fragment is integer arithmetic (+, -, *, parentheses, literals) on the kernel's
/// scalar parameters only: then it means the same in C and in the job's expressions, and the
/// host can evaluate it from the arguments to size dynamic shared memory.
bool scalar_arithmetic(const NaiveKernel& k, const Text& t) {
  std::string s;
  for (const Piece& p : t) {
    if (p.kind != Piece::Lit) return false;
    s += p.text;
  }
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isalpha(c) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      const std::string name = s.substr(i, j - i);
      if (!std::any_of(k.params.begin(), k.params.end(),
                       [&](const Param& p) { return !p.pointer && !p.assigned && p.name == name; }))
        return false;
      i = j;
    } else if (std::isdigit(c)) {
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
      if (i < s.size() && (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '.'))
        return false;  // suffixes and floating point
    } else if (std::string(" \t\n+-*()").find(static_cast<char>(c)) != std::string::npos) {
      ++i;
    } else {
      return false;
    }
  }
  return !s.empty();
}

/// A halo tile: one shared-memory window per block holding every element the block's threads read
/// from an input array whose reads are all the same affine function of (idx + ox, idy + oy): ox
/// and oy are small constant steps (a stencil's neighbours) plus loop counters that advance the
/// subscript exactly as idx or idy does (a convolution's filter window). The window is the block's
/// outputs widened by the offsets' span, so its size follows the loop bounds at run time: it lives
/// in dynamic shared memory, sized at launch from the kernel's scalar arguments.
struct HaloPlan {
  bool ok = false;
  std::string reason;
  int param = -1;
  std::vector<int> sites;                     ///< the reads; sites[0] is the reference
  std::vector<std::array<long long, 2>> off;  ///< per site: its offset from the window's corner
  std::array<long long, 2> span{0, 0};        ///< largest constant offset per axis
  std::array<std::vector<int>, 2> loops;      ///< loop ids that advance it along x, y
  bool contiguous = false;  ///< consecutive columns are consecutive 4-byte elements (vector loads)
};

/// The trip count of a loop as C text over scalars ("(hi) - (lo)", inclusive "+ 1").
std::string trip_text(const Stmt& l) {
  auto operand = [](std::string t) {
    bool simple = std::all_of(t.begin(), t.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    return simple ? t : "(" + t + ")";
  };
  const std::string lo = literal_text(l.lo), hi = operand(literal_text(l.hi));
  if (lo == "0") return l.inclusive ? hi + " + 1" : hi;
  return hi + (l.inclusive ? " + 1" : "") + " - " + operand(lo);
}

HaloPlan plan_halo(const NaiveKernel& k, int param) {
  HaloPlan h;
  h.param = param;
  const Param& prm = k.params[static_cast<size_t>(param)];
  auto no = [&](std::string why) {
    h.reason = std::move(why);
    return h;
  };
  if (prm.written) return no("written");
  if (!element_bytes(prm.element))
    return no("element type '" + prm.element + "' has no known size");
  for (size_t i = 0; i < k.accesses.size(); ++i)
    if (k.accesses[i].param == param) h.sites.push_back(static_cast<int>(i));
  if (h.sites.empty()) return no("not read");
  const char* axis[2] = {"x", "y"};
  const AccessSite& r = k.accesses[static_cast<size_t>(h.sites[0])];
  std::array<std::vector<long long>, 2> step;
  for (int d = 0; d < k.dims; ++d) {
    auto it = r.sym.find(axis[d]);
    if (it == r.sym.end() ||
        std::all_of(it->second.begin(), it->second.end(), [](long long v) { return v == 0; }))
      return no("line " + std::to_string(r.line) + ": the subscript does not move with " +
                k.index_names[static_cast<size_t>(d)] + ": no window around the block");
    step[static_cast<size_t>(d)] = it->second;
  }
  if (k.dims == 2 && step[0] == step[1])
    return no("line " + std::to_string(r.line) + ": idx and idy advance the subscript alike");
  h.contiguous = element_bytes(prm.element) == 4 &&
                 std::all_of(step[0].begin(), step[0].end(), [](long long v) { return v == 1; });
  std::vector<std::array<long long, 2>> rel;
  for (size_t n = 0; n < h.sites.size(); ++n) {
    const AccessSite& s = k.accesses[static_cast<size_t>(h.sites[n])];
    const std::string at = "line " + std::to_string(s.line) + ": ";
    if (s.conditional)
      return no(at + "read under a condition: the window would load what the kernel may skip");
    for (const std::string& d : s.depends)
      if (d == "opaque" || d == "thread" || d == "access" || d == "call" ||
          d.rfind("local:", 0) == 0)
        return no(at + "the subscript is not affine in idx, idy, loop counters and scalars");
    if (s.sym.empty())
      return no(at + "the subscript is not affine in idx, idy, loop counters and scalars");
    std::array<std::vector<int>, 2> loops;
    for (const auto& [name, c] : s.sym) {
      if (name == "1" || std::all_of(c.begin(), c.end(), [](long long v) { return v == 0; }))
        continue;
      if (name == "x" || name == "y") {
        if (c != step[name == "x" ? 0 : 1])
          return no(at + "the reads step differently along " + name + ": not one window");
        continue;
      }
      int d = c == step[0] ? 0 : k.dims == 2 && c == step[1] ? 1 : -1;
      const int id = std::stoi(name.substr(5));
      const Stmt* l = find_loop(k.body, id);
      if (d < 0 || !l)
        return no(at + "loop counter " + (l ? l->var : name) +
                  " advances the subscript by neither " + k.index_names[0] + "'s" +
                  (k.dims == 2 ? " nor " + k.index_names[1] + "'s" : std::string()) + " step");
      if (!scalar_arithmetic(k, l->lo) || !scalar_arithmetic(k, l->hi))
        return no("loop " + l->var +
                  ": bounds that are not +, -, * of (unassigned) scalar arguments and constants");
      loops[static_cast<size_t>(d)].push_back(id);
    }
    if (n == 0)
      h.loops = loops;
    else if (loops != h.loops)
      return no(at + "the reads run over different loops: not one window");
    // The constant part: a small step of idx and idy away from the reference read.
    std::vector<long long> diff(kSymPoints);
    for (int p = 0; p < kSymPoints; ++p)
      diff[static_cast<size_t>(p)] =
          s.sym.at("1")[static_cast<size_t>(p)] - r.sym.at("1")[static_cast<size_t>(p)];
    constexpr long long kMax = 32;
    bool found = false;
    std::array<long long, 2> best{0, 0};
    for (long long dy = k.dims == 2 ? -kMax : 0; dy <= (k.dims == 2 ? kMax : 0); ++dy)
      for (long long dx = -kMax; dx <= kMax; ++dx) {
        bool eq = true;
        for (size_t p = 0; p < static_cast<size_t>(kSymPoints) && eq; ++p)
          eq = diff[p] == dx * step[0][p] + (k.dims == 2 ? dy * step[1][p] : 0);
        if (eq && (!found || std::abs(dx) + std::abs(dy) < std::abs(best[0]) + std::abs(best[1])))
          best = {dx, dy}, found = true;
      }
    if (!found)
      return no(at + "its offset from line " + std::to_string(r.line) +
                "'s read is not a small step of the indices: not one window");
    rel.push_back(best);
  }
  if (h.sites.size() == 1 && h.loops[0].empty() && h.loops[1].empty())
    return no("line " + std::to_string(r.line) + ": read once per thread: no reuse to stage");
  for (size_t g = 0; g < k.guard.size(); ++g) {
    const auto& gd = k.guard_depends[g];
    for (const std::string& d : gd)
      if (d.rfind("local:", 0) == 0 || d == "thread" || d == "access" || d == "call")
        return no("the bounds check uses a local variable");
    if ((gd.count("x") || gd.count("y")) && k.guard_bounds[g].dim < 0)
      return no("the bounds check (" + literal_text(k.guard[g]) +
                ") is not an interval on one index (idx < E, idy >= E, ...)");
  }
  std::array<long long, 2> lo{0, 0};
  for (const auto& o : rel)
    for (size_t d = 0; d < 2; ++d) lo[d] = std::min(lo[d], o[d]);
  for (const auto& o : rel) {
    h.off.push_back({o[0] - lo[0], o[1] - lo[1]});
    for (size_t d = 0; d < 2; ++d) h.span[d] = std::max(h.span[d], o[d] - lo[d]);
  }
  h.ok = true;
  return h;
}

/// The halo plans of a kernel's input arrays (by parameter). All halo tiles of a kernel share one
/// `extern __shared__` array, so they must have one element type: the first array's.
std::map<int, HaloPlan> halo_plans(const NaiveKernel& k) {
  std::map<int, HaloPlan> out;
  std::string type;
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    if (!p.pointer || !p.read || p.written) continue;
    HaloPlan h = plan_halo(k, static_cast<int>(i));
    if (h.ok && !type.empty() && p.element != type) {
      h.ok = false;
      h.reason = "another array's window holds " + type + ": one dynamic shared array per kernel";
    }
    if (h.ok) type = p.element;
    out.emplace(static_cast<int>(i), std::move(h));
  }
  return out;
}

/// Every Reduce statement of the body, in order.
void reductions(const std::vector<Stmt>& list, std::vector<const Stmt*>& out) {
  for (const Stmt& s : list) {
    if (s.kind == Stmt::Reduce) out.push_back(&s);
    reductions(s.body, out);
  }
}

std::string suffix(const Choice& c, int dims) {
  std::string s;
  if (dims == 2 && c.merge_y > 1) s += "[gt_my]";
  if (c.merge_x > 1) s += "[gt_mx]";
  return s;
}
std::string array_dims(const Choice& c, int dims) {
  std::string s;
  if (dims == 2 && c.merge_y > 1) s += "[" + std::to_string(c.merge_y) + "]";
  if (c.merge_x > 1) s += "[" + std::to_string(c.merge_x) + "]";
  return s;
}

std::string strip_const(std::string t) {
  if (t.rfind("const ", 0) == 0) t = t.substr(6);
  return t;
}

class Emitter {
 public:
  Emitter(const NaiveKernel& k, const Choice& c) : k_(k), c_(c) {
    if (k_.dims == 1) {
      c_.block_y = 1;
      c_.merge_y = 1;
    }
    tx_ = c_.block_x * c_.merge_x;
    ty_ = c_.block_y * c_.merge_y;
    // Arrays read through a halo window: every read of the array comes from it.
    for (auto& [param, h] : halo_plans(k_)) {
      if (!h.ok || cache_of(param) != Cache::Shared) continue;
      for (size_t n = 0; n < h.sites.size(); ++n)
        halo_site_[h.sites[n]] = {static_cast<int>(halos_.size()), n};
      halos_.push_back(std::move(h));
    }
    // Which sites are staged, and their tiles (sites with the same subscript share one).
    for (size_t i = 0; i < k_.accesses.size(); ++i) {
      const AccessSite& s = k_.accesses[i];
      if (cache_of(s.param) != Cache::Shared || halo_site_.count(static_cast<int>(i))) continue;
      TilePlan p = plan_site(k_, s);
      if (!p.ok) continue;
      p.key = k_.params[s.param].name + "|" + std::to_string(s.loop) + "|" +
              index_text(static_cast<int>(i));
      auto it = std::find_if(tiles_.begin(), tiles_.end(),
                             [&](const Tile& t) { return t.plan.key == p.key; });
      if (it == tiles_.end()) {
        tiles_.push_back(Tile{p, static_cast<int>(tiles_.size()), static_cast<int>(i)});
        it = tiles_.end() - 1;
      }
      site_tile_[static_cast<int>(i)] = it->id;
    }
    // Arrays kept in registers for the whole work: every access of one is the same element per
    // output (register_refusal), so one register per merged row/column it depends on.
    for (size_t i = 0; i < k_.params.size(); ++i) {
      if (cache_of(static_cast<int>(i)) != Cache::Registers) continue;
      if (std::string why = register_refusal(k_, static_cast<int>(i)); !why.empty())
        throw NaiveError("kernel '" + k_.name + "': " + k_.params[i].name +
                         " cannot be kept in registers: " + why);
      Reg r;
      r.param = static_cast<int>(i);
      r.name = "gt_reg_" + k_.params[i].name;
      for (size_t a = 0; a < k_.accesses.size(); ++a) {
        if (k_.accesses[a].param != r.param) continue;
        if (r.site < 0) r.site = static_cast<int>(a);
        reg_site_[static_cast<int>(a)] = regs_.size();
      }
      const AccessSite& f = k_.accesses[static_cast<size_t>(r.site)];
      r.x = c_.merge_x > 1 && f.depends.count("x");
      r.y = k_.dims == 2 && c_.merge_y > 1 && f.depends.count("y");
      regs_.push_back(r);
    }
    if (k_.dims == 2)
      for (const std::string& a : c_.stage_store)
        if (int site = staged_store_site(k_, a); site >= 0) store_sites_.push_back(site);
    // With a vector width and thread merge along x, a thread's merged outputs come in runs of
    // consecutive elements when a read can then take one vector load per run: of an x-fast tile
    // (mm's b tile) or straight from global memory (transpose's in[idy*n+idx], tmv's a[i*m+idx]),
    // or a store one vector store per run (outer's c[row*n+col]). Without such an access the runs
    // would only spread each scalar access of a warp over more sectors and banks.
    if (c_.vector > 1 && c_.merge_x > 1 && c_.split == 1) {
      for (const Tile& t : tiles_)
        if (vector_tile(t)) xrun_ = std::min(c_.vector, c_.merge_x);
      for (size_t i = 0; i < k_.accesses.size(); ++i)
        if (global_run_candidate(static_cast<int>(i)) || run_store_candidate(static_cast<int>(i)))
          xrun_ = std::min(c_.vector, c_.merge_x);
    }
    if (c_.split > 1) {
      split_ = split_loop(k_);
      if (split_.loop < 0)
        throw NaiveError("kernel '" + k_.name + "': split " + std::to_string(c_.split) +
                         " not possible: " + split_.reason);
      if (!tiles_.empty() || !halos_.empty())
        throw NaiveError("kernel '" + k_.name + "': split " + std::to_string(c_.split) +
                         " is for variants without shared-memory tiles or windows");
      if (c_.split & (c_.split - 1) || c_.split > 32)
        throw NaiveError("kernel '" + k_.name + "': split must be a power of two up to 32");
    }
    lb_ = launch_block(k_, c_);
    std::vector<const Stmt*> all;
    reductions(k_.body, all);
    for (const Stmt* r : all) {
      const std::string& target = k_.params[r->target].name;
      if (!c_.block_reduce.count(target)) continue;
      if (sum_of(*r) < 0)
        sums_.push_back(
            Sum{sum_key(*r), r,
                "gt_acc_" + target + (sums_.empty() ? "" : std::to_string(sums_.size()))});
    }
  }

  long long shared_bytes() const {
    long long total = 0;
    for (const Tile& t : tiles_) total += extent_product(t) * t.plan.bytes * c_.stages;
    for (int site : store_sites_)
      total += static_cast<long long>(tx_) * (ty_ + (c_.pad ? store_vector(site) : 0)) *
               element_bytes(k_.params[k_.accesses[site].param].element);
    if (c_.split > 1 && split_.across_warps)
      for (int id : split_.locals)
        total += static_cast<long long>(c_.split) * tx_ *
                 element_bytes(strip_const(k_.locals[static_cast<size_t>(id)].type));
    for (const Sum& x : sums_)  // one element per warp (a single warp needs none)
      if (const long long warps = static_cast<long long>(lb_[0]) * lb_[1] / 32; warps > 1)
        total += warps * element_bytes(x.stmt->element);
    return total;
  }

  /// Dynamic shared memory of the halo windows, for the kernel's scalar arguments (by name).
  long long dynamic_bytes(const std::map<std::string, double>& scalars) const {
    std::vector<std::pair<std::string, Value>> bind;
    for (const auto& [n, v] : scalars) bind.emplace_back(n, Value(v));
    long long total = 0;
    for (const HaloPlan& h : halos_) {
      std::array<long long, 2> extra{0, 0};
      for (size_t d = 0; d < 2; ++d)
        for (int id : h.loops[d]) {
          const Stmt* l = find_loop(k_.body, id);
          double trip = 0;
          try {
            trip = eval_expression(trip_text(*l), bind).as_double();
          } catch (const std::exception& e) {
            throw NaiveError("kernel '" + k_.name + "': cannot size the halo window of " +
                             k_.params[static_cast<size_t>(h.param)].name + " from loop " + l->var +
                             "'s bounds (" + trip_text(*l) + "): " + e.what());
          }
          extra[d] += std::max(1LL, static_cast<long long>(trip)) - 1;
        }
      const long long cols = tx_ + h.span[0] + extra[0] + (c_.pad ? 1 : 0);
      const long long rows = k_.dims == 2 ? ty_ + h.span[1] + extra[1] : 1;
      total += rows * cols * element_bytes(k_.params[static_cast<size_t>(h.param)].element);
    }
    return total;
  }

  std::string run() {
    std::ostringstream o;
    header(o);
    if (pipelined()) o << kCpAsync;
    o << "extern \"C\" __global__ void ";
    if (c_.bounds != LaunchBounds::None)
      o << "__launch_bounds__(" << lb_[0] * lb_[1]
        << (c_.bounds == LaunchBounds::TwoBlocks ? ", 2" : "") << ") ";
    o << k_.name << "(";
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const Param& p = k_.params[i];
      if (i) o << ", ";
      const bool ro = p.pointer && read_only_path(static_cast<int>(i));
      if (p.row > 0)  // T (*a)[row]
        o << (ro || p.type.rfind("const ", 0) == 0 ? "const " : "") << p.element << " (*"
          << (ro ? "__restrict__ " : "") << p.name << ")[" << p.row << "]";
      else if (ro)
        o << "const " << p.element << "* __restrict__ " << p.name;
      else
        o << p.type << (p.type.back() == '*' ? "" : " ") << p.name;
    }
    o << ") {\n";
    ind_ = 1;
    line(o, "const int gt_bx = blockIdx.x * " + std::to_string(tx_) + ";");
    if (c_.split > 1 && split_.across_warps) {
      line(o, "const int gt_lane = threadIdx.y;  // " + std::to_string(c_.split) +
                  " rows of threads share each output's loop");
      line(o, "const int gt_x0 = gt_bx + threadIdx.x;");
    } else if (c_.split > 1) {
      const std::string sp = std::to_string(c_.split);
      line(o, "const int gt_lane = threadIdx.x % " + sp + ";  // " + sp +
                  " consecutive threads share each output's loop");
      line(o, "const int gt_x0 = gt_bx + threadIdx.x / " + sp + ";");
    } else if (xrun_ > 1) {
      line(o, "const int gt_x0 = gt_bx + threadIdx.x * " + std::to_string(xrun_) +
                  ";  // runs of " + std::to_string(xrun_) + " consecutive outputs along " +
                  k_.index_names[0]);
    } else {
      line(o, "const int gt_x0 = gt_bx + threadIdx.x;");
    }
    if (k_.dims == 2) {
      line(o, "const int gt_by = blockIdx.y * " + std::to_string(ty_) + ";");
      line(o, "const int gt_y0 = gt_by + threadIdx.y;");
    }
    if (!tiles_.empty() || !store_sites_.empty() || !sums_.empty() || !halos_.empty())
      line(o, "const int gt_tid = threadIdx.y * " + std::to_string(lb_[0]) + " + threadIdx.x;");
    if (!tiles_.empty()) {
      for (const Tile& t : tiles_) {
        std::string d;
        for (size_t j = 0; j < t.plan.dims.size(); ++j)
          d += "[" + std::to_string(extent(t, j)) + "]";
        const std::string name = tile_array(t);
        line(o, "__shared__ " +
                    std::string(vector_access(t) || pipelined() ? "__align__(16) " : "") +
                    k_.params[k_.accesses[t.site].param].element + " " + name +
                    (pipelined() ? "[" + std::to_string(c_.stages) + "]" : "") + d + ";  // " +
                    describe_tile(t) + (pipelined() ? ", one buffer per strip in flight" : ""));
      }
    }
    for (int site : store_sites_) {
      const int v = store_vector(site);
      line(o, "__shared__ " + std::string(v > 1 ? "__align__(16) " : "") +
                  k_.params[k_.accesses[site].param].element + " " + store_tile(site) + "[" +
                  std::to_string(tx_) + "][" + std::to_string(ty_ + (c_.pad ? v : 0)) + "];  // " +
                  k_.params[k_.accesses[site].param].name + "[" + index_text(site) + "] for " +
                  k_.index_names[0] + " x " + k_.index_names[1] + (c_.pad ? ", padded pitch" : "") +
                  ", written back along " + k_.index_names[1] +
                  (v > 1 ? ", " + std::to_string(v) + " elements per store where aligned" : ""));
    }
    for (const Sum& x : sums_)
      line(o, x.stmt->element + " " + x.name + " = " + x.stmt->element +
                  "(0);  // this thread's part of " + literal_text(x.stmt->address));
    if (!halos_.empty()) stage_halos(o);
    // Statements before the guard, then the guard, then the work.
    std::vector<Stmt> pre(k_.body.begin(), k_.body.begin() + static_cast<long>(k_.pre_guard));
    std::vector<Stmt> work(k_.body.begin() + static_cast<long>(k_.pre_guard), k_.body.end());
    emit_list(o, pre, false);
    if (!k_.guard.empty()) {
      const std::string cond = guard_text();
      line(o, "bool gt_ok" + array_dims(c_, k_.dims) + ";");
      replica_block(o, [&](std::ostringstream& b) {
        line(b, "gt_ok" + suffix(c_, k_.dims) + " = " + cond + ";");
      });
      if (merged()) {  // for the loads merged outputs share (hoist_shared_loads)
        const bool two = k_.dims == 2 && c_.merge_x > 1 && c_.merge_y > 1;
        if (two) {
          line(o, "bool gt_ok_row[" + std::to_string(c_.merge_y) + "] = {}, gt_ok_col[" +
                      std::to_string(c_.merge_x) +
                      "] = {};  // some output of the row/column passes");
        }
        line(o, "bool gt_ok_any = false;  // some output of this thread passes");
        replica_block(o, [&](std::ostringstream& b) {
          const std::string ok = "gt_ok" + suffix(c_, k_.dims);
          if (two) {
            line(b, "gt_ok_row[gt_my] = gt_ok_row[gt_my] || " + ok + ";");
            line(b, "gt_ok_col[gt_mx] = gt_ok_col[gt_mx] || " + ok + ";");
          }
          line(b, "gt_ok_any = gt_ok_any || " + ok + ";");
        });
      }
    }
    load_registers(o);
    emit_list(o, work, !k_.guard.empty());
    store_registers(o);
    for (int site : store_sites_) write_back(o, site);
    for (const Sum& x : sums_) block_sum(o, x);
    o << "}\n";
    return o.str();
  }

 private:
  struct Tile {
    TilePlan plan;
    int id;
    int site;
  };
  /// An array kept in registers: one per merged row/column its element depends on.
  struct Reg {
    int param = -1;
    int site = -1;              ///< its first access (every access is the same element)
    bool x = false, y = false;  ///< one register per merged column (x), row (y)
    std::string name;
    std::string index() const { return std::string(y ? "[gt_my]" : "") + (x ? "[gt_mx]" : ""); }
  };
  /// One address every thread adds to, summed per block first.
  struct Sum {
    std::string key;
    const Stmt* stmt;  ///< the first Reduce statement to it
    std::string name;  ///< the thread's accumulator
  };

  /// The whole bounds check, `(c1) && (c2)`, for the idx/idy in scope ("" when there is none).
  std::string guard_text() const {
    std::string cond;
    for (const Text& g : k_.guard) cond += (cond.empty() ? "(" : " && (") + render(g) + ")";
    return cond;
  }

  std::string sum_key(const Stmt& r) const {
    return k_.params[r.target].name + "|" + literal_text(r.address);
  }
  /// The block sum a Reduce statement adds to in this variant, or -1 (a plain atomicAdd).
  int sum_of(const Stmt& r) const {
    std::string key = sum_key(r);
    for (size_t i = 0; i < sums_.size(); ++i)
      if (sums_[i].key == key) return static_cast<int>(i);
    return -1;
  }

  std::string store_tile(int site) const {
    return "gt_w_" + k_.params[k_.accesses[site].param].name;
  }
  bool staged_store(int site) const {
    return std::find(store_sites_.begin(), store_sites_.end(), site) != store_sites_.end();
  }

  /// `v` consecutive elements as one vector access where every one passes `cond` (with the
  /// kernel's indices set by `at(" + gt_j")` for element gt_j) and the address `gt_p` declared by
  /// `pointer` is a multiple of `align` bytes: `vector()`; element by element otherwise:
  /// `element()` with element gt_j's indices set.
  template <class At, class Vector, class Element>
  void vector_or_elements(std::ostringstream& o, int v, const std::string& cond, At at,
                          const std::string& pointer, int align, Vector vector, Element element) {
    const std::string vs = std::to_string(v);
    line(o, "bool gt_all = true;");
    line(o, "for (int gt_j = 0; gt_j < " + vs + "; ++gt_j) {");
    ++ind_;
    at(" + gt_j");
    line(o, "gt_all = gt_all && (" + cond + ");");
    --ind_;
    line(o, "}");
    line(o, "{");
    ++ind_;
    at("");
    line(o, pointer);
    line(o, "if (gt_all && reinterpret_cast<unsigned long long>(gt_p) % " + std::to_string(align) +
                " == 0) {");
    ++ind_;
    vector();
    --ind_;
    line(o, "} else {");
    ++ind_;
    line(o, "for (int gt_j = 0; gt_j < " + vs + "; ++gt_j) {");
    ++ind_;
    at(" + gt_j");
    element();
    --ind_;
    line(o, "}");
    --ind_;
    line(o, "}");
    --ind_;
    line(o, "}");
  }

  /// Elements per write-back store of a staged store: `vector` when its 4-byte elements fill the
  /// tile's rows evenly (each thread then stores `vector` consecutive idy at once), else 1.
  int store_vector(int site) const {
    const Param& prm = k_.params[static_cast<size_t>(k_.accesses[static_cast<size_t>(site)].param)];
    return c_.vector > 1 && ty_ % c_.vector == 0 && element_bytes(prm.element) == 4 ? c_.vector : 1;
  }

  /// After the work: the stores staged in a tile go out with consecutive threads along idy; with
  /// a vector width, `vector` consecutive elements per thread as one float2/float4 store where
  /// all of them pass the bounds check and the address is aligned (the tile row always is: its
  /// pitch is a multiple of the width), one by one otherwise.
  void write_back(std::ostringstream& o, int site) {
    const int v = store_vector(site);
    const std::string n = std::to_string(c_.block_x * c_.block_y),
                      per_row = std::to_string(ty_ / v);
    const std::string& array = k_.params[k_.accesses[site].param].name;
    line(o, "__syncthreads();");
    line(o, "// write " + array + " back from the tile: consecutive threads along " +
                k_.index_names[1] + " store consecutive elements" +
                (v > 1 ? ", " + std::to_string(v) + " per store where aligned" : ""));
    line(o, "for (int gt_e = gt_tid; gt_e < " +
                std::to_string(static_cast<long long>(tx_) * ty_ / v) + "; gt_e += " + n + ") {");
    ++ind_;
    line(o, "const int gt_t0 = gt_e / " + per_row + ", gt_t1 = gt_e % " + per_row +
                (v > 1 ? " * " + std::to_string(v) : "") + ";");
    const std::string cond = guard_text();
    const std::string tile = store_tile(site) + "[gt_t0][gt_t1";
    auto at = [&](const std::string& j) {
      line(o, "const int " + k_.index_names[0] + " = gt_bx + gt_t0;");
      line(o, "const int " + k_.index_names[1] + " = gt_by + gt_t1" + j + ";");
    };
    if (v == 1) {
      at("");
      const std::string store = array + "[" + render_index(site) + "] = " + tile + "];";
      line(o, cond.empty() ? store : "if (" + cond + ") " + store);
    } else {
      const std::string vt =
          strip_const(k_.params[k_.accesses[site].param].element) + std::to_string(v);
      vector_or_elements(
          o, v, cond.empty() ? "true" : cond, at,
          k_.params[k_.accesses[site].param].element + "* gt_p = &" + array + "[" +
              render_index(site) + "];",
          4 * v,
          [&] {
            line(o, "*reinterpret_cast<" + vt + "*>(gt_p) = *reinterpret_cast<const " + vt +
                        "*>(&" + tile + "]);");
          },
          [&] {
            const std::string store =
                array + "[" + render_index(site) + "] = " + tile + " + gt_j];";
            line(o, cond.empty() ? store : "if (" + cond + ") " + store);
          });
    }
    --ind_;
    line(o, "}");
  }

  /// After the work: the threads' parts summed within each warp by a butterfly of shuffles, the
  /// warps' sums through shared memory and summed again by shuffles (every warp does it: a
  /// shuffle needs the whole warp), one atomicAdd per block.
  void block_sum(std::ostringstream& o, const Sum& x) {
    const int n = lb_[0] * lb_[1], warps = n / 32;
    const std::string buf = "gt_red" + x.name.substr(6), v = "gt_v" + x.name.substr(6);
    const std::string& t = x.stmt->element;
    line(o, "// sum the block's parts: each warp by shuffles, then the " + std::to_string(warps) +
                " warps' sums; one atomicAdd per block");
    line(o, t + " " + v + " = " + x.name + ";");
    line(o, "#pragma unroll");
    line(o, "for (int gt_o = 16; gt_o > 0; gt_o >>= 1) " + v + " += __shfl_xor_sync(0xffffffffu, " +
                v + ", gt_o);");
    if (warps > 1) {
      line(o, "__shared__ " + t + " " + buf + "[" + std::to_string(warps) + "];  // one per warp");
      line(o, "if (gt_tid % 32 == 0) " + buf + "[gt_tid / 32] = " + v + ";");
      line(o, "__syncthreads();");
      line(o, v + " = gt_tid % 32 < " + std::to_string(warps) + " ? " + buf +
                  "[gt_tid % 32] : " + t + "(0);");
      line(o, "#pragma unroll");
      line(o, "for (int gt_o = 16; gt_o > 0; gt_o >>= 1) " + v +
                  " += __shfl_xor_sync(0xffffffffu, " + v + ", gt_o);");
    }
    line(o, "if (gt_tid == 0) atomicAdd(" + render(x.stmt->address) + ", " + v + ");");
  }

  Cache cache_of(int param) const {
    auto it = c_.cache.find(k_.params[param].name);
    return it == c_.cache.end() ? Cache::Global : it->second;
  }
  bool read_only_path(int param) const {
    Cache c = cache_of(param);
    return (c == Cache::ReadOnly || c == Cache::Shared || c == Cache::Registers) &&
           !k_.params[param].written;
  }
  bool merged() const { return c_.merge_x * c_.merge_y > 1; }

  /// The Access piece of a site, wherever it sits in the body.
  const Piece* find_access(int site) const { return access_in(k_.body, site); }
  /// The subscript of a site as written (tells tiles apart, names them in comments).
  std::string index_text(int site) const {
    const Piece* p = find_access(site);
    return p ? literal_text(p->index) : std::string();
  }
  /// A read of one site as this variant renders it (tile, window, __ldg or plain).
  std::string render_access(int site) const {
    const Piece* p = find_access(site);
    return p ? render(Text{*p}) : std::string();
  }
  /// The subscript of a site as this variant renders it.
  std::string render_index(int site) const {
    const Piece* p = find_access(site);
    return p ? render(p->index) : std::string();
  }

  long long extent(const Tile& t, size_t j) const {
    const std::string& d = t.plan.dims[j];
    long long e = d == "x" ? tx_ : d == "y" ? ty_ : c_.tile_k;
    if (j + 1 == t.plan.dims.size() && t.plan.dims.size() == 2 && t.plan.paddable && c_.pad)
      e += pad_amount(t);
    return e;
  }
  long long extent_product(const Tile& t) const {
    long long p = 1;
    for (size_t j = 0; j < t.plan.dims.size(); ++j) p *= extent(t, j);
    return p;
  }
  /// The tile's array; pipelined, its buffer for the current strip (or `buffer`).
  std::string tile_name(const Tile& t, const std::string& buffer = "") const {
    if (!pipelined()) return tile_array(t);
    return tile_array(t) + "[" + (buffer.empty() ? stage_var(t.plan.loop) : buffer) + "]";
  }
  /// The tile's __shared__ array (with its buffers when pipelined).
  std::string tile_array(const Tile& t) const {
    return "gt_s_" + k_.params[k_.accesses[t.site].param].name +
           (t.id ? std::to_string(t.id) : std::string());
  }
  /// Double-buffered tiles: the next strip is copied (cp.async) while the current one is used.
  bool pipelined() const { return c_.stages > 1 && !tiles_.empty(); }
  /// The buffer a strip-mined loop works on.
  static std::string stage_var(int loop) { return "gt_stage" + std::to_string(loop); }
  std::string describe_tile(const Tile& t) const {
    std::string s = k_.params[k_.accesses[t.site].param].name + "[" + index_text(t.site) + "] for ";
    for (size_t j = 0; j < t.plan.dims.size(); ++j) {
      const std::string& d = t.plan.dims[j];
      s += (j ? " x " : "") + (d == "x"   ? k_.index_names[0]
                               : d == "y" ? k_.index_names[1]
                                          : loop_var(t.plan.loop));
    }
    if (t.plan.paddable && c_.pad)
      s += ", pitch padded by " + std::to_string(pad_amount(t)) +
           (pad_amount(t) > 1 ? " (rows stay aligned for vector accesses)" : "");
    return s;
  }
  std::string loop_var(int loop) const { return find_loop_var(k_.body, loop); }
  static std::string find_loop_var(const std::vector<Stmt>& list, int loop) {
    for (const Stmt& s : list) {
      if (s.kind == Stmt::Loop && s.loop == loop) return s.var;
      std::string r = find_loop_var(s.body, loop);
      if (!r.empty()) return r;
    }
    return "";
  }

  void line(std::ostringstream& o, const std::string& s) const {
    o << std::string(static_cast<size_t>(ind_) * 2, ' ') << s << "\n";
  }

  /// The text of a hole-split fragment for this variant.
  std::string render(const Text& t) const {
    std::string s;
    for (const Piece& p : t) {
      switch (p.kind) {
        case Piece::Lit:
          s += p.text;
          break;
        case Piece::Local:
          s += p.text + (k_.locals[p.id].replicated ? suffix(c_, k_.dims) : std::string());
          break;
        case Piece::ThreadIndex:
          s += k_.index_names[p.dim];
          break;
        case Piece::Access: {
          if (auto r = reg_site_.find(p.id); r != reg_site_.end()) {
            s += regs_[r->second].name + regs_[r->second].index();
            break;
          }
          if (auto h = loop_hoisted_.find(p.id); h != loop_hoisted_.end()) {
            s += h->second;
            break;
          }
          if (auto h = hoisted_.find(p.id); h != hoisted_.end()) {
            s += h->second;
            break;
          }
          auto it = site_tile_.find(p.id);
          if (auto hs = halo_site_.find(p.id); hs != halo_site_.end()) {
            s += halo_read(halos_[static_cast<size_t>(hs->second.first)], hs->second.second);
          } else if (k_.accesses[p.id].store && xrun_ > 1 && run_store_candidate(p.id)) {
            s += "gt_w" + std::to_string(p.id) + run_store_row() + "[gt_mx]";
          } else if (k_.accesses[p.id].store && staged_store(p.id)) {
            s += store_tile(p.id) + "[" + k_.index_names[0] + " - gt_bx][" + k_.index_names[1] +
                 " - gt_by]";
          } else if (it != site_tile_.end() && !k_.accesses[p.id].store) {
            const Tile& t = tiles_[it->second];
            s += tile_name(t);
            for (const std::string& d : t.plan.dims) {
              if (d == "x")
                s += "[" + k_.index_names[0] + " - gt_bx]";
              else if (d == "y")
                s += "[" + k_.index_names[1] + " - gt_by]";
              else
                s += "[" + loop_var(t.plan.loop) + " - gt_" + loop_var(t.plan.loop) + "_base]";
            }
          } else if (!k_.accesses[p.id].store && read_only_path(k_.accesses[p.id].param)) {
            s += "__ldg(&" + p.text + "[" + render(p.index) + "])";
          } else {
            s += p.text + "[" + render(p.index) + "]";
          }
          break;
        }
      }
    }
    return s;
  }

  bool halo_of(int param) const {
    return std::any_of(halos_.begin(), halos_.end(),
                       [&](const HaloPlan& h) { return h.param == param; });
  }
  std::string halo_name(const HaloPlan& h, const std::string& what) const {
    return "gt_h" + what + "_" + k_.params[static_cast<size_t>(h.param)].name;
  }
  /// How far the loops along axis d have advanced a read: "fx" or "(fx - (lo))", summed.
  std::string loop_advance(const HaloPlan& h, size_t d) const {
    std::string s;
    for (int id : h.loops[d]) {
      const Stmt* l = find_loop(k_.body, id);
      const std::string lo = literal_text(l->lo);
      s += " + " + (lo == "0" ? l->var : "(" + l->var + " - (" + lo + "))");
    }
    return s;
  }
  /// Columns per load of a halo window: the choice's vector width where consecutive columns are
  /// consecutive 4-byte elements, else 1.
  int halo_vector(const HaloPlan& h) const { return h.contiguous ? c_.vector : 1; }
  /// A read of site n of a halo array, from its window.
  std::string halo_read(const HaloPlan& h, size_t n) const {
    auto coord = [&](size_t d) {
      std::string c = k_.index_names[d] + (d == 0 ? " - gt_bx" : " - gt_by");
      if (h.off[n][d]) c += " + " + std::to_string(h.off[n][d]);
      return c + loop_advance(h, d);
    };
    std::string at = halo_name(h, "o") + " + ";
    if (k_.dims == 2) at += "(" + coord(1) + ") * " + halo_name(h, "p") + " + ";
    return "gt_halo[" + at + coord(0) + "]";
  }

  /// Loads every halo window once per block, before any work: the block's valid outputs (the
  /// bounds check's intervals clipped to the block) widened by each read's offsets; an element
  /// no valid thread reads stays zero and is never loaded, so no load leaves the kernel's range.
  void stage_halos(std::ostringstream& o) {
    const std::string elem = k_.params[static_cast<size_t>(halos_[0].param)].element;
    const std::string nthreads = std::to_string(c_.block_x * c_.block_y);
    line(o, "extern __shared__ " + elem + " gt_halo[];  // halo windows, sized at launch");
    line(o, "// The outputs of this block that pass the bounds check: columns [gt_vx0, gt_vx1]" +
                std::string(k_.dims == 2 ? ", rows [gt_vy0, gt_vy1]." : "."));
    std::string always;
    for (int d = 0; d < k_.dims; ++d) {
      const std::string v = d == 0 ? "gt_vx" : "gt_vy", base = d == 0 ? "gt_bx" : "gt_by";
      line(o, "int " + v + "0 = " + base + ", " + v + "1 = " + base + " + " +
                  std::to_string((d == 0 ? tx_ : ty_) - 1) + ";");
      for (size_t g = 0; g < k_.guard.size(); ++g) {
        const GuardBound& b = k_.guard_bounds[g];
        if (b.dim != d) continue;
        std::string e =
            "(" + render(b.bound) + ")" +
            (b.adjust ? (b.adjust > 0 ? " + " : " - ") + std::to_string(std::abs(b.adjust))
                      : std::string());
        line(o, b.upper ? v + "1 = min(" + v + "1, " + e + ");"
                        : v + "0 = max(" + v + "0, " + e + ");");
      }
    }
    for (size_t g = 0; g < k_.guard.size(); ++g)
      if (!k_.guard_depends[g].count("x") && !k_.guard_depends[g].count("y"))
        always += " && (" + render(k_.guard[g]) + ")";
    std::string offset = "0";
    for (const HaloPlan& h : halos_) {
      const Param& prm = k_.params[static_cast<size_t>(h.param)];
      const int ref = h.sites[0];
      const std::string a = prm.name, hw = halo_name(h, "w"), hp = halo_name(h, "p"),
                        hh = halo_name(h, "h"), ho = halo_name(h, "o"), run = halo_name(h, "run");
      line(o, "// halo window of " + a + "[" + index_text(ref) +
                  "]: " + std::to_string(h.sites.size()) +
                  " read(s), the block's outputs widened by their offsets" +
                  (h.loops[0].empty() && h.loops[1].empty() ? "" : " and loops") +
                  (c_.pad ? ", padded pitch" : ""));
      // How far the loops move a read along each axis: the sum of their trip counts - 1.
      std::string trips;
      std::array<std::string, 2> reach{"", ""};
      for (size_t d = 0; d < 2; ++d) {
        std::string sum;
        for (int id : h.loops[d]) {
          const Stmt* l = find_loop(k_.body, id);
          sum += std::string(sum.empty() ? "" : " + ") + "max(" + trip_text(*l) + ", 1) - 1";
          if (trips.find(trip_text(*l) + " > 0 && ") == std::string::npos)
            trips += trip_text(*l) + " > 0 && ";
        }
        if (sum.empty()) continue;
        reach[d] = halo_name(h, d == 0 ? "lx" : "ly");
        line(o,
             "const int " + reach[d] + " = " + sum + ";  // loop reach along " + k_.index_names[d]);
      }
      auto widen = [&](long long base, size_t d) {
        std::string e = std::to_string(base + h.span[d]);
        return reach[d].empty() ? e : e + " + " + reach[d];
      };
      line(o, "const int " + hw + " = " + widen(tx_, 0) + ";  // columns");
      line(o, "const int " + hp + " = " + hw + (c_.pad ? " + 1" : "") + ";  // pitch");
      line(o, "const int " + hh + " = " + (k_.dims == 2 ? widen(ty_, 1) : std::string("1")) +
                  ";  // rows");
      line(o, "const int " + ho + " = " + offset + ";  // first element in gt_halo");
      offset = ho + " + " + hh + " * " + hp;
      line(o, "const bool " + run + " = " + trips + "gt_vx0 <= gt_vx1" +
                  (k_.dims == 2 ? " && gt_vy0 <= gt_vy1" : "") + always + ";");
      // Needed when some valid thread reads it through some read: thread x reads column c
      // through read n for x in [bx + c - off_n - loops, bx + c - off_n].
      std::set<std::array<long long, 2>> seen;
      std::vector<std::string> need;
      for (size_t n = 0; n < h.sites.size(); ++n) {
        if (!seen.insert(h.off[n]).second) continue;
        std::string t;
        for (int d = 0; d < k_.dims; ++d) {
          const std::string hi = std::string(d == 0 ? "gt_bx + gt_c" : "gt_by + gt_r") +
                                 (h.off[n][static_cast<size_t>(d)]
                                      ? " - " + std::to_string(h.off[n][static_cast<size_t>(d)])
                                      : std::string());
          const std::string& r = reach[static_cast<size_t>(d)];
          const std::string lo = r.empty() ? hi : hi + " - " + r;
          const std::string v = d == 0 ? "gt_vx" : "gt_vy";
          t += std::string(t.empty() ? "" : " && ") + lo + " <= " + v + "1 && " + hi + " >= " + v +
               "0";
        }
        need.push_back("(" + t + ")");
      }
      std::string needed = run + " && (";  // some valid thread reads (gt_r, gt_c)
      for (size_t n = 0; n < need.size(); ++n) needed += (n ? " || " : "") + need[n];
      needed += ")";
      // The kernel's indices and loop counters at column gt_c (plus `shift`) of row gt_r.
      auto bind = [&](const std::string& shift) {
        if (!shift.empty()) line(o, "const int gt_c = gt_c0" + shift + ";");
        for (int d = 0; d < k_.dims; ++d)
          line(o, "const int " + k_.index_names[static_cast<size_t>(d)] + " = " +
                      (d == 0 ? "gt_bx + gt_c" : "gt_by + gt_r") +
                      (h.off[0][static_cast<size_t>(d)]
                           ? " - " + std::to_string(h.off[0][static_cast<size_t>(d)])
                           : std::string()) +
                      ";");
        for (size_t d = 0; d < 2; ++d)
          for (int id : h.loops[d]) {
            const Stmt* l = find_loop(k_.body, id);
            line(o, "const int " + l->var + " = " + literal_text(l->lo) + ";");
          }
      };
      const std::string slot = "gt_halo[" + ho + " + gt_r * " + hp + " + gt_c";
      const std::string load = "__ldg(&" + a + "[" + render_index(ref) + "])";
      const int v = halo_vector(h);
      if (v == 1) {
        line(o,
             "for (int gt_e = gt_tid; gt_e < " + hh + " * " + hw + "; gt_e += " + nthreads + ") {");
        ++ind_;
        line(o, "const int gt_r = gt_e / " + hw + ", gt_c = gt_e % " + hw + ";");
        line(o, "const bool gt_need = " + needed + ";");
        line(o, elem + " gt_v = " + elem + "(0);");
        line(o, "if (gt_need) {");
        ++ind_;
        bind("");
        line(o, "gt_v = " + load + ";");
        --ind_;
        line(o, "}");
        line(o, slot + "] = gt_v;");
      } else {
        // Groups of v columns that start where the row's address is a multiple of v elements
        // (rows of odd length start anywhere), so every group inside the needed part is one
        // aligned vector load; the groups at the edges go element by element.
        const std::string vs = std::to_string(v), groups = halo_name(h, "g");
        line(o, "// " + vs + " columns per load: groups aligned to the row's addresses");
        line(o, "const int " + groups + " = (" + hw + " + " + std::to_string(2 * v - 2) + ") / " +
                    vs + ";  // groups per row");
        line(o, "for (int gt_e = gt_tid; gt_e < " + hh + " * " + groups + "; gt_e += " + nthreads +
                    ") {");
        ++ind_;
        line(o, "const int gt_r = gt_e / " + groups + ";");
        line(o, "int gt_c0;");
        line(o, "{");
        ++ind_;
        line(o, "const int gt_c = 0;");
        bind("");
        line(o, "// the first column's offset from a " + std::to_string(4 * v) + "-byte boundary");
        line(o, "gt_c0 = (gt_e % " + groups + ") * " + vs +
                    " - static_cast<int>((reinterpret_cast<unsigned long long>(" + a + ") / 4 + " +
                    "static_cast<unsigned long long>(static_cast<long long>(" + render_index(ref) +
                    "))) % " + vs + ");");
        --ind_;
        line(o, "}");
        const std::string cond = "gt_c >= 0 && gt_c < " + hw + " && " + needed;
        const std::string vt = elem + vs;
        vector_or_elements(
            o, v, cond, [&](const std::string& shift) { bind(shift.empty() ? " + 0" : shift); },
            "const " + elem + "* gt_p = &" + a + "[" + render_index(ref) + "];", 4 * v,
            [&] {
              line(o, "const " + vt + " gt_v = __ldg(reinterpret_cast<const " + vt + "*>(gt_p));");
              for (int j = 0; j < v; ++j)
                line(o, slot + " + " + std::to_string(j) + "] = gt_v." + "xyzw"[j] + ";");
            },
            [&] {
              line(o, "if (gt_c >= 0 && gt_c < " + hw + ")");
              line(o, "  " + slot + "] = (" + cond + ") ? " + load + " : " + elem + "(0);");
            });
      }
      --ind_;
      line(o, "}");
    }
    line(o, "__syncthreads();");
  }

  /// Runs `body` once per merged thread with idx/idy (the kernel's names) set for it.
  template <class F>
  void replica_block(std::ostringstream& o, F body) {
    if (k_.dims == 2 && c_.merge_y > 1) {
      line(o, "#pragma unroll");
      line(o, "for (int gt_my = 0; gt_my < " + std::to_string(c_.merge_y) + "; ++gt_my)");
    }
    if (c_.merge_x > 1) {
      line(o, "#pragma unroll");
      line(o, "for (int gt_mx = 0; gt_mx < " + std::to_string(c_.merge_x) + "; ++gt_mx)");
    }
    line(o, "{");
    ++ind_;
    line(o, "const int " + k_.index_names[0] + " = " + x_index(c_.merge_x > 1) + ";");
    if (k_.dims == 2)
      line(o, "const int " + k_.index_names[1] + " = gt_y0" +
                  (c_.merge_y > 1 ? " + gt_my * " + std::to_string(c_.block_y) : "") + ";");
    body(o);
    --ind_;
    line(o, "}");
  }

  void emit_text_lines(std::ostringstream& o, const std::string& text) const {
    std::istringstream in(text);
    std::string l;
    // Re-indent the user's statement: keep its relative indentation.
    std::vector<std::string> lines;
    while (std::getline(in, l)) lines.push_back(l);
    size_t common = std::string::npos;
    for (size_t i = 1; i < lines.size(); ++i) {
      size_t n = lines[i].find_first_not_of(' ');
      if (n != std::string::npos) common = std::min(common, n);
    }
    if (common == std::string::npos) common = 0;
    for (size_t i = 0; i < lines.size(); ++i)
      line(o, i == 0 ? lines[i] : lines[i].substr(std::min(common, lines[i].size())));
  }

  /// Thread merge keeps shared loads once: a read that the merged outputs of one thread share
  /// (its subscript ignores a merged dimension: mm's a[idy*n+k] is the same for every merged
  /// column) is loaded into a register before the outputs are computed, once per distinct value,
  /// from wherever the array's path reads it (global, read-only, a shared tile), and only when
  /// one of the outputs that use it passes the bounds check. The compiler cannot do this itself:
  /// each output's read sits under that output's own bounds check.
  void hoist_shared_loads(std::ostringstream& o, const std::vector<const Stmt*>& group,
                          bool guarded) {
    if (!merged()) return;
    std::vector<int> sites;
    std::function<void(const Text&)> scan = [&](const Text& t) {
      for (const Piece& p : t) {
        if (p.kind != Piece::Access) continue;
        scan(p.index);
        if (std::find(sites.begin(), sites.end(), p.id) == sites.end()) sites.push_back(p.id);
      }
    };
    for (const Stmt* s : group) {
      scan(s->text);
      scan(s->address);
    }
    for (int site : sites) {
      const AccessSite& a = k_.accesses[static_cast<size_t>(site)];
      const Param& prm = k_.params[static_cast<size_t>(a.param)];
      if (a.store || prm.written || a.conditional || loop_hoisted_.count(site) ||
          reg_site_.count(site))
        continue;
      bool plain = true;
      for (const std::string& d : a.depends)
        plain = plain && (d == "x" || d == "y" || d.rfind("loop:", 0) == 0);
      if (!plain) continue;  // locals, loaded data, calls: left where they are
      if (auto t = site_tile_.find(site); xrun_ > 1 && t != site_tile_.end() &&
                                          vector_tile(tiles_[static_cast<size_t>(t->second)])) {
        hoist_vector_runs(o, site);
        continue;
      }
      if (xrun_ > 1 && global_run_candidate(site)) {
        hoist_global_runs(o, site, guarded);
        continue;
      }
      const bool x = a.depends.count("x") > 0, y = k_.dims == 2 && a.depends.count("y") > 0;
      const bool mx = c_.merge_x > 1, my = k_.dims == 2 && c_.merge_y > 1;
      if (!((mx && !x) || (my && !y))) continue;  // every merged output reads its own element
      const std::string name = "gt_r" + std::to_string(site);
      std::string dims, index;
      if (my && y) dims += "[" + std::to_string(c_.merge_y) + "]", index += "[gt_my]";
      if (mx && x) dims += "[" + std::to_string(c_.merge_x) + "]", index += "[gt_mx]";
      const std::string shared_by = index.empty() ? "all merged outputs"
                                    : (mx && !x)  ? "the merged outputs of a row"
                                                  : "the merged outputs of a column";
      // A tile holds every output of the block (zero outside the range): no check needed.
      const bool tile = site_tile_.count(site) && !halo_site_.count(site);
      if (tile) tile_hoisted_.insert(site);
      const std::string ok = guarded && !tile ? ok_flag(mx && x, my && y) : std::string();
      // A register loaded under a check starts at zero: left undefined, the compiler may carry
      // the previous step's value into the skipped path and reuse its products there, which
      // splits each FMA into a multiply and an add (conv1d merge 4 with a sliding window: 14
      // mul + 14 add + 6 FMA in the PTX, against 20 FMA).
      line(o, strip_const(prm.element) + " " + name + dims + (ok.empty() ? "" : "{}") + ";  // " +
                  prm.name + "[" + index_text(site) + "], read once for " + shared_by);
      per_register(o, mx && x, my && y, [&] {
        line(o, (ok.empty() ? "" : "if (" + ok + ") ") + name + index + " = " +
                    render_access(site) + ";");
      });
      hoisted_[site] = name + index;
    }
  }

  /// Emits `body` once per merged column (x) and/or row (y) of this thread, with idx/idy (the
  /// kernel's names) set for it; along a dimension not given, idx/idy are the first output's.
  template <class F>
  void per_register(std::ostringstream& o, bool x, bool y, F body) {
    if (y) {
      line(o, "#pragma unroll");
      line(o, "for (int gt_my = 0; gt_my < " + std::to_string(c_.merge_y) + "; ++gt_my)");
    }
    if (x) {
      line(o, "#pragma unroll");
      line(o, "for (int gt_mx = 0; gt_mx < " + std::to_string(c_.merge_x) + "; ++gt_mx)");
    }
    line(o, "{");
    ++ind_;
    line(o, "const int " + k_.index_names[0] + " = " + x_index(x) + ";");
    if (k_.dims == 2)
      line(o, "const int " + k_.index_names[1] + " = gt_y0" +
                  (y ? " + gt_my * " + std::to_string(c_.block_y) : "") + ";");
    body();
    --ind_;
    line(o, "}");
  }

  /// True when every statement of `group` may run for merged outputs outside the bounds check:
  /// each declares or updates (`=`, `+=`, `-=`, `*=`) a float/double local of the output (or its
  /// element of a float array kept in registers, zero unless loaded), from shared tiles (every
  /// output of the block lies inside them; outside the range they hold zero), registers, thread
  /// indices, kept locals and locals already set for every output, with no call, division,
  /// increment or other assignment. Such a result is never stored for an output out of range, so
  /// dropping the check changes no output and takes the predicate off every FMA of the inner loop.
  bool unguarded(const std::vector<const Stmt*>& group) {
    if (k_.guard.empty() || !merged()) return false;
    static const std::regex unsafe(R"([A-Za-z_0-9]\s*\(|=|\+\+|--|[/%{}\[\]?;])");
    auto local_ok = [&](int id) {
      const std::string t = strip_const(k_.locals[static_cast<size_t>(id)].type);
      return t == "float" || t == "double";
    };
    std::set<int> set;  // locals this group sets
    auto pure = [&](const Text& t, size_t from) {
      for (size_t i = from; i < t.size(); ++i) {
        const Piece& p = t[i];
        switch (p.kind) {
          case Piece::Lit: {
            std::string text = p.text;
            if (i + 1 == t.size() && !text.empty() && text.back() == ';') text.pop_back();
            if (std::regex_search(text, unsafe)) return false;
            break;
          }
          case Piece::Local:
            if (k_.locals[static_cast<size_t>(p.id)].replicated && !defined_.count(p.id) &&
                !set.count(p.id))
              return false;
            break;
          case Piece::ThreadIndex:
            break;
          case Piece::Access: {
            const AccessSite& a = k_.accesses[static_cast<size_t>(p.id)];
            const bool from_tile = loop_hoisted_.count(p.id) || tile_hoisted_.count(p.id) ||
                                   (!hoisted_.count(p.id) && site_tile_.count(p.id));
            if (reg_site_.count(p.id)) break;  // a register array: zero unless loaded
            // A global read hoisted into registers under the check (hoist_shared_loads,
            // hoist_global_runs): zero where its output is out of range, so an unguarded
            // update reads a defined value and the result, never stored, is harmless.
            if (hoisted_.count(p.id) && !a.store && !halo_site_.count(p.id)) break;
            if (a.store || halo_site_.count(p.id) || !from_tile) return false;
            break;
          }
        }
      }
      return true;
    };
    for (const Stmt* s : group) {
      if (s->kind == Stmt::RepDecl) {
        if (!local_ok(s->local) || !pure(s->text, 0)) return false;
        set.insert(s->local);
        continue;
      }
      if (s->kind != Stmt::Rep || s->text.size() < 3 || s->text[1].kind != Piece::Lit) return false;
      static const std::regex op(R"(^\s*[-+*]?=\s*$)");
      if (!std::regex_match(s->text[1].text, op) || !pure(s->text, 2)) return false;
      const Piece& lhs = s->text[0];
      if (lhs.kind == Piece::Access) {
        // An array kept in registers (zero-initialised, stored back under the check).
        if (!reg_site_.count(lhs.id) || !float_element(lhs.id)) return false;
        continue;
      }
      if (lhs.kind != Piece::Local || !local_ok(lhs.id) ||
          !k_.locals[static_cast<size_t>(lhs.id)].replicated)
        return false;
      const bool update = s->text[1].text.find_first_of("+-*") != std::string::npos;
      if (update && !defined_.count(lhs.id) && !set.count(lhs.id)) return false;
      set.insert(lhs.id);
    }
    defined_.insert(set.begin(), set.end());
    return true;
  }

  bool float_element(int site) const {
    const Param& prm = k_.params[static_cast<size_t>(k_.accesses[static_cast<size_t>(site)].param)];
    const std::string t = strip_const(prm.element);
    return t == "float" || t == "double";
  }

  /// The flag that says some output using a register passes the bounds check, for a register per
  /// merged column (x), row (y), both or neither ("" when the kernel has no bounds check).
  std::string ok_flag(bool x, bool y) const {
    if (k_.guard.empty()) return "";
    if (!merged()) return "gt_ok";
    const bool mx = c_.merge_x > 1, my = k_.dims == 2 && c_.merge_y > 1;
    if (x == mx && y == my) return "gt_ok" + suffix(c_, k_.dims);
    if (y && mx) return "gt_ok_row[gt_my]";
    if (x && my) return "gt_ok_col[gt_mx]";
    return "gt_ok_any";
  }

  /// An access of `site` straight from memory, on its array's path (the register's load/store).
  std::string memory_access(int site, bool load) const {
    const Piece* p = find_access(site);
    const std::string at = p->text + "[" + render(p->index) + "]";
    return load && read_only_path(k_.accesses[static_cast<size_t>(site)].param)
               ? "__ldg(&" + at + ")"
               : at;
  }

  /// Loads the registers of arrays kept in registers, once per output before the work.
  void load_registers(std::ostringstream& o) {
    for (const Reg& r : regs_) {
      const Param& prm = k_.params[static_cast<size_t>(r.param)];
      std::string dims;
      if (r.y) dims += "[" + std::to_string(c_.merge_y) + "]";
      if (r.x) dims += "[" + std::to_string(c_.merge_x) + "]";
      line(o, strip_const(prm.element) + " " + r.name + dims + " = {};  // " + prm.name + "[" +
                  index_text(r.site) + "] in registers for the whole work" +
                  (prm.written ? " (stored back after it)" : ""));
      const std::string ok = ok_flag(r.x, r.y);
      per_register(o, r.x, r.y, [&] {
        line(o, (ok.empty() ? "" : "if (" + ok + ") ") + r.name + r.index() + " = " +
                    memory_access(r.site, true) + ";");
      });
    }
  }

  /// Stores the registers of written arrays kept in registers, once per output after the work
  /// (with split, lane 0 holds the value: the other lanes only ran the shared loop).
  void store_registers(std::ostringstream& o) {
    for (const Reg& r : regs_) {
      if (!k_.params[static_cast<size_t>(r.param)].written) continue;
      std::string ok = ok_flag(r.x, r.y);
      if (c_.split > 1) ok += (ok.empty() ? "" : " && ") + std::string("gt_lane == 0");
      line(o, "// " + k_.params[static_cast<size_t>(r.param)].name + " back from registers");
      per_register(o, r.x, r.y, [&] {
        line(o, (ok.empty() ? "" : "if (" + ok + ") ") + memory_access(r.site, false) + " = " +
                    r.name + r.index() + ";");
      });
    }
  }

  /// A tile whose fast dimension is the strip loop, contiguous and with aligned rows: a thread's
  /// read of it at `vector` consecutive steps of the loop is one vector load.
  bool loop_vector_tile(const Tile& t) const {
    return c_.vector > 1 && t.plan.contiguous && t.plan.dims.back() == "loop" && aligned_rows(t) &&
           c_.tile_k % c_.vector == 0;
  }
  /// The reads of loop-fast tiles that sit directly in the loop's body (not in a nested loop):
  /// each is loaded `vector` steps at a time before the steps run.
  std::vector<int> loop_vector_sites(const Stmt& loop) const {
    std::vector<int> out;
    std::function<void(const Text&)> scan = [&](const Text& t) {
      for (const Piece& p : t) {
        if (p.kind != Piece::Access) continue;
        scan(p.index);
        auto it = site_tile_.find(p.id);
        if (it == site_tile_.end() || k_.accesses[static_cast<size_t>(p.id)].store) continue;
        const Tile& tile = tiles_[static_cast<size_t>(it->second)];
        if (tile.plan.loop != loop.loop || !loop_vector_tile(tile)) continue;
        if (std::find(out.begin(), out.end(), p.id) == out.end()) out.push_back(p.id);
      }
    };
    for (const Stmt& st : loop.body)
      if (st.kind != Stmt::Loop) {
        scan(st.text);
        scan(st.address);
      }
    return out;
  }
  /// Loads `vector` steps of a loop-fast tile read into registers, once per merged row (column)
  /// the read depends on; the steps then read gt_l<site>[...][gt_kv]. Tile memory: in range for
  /// every thread, no bounds check.
  void hoist_loop_vector(std::ostringstream& o, const Stmt& loop, int site, const std::string& k0) {
    const AccessSite& a = k_.accesses[static_cast<size_t>(site)];
    const Param& prm = k_.params[static_cast<size_t>(a.param)];
    const std::string elem = strip_const(prm.element), v = std::to_string(c_.vector);
    const std::string vt = elem + v, name = "gt_l" + std::to_string(site);
    const bool y = k_.dims == 2 && c_.merge_y > 1 && a.depends.count("y");
    const bool x = !y && c_.merge_x > 1 && a.depends.count("x");
    const std::string dims = y   ? "[" + std::to_string(c_.merge_y) + "]"
                             : x ? "[" + std::to_string(c_.merge_x) + "]"
                                 : "";
    const std::string at = y ? "[gt_my]" : x ? "[gt_mx]" : "";
    line(o, elem + " " + name + dims + "[" + v + "];  // " + prm.name + "[" + index_text(site) +
                "], " + v + " steps of " + loop.var + " per load from the tile");
    if (y || x) {
      line(o, "#pragma unroll");
      line(o, std::string("for (int ") + (y ? "gt_my" : "gt_mx") + " = 0; " +
                  (y ? "gt_my < " + std::to_string(c_.merge_y) + "; ++gt_my"
                     : "gt_mx < " + std::to_string(c_.merge_x) + "; ++gt_mx") +
                  ")");
    }
    line(o, "{");
    ++ind_;
    if (a.depends.count("x")) line(o, "const int " + k_.index_names[0] + " = " + x_index(x) + ";");
    if (k_.dims == 2 && a.depends.count("y"))
      line(o, "const int " + k_.index_names[1] + " = gt_y0" +
                  (y ? " + gt_my * " + std::to_string(c_.block_y) : "") + ";");
    line(o, "const int " + loop.var + " = " + k0 + " + gt_kk;");
    line(o, "const " + vt + " gt_v = *reinterpret_cast<const " + vt + "*>(&" + render_access(site) +
                ");");
    for (int j = 0; j < c_.vector; ++j)
      line(o, name + at + "[" + std::to_string(j) + "] = gt_v." + "xyzw"[j] + ";");
    --ind_;
    line(o, "}");
    loop_hoisted_[site] = name + at + "[gt_kv]";
  }

  /// A tile whose fast dimension is x, contiguous (unit stride, 4-byte elements) and not padded:
  /// a run of consecutive outputs along x reads consecutive, aligned elements of one row.
  bool vector_tile(const Tile& t) const {
    return t.plan.contiguous && t.plan.dims.back() == "x" && aligned_rows(t);
  }
  /// Every row of the tile starts on a 16-byte boundary (declared __align__(16), a pitch that is
  /// a power of two times the element) unless a pad makes the pitch odd.
  bool aligned_rows(const Tile& t) const {
    return !(t.plan.paddable && c_.pad) || (c_.vector > 1 && pad_amount(t) % c_.vector == 0);
  }
  /// Elements a pad adds to a paddable tile's pitch: one (the rows fall in different banks), or
  /// the vector width where vector accesses reach the tile, so its rows stay aligned and a
  /// thread's vector still lands in banks apart from its neighbours'.
  int pad_amount(const Tile& t) const { return c_.vector > 1 && t.plan.contiguous ? c_.vector : 1; }
  /// Vector accesses reach the tile: its staging stores, or the runs of merged outputs.
  bool vector_access(const Tile& t) const {
    return (vector_width(t) > 1 && aligned_rows(t)) || (xrun_ > 1 && vector_tile(t)) ||
           loop_vector_tile(t);
  }

  /// idx of merged column gt_mx: strided by the block (coalesced scalar accesses), or in runs of
  /// xrun_ consecutive outputs per thread, the runs strided by the block.
  std::string x_index(bool merged_x) const {
    if (!merged_x) return "gt_x0";
    if (xrun_ == 1) return "gt_x0 + gt_mx * " + std::to_string(c_.block_x);
    const std::string r = std::to_string(xrun_);
    return "gt_x0 + gt_mx / " + r + " * " + std::to_string(c_.block_x * xrun_) + " + gt_mx % " + r;
  }

  /// A read of an x-fast shared tile, with merged outputs in runs along x: one float2/float4
  /// load per run into registers, for all the thread's merged outputs. The tile row is aligned
  /// (declared __align__(16), its pitch and the run's start multiples of the run) and every
  /// thread's runs lie inside the tile, so the load needs no bounds check.
  void hoist_vector_runs(std::ostringstream& o, int site) {
    const Param& prm = k_.params[static_cast<size_t>(k_.accesses[static_cast<size_t>(site)].param)];
    const std::string elem = strip_const(prm.element), r = std::to_string(xrun_);
    const std::string vt = elem + r, name = "gt_r" + std::to_string(site);
    line(o, elem + " " + name + "[" + std::to_string(c_.merge_x) + "];  // " + prm.name + "[" +
                index_text(site) + "], " + r + " consecutive elements per load from the tile");
    line(o, "#pragma unroll");
    line(o, "for (int gt_q = 0; gt_q < " + std::to_string(c_.merge_x / xrun_) + "; ++gt_q) {");
    ++ind_;
    line(o, "const int " + k_.index_names[0] + " = gt_x0 + gt_q * " +
                std::to_string(c_.block_x * xrun_) + ";  // the run's first output");
    line(o, "const " + vt + " gt_v = *reinterpret_cast<const " + vt + "*>(&" + render_access(site) +
                ");");
    for (int j = 0; j < xrun_; ++j)
      line(o, name + "[gt_q * " + r + " + " + std::to_string(j) + "] = gt_v." + "xyzw"[j] + ";");
    --ind_;
    line(o, "}");
    hoisted_[site] = name + "[gt_mx]";
    tile_hoisted_.insert(site);
  }

  /// Opens a loop over this thread's runs of xrun_ consecutive outputs (per merged row when
  /// `y`), with idx/idy set to the run's first output; the caller closes it.
  void open_runs(std::ostringstream& o, bool y) {
    if (y) {
      line(o, "#pragma unroll");
      line(o, "for (int gt_my = 0; gt_my < " + std::to_string(c_.merge_y) + "; ++gt_my)");
    }
    line(o, "#pragma unroll");
    line(o, "for (int gt_q = 0; gt_q < " + std::to_string(c_.merge_x / xrun_) + "; ++gt_q) {");
    ++ind_;
    line(o, "const int " + k_.index_names[0] + " = gt_x0 + gt_q * " +
                std::to_string(c_.block_x * xrun_) + ";  // the run's first output");
    if (k_.dims == 2)
      line(o, "const int " + k_.index_names[1] + " = gt_y0" +
                  (y ? " + gt_my * " + std::to_string(c_.block_y) : "") + ";");
  }
  /// The merged column of member j of the current run.
  std::string run_member(int j) const {
    return "[gt_q * " + std::to_string(xrun_) + " + " + std::to_string(j) + "]";
  }
  /// A flag indexed by [gt_mx] ("" when there is none), for member j of the current run.
  std::string member_flag(std::string f, int j) const {
    if (auto p = f.find("[gt_mx]"); p != std::string::npos) f.replace(p, 7, run_member(j));
    return f;
  }
  /// The flag for every member of the run, joined by && ("" when there is none).
  std::string run_flags(const std::string& f) const {
    std::string all;
    for (int j = 0; j < xrun_ && !f.empty(); ++j) all += (j ? " && " : "") + member_flag(f, j);
    return all;
  }

  /// A store that goes straight to memory (not staged in a tile) and can go out one vector per
  /// run of consecutive outputs (vector_store_site).
  bool run_store_candidate(int site) const {
    return k_.accesses[static_cast<size_t>(site)].store && !staged_store(site) &&
           !reg_site_.count(site) && vector_store_site(k_, site);
  }
  /// The merged row every run store's register has ("[gt_my]" with merge_y > 1, else "").
  std::string run_store_row() const { return k_.dims == 2 && c_.merge_y > 1 ? "[gt_my]" : ""; }
  /// The run stores among a group's statements: their values go to registers in the replica
  /// block (declared here), and out after it (store_runs).
  std::vector<int> declare_run_stores(std::ostringstream& o,
                                      const std::vector<const Stmt*>& group) {
    std::vector<int> out;
    if (xrun_ == 1) return out;
    for (const Stmt* st : group)
      for (const Piece& p : st->text)
        if (p.kind == Piece::Access && run_store_candidate(p.id)) out.push_back(p.id);
    for (int site : out) {
      const Param& prm =
          k_.params[static_cast<size_t>(k_.accesses[static_cast<size_t>(site)].param)];
      line(o, strip_const(prm.element) + " gt_w" + std::to_string(site) +
                  (run_store_row().empty() ? "" : "[" + std::to_string(c_.merge_y) + "]") + "[" +
                  std::to_string(c_.merge_x) + "];  // " + prm.name + "[" + index_text(site) +
                  "], stored " + std::to_string(xrun_) +
                  " consecutive elements at a time where aligned");
    }
    return out;
  }
  /// The stores of the group's run stores: one float2/float4 store per run when every output of
  /// the run passes the bounds check and the address is aligned, element by element otherwise.
  void store_runs(std::ostringstream& o, const std::vector<int>& sites, bool guarded) {
    for (int site : sites) {
      const Param& prm =
          k_.params[static_cast<size_t>(k_.accesses[static_cast<size_t>(site)].param)];
      const std::string elem = strip_const(prm.element), r = std::to_string(xrun_);
      const std::string vt = elem + r, w = "gt_w" + std::to_string(site) + run_store_row();
      const bool y = !run_store_row().empty();
      open_runs(o, y);
      auto member = [&](int j) { return run_member(j); };
      const std::string flag = guarded ? "gt_ok" + suffix(c_, k_.dims) : std::string();
      auto ok = [&](int j) { return member_flag(flag, j); };
      const std::string all = run_flags(flag);
      line(o, elem + "* gt_p = &" + prm.name + "[" + render_index(site) + "];");
      line(o, "if (" + (all.empty() ? "" : all + " && ") +
                  "reinterpret_cast<unsigned long long>(gt_p) % " + std::to_string(4 * xrun_) +
                  " == 0) {");
      ++ind_;
      line(o, vt + " gt_v;");
      for (int j = 0; j < xrun_; ++j)
        line(o, std::string("gt_v.") + "xyzw"[j] + " = " + w + member(j) + ";");
      line(o, "*reinterpret_cast<" + vt + "*>(gt_p) = gt_v;");
      --ind_;
      line(o, "} else {");
      ++ind_;
      for (int j = 0; j < xrun_; ++j) {
        const std::string f = ok(j);
        line(o, (f.empty() ? "" : "if (" + f + ") ") + "gt_p[" + std::to_string(j) + "] = " + w +
                    member(j) + ";");
      }
      --ind_;
      line(o, "}");
      --ind_;
      line(o, "}");
    }
  }

  /// A read that goes straight to memory (no tile, window or register) and can take one vector
  /// load per run of consecutive outputs (vector_global_site).
  bool global_run_candidate(int site) const {
    return !site_tile_.count(site) && !halo_site_.count(site) && !reg_site_.count(site) &&
           vector_global_site(k_, k_.accesses[static_cast<size_t>(site)]);
  }

  /// A read straight from global memory, with merged outputs in runs along x: one float2/float4
  /// load per run (per merged row when the subscript uses idy) into registers, when every output
  /// of the run passes the bounds check (so every element is one the naive kernel reads) and the
  /// address is aligned; element by element otherwise (odd row lengths, offsets like idx - 1).
  void hoist_global_runs(std::ostringstream& o, int site, bool guarded) {
    const AccessSite& a = k_.accesses[static_cast<size_t>(site)];
    const Param& prm = k_.params[static_cast<size_t>(a.param)];
    const bool ro = read_only_path(a.param);
    const std::string elem = strip_const(prm.element), r = std::to_string(xrun_);
    const std::string vt = elem + r, name = "gt_r" + std::to_string(site);
    const bool y = k_.dims == 2 && c_.merge_y > 1 && a.depends.count("y");
    const std::string flag = guarded ? ok_flag(true, y) : std::string();
    // Zero where an output is out of range (as in hoist_shared_loads): the update that reads it
    // then runs for every merged output without a per-output check (unguarded).
    line(o, elem + " " + name + (y ? "[" + std::to_string(c_.merge_y) + "]" : "") + "[" +
                std::to_string(c_.merge_x) + "]" + (flag.empty() ? "" : "{}") + ";  // " +
                prm.name + "[" + index_text(site) + "], " + r +
                " consecutive elements per load where aligned");
    open_runs(o, y);
    const std::string row = y ? "[gt_my]" : "";
    auto member = [&](int j) { return run_member(j); };
    auto ok = [&](int j) { return member_flag(flag, j); };
    const std::string all = run_flags(flag);
    line(o, "const " + elem + "* gt_p = &" + prm.name + "[" + render_index(site) + "];");
    line(o, "if (" + (all.empty() ? "" : all + " && ") +
                "reinterpret_cast<unsigned long long>(gt_p) % " + std::to_string(4 * xrun_) +
                " == 0) {");
    ++ind_;
    line(o, "const " + vt + " gt_v = " +
                (ro ? "__ldg(reinterpret_cast<const " + vt + "*>(gt_p))"
                    : "*reinterpret_cast<const " + vt + "*>(gt_p)") +
                ";");
    for (int j = 0; j < xrun_; ++j) line(o, name + row + member(j) + " = gt_v." + "xyzw"[j] + ";");
    --ind_;
    line(o, "} else {");
    ++ind_;
    for (int j = 0; j < xrun_; ++j) {
      const std::string f = ok(j);
      line(o, (f.empty() ? "" : "if (" + f + ") ") + name + row + member(j) + " = " +
                  (ro ? "__ldg(gt_p + " + std::to_string(j) + ")"
                      : "gt_p[" + std::to_string(j) + "]") +
                  ";");
    }
    --ind_;
    line(o, "}");
    --ind_;
    line(o, "}");
    hoisted_[site] = name + row + "[gt_mx]";
  }

  /// After the split loop: the partial sums of an output's `split` threads (consecutive lanes
  /// of one warp) meet in a butterfly of warp shuffles, every lane ending with the total; every
  /// thread takes part (no bounds check: a shuffle needs the whole warp), and from here on only
  /// lane 0 of each output runs the kernel's statements.
  void combine_split(std::ostringstream& o) {
    if (split_.across_warps) {  // the lanes are rows of the block: through shared memory
      const std::string sp = std::to_string(c_.split), w = std::to_string(tx_);
      line(o, "// add up the " + sp + " rows' parts of each output in shared memory; row 0 adds");
      for (int id : split_.locals) {
        const Local& l = k_.locals[static_cast<size_t>(id)];
        line(o,
             "__shared__ " + strip_const(l.type) + " gt_sp_" + l.name + "[" + sp + "][" + w + "];");
      }
      replica_block(o, [&](std::ostringstream& b) {
        for (int id : split_.locals) {
          const Local& l = k_.locals[static_cast<size_t>(id)];
          line(b, "gt_sp_" + l.name + "[gt_lane][" + k_.index_names[0] + " - gt_bx] = " + l.name +
                      suffix(c_, k_.dims) + ";");
        }
      });
      line(o, "__syncthreads();");
      replica_block(o, [&](std::ostringstream& b) {
        line(b, "if (gt_lane == 0)");
        line(b, "  for (int gt_l = 1; gt_l < " + sp + "; ++gt_l) {");
        for (int id : split_.locals) {
          const Local& l = k_.locals[static_cast<size_t>(id)];
          line(b, "    " + l.name + suffix(c_, k_.dims) + " += gt_sp_" + l.name + "[gt_l][" +
                      k_.index_names[0] + " - gt_bx];");
        }
        line(b, "  }");
      });
      lane0_ = true;
      return;
    }
    line(o, "// add up the " + std::to_string(c_.split) + " threads' parts of each output");
    line(o, "#pragma unroll");
    line(o, "for (int gt_o = " + std::to_string(c_.split / 2) + "; gt_o > 0; gt_o >>= 1)");
    ++ind_;
    replica_block(o, [&](std::ostringstream& b) {
      for (int id : split_.locals) {
        const std::string v = k_.locals[static_cast<size_t>(id)].name + suffix(c_, k_.dims);
        line(b, v + " += __shfl_xor_sync(0xffffffffu, " + v + ", gt_o);");
      }
    });
    --ind_;
    lane0_ = true;
  }

  void emit_list(std::ostringstream& o, const std::vector<Stmt>& list, bool guarded) {
    std::vector<const Stmt*> group;
    auto flush = [&] {
      if (group.empty()) return;
      hoist_shared_loads(o, group, guarded);
      const std::vector<int> run_stores = declare_run_stores(o, group);
      // Work that only updates the output's own float accumulators from shared tiles runs for
      // every merged output, in range or not: no per-statement predicate in the inner loop.
      const bool check = guarded && !unguarded(group);
      const std::string only =
          (check ? "gt_ok" + suffix(c_, k_.dims) : std::string()) +
          (lane0_ ? std::string(check ? " && " : "") + "gt_lane == 0" : std::string());
      replica_block(o, [&](std::ostringstream& b) {
        if (!only.empty()) {
          line(b, "if (" + only + ") {");
          ++ind_;
        }
        for (const Stmt* s : group) {
          if (s->kind == Stmt::RepDecl) {
            const Local& l = k_.locals[s->local];
            line(b, l.name + suffix(c_, k_.dims) + " = " + render(s->text) + ";");
          } else if (s->kind == Stmt::Reduce) {
            int sum = sum_of(*s);
            line(b, sum >= 0 ? sums_[sum].name + " += " + render(s->text) + ";"
                             : "atomicAdd(" + render(s->address) + ", " + render(s->text) + ");");
          } else {
            emit_text_lines(b, render(s->text));
          }
        }
        if (!only.empty()) {
          --ind_;
          line(b, "}");
        }
      });
      store_runs(o, run_stores, guarded);
      hoisted_.clear();
      tile_hoisted_.clear();
      group.clear();
    };
    for (const Stmt& s : list) {
      switch (s.kind) {
        case Stmt::KeepDecl: {
          flush();
          const Local& l = k_.locals[s.local];
          line(o, l.type + " " + l.name + (s.text.empty() ? "" : " = " + render(s.text)) + ";");
          break;
        }
        case Stmt::RepDecl: {
          flush();
          const Local& l = k_.locals[s.local];
          line(o, strip_const(l.type) + " " + l.name + array_dims(c_, k_.dims) +
                      (c_.split > 1 ? " = {}" : "") + ";");
          if (!s.text.empty()) group.push_back(&s);
          break;
        }
        case Stmt::Loop:
          flush();
          emit_loop(o, s, guarded);
          if (c_.split > 1 && s.loop == split_.loop) combine_split(o);
          break;
        case Stmt::Rep:
        case Stmt::Reduce:
          group.push_back(&s);
          break;
      }
    }
    flush();
  }

  /// Reads of a halo window that slide along loop `s`: with merged outputs in runs of
  /// consecutive x, output j of a run reads at step k + 1 the element output j + 1 read at step
  /// k (conv1d's in[i + k], conv2d's in[(y + fy) * W + x + fx] along fx). Such a read, in the
  /// loop's own body (not a nested loop) and advanced along x by this loop alone, is kept in a
  /// register window per run: xrun - 1 elements loaded before the loop, one per step, shifted
  /// after it, so each step reads shared memory once per run instead of once per output.
  std::vector<int> sliding_sites(const Stmt& s) const {
    std::vector<int> out;
    if (xrun_ < 2 || c_.split > 1) return out;
    auto direct = [&](int site) {
      return std::any_of(s.body.begin(), s.body.end(), [&](const Stmt& b) {
        return b.kind != Stmt::Loop && (access_in(b.text, site) || access_in(b.address, site));
      });
    };
    for (const auto& [site, at] : halo_site_) {
      const HaloPlan& h = halos_[static_cast<size_t>(at.first)];
      if (h.loops[0].size() == 1 && h.loops[0][0] == s.loop && direct(site)) out.push_back(site);
    }
    return out;
  }
  enum class Slide { Before, Newest, Shift };
  /// One part of a sliding window (sliding_sites): its declaration and first xrun - 1 elements
  /// (Before the loop), the element the run's last output reads at this step (Newest, at the top
  /// of the body), and the shift by one (Shift, at its end).
  void slide_window(std::ostringstream& o, const Stmt& s, int site, Slide part) {
    const auto& [hn, n] = halo_site_.at(site);
    const HaloPlan& h = halos_[static_cast<size_t>(hn)];
    const Param& prm = k_.params[static_cast<size_t>(h.param)];
    const bool y = k_.dims == 2 && c_.merge_y > 1;
    const std::string name = "gt_sw" + std::to_string(site), row = y ? "[gt_my]" : "";
    auto member = [&](int j) {
      line(o, "{");
      ++ind_;
      line(o, "const int " + k_.index_names[0] + " = gt_xr + " + std::to_string(j) + ";");
      if (part == Slide::Before) line(o, "const int " + s.var + " = " + render(s.lo) + ";");
      line(o, name + row + run_member(j) + " = " + halo_read(h, n) + ";");
      --ind_;
      line(o, "}");
    };
    if (part == Slide::Before)
      line(o, strip_const(prm.element) + " " + name +
                  (y ? "[" + std::to_string(c_.merge_y) + "]" : "") + "[" +
                  std::to_string(c_.merge_x) + "];  // " + prm.name + "[" + index_text(site) +
                  "]: a window sliding along " + s.var + ", " + std::to_string(xrun_) +
                  " consecutive outputs per run");
    open_runs(o, y);
    if (part == Slide::Shift) {
      for (int j = 0; j + 1 < xrun_; ++j)
        line(o, name + row + run_member(j) + " = " + name + row + run_member(j + 1) + ";");
    } else {
      line(o, "const int gt_xr = " + k_.index_names[0] + ";");
      if (part == Slide::Before)
        for (int j = 0; j + 1 < xrun_; ++j) member(j);
      else
        member(xrun_ - 1);
    }
    --ind_;
    line(o, "}");
    if (part == Slide::Before) loop_hoisted_[site] = name + row + "[gt_mx]";
  }

  void emit_loop(std::ostringstream& o, const Stmt& s, bool guarded) {
    std::string lo = render(s.lo), hi = render(s.hi);
    if (s.inclusive) hi = "(" + hi + ") + 1";
    std::string unroll = "#pragma unroll " + std::to_string(c_.unroll);
    std::vector<const Tile*> here;
    for (const Tile& t : tiles_)
      if (t.plan.loop == s.loop) here.push_back(&t);
    // Every step of the loop runs the body once, in order, whichever form below runs it: a
    // sliding window (sliding_sites) is loaded before all of them and moves with each body.
    const std::vector<int> slide = sliding_sites(s);
    for (int site : slide) slide_window(o, s, site, Slide::Before);
    auto body = [&] {
      for (int site : slide) slide_window(o, s, site, Slide::Newest);
      emit_list(o, s.body, guarded);
      for (int site : slide) slide_window(o, s, site, Slide::Shift);
    };
    if (here.empty()) {
      line(o, unroll);
      if (c_.split > 1 && s.loop == split_.loop)  // this thread's share: every split-th step
        line(o, "for (int " + s.var + " = " + lo + " + gt_lane; " + s.var + " < " + hi + "; " +
                    s.var + " += " + std::to_string(c_.split) + ") {");
      else
        line(o,
             "for (int " + s.var + " = " + lo + "; " + s.var + " < " + hi + "; ++" + s.var + ") {");
      ++ind_;
      body();
      --ind_;
      line(o, "}");
      for (int site : slide) loop_hoisted_.erase(site);
      return;
    }
    // Strip-mined by tile_k: stage the tiles, then run the strip from shared memory. Pipelined
    // with S stages, the first S-1 strips are copied before the loop (one commit group each) and
    // each step starts the copy of the strip S-1 ahead into the buffer the previous step worked
    // on (free after its closing barrier), then waits for all but the S-1 newest groups: its own.
    const std::string k0 = "gt_" + s.var + "_base", tk = std::to_string(c_.tile_k);
    const std::string stage = stage_var(s.loop);
    if (pipelined()) {
      const int S = c_.stages;
      const std::string ahead = std::to_string(S - 1), prologue = "gt_" + s.var + "_ahead";
      line(o, "#pragma unroll");
      line(o, "for (int " + prologue + " = 0; " + prologue + " < " + ahead + "; ++" + prologue +
                  ") {  // the first " + (S == 2 ? "strip" : ahead + " strips"));
      ++ind_;
      line(o, "const int " + k0 + " = " + lo + " + " + prologue + " * " + tk + ";");
      line(o, "if (" + k0 + " < " + hi + ") {");
      ++ind_;
      for (const Tile* t : here) stage_tile(o, s, *t, k0, hi, prologue);
      --ind_;
      line(o, "}");
      line(o, "gt_cp_commit();");
      --ind_;
      line(o, "}");
      line(o, "for (int " + k0 + " = " + lo + "; " + k0 + " < " + hi + "; " + k0 + " += " + tk +
                  ") {");
      ++ind_;
      line(o, "const int " + stage + " = (" + k0 + " - (" + lo + ")) / " + tk + " % " +
                  std::to_string(S) + ";  // the buffer of this strip");
      const std::string next = "gt_" + s.var + "_next";
      line(o, "const int " + next + " = " + k0 + " + " + ahead + " * " + tk + ";");
      line(o, "if (" + next + " < " + hi + ") {");
      ++ind_;
      const std::string into = "(" + stage + " + " + ahead + ") % " + std::to_string(S);
      for (const Tile* t : here) stage_tile(o, s, *t, next, hi, into);
      --ind_;
      line(o, "}");
      line(o, "gt_cp_commit();");
      line(o, "gt_cp_wait<" + ahead + ">();  // this strip's copies (all but the " +
                  (S == 2 ? "group" : ahead + " groups") + " started after them)");
    } else {
      line(o, "for (int " + k0 + " = " + lo + "; " + k0 + " < " + hi + "; " + k0 + " += " + tk +
                  ") {");
      ++ind_;
      for (const Tile* t : here) stage_tile(o, s, *t, k0, hi);
    }
    line(o, "__syncthreads();");
    line(o, "if (" + k0 + " + " + tk + " <= " + hi + ") {");
    ++ind_;
    const std::vector<int> along = loop_vector_sites(s);
    if (along.empty()) {
      line(o, unroll);
      line(o, "for (int gt_kk = 0; gt_kk < " + tk + "; ++gt_kk) {");
      ++ind_;
      line(o, "const int " + s.var + " = " + k0 + " + gt_kk;");
      body();
      --ind_;
      line(o, "}");
    } else {
      // Reads of loop-fast tiles advance one element per step: one vector load covers
      // `vector` steps of the loop (a full strip only; the remainder below stays scalar).
      const std::string v = std::to_string(c_.vector);
      line(o, "#pragma unroll " + std::to_string(std::max(1, c_.unroll / c_.vector)));
      line(o, "for (int gt_kk = 0; gt_kk < " + tk + "; gt_kk += " + v + ") {");
      ++ind_;
      for (int site : along) hoist_loop_vector(o, s, site, k0);
      line(o, "#pragma unroll");
      line(o, "for (int gt_kv = 0; gt_kv < " + v + "; ++gt_kv) {");
      ++ind_;
      line(o, "const int " + s.var + " = " + k0 + " + gt_kk + gt_kv;");
      body();
      --ind_;
      line(o, "}");
      --ind_;
      line(o, "}");
      for (int site : along) loop_hoisted_.erase(site);
    }
    --ind_;
    line(o, "} else {");
    ++ind_;
    line(o, "for (int " + s.var + " = " + k0 + "; " + s.var + " < " + hi + "; ++" + s.var + ") {");
    ++ind_;
    body();
    --ind_;
    line(o, "}");
    --ind_;
    line(o, "}");
    line(o, "__syncthreads();");
    --ind_;
    line(o, "}");
    for (int site : slide) loop_hoisted_.erase(site);
  }

  /// Loads one strip of a tile cooperatively: consecutive threads take consecutive elements of
  /// its fast dimension; outside the loop range or the guard the tile holds zero. With a vector
  /// width, a thread takes `vector` consecutive elements with one float2/float4 load where the
  /// subscript is contiguous along the fast dimension (proven), all of them are in range and the
  /// address is aligned (checked: an odd row length or offset falls back to scalar loads).
  void stage_tile(std::ostringstream& o, const Stmt& s, const Tile& t, const std::string& k0,
                  const std::string& hi, const std::string& buffer = "") {
    const bool async = pipelined();
    const size_t nd = t.plan.dims.size();
    std::vector<long long> ext;
    long long n = 1;
    for (size_t j = 0; j < nd; ++j) {
      ext.push_back(t.plan.dims[j] == "x" ? tx_ : t.plan.dims[j] == "y" ? ty_ : c_.tile_k);
      n *= ext.back();
    }
    const int v = vector_width(t);
    line(o, "// stage " + describe_tile(t) + " (coalesced over consecutive threads" +
                (v > 1 ? ", " + std::to_string(v) + " elements per load where aligned" : "") + ")");
    line(o, "for (int gt_e = gt_tid; gt_e < " + std::to_string(n / v) +
                "; gt_e += " + std::to_string(c_.block_x * c_.block_y) + ") {");
    ++ind_;
    std::vector<std::string> coord;
    const std::string per = v > 1 ? " * " + std::to_string(v) : "";
    if (nd == 1) {
      line(o, "const int gt_t0 = gt_e" + per + ";");
      coord = {"gt_t0"};
    } else {
      line(o, "const int gt_t0 = gt_e / " + std::to_string(ext[1] / v) + ", gt_t1 = gt_e % " +
                  std::to_string(ext[1] / v) + per + ";");
      coord = {"gt_t0", "gt_t1"};
    }
    // The tile coordinates as the kernel's variables (the last one shifted by `shift`).
    auto declare = [&](const std::string& shift) {
      for (size_t j = 0; j < nd; ++j) {
        const std::string& d = t.plan.dims[j];
        std::string c = coord[j] + (j + 1 == nd ? shift : "");
        if (d == "x") line(o, "const int " + k_.index_names[0] + " = gt_bx + " + c + ";");
        if (d == "y") line(o, "const int " + k_.index_names[1] + " = gt_by + " + c + ";");
        if (d == "loop") line(o, "const int " + s.var + " = " + k0 + " + " + c + ";");
      }
    };
    std::string conds = s.var + " < " + hi;
    bool has_x = std::count(t.plan.dims.begin(), t.plan.dims.end(), "x") > 0;
    bool has_y = std::count(t.plan.dims.begin(), t.plan.dims.end(), "y") > 0;
    for (size_t g = 0; g < k_.guard.size(); ++g) {
      const auto& gd = k_.guard_depends[g];
      if ((gd.count("x") && !has_x) || (gd.count("y") && !has_y)) continue;
      conds += " && (" + render(k_.guard[g]) + ")";
    }
    const AccessSite& site = k_.accesses[t.site];
    const std::string& elem = k_.params[site.param].element;
    std::string load = k_.params[site.param].name + "[" + render_index(t.site) + "]";
    std::string dst = tile_name(t, buffer);
    for (size_t j = 0; j < nd; ++j)
      dst += "[" + coord[j] + (j + 1 == nd && v > 1 ? " + gt_j" : "") + "]";
    // Out of range: zero (an asynchronous copy of no bytes from the array's start zero-fills).
    std::string scalar = async
                             ? "gt_cp_async(&" + dst + ", (" + conds + ") ? &" + load +
                                   " : reinterpret_cast<const " + strip_const(elem) + "*>(" +
                                   k_.params[site.param].name + "), " + conds + ");"
                             : dst + " = (" + conds + ") ? __ldg(&" + load + ") : " + elem + "(0);";
    if (v == 1) {
      declare("");
      line(o, scalar);
    } else {
      const std::string vt = elem + std::to_string(v);
      std::string base = tile_name(t, buffer);
      for (size_t j = 0; j + 1 < nd; ++j) base += "[" + coord[j] + "]";
      const std::string at = base + "[" + coord[nd - 1];
      vector_or_elements(
          o, v, conds, declare, "const " + elem + "* gt_p = &" + load + ";", v * t.plan.bytes,
          [&] {
            if (async && aligned_rows(t)) {  // one asynchronous vector copy
              line(o, "gt_cp_async(reinterpret_cast<" + vt + "*>(&" + at +
                          "]), reinterpret_cast<const " + vt + "*>(gt_p), true);");
            } else if (async) {  // a padded pitch: rows are not aligned, element copies
              for (int j = 0; j < v; ++j)
                line(o, "gt_cp_async(&" + at + " + " + std::to_string(j) + "], gt_p + " +
                            std::to_string(j) + ", true);");
            } else if (aligned_rows(t)) {  // one vector store: consecutive 16 bytes per thread
              line(o, "const " + vt + " gt_v = __ldg(reinterpret_cast<const " + vt + "*>(gt_p));");
              line(o, "*reinterpret_cast<" + vt + "*>(&" + at + "]) = gt_v;");
            } else {  // a padded pitch: rows are not aligned, element stores
              line(o, "const " + vt + " gt_v = __ldg(reinterpret_cast<const " + vt + "*>(gt_p));");
              for (int j = 0; j < v; ++j)
                line(o, at + " + " + std::to_string(j) + "] = gt_v." + "xyzw"[j] + ";");
            }
          },
          [&] { line(o, scalar); });
    }
    --ind_;
    line(o, "}");
  }

  /// Elements per staging load of a tile: the choice's vector width where the tile's fast
  /// dimension is contiguous in memory and its extent a multiple of it, else 1.
  int vector_width(const Tile& t) const {
    if (c_.vector <= 1 || !t.plan.contiguous) return 1;
    const std::string& d = t.plan.dims.back();
    long long e = d == "x" ? tx_ : d == "y" ? ty_ : c_.tile_k;
    return e % c_.vector == 0 ? c_.vector : 1;
  }

  void header(std::ostringstream& o) const {
    o << "// Generated by gputune from the naive kernel '" << k_.name << "' (" << k_.file << ").\n";
    o << "// " << choice_label(k_, c_) << "\n";
    o << "// - thread block " << lb_[0] << " x " << lb_[1] << " threads";
    if (c_.split > 1)
      o << " (" << c_.block_x << " x " << (k_.dims == 2 ? c_.block_y : 1) << " outputs)";
    if (merged())
      o << "; thread merge " << c_.merge_x << " x " << c_.merge_y << ": each thread computes "
        << c_.merge_x * c_.merge_y
        << " outputs (replicated accumulators; loop control and the loads they share kept once)";
    if (c_.split > 1)
      o << "; " << c_.split << " threads per output share loop "
        << find_loop(k_.body, split_.loop)->var << " (every " << c_.split
        << "th step each, partial sums added by warp shuffles)";
    if (c_.bounds == LaunchBounds::None)
      o << "; no __launch_bounds__: registers are the compiler's choice (up to 255)";
    if (c_.bounds == LaunchBounds::TwoBlocks)
      o << "; __launch_bounds__ asks for 2 resident blocks per SM (the compiler caps registers "
           "to fit them)";
    if (xrun_ > 1)
      o << "; along " << k_.index_names[0] << " in runs of " << xrun_
        << " consecutive outputs: one " << xrun_
        << "-wide vector access per run (x-fast shared tiles; reads and stores at consecutive "
        << k_.index_names[0] << ", where aligned)";
    o << "\n";
    std::function<void(const std::vector<Stmt>&)> loops = [&](const std::vector<Stmt>& l) {
      for (const Stmt& s : l) {
        if (s.kind != Stmt::Loop) continue;
        bool strip = std::any_of(tiles_.begin(), tiles_.end(),
                                 [&](const Tile& t) { return t.plan.loop == s.loop; });
        o << "// - loop " << s.var << ": unroll " << c_.unroll;
        if (strip) o << ", strip-mined by tile_k = " << c_.tile_k << " for shared-memory tiles";
        if (strip && pipelined())
          o << ", " << c_.stages << " buffers: the next " << c_.stages - 1
            << " strip(s) are copied asynchronously (cp.async) while this one is used";
        if (strip && c_.vector > 1)
          o << ", staged with " << c_.vector << "-wide vector loads where contiguous and aligned";
        o << "\n";
        loops(s.body);
      }
    };
    loops(k_.body);
    for (const Reg& r : regs_) {
      const Param& p = k_.params[static_cast<size_t>(r.param)];
      o << "// - " << p.name << ": in registers, one per output for the whole work (loaded once "
        << (p.written ? "before it, stored once after" : "before it, read-only path") << ")\n";
    }
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const Param& p = k_.params[i];
      if (!p.pointer || !p.read || p.written) continue;
      Cache c = cache_of(static_cast<int>(i));
      if (c == Cache::Registers) continue;
      o << "// - " << p.name << ": "
        << (c == Cache::Global     ? "global loads"
            : c == Cache::ReadOnly ? "read-only path (const __restrict__, __ldg)"
            : halo_of(static_cast<int>(i))
                ? "a halo window in dynamic shared memory: the block's outputs widened by the "
                  "reads' offsets, loaded once per block"
                : "shared-memory tiles where reused, read-only path elsewhere");
      for (const HaloPlan& h : halos_)
        if (h.param == static_cast<int>(i) && halo_vector(h) > 1)
          o << ", " << halo_vector(h) << " columns per load where aligned";
      o << "\n";
    }
    for (int site : store_sites_)
      o << "// - " << k_.params[k_.accesses[site].param].name
        << ": stores staged in a shared tile, written back coalesced along " << k_.index_names[1]
        << "\n";
    for (const Sum& x : sums_)
      o << "// - atomicAdd(" << literal_text(x.stmt->address)
        << "): summed per block (warp shuffles, then the warps' sums), one atomic per block\n";
    o << "// Launch: block (" << lb_[0] << ", " << lb_[1] << ", 1), grid (ceil(X / " << tx_
      << "), ceil(Y / " << ty_ << "), 1) for X x Y naive threads";
    if (shared_bytes()) o << "; " << shared_bytes() << " bytes of shared memory";
    if (!halos_.empty())
      o << "; dynamic shared memory for the halo windows, sized at launch from the scalars";
    o << ".\n";
  }

  const NaiveKernel& k_;
  Choice c_;
  int tx_ = 0, ty_ = 0;
  int xrun_ = 1;       ///< merged outputs along x per run of consecutive elements (1: strided)
  SplitOption split_;  ///< the loop `split` threads share (split > 1)
  std::array<int, 2> lb_{1, 1};  ///< the launched block (launch_block)
  bool lane0_ = false;           ///< past the split loop: statements run on lane 0 of each output
  int ind_ = 0;
  std::vector<Tile> tiles_;
  std::map<int, int> site_tile_;
  std::vector<int> store_sites_;                     ///< stores staged through a tile
  std::vector<HaloPlan> halos_;                      ///< arrays read through a halo window
  std::map<int, std::pair<int, size_t>> halo_site_;  ///< site -> (halo, its index in the plan)
  std::map<int, std::string> hoisted_;       ///< site -> the register holding it (current group)
  std::map<int, std::string> loop_hoisted_;  ///< site -> its register (current vector loop step)
  std::set<int> tile_hoisted_;  ///< hoisted_ sites loaded from a shared tile, for every output
  std::set<int> defined_;       ///< replicated locals set for every merged output, in range or not
  std::vector<Sum> sums_;
  std::vector<Reg> regs_;           ///< arrays kept in registers
  std::map<int, size_t> reg_site_;  ///< site -> its array's register (regs_)
};

}  // namespace

std::vector<ArrayOptions> array_options(const NaiveKernel& k) {
  std::vector<ArrayOptions> out;
  const std::map<int, HaloPlan> halos = halo_plans(k);
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    if (!p.pointer || !p.read) continue;
    ArrayOptions a;
    a.array = p.name;
    a.allowed.push_back(Cache::Global);
    const std::string in_registers = register_refusal(k, static_cast<int>(i));
    if (p.written) {
      a.reasons.push_back("written by the kernel: never on the read-only path or staged");
      if (in_registers.empty())
        a.allowed.push_back(Cache::Registers);
      else
        a.reasons.push_back("not kept in registers: " + in_registers);
      out.push_back(a);
      continue;
    }
    a.allowed.push_back(Cache::ReadOnly);
    const HaloPlan h = halos.at(static_cast<int>(i));
    bool any = h.ok;
    for (const AccessSite& s : k.accesses) {
      if (h.ok || s.param != static_cast<int>(i) || s.store) continue;
      TilePlan t = plan_site(k, s);
      if (t.ok)
        any = true;
      else
        a.reasons.push_back("not staged at " + t.reason);
    }
    if (!any) a.reasons.push_back("no halo window: " + h.reason);
    if (any) a.allowed.push_back(Cache::Shared);
    if (in_registers.empty())
      a.allowed.push_back(Cache::Registers);
    else
      a.reasons.push_back("not kept in registers: " + in_registers);
    out.push_back(a);
  }
  return out;
}

std::vector<OutputOptions> output_options(const NaiveKernel& k) {
  std::vector<const Stmt*> sums;
  reductions(k.body, sums);
  std::vector<OutputOptions> out;
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    if (!p.pointer || !p.written) continue;
    OutputOptions o;
    o.array = p.name;
    o.reduce = std::any_of(sums.begin(), sums.end(),
                           [&](const Stmt* r) { return r->target == static_cast<int>(i); });
    o.stage = staged_store_site(k, p.name) >= 0;
    if (!o.stage && !o.reduce)
      for (size_t a = 0; a < k.accesses.size(); ++a)
        if (k.accesses[a].param == static_cast<int>(i) && k.accesses[a].store)
          o.reasons.push_back("stores not staged at " + store_refusal(k, static_cast<int>(a)));
    out.push_back(o);
  }
  return out;
}

Choice choice_from_config(const NaiveKernel& k, const Config& c) {
  Choice ch;
  auto find = [&](const std::string& name) -> const Value* {
    for (size_t i = 0; i < c.names->size(); ++i)
      if ((*c.names)[i] == name) return &c.values[i];
    return nullptr;
  };
  auto get = [&](const char* name, int def) {
    const Value* v = find(name);
    return v ? static_cast<int>(v->as_int()) : def;
  };
  auto str = [&](const std::string& name) {
    const Value* v = find(name);
    return v ? v->as_str() : std::string();
  };
  ch.block_x = get("block_size_x", 32);
  ch.block_y = k.dims == 2 ? get("block_size_y", 1) : 1;
  ch.merge_x = get("merge_x", 1);
  ch.merge_y = k.dims == 2 ? get("merge_y", 1) : 1;
  ch.unroll = get("unroll", 1);
  ch.tile_k = get("tile_k", 16);
  ch.pad = get("pad", 0) != 0;
  ch.vector = get("vector", 1);
  ch.split = get("split", 1);
  ch.stages = get("stages", 1);
  for (LaunchBounds b : kLaunchBounds)
    if (str("launch_bounds") == launch_bounds_name(b)) ch.bounds = b;
  for (const ArrayOptions& a : array_options(k)) {
    if (!find("cache_" + a.array)) continue;
    const std::string v = str("cache_" + a.array);
    ch.cache[a.array] = v == "shared"      ? Cache::Shared
                        : v == "readonly"  ? Cache::ReadOnly
                        : v == "registers" ? Cache::Registers
                                           : Cache::Global;
  }
  for (const OutputOptions& o : output_options(k)) {
    if (o.stage && str("write_" + o.array) == "shared") ch.stage_store.insert(o.array);
    if (o.reduce && str("reduce_" + o.array) == "block") ch.block_reduce.insert(o.array);
  }
  return ch;
}

long long shared_bytes(const NaiveKernel& k, const Choice& c) {
  return Emitter(k, c).shared_bytes();
}

long long dynamic_shared_bytes(const NaiveKernel& k, const Choice& c,
                               const std::map<std::string, double>& scalars) {
  return Emitter(k, c).dynamic_bytes(scalars);
}

std::vector<std::string> halo_windows(const NaiveKernel& k) {
  std::vector<std::string> out;
  for (const auto& [param, h] : halo_plans(k)) {
    if (!h.ok) continue;
    std::string s = k.params[static_cast<size_t>(param)].name + ": " +
                    std::to_string(h.sites.size()) + " read(s), offsets up to " +
                    std::to_string(h.span[0]) +
                    (k.dims == 2 ? " x " + std::to_string(h.span[1]) : "");
    for (size_t d = 0; d < 2; ++d)
      for (int id : h.loops[d])
        s += ", loop " + find_loop(k.body, id)->var + " along " + k.index_names[d];
    out.push_back(s);
  }
  return out;
}

namespace {

bool ident_char(char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }

/// Whether `name` occurs as a whole identifier in `text`.
bool mentions(const std::string& text, const std::string& name) {
  for (size_t p = text.find(name); p != std::string::npos; p = text.find(name, p + 1)) {
    const bool start = p == 0 || !ident_char(text[p - 1]);
    const bool end = p + name.size() >= text.size() || !ident_char(text[p + name.size()]);
    if (start && end) return true;
  }
  return false;
}

/// The code of a line, without its `//` comment.
std::string code_of(const std::string& l) {
  const size_t c = l.find("//");
  return c == std::string::npos ? l : l.substr(0, c);
}

/// `const int NAME = EXPR;` alone on a line (a comment may follow), EXPR without calls,
/// assignments or increments: NAME, or "" for any other line.
std::string pure_binding(const std::string& l) {
  static const std::string kConst = "const int ";
  size_t p = l.find_first_not_of(' ');
  if (p == std::string::npos || l.compare(p, kConst.size(), kConst) != 0) return "";
  p += kConst.size();
  size_t e = p;
  while (e < l.size() && ident_char(l[e])) ++e;
  if (e == p || std::isdigit(static_cast<unsigned char>(l[p])) || l.compare(e, 3, " = ") != 0)
    return "";
  const size_t semi = l.find(';', e);
  if (semi == std::string::npos) return "";
  const std::string rest = code_of(l.substr(semi + 1));
  if (rest.find_first_not_of(' ') != std::string::npos) return "";
  const std::string expr = l.substr(e + 3, semi - e - 3);
  for (size_t i = 0; i < expr.size(); ++i) {
    const char ch = expr[i], prev = i ? expr[i - 1] : ' ',
               next = i + 1 < expr.size() ? expr[i + 1] : ' ';
    if ((ch == '+' || ch == '-') && next == ch) return "";
    if (ch == '=' && next != '=' && prev != '=' && prev != '<' && prev != '>' && prev != '!')
      return "";
    if (ch == '(') {  // a call: an identifier just before the parenthesis
      size_t j = i;
      while (j > 0 && expr[j - 1] == ' ') --j;
      if (j > 0 && ident_char(expr[j - 1])) return "";
    }
  }
  return l.substr(p, e - p);
}

}  // namespace

std::string drop_unused_bindings(const std::string& src) {
  std::vector<std::string> lines;
  {
    std::istringstream in(src);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  std::string macros;  // a name a macro mentions is kept: its uses are hidden in the macro
  for (const std::string& l : lines) {
    const size_t first = l.find_first_not_of(' ');
    if (first != std::string::npos && l[first] == '#') macros += l + "\n";
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string name = pure_binding(lines[i]);
      if (name.empty() || mentions(macros, name)) continue;
      bool used = false;
      int depth = 0;
      for (size_t j = i + 1; j < lines.size() && depth >= 0 && !used; ++j) {
        std::string code = code_of(lines[j]);
        for (size_t c = 0; c < code.size(); ++c) {
          if (code[c] == '{') ++depth;
          if (code[c] == '}' && --depth < 0) {
            code.resize(c);  // the enclosing block ends here
            break;
          }
        }
        used = mentions(code, name);
      }
      if (!used) {
        lines.erase(lines.begin() + static_cast<long>(i));
        changed = true;
        --i;
      }
    }
  }
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  if (!src.empty() && src.back() != '\n') out.pop_back();
  return out;
}

std::string emit_variant(const NaiveKernel& k, const Choice& c) {
  const std::string v = drop_unused_bindings(Emitter(k, c).run());
  if (k.before.empty() && k.after.find_first_not_of(" \t\r\n") == std::string::npos) return v;
  // The file's own text around the generated kernel: after gputune's header comment and helpers,
  // so that the file's macros (`#define N 64`) cannot reach into those.
  size_t at = v.find("\nextern \"C\" __global__ void ");
  at = at == std::string::npos ? 0 : at + 1;
  std::string out = v.substr(0, at) + k.before;
  if (!k.before.empty() && k.before.back() != '\n') out += "\n";
  out += v.substr(at);
  if (k.after.find_first_not_of(" \t\r\n") != std::string::npos) out += k.after;
  return out;
}

std::string choice_label(const NaiveKernel& k, const Choice& c) {
  std::string s = "bx" + std::to_string(c.block_x);
  if (k.dims == 2) s += "_by" + std::to_string(c.block_y);
  s += "_mx" + std::to_string(c.merge_x);
  if (k.dims == 2) s += "_my" + std::to_string(c.merge_y);
  if (k.loops) s += "_u" + std::to_string(c.unroll);
  if (c.split > 1) s += "_s" + std::to_string(c.split);
  bool shared = false, halo = false;
  const std::map<int, HaloPlan> halos = halo_plans(k);
  for (const ArrayOptions& a : array_options(k)) {
    if (a.allowed.size() < 2) continue;
    auto it = c.cache.find(a.array);
    Cache ch = it == c.cache.end() ? Cache::Global : it->second;
    const bool window = std::any_of(halos.begin(), halos.end(), [&](const auto& h) {
      return h.second.ok && k.params[static_cast<size_t>(h.first)].name == a.array;
    });
    (window ? halo : shared) |= ch == Cache::Shared;
    s += "_" + a.array + "-" + cache_name(ch);
  }
  bool staged = false;
  for (const OutputOptions& o : output_options(k)) {
    if (o.stage) {
      staged |= c.stage_store.count(o.array) > 0;
      s += "_w" + o.array + "-" + (c.stage_store.count(o.array) ? "shared" : "direct");
    }
    if (o.reduce) s += "_r" + o.array + "-" + (c.block_reduce.count(o.array) ? "block" : "atomic");
  }
  if (shared) s += "_tk" + std::to_string(c.tile_k);
  if (shared && c.stages > 1) s += "_st" + std::to_string(c.stages);
  if (c.vector > 1) s += "_v" + std::to_string(c.vector);
  if ((shared || staged || halo) && c.pad) s += "_pad";
  if (c.bounds != LaunchBounds::Threads) s += "_lb-" + launch_bounds_name(c.bounds);
  return s;
}

namespace {

Parameter int_param(const std::string& name, std::vector<int> values, int def) {
  Parameter p;
  p.name = name;
  p.type = "int";
  for (int v : values) p.values.emplace_back(v);
  p.default_value.emplace(def);
  return p;
}

/// A string parameter whose first value is the default.
Parameter str_param(const std::string& name, const std::vector<std::string>& values) {
  Parameter p;
  p.name = name;
  p.type = "string";
  for (const std::string& v : values) p.values.emplace_back(v);
  p.default_value.emplace(values.front());
  return p;
}

void require_thread_counts(const Job& job) {
  if (job.global_size_type != "OpenCL")
    throw JobError(job.file.string(), "KernelSpecification.GlobalSizeType",
                   "a naive kernel's GlobalSize must count threads (one per output element)",
                   "set \"GlobalSizeType\": \"OpenCL\" and GlobalSize to the output's extent");
}

/// The block-shape dimensions (powers of two, 32..1024 threads) and the block the job launches.
void block_shape(Job& job, int dims, std::vector<Parameter>& params,
                 std::vector<Condition>& conds) {
  if (dims == 2) {
    params.push_back(int_param("block_size_x", {4, 8, 16, 32, 64, 128, 256}, 32));
    params.push_back(int_param("block_size_y", {1, 2, 4, 8, 16, 32}, 4));
    conds.push_back(
        {"32 <= block_size_x * block_size_y <= 1024", {"block_size_x", "block_size_y"}});
  } else {
    params.push_back(int_param("block_size_x", {32, 64, 128, 256, 512, 1024}, 128));
  }
  job.local_size.x = "block_size_x";
  job.local_size.y = dims == 2 ? "block_size_y" : "1";
  job.local_size.z = "1";
}

}  // namespace

void apply_to_job(Job& job, const NaiveKernel& k) {
  require_thread_counts(job);
  std::vector<Parameter> gen;
  std::vector<Condition> conds;
  block_shape(job, k.dims, gen, conds);
  gen.push_back(int_param("merge_x", {1, 2, 4, 8}, 1));
  if (k.dims == 2) gen.push_back(int_param("merge_y", {1, 2, 4, 8}, 1));
  // A loop keeps every merged output's accumulator live across it, and the registers per thread
  // are at most 64K / threads (every launch bound here: `none` only up to 256 threads): at or
  // below the outputs per thread the accumulators alone fill them and the variant spills (mm
  // 64x16 threads merge 8x8: 64 registers), so it is not offered.
  if (k.dims == 2 && k.loops)
    conds.push_back({"merge_x*merge_y < 65536 // (block_size_x*block_size_y)", {}});
  if (k.loops) gen.push_back(int_param("unroll", {1, 2, 4, 8}, 1));
  std::vector<std::string> shared_arrays, pad_arrays, vector_arrays;
  std::string smem;
  bool copyable = true;  // every tile's elements can be copied by cp.async (4 or 8 bytes)
  const std::map<int, HaloPlan> halos = halo_plans(k);
  for (const ArrayOptions& a : array_options(k)) {
    if (a.allowed.size() < 2) continue;
    std::vector<std::string> values;
    for (Cache c : a.allowed) values.push_back(cache_name(c));  // global first
    gen.push_back(str_param("cache_" + a.array, values));
    if (std::find(a.allowed.begin(), a.allowed.end(), Cache::Shared) == a.allowed.end()) continue;
    int prm = 0;
    while (k.params[static_cast<size_t>(prm)].name != a.array) ++prm;
    if (halos.at(prm).ok) {  // a halo window: dynamic shared memory, sized at launch
      pad_arrays.push_back(a.array);
      // Loaded `vector` columns at a time where its rows are contiguous (Emitter::halo_vector).
      if (halos.at(prm).contiguous) vector_arrays.push_back(a.array);
      continue;
    }
    shared_arrays.push_back(a.array);
    // Shared bytes of this array's tiles, as an expression of the parameters.
    std::string bytes;
    for (size_t i = 0; i < k.accesses.size(); ++i) {
      const AccessSite& s = k.accesses[i];
      if (k.params[s.param].name != a.array || s.store) continue;
      TilePlan t = plan_site(k, s);
      if (!t.ok) continue;
      if (t.paddable) pad_arrays.push_back(a.array);
      if (t.contiguous) vector_arrays.push_back(a.array);
      std::string e = std::to_string(t.bytes);
      for (size_t j = 0; j < t.dims.size(); ++j) {
        std::string d = t.dims[j] == "x"   ? "block_size_x*merge_x"
                        : t.dims[j] == "y" ? "block_size_y*merge_y"
                                           : "tile_k";
        if (j + 1 == t.dims.size() && t.dims.size() == 2 && t.paddable)
          d = "(" + d + (t.contiguous ? " + pad*vector)" : " + pad)");  // Emitter::pad_amount
        e += "*" + d;
      }
      bytes += (bytes.empty() ? "" : " + ") + e;
      copyable = copyable && (t.bytes == 4 || t.bytes == 8);
    }
    smem += (smem.empty() ? "" : " + ") +
            ("((" + bytes + ") * stages if cache_" + a.array + " == 'shared' else 0)");
  }
  std::vector<std::string> pad_uses;  // the choices a pitch pad changes
  const bool split = split_loop(k).loop >= 0;
  for (const std::string& a : pad_arrays) pad_uses.push_back("cache_" + a + " == 'shared'");
  for (const OutputOptions& o : output_options(k)) {
    int prm = 0;
    while (k.params[prm].name != o.array) ++prm;
    const std::string eb = std::to_string(element_bytes(k.params[prm].element));
    if (o.stage) {
      gen.push_back(str_param("write_" + o.array, {"direct", "shared"}));
      pad_uses.push_back("write_" + o.array + " == 'shared'");
      // The pad is `vector` elements where the write-back stores vectors (Emitter::store_vector).
      const std::string pad =
          eb == "4" ? "pad * (vector if (block_size_y*merge_y) % vector == 0 else 1)" : "pad";
      smem += (smem.empty() ? "" : " + ") +
              ("((" + eb + "*block_size_x*merge_x*(block_size_y*merge_y + " + pad + ")) if write_" +
               o.array + " == 'shared' else 0)");
    }
    if (o.reduce) {
      gen.push_back(str_param("reduce_" + o.array, {"atomic", "block"}));
      std::vector<const Stmt*> sums;
      reductions(k.body, sums);
      std::set<std::string> addresses;
      std::string rb = "0";
      for (const Stmt* r : sums)
        if (r->target == prm && addresses.insert(literal_text(r->address)).second)
          rb += " + (" + std::to_string(element_bytes(r->element)) + "*(block_size_x" +
                (k.dims == 2 ? "*block_size_y" : "") + (split ? "*split" : "") +
                "//32) if block_size_x" + (k.dims == 2 ? "*block_size_y" : "") +
                (split ? "*split" : "") + " > 32 else 0)";  // Emitter::block_sum
      smem += (smem.empty() ? "" : " + ") +
              ("((" + rb + ") if reduce_" + o.array + " == 'block' else 0)");
    }
  }
  if (!shared_arrays.empty()) {
    gen.push_back(int_param("tile_k", {8, 16, 32}, 16));
    std::string any;
    for (const std::string& a : shared_arrays) any += " or cache_" + a + " == 'shared'";
    conds.push_back({"tile_k == 16" + any, {}});
    // S buffers per tile: the next S-1 strips are copied asynchronously while the threads work
    // on this one (Emitter::pipelined); the shared-memory condition below counts every buffer.
    gen.push_back(copyable ? int_param("stages", {1, 2, 3, 4}, 1) : int_param("stages", {1}, 1));
    if (copyable) conds.push_back({"stages == 1" + any, {}});
    // Register-tiled 2-D blocks with shared tiles use the most registers, and there ptxas's
    // choice under __launch_bounds__(threads) swings (mm 16x16 merge 8x8 tk16, NVRTC: 128
    // registers and 36 bytes of spills with two stages, 171 and none with three): `none` leaves
    // the compiler up to 255 (offered up to 256 threads, where any count launches), `two_blocks`
    // caps them for two blocks per SM (where that is under 128: 2 x threads >= 512), and only
    // where the cap (64K registers per SM, as on every GPU since Kepler, over 2 x threads) is
    // above the outputs per thread: at or below it the accumulators alone fill the registers and
    // every such variant spills (mm 32x16 merge 8x8: 64 registers, 2-3 KB of spills). Only for
    // the heaviest register tiles (32 outputs or more per thread): the rest fit either way.
    if (k.dims == 2) {
      std::vector<std::string> names;
      for (LaunchBounds b : kLaunchBounds) names.push_back(launch_bounds_name(b));
      gen.push_back(str_param("launch_bounds", names));  // "threads" first: the default
      conds.push_back({"launch_bounds == 'threads' or (merge_x*merge_y >= 32 and (" +
                           any.substr(4) +
                           ") and (block_size_x*block_size_y <= 256 if launch_bounds == 'none' "
                           "else 256 <= block_size_x*block_size_y and merge_x*merge_y < 32768 // "
                           "(block_size_x*block_size_y)))",
                       {}});
    }
  }
  // Arrays read straight from global memory at consecutive idx (vector_global_site): with
  // merge_x > 1 their reads take one vector per run of `vector` consecutive outputs.
  // Stores at consecutive idx (vector_store_site) go out one vector per run unless staged.
  std::vector<std::string> runs;    // when each such access is a run (condition clauses)
  std::vector<std::string> stored;  // when a staged store's write-back takes vectors
  for (size_t i = 0; i < k.accesses.size(); ++i) {
    const AccessSite& s = k.accesses[i];
    const std::string& a = k.params[static_cast<size_t>(s.param)].name;
    std::string when;
    if (vector_global_site(k, s)) {
      when = "cache_" + a + " in ('global', 'readonly')";
    } else if (vector_store_site(k, static_cast<int>(i))) {
      const bool stage = staged_store_site(k, a) >= 0;
      when = stage ? "write_" + a + " == 'direct'" : "True";
    }
    if (!when.empty() && std::find(runs.begin(), runs.end(), when) == runs.end())
      runs.push_back(when);
    // A staged store's write-back takes `vector` elements per store (Emitter::store_vector).
    if (s.store && staged_store_site(k, a) == static_cast<int>(i) &&
        element_bytes(k.params[static_cast<size_t>(s.param)].element) == 4)
      stored.push_back("(write_" + a + " == 'shared' and (block_size_y*merge_y) % vector == 0)");
  }
  if (!vector_arrays.empty() || !runs.empty() || !stored.empty()) {
    gen.push_back(int_param("vector", {1, 2, 4}, 1));
    std::string any;
    for (const std::string& a : vector_arrays) any += " or cache_" + a + " == 'shared'";
    for (const std::string& w : stored) any += " or " + w;
    if (!runs.empty()) {  // runs of min(vector, merge_x): vector > merge_x adds nothing
      std::string direct;
      for (const std::string& w : runs) direct += std::string(direct.empty() ? "" : " or ") + w;
      any += " or (vector <= merge_x" + std::string(split ? " and split == 1" : "") + " and (" +
             direct + "))";
    }
    conds.push_back({"vector == 1" + any, {}});
  }
  if (!pad_uses.empty()) {
    gen.push_back(int_param("pad", {0, 1}, 0));
    std::string anyp;
    for (const std::string& u : pad_uses) anyp += " or " + u;
    conds.push_back({"pad == 0" + anyp, {}});
  }
  // Several threads per output share the reduction loop (too few outputs to fill a GPU: mv and
  // tmv at 4096 rows are 128 warps). Not with shared tiles or windows (the tile's cooperative
  // loads would need the split's lanes too; a tile gives a thread's loop its reuse already).
  if (split) {
    const SplitOption sp = split_loop(k);
    gen.push_back(int_param("split", {1, 2, 4, 8, 16, 32}, 1));
    std::string none;
    for (const std::string& a : shared_arrays) none += " and cache_" + a + " != 'shared'";
    for (const std::string& a : pad_arrays)
      if (std::find(shared_arrays.begin(), shared_arrays.end(), a) == shared_arrays.end())
        none += " and cache_" + a + " != 'shared'";
    conds.push_back({"split == 1 or (True" + none + ")", {}});
    conds.push_back({"block_size_x * split <= 1024", {"block_size_x", "split"}});
    if (sp.across_warps) {  // lanes along y, parts added in shared memory (Emitter::combine_split)
      job.local_size.y = "split";
      std::string b;
      for (int id : sp.locals)
        b += (b.empty() ? "" : " + ") +
             std::to_string(element_bytes(strip_const(k.locals[static_cast<size_t>(id)].type))) +
             "*split*block_size_x*merge_x";
      smem += (smem.empty() ? "" : " + ") + ("((" + b + ") if split > 1 else 0)");
    } else {
      job.local_size.x = "block_size_x*split";
    }
  }
  if (!smem.empty()) conds.push_back({smem + " <= 48 * 1024", {}});
  // The job may narrow generated parameters (same name) or list none. A narrowing value must be
  // one the emitter understands: a listed choice for a string dimension (an unknown one would
  // silently mean the default), an integer for a numeric one (at least 1 where every generated
  // value is).
  for (const Parameter& p : job.parameters) {
    auto it =
        std::find_if(gen.begin(), gen.end(), [&](const Parameter& g) { return g.name == p.name; });
    if (it == gen.end()) {
      std::string names;
      for (const Parameter& g : gen) names += (names.empty() ? "" : ", ") + g.name;
      throw JobError(job.file.string(), "ConfigurationSpace.TuningParameters." + p.name,
                     "not a dimension of the generated space of naive kernel '" + k.name + "'",
                     "use the generated names (" + names + ") or drop the parameter");
    }
    const Parameter& g = *it;
    std::string offered;
    for (const Value& v : g.values) offered += (offered.empty() ? "" : ", ") + v.repr();
    const bool positive = std::all_of(g.values.begin(), g.values.end(),
                                      [](const Value& v) { return v.is_int() && v.as_int() >= 1; });
    for (const Value& v : p.values) {
      const bool ok = g.type == "string"
                          ? std::any_of(g.values.begin(), g.values.end(),
                                        [&](const Value& x) { return py_equal(x, v); })
                          : v.is_int() && v.as_int() >= (positive ? 1 : 0);
      if (!ok)
        throw JobError(
            job.file.string(), "ConfigurationSpace.TuningParameters." + p.name,
            "value " + v.repr() + " is not one naive kernel '" + k.name + "' can be generated with",
            g.type == "string" ? "use values among " + offered
                               : std::string("use ") + (positive ? "positive " : "") +
                                     "integers, as generated: " + offered);
    }
  }
  for (Parameter& g : gen)
    for (const Parameter& p : job.parameters)
      if (p.name == g.name) g = p;
  job.parameters = gen;
  job.conditions.insert(job.conditions.begin(), conds.begin(), conds.end());
  Dim3Expr threads = job.global_size;
  job.naive_threads = threads;
  job.global_size.x = "((" + threads.x + ") + block_size_x*merge_x - 1) // (block_size_x*merge_x)";
  job.global_size.y =
      k.dims == 2 ? "((" + threads.y + ") + block_size_y*merge_y - 1) // (block_size_y*merge_y)"
                  : "(" + threads.y + ")";
  job.global_size.z = "(" + threads.z + ")";
  job.global_size_type = "CUDA";
}

SplitOption split_loop(const NaiveKernel& k) {
  SplitOption out;
  if (k.dims != 1) {
    out.reason = "a 2-D kernel has an output per (idx, idy): enough threads without splitting";
    return out;
  }
  for (size_t i = k.pre_guard; i < k.body.size(); ++i) {
    const Stmt& l = k.body[i];
    if (l.kind != Stmt::Loop) continue;
    std::vector<int> acc;
    std::string why;
    for (const Stmt& s : l.body) {
      if (s.kind == Stmt::KeepDecl) continue;
      // `L += E;` with L a replicated accumulator that E does not read.
      const bool add = s.kind == Stmt::Rep && s.text.size() >= 2 &&
                       s.text[0].kind == Piece::Local && s.text[1].kind == Piece::Lit &&
                       s.text[1].text.find_first_not_of(' ') != std::string::npos &&
                       s.text[1].text.compare(s.text[1].text.find_first_not_of(' '), 2, "+=") == 0;
      if (!add) {
        why = "loop " + l.var + ": its body does more than add to accumulators (`sum += ...;`)";
        break;
      }
      const int id = s.text[0].id;
      const Local& loc = k.locals[static_cast<size_t>(id)];
      const std::string t = strip_const(loc.type);
      if (!loc.replicated || (t != "float" && t != "double" && t != "int")) {
        why = "loop " + l.var + ": accumulator " + loc.name + " is not a per-thread float, " +
              "double or int";
        break;
      }
      for (size_t p = 1; p < s.text.size() && why.empty(); ++p)
        if (s.text[p].kind == Piece::Local && s.text[p].id == id)
          why = "loop " + l.var + ": the added value reads the accumulator " + loc.name;
      if (!why.empty()) break;
      if (std::find(acc.begin(), acc.end(), id) == acc.end()) acc.push_back(id);
    }
    if (why.empty() && acc.empty()) why = "loop " + l.var + ": nothing to add up";
    if (why.empty()) {
      out.loop = l.loop;
      out.locals = acc;
      for (const AccessSite& a : k.accesses)
        if (a.loop == l.loop && !a.store && a.unit.count("x") && a.unit.at("x") == 1)
          out.across_warps = true;
      return out;
    }
    out.reason = why;
  }
  if (out.reason.empty()) out.reason = "no loop in the work";
  return out;
}

std::array<int, 2> launch_block(const NaiveKernel& k, const Choice& c) {
  std::array<int, 2> b{c.block_x, k.dims == 2 ? c.block_y : 1};
  if (c.split > 1) b[split_loop(k).across_warps ? 1 : 0] *= c.split;
  return b;
}

void apply_block_shape_only(Job& job, int dims) {
  require_thread_counts(job);
  std::vector<Parameter> params;
  std::vector<Condition> conds;
  block_shape(job, dims, params, conds);
  if (job.parameters.empty()) {
    job.parameters = params;
    job.conditions.insert(job.conditions.begin(), conds.begin(), conds.end());
  }
}

}  // namespace gputune::naive
