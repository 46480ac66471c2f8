// Emitter: merged outputs in runs of consecutive idx (declared in internal.h; xrun_ > 1), or of
// consecutive idy reading a transposed tile (yrun_ > 1). One float2/float4 load per run from a
// shared tile whose rows run along the runs or (along idx) from global memory, one vector store
// per run, where every output of the run is in range and the address aligned; element by element
// otherwise. Must not: decide when runs apply (the constructor, plan.cpp's vector_*_site).
#include <sstream>
#include <string>
#include <vector>

#include "variants/naive/internal.h"

namespace gputune::naive {

/// A read of a shared tile whose rows run along dimension d (0: an x-fast tile, or one stored
/// transposed [loop][x]; 1: one stored transposed [loop][y]), with merged outputs in runs along
/// d: one float2/float4 load per run into registers, for all the thread's merged outputs along
/// d. The tile row is aligned (declared __align__(16), its pitch and the run's start multiples
/// of the run) and every thread's runs lie inside the tile, so the load needs no bounds check.
void Emitter::hoist_runs(std::ostringstream& o, int site, int d) {
  const Param& prm = k_.params[static_cast<size_t>(k_.accesses[static_cast<size_t>(site)].param)];
  const int run = d == 0 ? xrun_ : yrun_, merge = d == 0 ? c_.merge_x : c_.merge_y;
  const int block = d == 0 ? c_.block_x : c_.block_y;
  const std::string elem = strip_const(prm.element), r = std::to_string(run);
  const std::string vt = elem + r, name = "gt_r" + std::to_string(site);
  line(o, elem + " " + name + "[" + std::to_string(merge) + "];  // " + prm.name + "[" +
              index_text(site) + "], " + r +
              (d == 0 ? " consecutive elements per load from the tile"
                      : " consecutive rows per load from the transposed tile"));
  line(o, "#pragma unroll");
  line(o, "for (int gt_q = 0; gt_q < " + std::to_string(merge / run) + "; ++gt_q) {");
  ++ind_;
  line(o, "const int " + k_.index_names[static_cast<size_t>(d)] + " = " +
              (d == 0 ? "gt_x0" : "gt_y0") + " + gt_q * " + std::to_string(block * run) +
              (d == 0 ? ";  // the run's first output" : ";  // the run's first row"));
  line(o, "const " + vt + " gt_v = *reinterpret_cast<const " + vt + "*>(&" + render_access(site) +
              ");");
  for (int j = 0; j < run; ++j)
    line(o, name + "[gt_q * " + r + " + " + std::to_string(j) + "] = gt_v." + "xyzw"[j] + ";");
  --ind_;
  line(o, "}");
  hoisted_[site] = name + (d == 0 ? "[gt_mx]" : "[gt_my]");
  tile_hoisted_.insert(site);
}

/// Opens a loop over this thread's runs of xrun_ consecutive outputs (per merged row when
/// `y`), with idx/idy set to the run's first output; the caller closes it.
void Emitter::open_runs(std::ostringstream& o, bool y) {
  if (y) {
    line(o, "#pragma unroll");
    line(o, "for (int gt_my = 0; gt_my < " + std::to_string(c_.merge_y) + "; ++gt_my)");
  }
  line(o, "#pragma unroll");
  line(o, "for (int gt_q = 0; gt_q < " + std::to_string(c_.merge_x / xrun_) + "; ++gt_q) {");
  ++ind_;
  line(o, "const int " + k_.index_names[0] + " = gt_x0 + gt_q * " +
              std::to_string(c_.block_x * xrun_) + ";  // the run's first output");
  if (k_.dims == 2) line(o, "const int " + k_.index_names[1] + " = " + y_index(y) + ";");
}

/// The merged column of member j of the current run.
std::string Emitter::run_member(int j) const {
  return "[gt_q * " + std::to_string(xrun_) + " + " + std::to_string(j) + "]";
}

/// A flag indexed by [gt_mx] ("" when there is none), for member j of the current run.
std::string Emitter::member_flag(std::string f, int j) const {
  if (auto p = f.find("[gt_mx]"); p != std::string::npos) f.replace(p, 7, run_member(j));
  return f;
}

/// The flag for every member of the run, joined by && ("" when there is none).
std::string Emitter::run_flags(const std::string& f) const {
  std::string all;
  for (int j = 0; j < xrun_ && !f.empty(); ++j) all += (j ? " && " : "") + member_flag(f, j);
  return all;
}

/// A store that goes straight to memory (not staged in a tile) and can go out one vector per
/// run of consecutive outputs (vector_store_site).
bool Emitter::run_store_candidate(int site) const {
  return k_.accesses[static_cast<size_t>(site)].store && !staged_store(site) &&
         !reg_site_.count(site) && vector_store_site(k_, site);
}

/// The merged row every run store's register has ("[gt_my]" with merge_y > 1, else "").
std::string Emitter::run_store_row() const {
  return k_.dims == 2 && c_.merge_y > 1 ? "[gt_my]" : "";
}

/// The run stores among a group's statements: their values go to registers in the replica
/// block (declared here), and out after it (store_runs).
std::vector<int> Emitter::declare_run_stores(std::ostringstream& o,
                                             const std::vector<const Stmt*>& group) {
  std::vector<int> out;
  if (xrun_ == 1) return out;
  for (const Stmt* st : group)
    for (const Piece& p : st->text)
      if (p.kind == Piece::Access && run_store_candidate(p.id)) out.push_back(p.id);
  for (int site : out) {
    const Param& prm = k_.params[static_cast<size_t>(k_.accesses[static_cast<size_t>(site)].param)];
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
void Emitter::store_runs(std::ostringstream& o, const std::vector<int>& sites, bool guarded) {
  for (int site : sites) {
    const Param& prm = k_.params[static_cast<size_t>(k_.accesses[static_cast<size_t>(site)].param)];
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
bool Emitter::global_run_candidate(int site) const {
  return !site_tile_.count(site) && !halo_site_.count(site) && !reg_site_.count(site) &&
         vector_global_site(k_, k_.accesses[static_cast<size_t>(site)]);
}

/// A read straight from global memory, with merged outputs in runs along x: one float2/float4
/// load per run (per merged row when the subscript uses idy) into registers, when every output
/// of the run passes the bounds check (so every element is one the naive kernel reads) and the
/// address is aligned; element by element otherwise (odd row lengths, offsets like idx - 1).
void Emitter::hoist_global_runs(std::ostringstream& o, int site, bool guarded) {
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
              std::to_string(c_.merge_x) + "]" + (flag.empty() ? "" : "{}") + ";  // " + prm.name +
              "[" + index_text(site) + "], " + r + " consecutive elements per load where aligned");
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
    line(o,
         (f.empty() ? "" : "if (" + f + ") ") + name + row + member(j) + " = " +
             (ro ? "__ldg(gt_p + " + std::to_string(j) + ")" : "gt_p[" + std::to_string(j) + "]") +
             ";");
  }
  --ind_;
  line(o, "}");
  --ind_;
  line(o, "}");
  hoisted_[site] = name + row + "[gt_mx]";
}

}  // namespace gputune::naive
