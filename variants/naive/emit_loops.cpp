// Emitter: the loops every thread runs alike (declared in internal.h). Unrolled; shared by the
// split's lanes; strip-mined by tile_k where shared tiles are staged, cooperatively and with
// vector loads where contiguous and aligned, pipelined over several buffers with cp.async; tile
// reads along the loop taken `vector` steps per load.
// Must not: decide which reads are tiled (plan.cpp: plan_site).
#include <algorithm>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "variants/naive/internal.h"

namespace gputune::naive {

long long Emitter::extent(const Tile& t, size_t j) const {
  const std::string& d = t.plan.dims[j];
  long long e = d == "x" ? tx_ : d == "y" ? ty_ : c_.tile_k;
  // The pad lengthens the rows of the tile as stored: its last dimension.
  if (j == storage_order(t).back() && t.plan.dims.size() == 2 && t.plan.paddable && c_.pad)
    e += pad_amount(t);
  return e;
}

/// The tile's dimensions (indices into plan.dims) in the order the shared array is declared.
std::vector<size_t> Emitter::storage_order(const Tile& t) {
  std::vector<size_t> order;
  for (size_t j = 0; j < t.plan.dims.size(); ++j) order.push_back(j);
  if (t.transposed) std::reverse(order.begin(), order.end());
  return order;
}

long long Emitter::extent_product(const Tile& t) const {
  long long p = 1;
  for (size_t j = 0; j < t.plan.dims.size(); ++j) p *= extent(t, j);
  return p;
}

/// The tile's array; pipelined, its buffer for the current strip (or `buffer`).
std::string Emitter::tile_name(const Tile& t, const std::string& buffer) const {
  if (!pipelined()) return tile_array(t);
  return tile_array(t) + "[" + (buffer.empty() ? stage_var(t.plan.loop) : buffer) + "]";
}

/// The tile's __shared__ array (with its buffers when pipelined).
std::string Emitter::tile_array(const Tile& t) const {
  return "gt_s_" + k_.params[k_.accesses[t.site].param].name +
         (t.id ? std::to_string(t.id) : std::string());
}

/// Double-buffered tiles: the next strip is copied (cp.async) while the current one is used.
bool Emitter::pipelined() const { return c_.stages > 1 && !tiles_.empty(); }

/// The buffer a strip-mined loop works on.
std::string Emitter::stage_var(int loop) { return "gt_stage" + std::to_string(loop); }

std::string Emitter::describe_tile(const Tile& t) const {
  std::string s = k_.params[k_.accesses[t.site].param].name + "[" + index_text(t.site) + "] for ";
  for (size_t j = 0; j < t.plan.dims.size(); ++j) {
    const std::string& d = t.plan.dims[j];
    s += (j ? " x " : "") + (d == "x"   ? k_.index_names[0]
                             : d == "y" ? k_.index_names[1]
                                        : loop_var(t.plan.loop));
  }
  if (t.transposed)
    s += ", stored transposed ([" + loop_var(t.plan.loop) + "][" +
         k_.index_names[t.plan.dims[0] == "y" ? 1 : 0] + "])";
  if (t.plan.paddable && c_.pad)
    s += ", pitch padded by " + std::to_string(pad_amount(t)) +
         (pad_amount(t) > 1 ? " (rows stay aligned for vector accesses)" : "");
  return s;
}

std::string Emitter::loop_var(int loop) const { return find_loop_var(k_.body, loop); }

std::string Emitter::find_loop_var(const std::vector<Stmt>& list, int loop) {
  for (const Stmt& s : list) {
    if (s.kind == Stmt::Loop && s.loop == loop) return s.var;
    std::string r = find_loop_var(s.body, loop);
    if (!r.empty()) return r;
  }
  return "";
}

/// A tile whose fast dimension is the strip loop, contiguous and with aligned rows: a thread's
/// read of it at `vector` consecutive steps of the loop is one vector load.
bool Emitter::loop_vector_tile(const Tile& t) const {
  return c_.vector > 1 && !t.transposed && t.plan.contiguous && t.plan.dims.back() == "loop" &&
         aligned_rows(t) && c_.tile_k % c_.vector == 0;
}

/// The reads of loop-fast tiles that sit directly in the loop's body (not in a nested loop):
/// each is loaded `vector` steps at a time before the steps run.
std::vector<int> Emitter::loop_vector_sites(const Stmt& loop) const {
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
void Emitter::hoist_loop_vector(std::ostringstream& o, const Stmt& loop, int site,
                                const std::string& k0) {
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
    line(o, "const int " + k_.index_names[1] + " = " + y_index(y) + ";");
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
bool Emitter::vector_tile(const Tile& t) const {
  if (t.transposed) return t.plan.dims[0] == "x" && aligned_rows(t);  // stored [loop][x]
  return t.plan.contiguous && t.plan.dims.back() == "x" && aligned_rows(t);
}

/// Every row of the tile starts on a 16-byte boundary (declared __align__(16), a pitch that is
/// a power of two times the element) unless a pad makes the pitch odd.
bool Emitter::aligned_rows(const Tile& t) const {
  return !(t.plan.paddable && c_.pad) || (c_.vector > 1 && pad_amount(t) % c_.vector == 0);
}

/// Elements a pad adds to a paddable tile's pitch: one (the rows fall in different banks), or
/// the vector width where vector accesses reach the tile, so its rows stay aligned and a
/// thread's vector still lands in banks apart from its neighbours'.
int Emitter::pad_amount(const Tile& t) const {
  return c_.vector > 1 && t.plan.contiguous ? c_.vector : 1;
}

/// Vector accesses reach the tile: its staging stores, or the runs of merged outputs.
bool Emitter::vector_access(const Tile& t) const {
  return (vector_width(t) > 1 && aligned_rows(t)) || (xrun_ > 1 && vector_tile(t)) ||
         loop_vector_tile(t) || (t.transposed && t.plan.dims[0] == "y" && yrun_ > 1);
}

/// A triangular loop's bound for the whole block: its thread index replaced by the block's first
/// valid output (a lower bound) or its last (an upper bound), gt_vx0/gt_vx1 (gt_vy0/gt_vy1), so
/// that the block's range covers every valid output's and no step that none of them runs.
std::string Emitter::block_bound(const Text& t, bool upper) const {
  const std::string end = upper ? "1" : "0";
  Text b;
  for (const Piece& p : t) {
    if (p.kind == Piece::ThreadIndex) {
      b.push_back(Piece{Piece::Lit, std::string(p.dim == 0 ? "gt_vx" : "gt_vy") + end, -1, 0, {}});
      continue;
    }
    b.push_back(p);
    if (p.kind != Piece::Lit) continue;
    // The kernel's index variables, by name (`j = i`).
    for (int d = 0; d < k_.dims; ++d) {
      const std::string& name = k_.index_names[static_cast<size_t>(d)];
      if (name.empty()) continue;
      const std::regex word("(^|[^A-Za-z0-9_.])" + name + "(?![A-Za-z0-9_])");
      b.back().text = std::regex_replace(b.back().text, word,
                                         "$1" + std::string(d == 0 ? "gt_vx" : "gt_vy") + end);
    }
  }
  return render(b);
}

/// The steps of triangular loop `s` that the output in scope runs (its own bounds).
std::string Emitter::range_check(const Stmt& s) const {
  std::string c;
  if (s.lo_dim >= 0) c = s.var + " >= (" + render(s.lo) + ")";
  if (s.hi_dim >= 0)
    c += std::string(c.empty() ? "" : " && ") + s.var + (s.inclusive ? " <= (" : " < (") +
         render(s.hi) + ")";
  return c;
}

/// Whether the kernel has a triangular loop (emitter.cpp declares the block's valid outputs).
bool Emitter::triangular() const {
  std::function<bool(const std::vector<Stmt>&)> any = [&](const std::vector<Stmt>& list) {
    return std::any_of(list.begin(), list.end(), [&](const Stmt& s) {
      return (s.kind == Stmt::Loop && (s.lo_dim >= 0 || s.hi_dim >= 0)) || any(s.body);
    });
  };
  return any(k_.body);
}

// Opens the strip loop of a loop strip-mined by tile_k (its counter gt_<var>_base) and stages
// its tiles for the strip, as emit_loop describes: pipelined, the first S-1 strips before the
// loop and each step the strip S-1 ahead. Leaves the indentation one level into the loop.
void Emitter::open_strips(std::ostringstream& o, const Stmt& s,
                          const std::vector<const Tile*>& here, const std::string& lo,
                          const std::string& hi) {
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
    line(o,
         "for (int " + k0 + " = " + lo + "; " + k0 + " < " + hi + "; " + k0 + " += " + tk + ") {");
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
    line(o,
         "for (int " + k0 + " = " + lo + "; " + k0 + " < " + hi + "; " + k0 + " += " + tk + ") {");
    ++ind_;
    for (const Tile* t : here) stage_tile(o, s, *t, k0, hi);
  }
}

void Emitter::emit_loop(std::ostringstream& o, const Stmt& s, bool guarded) {
  std::string lo = s.lo_dim >= 0 ? block_bound(s.lo, false) : render(s.lo),
              hi = s.hi_dim >= 0 ? block_bound(s.hi, true) : render(s.hi);
  if (s.inclusive) hi = "(" + hi + ") + 1";
  const bool ranged = s.lo_dim >= 0 || s.hi_dim >= 0;
  if (ranged) ranges_.push_back(&s);
  struct Pop {
    std::vector<const Stmt*>& v;
    bool on;
    ~Pop() {
      if (on) v.pop_back();
    }
  } pop{ranges_, ranged};
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
  open_strips(o, s, here, lo, hi);
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
void Emitter::stage_tile(std::ostringstream& o, const Stmt& s, const Tile& t, const std::string& k0,
                         const std::string& hi, const std::string& buffer) {
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
  // A triangular loop's tile along the index its bounds follow: each element as its output
  // reads it (that output's own steps); along the block's range only otherwise.
  const int follows = std::max(s.lo_dim, s.hi_dim);
  if (follows >= 0 && (follows == 0 ? has_x : has_y)) conds += " && " + range_check(s);
  for (size_t g = 0; g < k_.guard.size(); ++g) {
    const auto& gd = k_.guard_depends[g];
    if ((gd.count("x") && !has_x) || (gd.count("y") && !has_y)) continue;
    conds += " && (" + render(k_.guard[g]) + ")";
  }
  const AccessSite& site = k_.accesses[t.site];
  const std::string& elem = k_.params[site.param].element;
  std::string load = k_.params[site.param].name + "[" + render_index(t.site) + "]";
  // Coordinates in the order stored; element gt_j of a vector is along the fast dimension in
  // memory (plan.dims' last), wherever the tile stores it.
  auto stored = [&](const std::string& last_shift) {
    std::string d = tile_name(t, buffer);
    for (size_t j : storage_order(t)) d += "[" + coord[j] + (j + 1 == nd ? last_shift : "") + "]";
    return d;
  };
  std::string dst = stored(v > 1 ? " + gt_j" : "");
  // Out of range: zero (an asynchronous copy of no bytes from the array's start zero-fills).
  std::string scalar = async ? "gt_cp_async(&" + dst + ", (" + conds + ") ? &" + load +
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
          if (t.transposed) {  // the vector's elements go to `v` rows of the tile
            if (!async)
              line(o, "const " + vt + " gt_v = __ldg(reinterpret_cast<const " + vt + "*>(gt_p));");
            for (int j = 0; j < v; ++j) {
              const std::string e = stored(" + " + std::to_string(j));
              line(o, async ? "gt_cp_async(&" + e + ", gt_p + " + std::to_string(j) + ", true);"
                            : e + " = gt_v." + std::string(1, "xyzw"[j]) + ";");
            }
          } else if (async && aligned_rows(t)) {  // one asynchronous vector copy
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
int Emitter::vector_width(const Tile& t) const {
  if (c_.vector <= 1 || !t.plan.contiguous) return 1;
  const std::string& d = t.plan.dims.back();
  long long e = d == "x" ? tx_ : d == "y" ? ty_ : c_.tile_k;
  return e % c_.vector == 0 ? c_.vector : 1;
}

}  // namespace gputune::naive
