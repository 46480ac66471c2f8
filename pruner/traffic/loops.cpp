// The traffic analysis's loops (see sim.h for the layout of pruner/traffic/): recognising a
// counted loop and its trip count, running or sampling its iterations, the unroll factor the
// compiler will use and the control instructions it leaves, and the hoisting of conversions out of
// the loops they do not depend on. Owns: Sim's members listed under loops.cpp in sim.h. Must not:
// compute values or memory costs itself (values.cpp, accesses.cpp).
#include <clang/AST/Attr.h>

#include <algorithm>

#include "pruner/traffic/sim.h"

namespace gputune::pruner::traffic {

namespace {

/// Variables assigned anywhere in a statement (assignment, ++/--, address taken).
void assigned_vars(const Stmt* s, std::unordered_set<const VarDecl*>& out) {
  if (!s) return;
  auto target = [&](const Expr* e) {
    e = e->IgnoreParenImpCasts();
    if (auto* d = dyn_cast<DeclRefExpr>(e))
      if (auto* v = dyn_cast<VarDecl>(d->getDecl())) out.insert(v);
  };
  if (auto* b = dyn_cast<BinaryOperator>(s)) {
    if (b->isAssignmentOp()) target(b->getLHS());
  } else if (auto* u = dyn_cast<UnaryOperator>(s)) {
    if (u->isIncrementDecrementOp() || u->getOpcode() == UO_AddrOf) target(u->getSubExpr());
  }
  for (const Stmt* c : s->children()) assigned_vars(c, out);
}

bool contains_jump(const Stmt* s) {
  if (!s) return false;
  if (isa<BreakStmt>(s) || isa<ContinueStmt>(s) || isa<ReturnStmt>(s) || isa<GotoStmt>(s))
    return true;
  for (const Stmt* c : s->children())
    if (contains_jump(c)) return true;
  return false;
}

void declared_vars(const Stmt* s, std::unordered_set<const VarDecl*>& out) {
  if (!s) return;
  if (auto* d = dyn_cast<DeclStmt>(s))
    for (auto* dd : d->decls())
      if (auto* v = dyn_cast<VarDecl>(dd)) out.insert(v);
  for (const Stmt* c : s->children()) declared_vars(c, out);
}

// ---------------------------------------------------------------- loop control
// What a loop costs besides its body: per iteration the compiled loop keeps, one counter
// update, one compare and one branch (kControlPerIteration warp instructions). Unrolling by U
// leaves floor(T/U) iterations and a remainder of T mod U, so the count follows the unroll
// factor the compiler will use:
//   `#pragma unroll N`: N; `#pragma nounroll`: 1;
//   `#pragma unroll` or no pragma, compile-time trip count: fully unrolled (none left) when
//     T <= kFullUnrollTrips, else kDefaultUnroll;
//   no compile-time trip count: kDefaultUnroll (what nvcc and NVRTC do without a pragma).
constexpr double kControlPerIteration = 3;
constexpr int kDefaultUnroll = 4;
constexpr std::int64_t kFullUnrollTrips = 32;
constexpr int kFull = 0;  ///< unroll factor "all of it"

}  // namespace

// ---------------------------------------------------------------- conversions
// A conversion between an integer and a floating type, or between float and double, is a warp
// instruction of its own (I2F, F2I, F2F) that runs at a fraction of the FP32 rate. One whose
// operand is a constant expression is folded by the compiler and costs nothing; one whose
// operand no enclosing loop changes is hoisted out of the loops it does not depend on and
// counted once per entry of the outermost of them.

/// The variables a loop's iterations may change (cached per loop statement).
const std::unordered_set<const VarDecl*>* Sim::varying_of(
    const Stmt* loop_stmt, std::initializer_list<const Stmt*> parts) {
  auto [it, fresh] = varying_.try_emplace(loop_stmt);
  if (fresh)
    for (const Stmt* p : parts) assigned_vars(p, it->second), declared_vars(p, it->second);
  return &it->second;
}

/// Whether `e` reads none of `varying` and no memory (a load might see another value).
bool Sim::invariant(const Stmt* e, const std::unordered_set<const VarDecl*>& varying) {
  if (!e) return true;
  if (isa<ArraySubscriptExpr>(e) || isa<CallExpr>(e)) return false;
  if (auto* u = dyn_cast<UnaryOperator>(e); u && u->getOpcode() == UO_Deref) return false;
  if (auto* m = dyn_cast<MemberExpr>(e); m && m->isArrow()) return false;
  if (auto* d = dyn_cast<DeclRefExpr>(e)) {
    auto* v = dyn_cast<VarDecl>(d->getDecl());
    // (threadIdx and its kin are const globals; a writable global or shared variable is
    // memory another thread may store to.)
    if (v && (varying.count(v) || v->hasAttr<CUDASharedAttr>() ||
              (v->hasGlobalStorage() && !v->getType().isConstQualified())))
      return false;
  }
  for (const Stmt* c : e->children())
    if (!invariant(c, varying)) return false;
  return true;
}

void Sim::count_conversion(const CastExpr* c, const Expr* operand) {
  if (!active_ || operand->isValueDependent() || operand->isEvaluatable(ctx_)) return;
  size_t k = loops_.size();
  while (k > 0 && loops_[k - 1].varying && invariant(operand, *loops_[k - 1].varying)) --k;
  if (k == loops_.size()) {
    conversions_ += weight_;
  } else if (loops_[k].hoisted.insert(c).second) {
    conversions_ += loops_[k].entry_weight;
  }
}

/// The unroll pragma of an attributed loop: its count, kFull for `#pragma unroll`, 1 for
/// `#pragma nounroll`; nullopt without one (or with a count clang cannot evaluate).
std::optional<int> Sim::unroll_hint(const AttributedStmt* a) const {
  for (const Attr* at : a->getAttrs()) {
    const auto* h = dyn_cast<LoopHintAttr>(at);
    if (!h) continue;
    if (h->getOption() == LoopHintAttr::UnrollCount && h->getValue()) {
      Expr::EvalResult r;
      if (h->getValue()->EvaluateAsInt(r, ctx_) && r.Val.getInt().getSExtValue() >= 1)
        return static_cast<int>(r.Val.getInt().getSExtValue());
    } else if (h->getOption() == LoopHintAttr::Unroll) {
      if (h->getState() == LoopHintAttr::Disable) return 1;
      return kFull;
    }
  }
  return std::nullopt;
}

/// The trip count when the compiler can see it: start, bound and step are constant expressions.
std::optional<std::int64_t> Sim::static_trips(const Stmt* init, const Expr* cond, const Expr* inc) {
  auto p = pattern(cond, inc);
  if (!p) return std::nullopt;
  const Expr* start = nullptr;
  if (auto* ds = dyn_cast_or_null<DeclStmt>(init)) {
    if (ds->isSingleDecl() && ds->getSingleDecl() == p->iv) start = p->iv->getInit();
  } else if (auto* b = dyn_cast_or_null<BinaryOperator>(init)) {
    if (b->getOpcode() == BO_Assign && as_var(b->getLHS()) == p->iv) start = b->getRHS();
  }
  auto constant = [&](const Expr* e) -> std::optional<std::int64_t> {
    Expr::EvalResult r;
    if (!e || e->isValueDependent() || !e->EvaluateAsInt(r, ctx_)) return std::nullopt;
    return r.Val.getInt().getSExtValue();
  };
  auto x = constant(start), e = constant(p->bound);
  auto st = p->step ? constant(p->step) : std::optional<std::int64_t>(1);
  if (!x || !e || !st) return std::nullopt;
  return trips_of(p->cmp, *x, *e, p->sign * *st);
}

/// The unroll factor the compiler will use for a loop (kFull: no loop left).
int Sim::unroll_factor(std::optional<int> hint, const Stmt* init, const Expr* cond, const Expr* inc,
                       bool do_while) {
  if (hint && *hint != kFull) return *hint;
  auto t = do_while ? std::nullopt : static_trips(init, cond, inc);
  if (t && *t <= kFullUnrollTrips) return kFull;
  return kDefaultUnroll;
}

void Sim::count_control(std::int64_t trips, int unroll, double weight) {
  if (unroll == kFull || trips <= 0) return;
  const std::int64_t left = trips / unroll + trips % unroll;
  control_ += kControlPerIteration * static_cast<double>(left) * weight;
}

const VarDecl* Sim::as_var(const Expr* e) {
  if (auto* d = dyn_cast<DeclRefExpr>(e->IgnoreParenImpCasts()))
    return dyn_cast<VarDecl>(d->getDecl());
  return nullptr;
}

std::optional<Sim::Pattern> Sim::pattern(const Expr* cond, const Expr* inc) {
  if (!cond || !inc) return std::nullopt;
  Pattern p;
  auto* c = dyn_cast<BinaryOperator>(cond->IgnoreParenImpCasts());
  if (!c || !c->isComparisonOp() || c->getOpcode() == BO_EQ) return std::nullopt;
  if (const VarDecl* v = as_var(c->getLHS())) {
    p.iv = v, p.bound = c->getRHS(), p.cmp = c->getOpcode();
  } else if (const VarDecl* v2 = as_var(c->getRHS())) {
    p.iv = v2, p.bound = c->getLHS();
    switch (c->getOpcode()) {
      case BO_LT:
        p.cmp = BO_GT;
        break;
      case BO_GT:
        p.cmp = BO_LT;
        break;
      case BO_LE:
        p.cmp = BO_GE;
        break;
      case BO_GE:
        p.cmp = BO_LE;
        break;
      default:
        p.cmp = c->getOpcode();
    }
  } else {
    return std::nullopt;
  }
  if (!p.iv->getType()->isIntegralOrEnumerationType()) return std::nullopt;
  const Expr* i = inc->IgnoreParenImpCasts();
  if (auto* u = dyn_cast<UnaryOperator>(i)) {
    if (!u->isIncrementDecrementOp() || as_var(u->getSubExpr()) != p.iv) return std::nullopt;
    p.sign = u->isIncrementOp() ? 1 : -1;
  } else if (auto* b = dyn_cast<CompoundAssignOperator>(i)) {
    if (as_var(b->getLHS()) != p.iv ||
        (b->getOpcode() != BO_AddAssign && b->getOpcode() != BO_SubAssign))
      return std::nullopt;
    p.step = b->getRHS();
    p.sign = b->getOpcode() == BO_AddAssign ? 1 : -1;
  } else {
    return std::nullopt;
  }
  return p;
}

/// Per-lane trip count of a recognised loop, or nullopt when not all active lanes agree.
std::optional<std::int64_t> Sim::trip_count(const Pattern& p) {
  Val v0 = var_value(p.iv);
  Val b = eval(p.bound);
  Val st = p.step ? eval(p.step) : Val::constant(1);
  if (v0.k != Val::Int || b.k != Val::Int || st.k != Val::Int) return std::nullopt;
  std::optional<std::int64_t> t;
  for (int l = 0; l < W; ++l) {
    if (!(active_ >> l & 1)) continue;
    auto n = trips_of(p.cmp, v0.v[l], b.v[l], p.sign * st.v[l]);
    if (!n || (t && *t != *n)) return std::nullopt;
    t = n;
  }
  return t;
}

/// Iterations of `for (v = x; v CMP e; v += s)`; nullopt when it never ends or CMP is another.
std::optional<std::int64_t> Sim::trips_of(BinaryOperatorKind cmp, std::int64_t x, std::int64_t e,
                                          std::int64_t s) {
  if (s == 0) return std::nullopt;
  std::int64_t n = 0;
  switch (cmp) {
    case BO_LT:
      n = s > 0 ? std::max<std::int64_t>(0, (e - x + s - 1) / s) : (x < e ? -1 : 0);
      break;
    case BO_LE:
      n = s > 0 ? std::max<std::int64_t>(0, (e - x) / s + 1) : (x <= e ? -1 : 0);
      break;
    case BO_GT:
      n = s < 0 ? std::max<std::int64_t>(0, (x - e + (-s) - 1) / (-s)) : (x > e ? -1 : 0);
      break;
    case BO_GE:
      n = s < 0 ? std::max<std::int64_t>(0, (x - e) / (-s) + 1) : (x >= e ? -1 : 0);
      break;
    case BO_NE:
      n = ((e - x) % s == 0 && (e - x) / s >= 0) ? (e - x) / s : -1;
      break;
    default:
      return std::nullopt;
  }
  if (n < 0) return std::nullopt;
  return n;
}

void Sim::loop(const Stmt* init, const Expr* cond, const Expr* inc, const Stmt* body, bool do_while,
               const Stmt* where) {
  const std::optional<int> hint = hint_;
  hint_.reset();  // a loop nested in this one has its own pragma or none
  if (init) exec(init);
  if (!active_) return;
  const int unroll = unroll_factor(hint, init, cond, inc, do_while);
  const auto* varying = varying_of(where, {cond, inc, body});
  // A long loop with one trip count for all lanes and no loop-carried integer state is sampled.
  if (!do_while) {
    if (auto p = pattern(cond, inc)) {
      std::unordered_set<const VarDecl*> assigned, declared;
      assigned_vars(body, assigned);
      declared_vars(body, declared);
      bool carried = assigned.count(p->iv) > 0;
      for (const VarDecl* v : assigned)
        if (!declared.count(v) && v != p->iv &&
            (v->getType()->isIntegralOrEnumerationType() || v->getType()->isPointerType()))
          carried = true;
      std::unordered_set<const VarDecl*> in_bound;
      assigned_vars(p->bound, in_bound);  // bounds with side effects are not sampled
      if (!carried && in_bound.empty() && !contains_jump(body)) {
        auto t = trip_count(*p);
        if (t && *t > 8) {
          count_control(*t, unroll, weight_);
          sampled(*p, *t, body, assigned, declared, varying, unroll);
          return;
        }
      }
    }
  }
  Mask exited = 0;
  loops_.push_back({});
  loops_.back().varying = varying;
  loops_.back().entry_weight = weight_;
  Mask in_loop = active_;
  const double entry_weight = weight_;
  int it = 0;
  for (;; ++it) {
    active_ = in_loop;
    if (!active_) break;
    if (it >= kMaxIterations) {
      notes_.insert("loop at " + at(where) + " stopped after " + std::to_string(kMaxIterations) +
                    " iterations with varying trip counts: later iterations not counted");
      break;
    }
    if (cond && !(do_while && it == 0)) {
      Val c = eval(cond);
      bool unk = false;
      Mask t = truth(c, unk);
      if (unk) {
        if (it > 0) {
          exited |= active_;
          active_ = 0;
          break;
        }
        notes_.insert("loop at " + at(where) +
                      " has a data-dependent condition: one iteration counted");
      } else {
        exited |= active_ & ~t;
        active_ = t;
        if (!active_) break;
      }
    }
    if (unroll != kFull) end_round(1.0 / unroll);
    exec(body);
    active_ |= loops_.back().cont;
    loops_.back().cont = 0;
    if (inc && active_) eval(inc);
    in_loop = active_;
  }
  active_ = exited | loops_.back().brk | (it >= kMaxIterations ? in_loop : 0);
  loops_.pop_back();
  count_control(it, unroll, entry_weight);
}

/// `assigned` and `declared`: the variables the body assigns and declares (loop() has them);
/// `varying`: what the loop's iterations may change (the hoisting of conversions).
void Sim::sampled(const Pattern& p, std::int64_t trips, const Stmt* body,
                  const std::unordered_set<const VarDecl*>& assigned,
                  const std::unordered_set<const VarDecl*>& declared,
                  const std::unordered_set<const VarDecl*>* varying, int unroll) {
  Val v0 = var_value(p.iv);
  Val st = p.step ? eval(p.step) : Val::constant(1);
  Mask entry = active_;
  const std::int64_t samples[4] = {0, 1, trips / 2, trips - 1};
  double saved_weight = weight_;
  weight_ = saved_weight * static_cast<double>(trips) / 4.0;
  loops_.push_back({});
  loops_.back().varying = varying;
  loops_.back().entry_weight = saved_weight;
  for (std::int64_t t : samples) {
    Val iv = v0;
    for (int l = 0; l < W; ++l) iv.v[l] = wrap(p.iv->getType(), v0.v[l] + p.sign * t * st.v[l]);
    vars_[p.iv] = iv;
    active_ = entry;
    if (unroll != kFull) end_round(1.0 / unroll);
    exec(body);
  }
  loops_.pop_back();
  weight_ = saved_weight;
  // What the body carries across iterations (a float sum: never an integer, or the loop would
  // not be sampled) saw 4 of the iterations: its value is unknown after the loop, not a guess.
  for (const VarDecl* v : assigned)
    if (!declared.count(v) && v != p.iv && vars_.count(v)) vars_[v] = Val{};
  Val end = v0;
  for (int l = 0; l < W; ++l) end.v[l] = wrap(p.iv->getType(), v0.v[l] + p.sign * trips * st.v[l]);
  vars_[p.iv] = end;
  active_ = entry;
}

}  // namespace gputune::pruner::traffic
