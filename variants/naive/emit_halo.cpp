// Emitter: halo windows (declared in internal.h, planned by plan.cpp's halo_plans). Each window
// is loaded once per block into dynamic shared memory before the work: the block's valid outputs
// widened by the reads' offsets and the loops' reach, `vector` columns per load where aligned.
// With runs of merged outputs, a read that slides along a loop is kept in a register window.
// Must not: decide which arrays get a window, or size it for the launch (emitter.cpp).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "variants/naive/internal.h"

namespace gputune::naive {

bool Emitter::halo_of(int param) const {
  return std::any_of(halos_.begin(), halos_.end(),
                     [&](const HaloPlan& h) { return h.param == param; });
}

std::string Emitter::halo_name(const HaloPlan& h, const std::string& what) const {
  return "gt_h" + what + "_" + k_.params[static_cast<size_t>(h.param)].name +
         (h.plane ? "_" + std::to_string(h.plane) : std::string());
}

/// How far the loops along axis d have advanced a read: "fx" or "(fx - (lo))", summed.
std::string Emitter::loop_advance(const HaloPlan& h, size_t d) const {
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
int Emitter::halo_vector(const HaloPlan& h) const { return h.contiguous ? c_.vector : 1; }

/// A read of site n of a halo array, from its window.
std::string Emitter::halo_read(const HaloPlan& h, size_t n) const {
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
void Emitter::stage_halos(std::ostringstream& o) {
  const std::string elem = k_.params[static_cast<size_t>(halos_[0].param)].element;
  line(o, "extern __shared__ " + elem + " gt_halo[];  // halo windows, sized at launch");
  const std::string always = halo_valid_outputs(o);
  std::string offset = "0";
  for (const HaloPlan& h : halos_) offset = stage_halo(o, h, always, offset);
  line(o, "__syncthreads();");
}

/// Declares the block's outputs that pass the bounds check, columns [gt_vx0, gt_vx1] (and rows
/// [gt_vy0, gt_vy1]): the block clipped to the check's interval bounds. Returns the conjuncts of
/// the check on neither index (" && (c)" each): they hold for the whole block or for none of it.
std::string Emitter::halo_valid_outputs(std::ostringstream& o) const {
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
      const std::string e = bound_text(b, "(");
      line(o,
           b.upper ? v + "1 = min(" + v + "1, " + e + ");" : v + "0 = max(" + v + "0, " + e + ");");
    }
  }
  for (size_t g = 0; g < k_.guard.size(); ++g)
    if (!k_.guard_depends[g].count("x") && !k_.guard_depends[g].count("y"))
      always += " && (" + render(k_.guard[g]) + ")";
  return always;
}

/// One halo window, `offset` elements into gt_halo: its loops' reach, its columns, pitch and
/// rows, whether the block reads it at all (`always`: the block-wide part of the bounds check),
/// then its load. Returns the offset of the next window.
std::string Emitter::stage_halo(std::ostringstream& o, const HaloPlan& h, const std::string& always,
                                const std::string& offset) {
  const Param& prm = k_.params[static_cast<size_t>(h.param)];
  const int ref = h.sites[0];
  const std::string a = prm.name, hw = halo_name(h, "w"), hp = halo_name(h, "p"),
                    hh = halo_name(h, "h"), ho = halo_name(h, "o"), run = halo_name(h, "run");
  line(o, "// halo window of " + a + "[" + index_text(ref) +
              "]: " + std::to_string(h.sites.size()) +
              " read(s), the block's outputs widened by their offsets" +
              (h.loops[0].empty() && h.loops[1].empty() ? "" : " and loops") +
              (c_.pad ? ", padded pitch" : ""));
  std::string trips;
  const std::array<std::string, 2> reach = halo_reach(o, h, trips);
  auto widen = [&](long long base, size_t d) {
    std::string e = std::to_string(base + h.span[d]);
    return reach[d].empty() ? e : e + " + " + reach[d];
  };
  line(o, "const int " + hw + " = " + widen(tx_, 0) + ";  // columns");
  line(o, "const int " + hp + " = " + hw + (c_.pad ? " + 1" : "") + ";  // pitch");
  line(o, "const int " + hh + " = " + (k_.dims == 2 ? widen(ty_, 1) : std::string("1")) +
              ";  // rows");
  line(o, "const int " + ho + " = " + offset + ";  // first element in gt_halo");
  line(o, "const bool " + run + " = " + trips + "gt_vx0 <= gt_vx1" +
              (k_.dims == 2 ? " && gt_vy0 <= gt_vy1" : "") + always + ";");
  load_halo(o, h, halo_needed(h, reach, run));
  return ho + " + " + hh + " * " + hp;
}

/// How far the loops move a read of window h along each axis: the sum of their trip counts - 1,
/// declared along the axes some loop advances ("" along the others). Appends "trip > 0 && " to
/// `trips` once per distinct trip count (a loop that never runs reads nothing).
std::array<std::string, 2> Emitter::halo_reach(std::ostringstream& o, const HaloPlan& h,
                                               std::string& trips) const {
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
    line(o, "const int " + reach[d] + " = " + sum + ";  // loop reach along " + k_.index_names[d]);
  }
  return reach;
}

