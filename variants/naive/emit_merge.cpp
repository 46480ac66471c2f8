// Emitter: thread merge (declared in internal.h). Loads that a thread's merged outputs share,
// kept once in registers; work that may run for every merged output without the bounds check;
// arrays kept in registers for the whole work (loaded before it, stored after); the partial sums
// of the split's lanes added up.
// Must not: emit the vector runs of merged outputs (emit_runs.cpp).
#include <algorithm>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "variants/naive/internal.h"

namespace gputune::naive {

/// Thread merge keeps shared loads once: a read that the merged outputs of one thread share
/// (its subscript ignores a merged dimension: mm's a[idy*n+k] is the same for every merged
/// column) is loaded into a register before the outputs are computed, once per distinct value,
/// from wherever the array's path reads it (global, read-only, a shared tile), and only when
/// one of the outputs that use it passes the bounds check. The compiler cannot do this itself:
/// each output's read sits under that output's own bounds check.
void Emitter::hoist_shared_loads(std::ostringstream& o, const std::vector<const Stmt*>& group,
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
    if (a.store || prm.written || a.conditional || a.ranged || loop_hoisted_.count(site) ||
        reg_site_.count(site))
      continue;
    bool plain = true;
    for (const std::string& d : a.depends)
      plain = plain && (d == "x" || d == "y" || d.rfind("loop:", 0) == 0);
    if (!plain) continue;  // locals, loaded data, calls: left where they are
    if (auto t = site_tile_.find(site);
        yrun_ > 1 && t != site_tile_.end() && tiles_[static_cast<size_t>(t->second)].transposed &&
        tiles_[static_cast<size_t>(t->second)].plan.dims[0] == "y") {
      hoist_runs(o, site, 1);
      continue;
    }
    if (auto t = site_tile_.find(site);
        xrun_ > 1 && t != site_tile_.end() && vector_tile(tiles_[static_cast<size_t>(t->second)])) {
      hoist_runs(o, site, 0);
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
      line(o, (ok.empty() ? "" : "if (" + ok + ") ") + name + index + " = " + render_access(site) +
                  ";");
    });
    hoisted_[site] = name + index;
  }
}

/// Emits `body` once per merged column (x) and/or row (y) of this thread, with idx/idy (the
/// kernel's names) set for it; along a dimension not given, idx/idy are the first output's.
template <class F>
void Emitter::per_register(std::ostringstream& o, bool x, bool y, F body) {
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
  if (k_.dims == 2) line(o, "const int " + k_.index_names[1] + " = " + y_index(y) + ";");
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
bool Emitter::unguarded(const std::vector<const Stmt*>& group) {
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

bool Emitter::float_element(int site) const {
  const Param& prm = k_.params[static_cast<size_t>(k_.accesses[static_cast<size_t>(site)].param)];
  const std::string t = strip_const(prm.element);
  return t == "float" || t == "double";
}

/// The flag that says some output using a register passes the bounds check, for a register per
/// merged column (x), row (y), both or neither ("" when the kernel has no bounds check).
std::string Emitter::ok_flag(bool x, bool y) const {
  if (k_.guard.empty()) return "";
  if (!merged()) return "gt_ok";
  const bool mx = c_.merge_x > 1, my = k_.dims == 2 && c_.merge_y > 1;
  if (x == mx && y == my) return "gt_ok" + suffix(c_, k_.dims);
  if (y && mx) return "gt_ok_row[gt_my]";
  if (x && my) return "gt_ok_col[gt_mx]";
  return "gt_ok_any";
}

/// An access of `site` straight from memory, on its array's path (the register's load/store).
std::string Emitter::memory_access(int site, bool load) const {
  const Piece* p = find_access(site);
  const std::string at = p->text + "[" + render(p->index) + "]";
  return load && read_only_path(k_.accesses[static_cast<size_t>(site)].param) ? "__ldg(&" + at + ")"
                                                                              : at;
}

/// Loads the registers of arrays kept in registers, once per output before the work.
void Emitter::load_registers(std::ostringstream& o) {
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
void Emitter::store_registers(std::ostringstream& o) {
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

/// The index along dimension d (0: x, 1: y) of merged output gt_mx / gt_my (`merged`), or of
/// the thread's first: strided by the block (coalesced scalar accesses), or in runs of xrun_
/// (yrun_) consecutive outputs per thread, the runs strided by the block.
std::string Emitter::merged_index(int d, bool merged) const {
  const std::string first = d == 0 ? "gt_x0" : "gt_y0", m = d == 0 ? "gt_mx" : "gt_my";
  if (!merged) return first;
  const int run = d == 0 ? xrun_ : yrun_, block = d == 0 ? c_.block_x : c_.block_y;
  if (run == 1) return first + " + " + m + " * " + std::to_string(block);
  const std::string r = std::to_string(run);
  return first + " + " + m + " / " + r + " * " + std::to_string(block * run) + " + " + m + " % " +
         r;
}

/// After the split loop: the partial sums of an output's `split` threads (consecutive lanes
/// of one warp) meet in a butterfly of warp shuffles, every lane ending with the total; every
/// thread takes part (no bounds check: a shuffle needs the whole warp), and from here on only
/// lane 0 of each output runs the kernel's statements.
void Emitter::combine_split(std::ostringstream& o) {
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

}  // namespace gputune::naive
