// Planning of a naive kernel's halo windows (declared in internal.h; the rest of the planning is
// plan.cpp's): which input arrays a block can stage as a window in dynamic shared memory, around
// the block's outputs and along the loops every thread runs alike, its planes and offsets, and
// why an array is refused one. Must not: write code (emit_halo.cpp) or build the space.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "variants/naive/internal.h"

namespace gputune::naive {

namespace {

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

}  // namespace

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

namespace {

// The constant part of read s: a small step of idx and idy away from the first read of its plane.
// Every read steps alike along idx, idy and the loops, so what differs is a constant of the
// launch; where it is no small step, the read starts a plane (a window) of its own.
std::optional<std::array<long long, 2>> step_from(const NaiveKernel& k,
                                                  const std::array<std::vector<long long>, 2>& step,
                                                  const AccessSite& s, const AccessSite& ref) {
  std::vector<long long> diff(kSymPoints);
  for (int p = 0; p < kSymPoints; ++p)
    diff[static_cast<size_t>(p)] =
        s.sym.at("1")[static_cast<size_t>(p)] - ref.sym.at("1")[static_cast<size_t>(p)];
  constexpr long long kMax = 32;
  std::optional<std::array<long long, 2>> best;
  for (long long dy = k.dims == 2 ? -kMax : 0; dy <= (k.dims == 2 ? kMax : 0); ++dy)
    for (long long dx = -kMax; dx <= kMax; ++dx) {
      bool eq = true;
      for (size_t p = 0; p < static_cast<size_t>(kSymPoints) && eq; ++p)
        eq = diff[p] == dx * step[0][p] + (k.dims == 2 ? dy * step[1][p] : 0);
      if (eq &&
          (!best || std::abs(dx) + std::abs(dy) < std::abs((*best)[0]) + std::abs((*best)[1])))
        best = std::array<long long, 2>{dx, dy};
    }
  return best;
}

/// Why the kernel's bounds check keeps a window from being staged, if it does.
std::optional<std::string> guard_problem(const NaiveKernel& k) {
  for (size_t g = 0; g < k.guard.size(); ++g) {
    const auto& gd = k.guard_depends[g];
    for (const std::string& d : gd)
      if (d.rfind("local:", 0) == 0 || d == "thread" || d == "access" || d == "call")
        return "the bounds check uses a local variable";
    if ((gd.count("x") || gd.count("y")) && k.guard_bounds[g].dim < 0)
      return "the bounds check (" + literal_text(k.guard[g]) +
             ") is not an interval on one index (idx < E, idy >= E, ...)";
  }
  return std::nullopt;
}

/// One window per plane of h's reads (plane_of[n] and rel[n]: read n's plane and its offset in
/// steps from the plane's first read), each from its own reads' offsets; a plane read once per
/// thread, among several, is no window: its read goes to h.unwindowed (the read-only path).
std::vector<HaloPlan> windows_of(HaloPlan& h, size_t planes, const std::vector<size_t>& plane_of,
                                 const std::vector<std::array<long long, 2>>& rel) {
  const bool loops = !h.loops[0].empty() || !h.loops[1].empty();
  std::vector<HaloPlan> windows;
  for (size_t plane = 0; plane < planes; ++plane) {
    HaloPlan w;
    w.param = h.param;
    w.loops = h.loops;
    w.contiguous = h.contiguous;
    std::vector<size_t> reads;
    for (size_t n = 0; n < h.sites.size(); ++n)
      if (plane_of[n] == plane) reads.push_back(n);
    if (planes > 1 && reads.size() == 1 && !loops) {
      h.unwindowed.push_back(h.sites[reads[0]]);  // read once per thread: the read-only path
      continue;
    }
    std::array<long long, 2> lo{0, 0};
    for (size_t n : reads)
      for (size_t d = 0; d < 2; ++d) lo[d] = std::min(lo[d], rel[n][d]);
    for (size_t n : reads) {
      w.sites.push_back(h.sites[n]);
      w.off.push_back({rel[n][0] - lo[0], rel[n][1] - lo[1]});
      for (size_t d = 0; d < 2; ++d) w.span[d] = std::max(w.span[d], rel[n][d] - lo[d]);
    }
    w.plane = static_cast<int>(windows.size());
    w.ok = true;
    windows.push_back(std::move(w));
  }
  return windows;
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
  std::vector<size_t> plane_of, plane_ref;  // per read: its plane; per plane: its first read
  for (size_t n = 0; n < h.sites.size(); ++n) {
    const AccessSite& s = k.accesses[static_cast<size_t>(h.sites[n])];
    const std::string at = "line " + std::to_string(s.line) + ": ";
    if (s.conditional)
      return no(at + "read under a condition: the window would load what the kernel may skip");
    if (s.ranged)
      return no(at + "read in a triangular loop: the window would load steps the thread skips");
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
    std::optional<std::array<long long, 2>> off;
    size_t plane = 0;
    for (; plane < plane_ref.size() && !off; ++plane)
      off = step_from(k, step, s, k.accesses[static_cast<size_t>(h.sites[plane_ref[plane]])]);
    if (off) {
      --plane;
    } else {
      constexpr size_t kMaxPlanes = 8;
      if (plane_ref.size() == kMaxPlanes)
        return no(at + "its offset from the other reads is no small step of the indices, and " +
                  std::to_string(kMaxPlanes) + " windows (planes) are the most per array");
      plane_ref.push_back(n);
      off = std::array<long long, 2>{0, 0};
    }
    plane_of.push_back(plane);
    rel.push_back(*off);
  }
  if (h.sites.size() == 1 && h.loops[0].empty() && h.loops[1].empty())
    return no("line " + std::to_string(r.line) + ": read once per thread: no reuse to stage");
  if (auto why = guard_problem(k)) return no(*why);
  // One window per plane, each from its own reads' offsets.
  std::vector<HaloPlan> windows = windows_of(h, plane_ref.size(), plane_of, rel);
  if (windows.empty())
    return no("line " + std::to_string(r.line) +
              ": every plane of the reads is read once per thread: no reuse to stage");
  if (windows.size() == 1 && h.unwindowed.empty()) {
    HaloPlan one = std::move(windows[0]);
    one.reason = h.reason;
    return one;
  }
  h.sites.clear();
  h.planes = std::move(windows);
  h.ok = true;
  return h;
}

}  // namespace

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

}  // namespace gputune::naive
