// The Emitter's rendering of the naive kernel's text for a variant (declared in internal.h): the
// bounds check, each access as the variant makes it (global, read-only path, shared tile, halo
// window, registers), the check that reads stay apart from writes, and the kernel's lists of
// statements, each with its own transformation where one applies (see internal.h).
// Must not: decide what a kernel allows (plan.cpp) or know about jobs and spaces (space.cpp).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "variants/expr.h"
#include "variants/naive/internal.h"

namespace gputune::naive {

/// The whole bounds check, `(c1) && (c2)`, for the idx/idy in scope ("" when there is none).
std::string Emitter::guard_text() const {
  std::string cond;
  for (const Text& g : k_.guard) cond += (cond.empty() ? "(" : " && (") + render(g) + ")";
  return cond;
}

Cache Emitter::cache_of(int param) const {
  auto it = c_.cache.find(k_.params[param].name);
  return it == c_.cache.end() ? Cache::Global : it->second;
}

bool Emitter::read_only_path(int param) const {
  Cache c = cache_of(param);
  return (c == Cache::ReadOnly || c == Cache::Shared || c == Cache::Registers) &&
         !k_.params[param].written;
}

bool Emitter::merged() const { return c_.merge_x * c_.merge_y > 1; }

/// The Access piece of a site, wherever it sits in the body.
const Piece* Emitter::find_access(int site) const { return access_in(k_.body, site); }

/// The subscript of a site as written (tells tiles apart, names them in comments).
std::string Emitter::index_text(int site) const {
  const Piece* p = find_access(site);
  return p ? literal_text(p->index) : std::string();
}

/// A read of one site as this variant renders it (tile, window, __ldg or plain).
std::string Emitter::render_access(int site) const {
  const Piece* p = find_access(site);
  return p ? render(Text{*p}) : std::string();
}

/// The subscript of a site as this variant renders it.
std::string Emitter::render_index(int site) const {
  const Piece* p = find_access(site);
  return p ? render(p->index) : std::string();
}

void Emitter::line(std::ostringstream& o, const std::string& s) const {
  o << std::string(static_cast<size_t>(ind_) * 2, ' ') << s << "\n";
}

/// The text of a hole-split fragment for this variant.
std::string Emitter::render(const Text& t) const {
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
          for (size_t j : storage_order(t)) {
            const std::string& d = t.plan.dims[j];
            if (d == "x")
              s += "[" + k_.index_names[0] + " - gt_bx]";
            else if (d == "y")
              s += "[" + k_.index_names[1] + " - gt_by]";
            else
              s += "[" + loop_var(t.plan.loop) + " - gt_" + loop_var(t.plan.loop) + "_base]";
          }
        } else if (apart_.count(p.id)) {
          const std::string at = p.text + "[" + render(p.index) + "]";
          s += "(gt_apart" + std::to_string(p.id) + " ? __ldg(&" + at + ") : " + at + ")";
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

/// A bound of the bounds check as the variant's text: `open` + E + ")" and its adjustment
/// (`i > k`: the inclusive lower bound `(k) + 1`).
std::string Emitter::bound_text(const GuardBound& b, const std::string& open) const {
  return open + render(b.bound) + ")" +
         (b.adjust ? (b.adjust > 0 ? " + " : " - ") + std::to_string(std::abs(b.adjust))
                   : std::string());
}

/// For each read of a written array on the read-only path (apart_): whether, at this launch, it
/// reads no element the kernel writes (apart_refusal says why that suffices). Per write: the
/// subscripts' difference D at indices (0, 0), (1, 0), (0, 1) gives D = d0 + sx idx + sy idy;
/// D = 0 at idx = -d0 / sx (or idy = -d0 / sy) where that divides; the read is apart when that
/// index is outside the bounds check's interval on it. Once per thread, before the work.
void Emitter::check_apart(std::ostringstream& o) {
  for (int site : apart_) {
    const AccessSite& r = k_.accesses[static_cast<size_t>(site)];
    const std::string flag = "gt_apart" + std::to_string(site);
    const std::string array = k_.params[static_cast<size_t>(r.param)].name;
    line(o, "bool " + flag + " = true;  // " + array + "[" + index_text(site) + "] (line " +
                std::to_string(r.line) + ") reads nothing the kernel writes: the read-only path");
    for (size_t w = 0; w < k_.accesses.size(); ++w) {
      const AccessSite& a = k_.accesses[w];
      if (a.param != r.param || !a.store) continue;
      line(o, "{  // apart from " + array + "[" + index_text(static_cast<int>(w)) + "] (line " +
                  std::to_string(a.line) + ")?");
      ++ind_;
      line(o, "long long gt_d[3];  // read minus write at (idx, idy) = (0, 0), (1, 0), (0, 1)");
      line(o, "for (int gt_q = 0; gt_q < 3; ++gt_q) {");
      ++ind_;
      line(o, "const int " + k_.index_names[0] + " = gt_q == 1;");
      if (k_.dims == 2) line(o, "const int " + k_.index_names[1] + " = gt_q == 2;");
      line(o, "gt_d[gt_q] = static_cast<long long>(" + render_index(site) +
                  ") - static_cast<long long>(" + render_index(static_cast<int>(w)) + ");");
      --ind_;
      line(o, "}");
      line(o, "const long long gt_sx = gt_d[1] - gt_d[0], gt_sy = gt_d[2] - gt_d[0];");
      line(o,
           "long long gt_lo = 0, gt_hi = 9223372036854775807LL;  // the moving index's interval");
      for (int d = 0; d < k_.dims; ++d) {
        std::string bounds;
        for (size_t g = 0; g < k_.guard.size(); ++g) {
          const GuardBound& b = k_.guard_bounds[g];
          if (b.dim != d) continue;
          const std::string e = bound_text(b, "static_cast<long long>(");
          bounds += b.upper ? " if (" + e + " < gt_hi) gt_hi = " + e + ";"
                            : " if (" + e + " > gt_lo) gt_lo = " + e + ";";
        }
        if (!bounds.empty())
          line(o, std::string("if (") + (d == 0 ? "gt_sx" : "gt_sy") + " != 0) {" + bounds + " }");
      }
      line(o, "const long long gt_s = gt_sx != 0 ? gt_sx : gt_sy;");
      line(o,
           "const bool gt_hit = (gt_sx != 0 && gt_sy != 0) || (gt_s == 0 ? gt_d[0] == 0 : "
           "gt_d[0] % gt_s == 0 && -gt_d[0] / gt_s >= gt_lo && -gt_d[0] / gt_s <= gt_hi);");
      line(o, flag + " = " + flag + " && !gt_hit;");
      --ind_;
      line(o, "}");
    }
  }
}

void Emitter::emit_text_lines(std::ostringstream& o, const std::string& text) const {
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

void Emitter::emit_list(std::ostringstream& o, const std::vector<Stmt>& list, bool guarded) {
  std::vector<const Stmt*> group;
  auto flush = [&] {
    if (group.empty()) return;
    hoist_shared_loads(o, group, guarded);
    const std::vector<int> run_stores = declare_run_stores(o, group);
    // Work that only updates the output's own float accumulators from shared tiles runs for
    // every merged output, in range or not: no per-statement predicate in the inner loop.
    const bool check = guarded && !unguarded(group);
    std::string only = (check ? "gt_ok" + suffix(c_, k_.dims) : std::string()) +
                       (lane0_ ? std::string(check ? " && " : "") + "gt_lane == 0" : std::string());
    // Inside triangular loops: only the output's own steps (always checked: a step outside
    // them reads what the naive kernel never reads for this output).
    for (const Stmt* r : ranges_) only += (only.empty() ? "" : " && ") + range_check(*r);
    replica_block(o, [&](std::ostringstream& b) {
      if (!only.empty()) {
        line(b, "if (" + only + ") {");
        ++ind_;
      }
      for (const Stmt* s : group) {
        if (s->kind == Stmt::RepDecl) {
          const Local& l = k_.locals[s->local];
          const std::string init = render(s->text);
          // A split loop's lanes each add a part and the parts are summed: a sum that starts from
          // a value (`float sum = b[i];`) takes it in lane 0 alone; the others start at zero
          // (the declaration's `= {}`).
          static const std::regex zero(R"(^\s*\(?\s*[-+]?(0+\.?0*|\.0+)[fFlLuU]?\s*\)?\s*$)");
          const bool part = c_.split > 1 && !lane0_ &&
                            std::find(split_.locals.begin(), split_.locals.end(), s->local) !=
                                split_.locals.end() &&
                            !std::regex_match(init, zero);
          line(b, (part ? "if (gt_lane == 0) " : "") + l.name + suffix(c_, k_.dims) + " = " + init +
                      ";");
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

}  // namespace gputune::naive
