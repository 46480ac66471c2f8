// Planning of a naive kernel's variants (declared in internal.h): the decisions taken before any
// code is written. Which reads a shared tile or a halo window can stage, which stores a tile can
// coalesce, which arrays registers can hold, which accesses take vectors, which loop threads can
// split, and the options each array offers (array_options, output_options) with the reason for
// each one refused. Must not: write code (the Emitter's files) or build the space (space.cpp).
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "variants/naive/internal.h"

namespace gputune::naive {

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

std::string strip_const(std::string t) {
  if (t.rfind("const ", 0) == 0) t = t.substr(6);
  return t;
}

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
  if (s.ranged) {
    // A tile of a triangular loop loads, per element, what the output it belongs to reads
    // (the range check), or what the block's first (last) valid output reads: the bounds
    // check must say exactly which outputs are valid, and the tile's loop must be the
    // triangular one (an inner loop's tile would load steps of the outer one the thread skips).
    const Stmt* l = find_loop(k.body, s.loop);
    if (s.ranged > 1 || !l || (l->lo_dim < 0 && l->hi_dim < 0))
      return no(
          "inside a triangular loop, in an inner loop: its tile would load steps the "
          "thread skips");
    for (size_t g = 0; g < k.guard.size(); ++g)
      if ((k.guard_depends[g].count("x") || k.guard_depends[g].count("y")) &&
          k.guard_bounds[g].dim < 0)
        return no("in a triangular loop, under a bounds check (" + literal_text(k.guard[g]) +
                  ") that is not an interval on one index: the block's valid outputs are not "
                  "known");
  }
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

namespace {

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

}  // namespace

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

int transposable_dim(const NaiveKernel& k, const AccessSite& s) {
  if (k.dims != 2 || s.store || s.ranged) return -1;
  const TilePlan t = plan_site(k, s);
  if (!t.ok || !t.contiguous || t.bytes != 4 || t.dims.size() != 2 || t.dims[1] != "loop")
    return -1;
  return t.dims[0] == "x" ? 0 : t.dims[0] == "y" ? 1 : -1;
}

/// "the read at line 7", "the 2 reads at line 7", "the reads at lines 7, 9": sites `sites`.
std::string reads_at(const NaiveKernel& k, const std::vector<int>& sites) {
  std::vector<int> lines;
  for (int s : sites) lines.push_back(k.accesses[static_cast<size_t>(s)].line);
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  if (sites.size() == 1) return "the read at line " + std::to_string(lines[0]);
  std::string out = lines.size() == 1 ? "the " + std::to_string(sites.size()) + " reads at line "
                                      : std::string("the reads at lines ");
  for (size_t i = 0; i < lines.size(); ++i) out += (i ? ", " : "") + std::to_string(lines[i]);
  return out;
}

/// Why a read of an array the kernel writes cannot go on the read-only path ("" when it can):
/// the read must be shown, at launch, never to read what the kernel writes. The naive kernel is
/// race-free (one thread per output: an element one output writes is read by no other), so
/// the read's element is written by no thread when, for each write of the array, the
/// difference D of the two subscripts at the same output is never zero for a valid output. D
/// must be affine in at most one index (`A[i * n + k]` against `A[i * n + j]`: D = k - j), so
/// that D = 0 has at most one solution, which the variant computes at launch from D's value and
/// step at index 0 and 1, and checks against the bounds check's interval on that index (j > k:
/// j = k is outside). Where the check fails at launch the read stays a plain load.
std::string apart_refusal(const NaiveKernel& k, int site) {
  const AccessSite& r = k.accesses[static_cast<size_t>(site)];
  const std::string at = "line " + std::to_string(r.line) + ": ";
  if (r.store) return at + "a store";
  // "" when the subscript is affine in the thread's indices and kernel scalars alone (the
  // check runs before the work, where no local or loop counter exists yet).
  auto plain = [&](const AccessSite& a) -> std::string {
    for (const std::string& d : a.depends) {
      if (d.rfind("local:", 0) == 0)
        return "the subscript uses the local '" +
               k.locals[static_cast<size_t>(std::stoi(d.substr(6)))].name +
               "' (write the scalars it stands for in the subscript)";
      if (d.rfind("loop:", 0) == 0) return "the subscript moves with a loop";
      if (d != "x" && d != "y") return "the subscript reads memory or calls a function";
    }
    return a.sym.empty() ? "the subscript is not affine in the thread's indices" : "";
  };
  if (std::string why = plain(r); !why.empty()) return at + why;
  bool any = false;
  for (const AccessSite& w : k.accesses) {
    if (w.param != r.param || !w.store) continue;
    any = true;
    if (std::string why = plain(w); !why.empty())
      return at + "the write at line " + std::to_string(w.line) + ": " + why;
    int moving = 0;
    for (const char* d : {"x", "y"}) {
      const std::vector<long long> zero(kSymPoints, 0);
      auto coef = [&](const AccessSite& a) {
        auto it = a.sym.find(d);
        return it == a.sym.end() ? zero : it->second;
      };
      moving += coef(r) != coef(w);
    }
    if (moving > 1)
      return at + "its distance from the write at line " + std::to_string(w.line) +
             " moves with both indices";
    bool same = true;  // the same element at every output: read and written
    for (const auto& [name, c] : r.sym) same = same && w.sym.count(name) && w.sym.at(name) == c;
    for (const auto& [name, c] : w.sym)
      same = same && (r.sym.count(name) ||
                      std::all_of(c.begin(), c.end(), [](long long v) { return v == 0; }));
    if (same) return at + "the element the output writes (line " + std::to_string(w.line) + ")";
  }
  if (!any) return at + "the array is not written";
  return "";
}

/// Whether a read can come `vector` elements at a time straight from global memory once a
/// thread's merged outputs come in runs of consecutive idx: consecutive idx read consecutive
/// 4-byte elements (unit idx coefficient), the subscript affine in idx, idy and loop counters,
/// outside conditions, on a 1-D pointer the kernel never writes. Alignment is checked at run time.
bool vector_global_site(const NaiveKernel& k, const AccessSite& s) {
  const Param& prm = k.params[static_cast<size_t>(s.param)];
  if (s.store || prm.written || s.conditional || s.ranged || prm.row > 0) return false;
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

/// Every Reduce statement of the body, in order.
void reductions(const std::vector<Stmt>& list, std::vector<const Stmt*>& out) {
  for (const Stmt& s : list) {
    if (s.kind == Stmt::Reduce) out.push_back(&s);
    reductions(s.body, out);
  }
}

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
      // Reads the bounds check keeps off what the kernel writes: the read-only path, checked
      // at launch (apart_refusal).
      std::vector<int> apart;
      std::vector<std::string> not_apart;
      for (size_t s = 0; s < k.accesses.size(); ++s) {
        if (k.accesses[s].param != static_cast<int>(i) || k.accesses[s].store) continue;
        const std::string why = apart_refusal(k, static_cast<int>(s));
        if (why.empty())
          apart.push_back(static_cast<int>(s));
        else
          not_apart.push_back(why);
      }
      if (!apart.empty()) {
        a.allowed.push_back(Cache::ReadOnly);
        a.reasons.push_back("readonly: " + reads_at(k, apart) +
                            " at launches whose bounds check keeps the kernel's writes elsewhere "
                            "(checked at launch; a plain load where it does not)");
        for (const std::string& why : not_apart) a.reasons.push_back("not read-only at " + why);
      } else {
        a.reasons.push_back("written by the kernel: never on the read-only path or staged");
        // Why no read is shown apart, unless the only read is of the element written.
        for (const std::string& why : not_apart)
          if (why.find(": the element the output writes") == std::string::npos)
            a.reasons.push_back("not read-only at " + why);
      }
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

std::vector<std::string> halo_windows(const NaiveKernel& k) {
  std::vector<std::string> out;
  for (const auto& [param, plan] : halo_plans(k)) {
    if (!plan.ok) continue;
    const std::vector<HaloPlan> one{plan};
    const std::vector<HaloPlan>& windows = plan.planes.empty() ? one : plan.planes;
    for (const HaloPlan& h : windows) {
      std::string s =
          k.params[static_cast<size_t>(param)].name + ": " +
          (plan.planes.empty()
               ? std::string()
               : "plane " + std::to_string(h.plane + 1) + " of " +
                     std::to_string(plan.planes.size() + plan.unwindowed.size()) + ", ") +
          std::to_string(h.sites.size()) + " read(s), offsets up to " + std::to_string(h.span[0]) +
          (k.dims == 2 ? " x " + std::to_string(h.span[1]) : "");
      for (size_t d = 0; d < 2; ++d)
        for (int id : h.loops[d])
          s += ", loop " + find_loop(k.body, id)->var + " along " + k.index_names[d];
      if (&h == &windows.back() && !plan.unwindowed.empty()) {
        s += "; " + std::to_string(plan.unwindowed.size()) +
             " plane(s) read once per thread, on the read-only path (line";
        for (int site : plan.unwindowed)
          s += (site == plan.unwindowed[0] ? " " : ", ") +
               std::to_string(k.accesses[static_cast<size_t>(site)].line);
        s += ")";
      }
      out.push_back(s);
    }
  }
  return out;
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

}  // namespace gputune::naive