/// Whether element (gt_r, gt_c) of window h is needed: the window is used (`run`) and some valid
/// thread reads it through some read: thread x reads column c through read n for x in
/// [bx + c - off_n - loops, bx + c - off_n].
std::string Emitter::halo_needed(const HaloPlan& h, const std::array<std::string, 2>& reach,
                                 const std::string& run) const {
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
      t += std::string(t.empty() ? "" : " && ") + lo + " <= " + v + "1 && " + hi + " >= " + v + "0";
    }
    need.push_back("(" + t + ")");
  }
  std::string needed = run + " && (";  // some valid thread reads (gt_r, gt_c)
  for (size_t n = 0; n < need.size(); ++n) needed += (n ? " || " : "") + need[n];
  needed += ")";
  return needed;
}

/// The kernel's indices and loop counters at column gt_c (plus `shift`) of row gt_r of window h,
/// for its reference read.
void Emitter::halo_bind(std::ostringstream& o, const HaloPlan& h, const std::string& shift) const {
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
}

/// The cooperative load of window h by the block's threads: each element that is `needed`, zero
/// elsewhere; `vector` columns per load where the rows are contiguous (halo_vector).
void Emitter::load_halo(std::ostringstream& o, const HaloPlan& h, const std::string& needed) {
  const std::string elem = k_.params[static_cast<size_t>(halos_[0].param)].element;
  const std::string nthreads = std::to_string(c_.block_x * c_.block_y);
  const int ref = h.sites[0];
  const std::string a = k_.params[static_cast<size_t>(h.param)].name, hw = halo_name(h, "w"),
                    hp = halo_name(h, "p"), hh = halo_name(h, "h"), ho = halo_name(h, "o");
  const std::string slot = "gt_halo[" + ho + " + gt_r * " + hp + " + gt_c";
  const std::string load = "__ldg(&" + a + "[" + render_index(ref) + "])";
  const int v = halo_vector(h);
  if (v == 1) {
    line(o, "for (int gt_e = gt_tid; gt_e < " + hh + " * " + hw + "; gt_e += " + nthreads + ") {");
    ++ind_;
    line(o, "const int gt_r = gt_e / " + hw + ", gt_c = gt_e % " + hw + ";");
    line(o, "const bool gt_need = " + needed + ";");
    line(o, elem + " gt_v = " + elem + "(0);");
    line(o, "if (gt_need) {");
    ++ind_;
    halo_bind(o, h, "");
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
    line(o, "const int " + groups + " = (" + hw + " + " + std::to_string(2 * v - 2) + ") / " + vs +
                ";  // groups per row");
    line(o,
         "for (int gt_e = gt_tid; gt_e < " + hh + " * " + groups + "; gt_e += " + nthreads + ") {");
    ++ind_;
    line(o, "const int gt_r = gt_e / " + groups + ";");
    line(o, "int gt_c0;");
    line(o, "{");
    ++ind_;
    line(o, "const int gt_c = 0;");
    halo_bind(o, h, "");
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
        o, v, cond,
        [&](const std::string& shift) { halo_bind(o, h, shift.empty() ? " + 0" : shift); },
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

/// Reads of a halo window that slide along loop `s`: with merged outputs in runs of
/// consecutive x, output j of a run reads at step k + 1 the element output j + 1 read at step
/// k (conv1d's in[i + k], conv2d's in[(y + fy) * W + x + fx] along fx). Such a read, in the
/// loop's own body (not a nested loop) and advanced along x by this loop alone, is kept in a
/// register window per run: xrun - 1 elements loaded before the loop, one per step, shifted
/// after it, so each step reads shared memory once per run instead of once per output.
std::vector<int> Emitter::sliding_sites(const Stmt& s) const {
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

/// One part of a sliding window (sliding_sites): its declaration and first xrun - 1 elements
/// (Before the loop), the element the run's last output reads at this step (Newest, at the top
/// of the body), and the shift by one (Shift, at its end).
void Emitter::slide_window(std::ostringstream& o, const Stmt& s, int site, Slide part) {
  const auto& [hn, n_bound] = halo_site_.at(site);
  const auto n = n_bound;  // clang 14 (the fuzz build) cannot capture a structured binding
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

}  // namespace gputune::naive
