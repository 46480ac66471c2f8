// The traffic analysis's execution (see sim.h for the layout of pruner/traffic/): the entry point
// analyse_traffic, the choice of blocks and warps that stand for the grid (Sim::run), the kernel's
// parameters, statements, calls (builtins, barriers, asynchronous copies, inlined device
// functions) and the report's totals. Owns: Sim's members listed under execution.cpp in sim.h.
// Must not: compute values or memory costs itself (values.cpp, accesses.cpp) or run loops
// (loops.cpp).
#include <clang/AST/DeclCXX.h>
#include <clang/AST/ExprCXX.h>
#include <clang/Frontend/ASTUnit.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <tuple>

#include "pruner/traffic/sim.h"
#include "variants/cuda_parse.h"

namespace gputune::pruner::traffic {

void Sim::run(const FunctionDecl* kernel, TrafficReport& rep) {
  kernel_ = kernel;
  const auto& g = in_.grid;
  const auto& b = in_.block;
  std::int64_t threads = b[0] * b[1] * b[2];
  std::int64_t blocks = g[0] * g[1] * g[2];
  int nwarps = static_cast<int>((threads + W - 1) / W);
  std::vector<int> warps{0};
  if (in_.max_warps_per_block >= 3 && nwarps > 2) warps.push_back(nwarps / 2);
  if (in_.max_warps_per_block >= 2 && nwarps > 1) warps.push_back(nwarps - 1);
  rep.blocks = blocks;
  rep.warps_per_block = nwarps;
  rep.warps_simulated = static_cast<int>(warps.size());
  // Which blocks stand for the grid: an interior one along each axis, and along an axis of
  // at most kEdgeBlocks blocks also the last one, weighted 1 (it is often partial: a tile of
  // 248 x 8 rows over 2048 leaves the second of two blocks 64 rows, and an interior block alone
  // would stand for both as full or both as nearly idle).
  // Such a last block runs all its warps: which of them the bounds leave idle is what sets its
  // cost (of 22 warps whose last 1.25 are idle, its first, middle and last warp would have
  // stood for 7.3 idle ones).
  std::array<std::vector<std::pair<std::int64_t, double>>, 3> at;
  std::array<std::int64_t, 3> edge{-1, -1, -1};
  for (size_t d = 0; d < 3; ++d) {
    if (g[d] >= 2 && g[d] <= kEdgeBlocks) {
      at[d] = {{g[d] / 2 == g[d] - 1 ? 0 : g[d] / 2, static_cast<double>(g[d] - 1)},
               {g[d] - 1, 1.0}};
      edge[d] = g[d] - 1;
    } else {
      at[d] = {{g[d] / 2, static_cast<double>(g[d])}};
    }
  }
  std::vector<int> all_warps(static_cast<size_t>(nwarps));
  std::iota(all_warps.begin(), all_warps.end(), 0);
  for (const auto& [bx, wx] : at[0])
    for (const auto& [by, wy] : at[1])
      for (const auto& [bz, wz] : at[2]) {
        bid_ = {bx, by, bz};
        const bool last = bx == edge[0] || by == edge[1] || bz == edge[2];
        const std::vector<int>& run_warps = last ? all_warps : warps;
        // Per simulated warp, the warps it stands for.
        const double base = wx * wy * wz * nwarps / static_cast<double>(run_warps.size());
        for (int w : run_warps) {
          Mask m = 0;
          for (int l = 0; l < W; ++l) {
            std::int64_t t = static_cast<std::int64_t>(w) * W + l;
            if (t < threads) m |= Mask(1) << l;
            tid_[0][l] = t % b[0];
            tid_[1][l] = (t / b[0]) % b[1];
            tid_[2][l] = t / (b[0] * b[1]);
          }
          vars_.clear();
          local_vals_.clear();
          bind_params();
          weight_ = base;
          active_ = m;
          end_round(1);
          frames_.assign(1, Frame{});
          loops_.clear();
          exec(kernel->getBody());
        }
      }
  finish(rep);
}

void Sim::bind_params() {
  for (const ParmVarDecl* p : kernel_->parameters()) {
    // The job's argument in this position, as the launch passes it; by name without an order.
    const size_t at = p->getFunctionScopeIndex();
    std::string name =
        at < in_.argument_order.size() ? in_.argument_order[at] : p->getNameAsString();
    QualType t = p->getType();
    if (t->isPointerType()) {
      auto it = in_.array_bytes.find(name);
      Val v;
      v.k = Val::Ptr;
      v.arr = array_for(p, "global", it == in_.array_bytes.end() ? -1 : it->second);
      if (auto d = in_.array_data.find(name); d != in_.array_data.end() && d->second.bytes)
        arrays_[static_cast<size_t>(v.arr)].data = &d->second;
      vars_[p] = v;
    } else if (t->isIntegralOrEnumerationType()) {
      auto it = in_.scalars.find(name);
      if (it != in_.scalars.end()) {
        vars_[p] = Val::constant(static_cast<std::int64_t>(it->second));
      } else {
        vars_[p] = uniform(mix(7, p->getFunctionScopeIndex()));
        notes_.insert("scalar argument '" + name +
                      "' has no value in the job: its uses are unknown");
      }
    } else {
      vars_[p] = uniform(mix(7, p->getFunctionScopeIndex()));  // the same on every lane
    }
  }
}

Val Sim::call(const CallExpr* c) {
  const FunctionDecl* f = c->getDirectCallee();
  std::string name = f ? f->getNameAsString() : "";
  if (name.rfind("__syncthreads", 0) == 0 || name == "__syncwarp" || name == "gt_cp_wait")
    end_round(1);  // the warp waits here: loads after it start a new round
  auto args = [&]() {
    std::vector<Val> v;
    for (const Expr* a : c->arguments()) v.push_back(eval(a));
    return v;
  };
  if (name == "min" || name == "max" || name == "umin" || name == "umax" || name == "llmin" ||
      name == "llmax") {
    auto v = args();
    if (v.size() == 2 && v[0].k == Val::Int && v[1].k == Val::Int) {
      Val r = v[0];
      bool mn = name.find("min") != std::string::npos;
      for (int l = 0; l < W; ++l)
        r.v[l] = mn ? std::min(v[0].v[l], v[1].v[l]) : std::max(v[0].v[l], v[1].v[l]);
      return r;
    }
    return Val{};
  }
  if (name == "abs" || name == "llabs") {
    auto v = args();
    if (v.size() == 1 && v[0].k == Val::Int) {
      for (auto& x : v[0].v) x = x < 0 ? -x : x;
      return v[0];
    }
    return Val{};
  }
  if (name == "__mul24" || name == "__umul24") {
    auto v = args();
    if (v.size() == 2 && v[0].k == Val::Int && v[1].k == Val::Int) {
      for (int l = 0; l < W; ++l) v[0].v[l] *= v[1].v[l];
      return v[0];
    }
    return Val{};
  }
  // A pipelined variant's asynchronous copy (kCpAsync, variants/naive/emitter.cpp): a load from
  // global memory on the lanes whose `ok` holds (the others copy nothing: zero-fill), a store to
  // the shared buffer on every lane. Its commit and wait move no data.
  if (name == "gt_cp_async" && c->getNumArgs() == 3) {
    Val dst = eval(c->getArg(0)), src = eval(c->getArg(1)), ok = eval(c->getArg(2));
    bool unk = false;
    const Mask copy = truth(ok, unk);
    const std::int64_t bytes = size_of(c->getArg(1)->getType()->getPointeeType());
    const Mask saved = active_;
    active_ = unk ? saved : saved & copy;
    if (src.arr >= 0 && active_) record(c->getArg(1), src, bytes, false);
    active_ = saved;
    if (dst.arr >= 0) record(c, dst, bytes, true);
    return Val{};
  }
  if (name == "gt_cp_commit" || name == "gt_cp_wait") return Val{};
  if (name.rfind("__ld", 0) == 0 && c->getNumArgs() == 1) {
    Val p = eval(c->getArg(0));
    if (p.arr >= 0) record(c, p, size_of(c->getArg(0)->getType()->getPointeeType()), false);
    return loaded(p, c->getArg(0)->getType()->getPointeeType());
  }
  if (name.rfind("__st", 0) == 0 && c->getNumArgs() == 2) {
    Val p = eval(c->getArg(0));
    eval(c->getArg(1));
    if (p.arr >= 0) record(c, p, size_of(c->getArg(0)->getType()->getPointeeType()), true);
    return Val{};
  }
  if (name.rfind("atomic", 0) == 0 && c->getNumArgs() >= 2) {
    auto v = args();
    std::int64_t sz = size_of(c->getArg(0)->getType()->getPointeeType());
    if (v[0].arr >= 0) {
      record(c->getArg(0), v[0], sz, false);
      record(c, v[0], sz, true);
    }
    return Val{};
  }
  if (name == "fmaf" || name == "fma" || name == "__fmaf_rn" || name == "__fma_rn") {
    args();
    count_flops(2);
    return Val{};
  }
  if (f && f->hasBody() && f->getBody() &&
      std::find(call_stack_.begin(), call_stack_.end(), f) == call_stack_.end() &&
      call_stack_.size() < 8) {
    const FunctionDecl* def = nullptr;
    f->hasBody(def);
    std::vector<Val> v = args();
    // A call of an operator method (a lambda's operator()) passes the object as argument 0.
    const auto* method = dyn_cast<CXXMethodDecl>(def);
    const unsigned first =
        isa<CXXOperatorCallExpr>(c) && method && !method->isStatic() && !v.empty() ? 1 : 0;
    for (unsigned i = 0; i < def->getNumParams() && i + first < v.size(); ++i)
      vars_[def->getParamDecl(i)] = v[i + first];
    call_stack_.push_back(def);
    frames_.push_back(Frame{});
    Mask saved = active_;
    exec(def->getBody());
    active_ = saved;
    Val r = frames_.back().ret;
    frames_.pop_back();
    call_stack_.pop_back();
    return r;
  }
  args();
  return Val{};
}

// ---------------------------------------------------------------- statements
void Sim::exec(const Stmt* s) {
  if (!s || !active_) return;
  if (++steps_ > kMaxSteps)
    throw Abort("analysis stopped after " + std::to_string(kMaxSteps) + " evaluation steps");
  if (auto* c = dyn_cast<CompoundStmt>(s)) {
    for (const Stmt* x : c->body()) {
      if (!active_) break;
      exec(x);
    }
    return;
  }
  if (auto* d = dyn_cast<DeclStmt>(s)) {
    for (const Decl* dd : d->decls()) {
      auto* v = dyn_cast<VarDecl>(dd);
      if (!v) continue;
      if (v->getType()->isArrayType()) {
        const int id = array_for(v, space_of(v), size_of(v->getType()));
        if (v->hasInit()) eval(v->getInit());
        if (space_of(v) == "local") {  // a fresh array: `= {}` is all zeros, else unknown
          forget_local(id);
          auto* init = dyn_cast_or_null<InitListExpr>(v->hasInit() ? v->getInit() : nullptr);
          const std::int64_t step = size_of(ctx_.getBaseElementType(v->getType()));
          if (init && init->getNumInits() == 0 && step > 0)
            for (std::int64_t off = 0; off < size_of(v->getType()); off += step)
              remember_local(id, Val::constant(off), Val::constant(0));
        }
        continue;
      }
      if (v->hasInit()) {
        Val init = eval(v->getInit());
        vars_[v] = Val{Val::Uninit};
        assign_var(v, init);
      } else {
        vars_[v] = Val{Val::Uninit};
      }
    }
    return;
  }
  if (auto* e = dyn_cast<Expr>(s)) {
    eval(e);
    return;
  }
  if (auto* a = dyn_cast<AttributedStmt>(s)) {
    hint_ = unroll_hint(a);
    exec(a->getSubStmt());
    hint_.reset();
    return;
  }
  if (auto* i = dyn_cast<IfStmt>(s)) {
    if (i->getInit()) exec(i->getInit());
    if (i->getConditionVariableDeclStmt()) exec(i->getConditionVariableDeclStmt());
    Val c = eval(i->getCond());
    bool unk = false;
    Mask t = truth(c, unk);
    Mask saved = active_;
    if (unk) {
      notes_.insert("data-dependent branch at " + at(i) + ": both sides counted for every lane");
      exec(i->getThen());
      Mask a1 = active_;
      active_ = saved;
      if (i->getElse()) exec(i->getElse());
      active_ = a1 | active_;
      return;
    }
    active_ = t;
    exec(i->getThen());
    Mask a1 = active_;
    active_ = saved & ~t;
    if (i->getElse()) exec(i->getElse());
    active_ = a1 | active_;
    return;
  }
  if (auto* f = dyn_cast<ForStmt>(s))
    return loop(f->getInit(), f->getCond(), f->getInc(), f->getBody(), false, f);
  if (auto* w = dyn_cast<WhileStmt>(s))
    return loop(nullptr, w->getCond(), nullptr, w->getBody(), false, w);
  if (auto* d = dyn_cast<DoStmt>(s))
    return loop(nullptr, d->getCond(), nullptr, d->getBody(), true, d);
  if (isa<BreakStmt>(s)) {
    if (!loops_.empty()) loops_.back().brk |= active_;
    active_ = 0;
    return;
  }
  if (isa<ContinueStmt>(s)) {
    if (!loops_.empty()) loops_.back().cont |= active_;
    active_ = 0;
    return;
  }
  if (auto* r = dyn_cast<ReturnStmt>(s)) {
    if (r->getRetValue()) {
      Val v = eval(r->getRetValue());
      Frame& fr = frames_.back();
      if (!fr.has_ret) {
        fr.ret = v;
        fr.has_ret = true;
      } else {
        merge(fr.ret, v);
      }
    }
    active_ = 0;
    return;
  }
  if (isa<NullStmt>(s)) return;
  notes_.insert(std::string("statement '") + s->getStmtClassName() + "' at " + at(s) +
                " is not analysed (its accesses are not counted)");
}

void Sim::finish(TrafficReport& rep) {
  std::vector<Access> out;
  std::map<std::string, double> requested, loaded;  // per global array: sector bytes
  for (auto& [k, a] : accesses_) {
    out.push_back(a);
    if (a.space == "global") {
      (a.kind == "load" ? rep.load_sectors : rep.store_sectors) += a.sectors;
      rep.requested_bytes += a.bytes;
      requested[a.array] += 32.0 * a.sectors;  // DRAM moves whole sectors
      if (a.kind == "load") loaded[a.array] += 32.0 * a.sectors;
    } else {
      rep.shared_wavefronts += a.wavefronts;
      rep.shared_ideal += a.ideal;
    }
    if (!a.analysed) ++rep.unanalysed;
  }
  for (auto& [name, bytes] : requested) {
    std::int64_t alloc = -1;
    for (auto& d : arrays_)
      if (d.name == name && d.space == "global") alloc = d.bytes;
    // DRAM moves an array's bytes at most once: the allocation bounds what it reads.
    auto compulsory = [&](double b) {
      return alloc > 0 ? std::min<double>(static_cast<double>(alloc), b) : b;
    };
    rep.compulsory_bytes += compulsory(bytes);
    if (auto l = loaded.find(name); l != loaded.end())
      rep.compulsory_load_bytes += compulsory(l->second);
  }
  std::sort(out.begin(), out.end(), [](const Access& a, const Access& b) {
    return std::tie(a.line, a.column, a.kind) < std::tie(b.line, b.column, b.kind);
  });
  rep.accesses = std::move(out);
  rep.flops = flops_;
  rep.control_instructions = control_;
  rep.load_rounds = load_rounds_;
  rep.conversion_instructions = conversions_;
  rep.notes.assign(notes_.begin(), notes_.end());
}

}  // namespace gputune::pruner::traffic

namespace gputune::pruner {

TrafficReport analyse_traffic(const TrafficInput& in) {
  TrafficReport rep;
  ParsedCuda parsed = parse_cuda(in.source + instance_reference(in.kernel_name), in.options,
                                 "kernel.cu", "gputune-traffic");
  if (!parsed.ast) {
    rep.error = "clang could not parse the kernel: " + parsed.error;
    return rep;
  }
  std::unique_ptr<clang::ASTUnit> ast = std::move(parsed.ast);
  clang::ASTContext& ctx = ast->getASTContext();
  const clang::FunctionDecl* kernel = find_kernel(ctx, in.kernel_name);
  if (!kernel) {
    rep.error = "no __global__ function named '" + in.kernel_name + "' with a body";
    return rep;
  }
  rep.parsed = true;
  try {
    traffic::Sim sim(ctx, in);
    sim.run(kernel, rep);
  } catch (const traffic::Abort& a) {
    rep.error = a.msg;
  }
  rep.notes.insert(rep.notes.begin(), parsed.notes.begin(), parsed.notes.end());
  return rep;
}

}  // namespace gputune::pruner
