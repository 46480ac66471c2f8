// The Emitter's skeleton (declared in internal.h): what a variant holds (its tiles, windows,
// registers and block sums, from the plans), its shared memory, the kernel's signature, set-up
// and header comment. The rendering of the naive kernel's text and its lists of statements are
// emit_text.cpp's; each transformation's code is in its own emit_*.cpp (see internal.h).
// Must not: decide what a kernel allows (plan.cpp) or know about jobs and spaces (space.cpp).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "variants/expr.h"
#include "variants/naive/internal.h"

namespace gputune::naive {

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

}  // namespace

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

Emitter::Emitter(const NaiveKernel& k, const Choice& c) : k_(k), c_(c) {
  if (k_.dims == 1) {
    c_.block_y = 1;
    c_.merge_y = 1;
  }
  tx_ = c_.block_x * c_.merge_x;
  ty_ = c_.block_y * c_.merge_y;
  // Arrays read through a halo window: every read of the array comes from it.
  // An array whose reads span planes a launch constant apart has a window per plane.
  for (auto& [param, plan] : halo_plans(k_)) {
    if (!plan.ok || cache_of(param) != Cache::Shared) continue;
    std::vector<HaloPlan> windows;
    if (plan.planes.empty())
      windows.push_back(std::move(plan));
    else
      windows = std::move(plan.planes);
    for (HaloPlan& h : windows) {
      for (size_t n = 0; n < h.sites.size(); ++n)
        halo_site_[h.sites[n]] = {static_cast<int>(halos_.size()), n};
      halos_.push_back(std::move(h));
    }
  }
  // Reads of a written array on the read-only path where checked apart from its writes.
  for (size_t i = 0; i < k_.accesses.size(); ++i) {
    const AccessSite& s = k_.accesses[i];
    if (!s.store && k_.params[s.param].written && cache_of(s.param) == Cache::ReadOnly &&
        apart_refusal(k_, static_cast<int>(i)).empty())
      apart_.insert(static_cast<int>(i));
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
  // Transposed tiles, and the runs of merged rows that read them one vector per run.
  if (c_.transpose && c_.vector > 1 && c_.split == 1 && k_.dims == 2) {
    for (Tile& t : tiles_) {
      const int d = transposable_dim(k_, k_.accesses[static_cast<size_t>(t.site)]);
      t.transposed = (d == 1 && c_.merge_y > 1) || (d == 0 && c_.merge_x > 1);
    }
    if (std::any_of(tiles_.begin(), tiles_.end(),
                    [](const Tile& t) { return t.transposed && t.plan.dims[0] == "y"; }))
      yrun_ = std::min(c_.vector, c_.merge_y);
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
  if (c_.warp_x > 0 && (k_.dims != 2 || c_.split > 1 || 32 % c_.warp_x || c_.block_x % c_.warp_x ||
                        c_.block_y % (32 / c_.warp_x)))
    throw NaiveError("kernel '" + k_.name + "': warps of " + std::to_string(c_.warp_x) +
                     " threads along x do not tile a " + std::to_string(c_.block_x) + " x " +
                     std::to_string(c_.block_y) + " block of a 2-D kernel without split");
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

long long Emitter::shared_bytes() const {
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
long long Emitter::dynamic_bytes(const std::map<std::string, double>& scalars) const {
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

// The kernel's signature: its launch bounds, and each parameter as the user wrote it, const and
// __restrict__ where it is read through the read-only path.
void Emitter::signature(std::ostringstream& o) {
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
}

// Where the thread's outputs start (gt_x0, gt_y0): from its place in the block, as launched or
// from its lane and warp (warp_x), and its share of a split loop (gt_lane).
void Emitter::thread_place(std::ostringstream& o) {
  line(o, "const int gt_bx = blockIdx.x * " + std::to_string(tx_) + ";");
  // The thread's place in the block: as launched, or from its lane and warp (warp_x).
  std::string tx = "threadIdx.x", ty = "threadIdx.y";
  if (c_.warp_x > 0) {
    const int wx = c_.warp_x, wy = 32 / wx;
    line(o, "const int gt_wl = (threadIdx.y * " + std::to_string(c_.block_x) +
                " + threadIdx.x) % 32, gt_wi = (threadIdx.y * " + std::to_string(c_.block_x) +
                " + threadIdx.x) / 32;  // lane, warp");
    line(o, "const int gt_tx = gt_wi % " + std::to_string(c_.block_x / wx) + " * " +
                std::to_string(wx) + " + gt_wl % " + std::to_string(wx) + ";  // warps of " +
                std::to_string(wx) + " x " + std::to_string(wy) + " threads");
    line(o, "const int gt_ty = gt_wi / " + std::to_string(c_.block_x / wx) + " * " +
                std::to_string(wy) + " + gt_wl / " + std::to_string(wx) + ";");
    tx = "gt_tx", ty = "gt_ty";
  }
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
    line(o, "const int gt_x0 = gt_bx + " + tx + " * " + std::to_string(xrun_) + ";  // runs of " +
                std::to_string(xrun_) + " consecutive outputs along " + k_.index_names[0]);
  } else {
    line(o, "const int gt_x0 = gt_bx + " + tx + ";");
  }
  if (k_.dims == 2) {
    line(o, "const int gt_by = blockIdx.y * " + std::to_string(ty_) + ";");
    if (yrun_ > 1)
      line(o, "const int gt_y0 = gt_by + " + ty + " * " + std::to_string(yrun_) + ";  // runs of " +
                  std::to_string(yrun_) + " consecutive outputs along " + k_.index_names[1]);
    else
      line(o, "const int gt_y0 = gt_by + " + ty + ";");
  }
}

// The block's shared tiles and store tiles and the thread's partial sums, declared.
void Emitter::block_storage(std::ostringstream& o) {
  if (!tiles_.empty() || !store_sites_.empty() || !sums_.empty() || !halos_.empty())
    line(o, "const int gt_tid = threadIdx.y * " + std::to_string(lb_[0]) + " + threadIdx.x;");
  if (!tiles_.empty()) {
    for (const Tile& t : tiles_) {
      std::string d;
      for (size_t j : storage_order(t)) d += "[" + std::to_string(extent(t, j)) + "]";
      const std::string name = tile_array(t);
      line(o, "__shared__ " + std::string(vector_access(t) || pipelined() ? "__align__(16) " : "") +
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
}

std::string Emitter::run() {
  std::ostringstream o;
  header(o);
  if (pipelined()) o << kCpAsync;
  signature(o);
  ind_ = 1;
  thread_place(o);
  block_storage(o);
  if (!apart_.empty()) check_apart(o);
  if (!halos_.empty())
    stage_halos(o);
  else if (triangular())
    halo_valid_outputs(o);  // the range a triangular loop runs over
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

void Emitter::header(std::ostringstream& o) const {
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
  if (c_.warp_x > 0)
    o << "; warps of " << c_.warp_x << " x " << 32 / c_.warp_x
      << " threads (a thread's place in the block from its lane and warp)";
  if (c_.bounds == LaunchBounds::None)
    o << "; no __launch_bounds__: registers are the compiler's choice (up to 255)";
  if (c_.bounds == LaunchBounds::TwoBlocks)
    o << "; __launch_bounds__ asks for 2 resident blocks per SM (the compiler caps registers "
         "to fit them)";
  if (xrun_ > 1)
    o << "; along " << k_.index_names[0] << " in runs of " << xrun_ << " consecutive outputs: one "
      << xrun_
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
    for (const Tile& t : tiles_)
      if (t.transposed && k_.accesses[static_cast<size_t>(t.site)].param == static_cast<int>(i))
        o << "; " << describe_tile(t) << ": "
          << (t.plan.dims[0] == "y" ? "the merged rows in runs of " + std::to_string(yrun_) +
                                          " consecutive " + k_.index_names[1]
                                    : "read by the runs along " + k_.index_names[0])
          << ", one vector per run and step";
    o << "\n";
  }
  for (size_t i = 0; i < k_.params.size(); ++i) {
    std::vector<int> sites;
    for (int site : apart_)
      if (k_.accesses[static_cast<size_t>(site)].param == static_cast<int>(i))
        sites.push_back(site);
    if (!sites.empty())
      o << "// - " << k_.params[i].name << " (written): " << reads_at(k_, sites)
        << " on the read-only path (__ldg) at launches whose bounds check keeps the "
           "kernel's writes elsewhere (checked once per thread)\n";
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

}  // namespace gputune::naive
