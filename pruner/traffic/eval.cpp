// The traffic analysis's evaluation of expressions (see sim.h for the layout of
// pruner/traffic/): an expression's value per lane of a warp (values.cpp's domain), through its
// casts, unary and binary operators and conditionals, counting flops and reaching memory through
// load, store and addr (accesses.cpp). Owns: Sim's members listed under eval.cpp in sim.h.
// Must not: count memory traffic itself or walk statements (execution.cpp, loops.cpp).
#include <clang/AST/ExprCXX.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>

#include "pruner/traffic/sim.h"

namespace gputune::pruner::traffic {

Val Sim::eval(const Expr* e) {
  if (++steps_ > kMaxSteps)
    throw Abort("analysis stopped after " + std::to_string(kMaxSteps) + " evaluation steps");
  e = e->IgnoreParens();
  if (!e->getType()->isDependentType() && e->getType()->isIntegralOrEnumerationType() &&
      !isa<DeclRefExpr>(e) && !isa<MemberExpr>(e))
    if (auto c = folded(e)) return Val::constant(*c);
  if (auto* c = dyn_cast<ImplicitCastExpr>(e)) return cast(c, c->getSubExpr());
  if (auto* c = dyn_cast<ExplicitCastExpr>(e)) return cast(c, c->getSubExpr());
  if (auto* d = dyn_cast<DeclRefExpr>(e)) {
    if (auto* v = dyn_cast<VarDecl>(d->getDecl())) {
      if (v->getType()->isArrayType()) return addr(d);
      return var_value(v);
    }
    if (auto c = folded(e)) return Val::constant(*c);
    return Val{};
  }
  if (auto* m = dyn_cast<MemberExpr>(e)) {
    if (auto b = builtin(m)) return *b;
    if (m->getType()->isArrayType()) return addr(m);
    return Val{};
  }
  if (auto* u = dyn_cast<UnaryOperator>(e)) return unary(u);
  if (auto* b = dyn_cast<BinaryOperator>(e)) return binary(b);
  if (auto* c = dyn_cast<ConditionalOperator>(e)) return conditional(c);
  if (auto* s = dyn_cast<ArraySubscriptExpr>(e)) return addr(s);
  if (auto* oc = dyn_cast<CXXOperatorCallExpr>(e);
      oc && oc->getOperator() == OO_Equal && oc->getNumArgs() == 2) {
    // `out[i] = v;` on a record (float4): a store of the whole record; a record on the right
    // that lives in memory is loaded.
    const Expr* src = oc->getArg(1)->IgnoreImpCasts();
    if (src->isGLValue())
      load(src);
    else
      eval(src);
    store(oc->getArg(0), Val{}, oc);
    return Val{};
  }
  if (auto* c = dyn_cast<CallExpr>(e)) return call(c);
  if (auto* f = dyn_cast<FloatingLiteral>(e))
    return Val::floating(f->getValueAsApproximateDouble());
  if (auto* c = dyn_cast<CXXConstructExpr>(e)) {
    // `float4 v = A[i];`: a copy of a record out of memory is a load of the whole record.
    if (c->getNumArgs() == 1 && c->getConstructor()->isCopyOrMoveConstructor()) {
      const Expr* src = c->getArg(0)->IgnoreImpCasts();
      if (src->isGLValue()) return load(src);
    }
    for (const Expr* a : c->arguments()) eval(a);
    return Val{};
  }
  if (auto* f = dyn_cast<FullExpr>(e)) return eval(f->getSubExpr());
  if (auto* m = dyn_cast<MaterializeTemporaryExpr>(e)) return eval(m->getSubExpr());
  if (auto* b = dyn_cast<CXXBindTemporaryExpr>(e)) return eval(b->getSubExpr());
  for (const Stmt* c : e->children())
    if (auto* ce = dyn_cast_or_null<Expr>(c)) eval(ce);
  return Val{};
}

Val Sim::cast(const CastExpr* c, const Expr* sub) {
  switch (c->getCastKind()) {
    case CK_LValueToRValue:
      return load(sub);
    case CK_ArrayToPointerDecay:
      return addr(sub);
    case CK_IntegralCast:
    case CK_IntegralToBoolean:
    case CK_BooleanToSignedIntegral: {
      Val v = eval(sub);
      // A cast between integer types keeps a symbol's known part (a wrap is not modelled).
      if (v.k == Val::Sym && c->getCastKind() == CK_IntegralCast) return v;
      if (v.k == Val::Sym)
        return opaque(mix(12, static_cast<std::uint64_t>(c->getCastKind())), {&v});
      if (v.k != Val::Int) return Val{};
      for (auto& x : v.v)
        x = wrap(c->getType(), c->getCastKind() == CK_BooleanToSignedIntegral ? -x : x);
      return v;
    }
    case CK_PointerToBoolean: {
      Val v = eval(sub);
      return v.k == Val::Ptr ? Val::constant(1) : Val{};
    }
    case CK_PointerToIntegral: {
      // An address as an integer is only ever tested for alignment (`p % 16 == 0` before a
      // vector load): its offset from the array's start, which cudaMalloc (256 bytes) and the
      // shared-memory declarations align, gives the same remainder for powers of two.
      Val v = eval(sub);
      if (v.k != Val::Ptr) return Val{};
      v.k = Val::Int;
      v.arr = -1;
      return v;
    }
    case CK_NoOp:
    case CK_BitCast:
    case CK_UncheckedDerivedToBase:
    case CK_DerivedToBase:
    case CK_ToVoid:
    case CK_ConstructorConversion:
    case CK_UserDefinedConversion:
    case CK_AddressSpaceConversion:
      return eval(sub);
    case CK_IntegralToFloating:
    case CK_FloatingToIntegral:
    case CK_FloatingCast:
    case CK_FloatingToBoolean: {
      Val v = eval(sub);
      if (c->getCastKind() != CK_FloatingToBoolean &&
          (c->getCastKind() != CK_FloatingCast || size_of(c->getType()) != size_of(sub->getType())))
        count_conversion(c, sub);
      if (auto r = float_cast(c->getCastKind(), v, c->getType())) return *r;
      return opaque(mix(mix(12, static_cast<std::uint64_t>(c->getCastKind())),
                        static_cast<std::uint64_t>(size_of(c->getType()))),
                    {&v});
    }
    default:
      eval(sub);
      return Val{};
  }
}

Val Sim::unary(const UnaryOperator* u) {
  const Expr* s = u->getSubExpr();
  switch (u->getOpcode()) {
    case UO_AddrOf:
      return addr(s);
    case UO_Deref:
      return load(u);
    case UO_PreInc:
    case UO_PreDec:
    case UO_PostInc:
    case UO_PostDec: {
      Val old = load(s);
      Val r = old;
      if (old.k == Val::Int || old.k == Val::Ptr ||
          (old.k == Val::Sym && !s->getType()->isFloatingType())) {
        std::int64_t step = u->isIncrementOp() ? 1 : -1;
        if (s->getType()->isPointerType()) step *= size_of(s->getType()->getPointeeType());
        for (auto& x : r.v) x = wrap(s->getType(), x + step);
      } else if (s->getType()->isFloatingType()) {
        count_flops(1);
      }
      store(s, r, u);
      return u->isPrefix() ? r : old;
    }
    case UO_Minus:
    case UO_Not:
    case UO_LNot:
    case UO_Plus: {
      Val v = eval(s);
      if (v.k == Val::Flt && (u->getOpcode() == UO_Minus || u->getOpcode() == UO_Plus)) {
        if (u->getOpcode() == UO_Minus)
          for (int l = 0; l < W; ++l) v.set_f(l, -v.f(l));
        return v;
      }
      if (v.k == Val::Sym || v.k == Val::Flt) return opaque(mix(11, u->getOpcode()), {&v});
      if (v.k != Val::Int) return Val{};
      for (auto& x : v.v) {
        x = u->getOpcode() == UO_Minus  ? -x
            : u->getOpcode() == UO_Not  ? ~x
            : u->getOpcode() == UO_LNot ? !x
                                        : x;
        x = wrap(u->getType(), x);
      }
      return v;
    }
    default:
      eval(s);
      return Val{};
  }
}

Val Sim::binary(const BinaryOperator* b) {
  BinaryOperatorKind op = b->getOpcode();
  if (op == BO_Assign) {
    Val rhs = eval(b->getRHS());
    store(b->getLHS(), rhs, b);
    return rhs;
  }
  if (b->isCompoundAssignmentOp()) {
    Val old = load(b->getLHS());
    Val rhs = eval(b->getRHS());
    Val r;
    if (b->getLHS()->getType()->isFloatingType() || b->getLHS()->getType()->isVectorType()) {
      count_flops(1);
      if (b->getLHS()->getType()->isFloatingType())
        r = float_op(base_op(op), old, rhs, b->getLHS()->getType());
    } else {
      r = arith(base_op(op), old, rhs, b->getLHS()->getType(), b->getLHS()->getType());
    }
    store(b->getLHS(), r, b);
    return r;
  }
  if (op == BO_Comma) {
    eval(b->getLHS());
    return eval(b->getRHS());
  }
  if (op == BO_LAnd || op == BO_LOr) {
    Val l = eval(b->getLHS());
    bool unk = false;
    Mask lt = truth(l, unk);
    Mask saved = active_;
    active_ = unk ? saved : (op == BO_LAnd ? lt : saved & ~lt);
    Val r = active_ ? eval(b->getRHS()) : Val::constant(0);
    active_ = saved;
    if (unk || (r.k != Val::Int && r.k != Val::Ptr)) return Val{};
    Val out;
    out.k = Val::Int;
    for (int i = 0; i < W; ++i) {
      bool lv = lt >> i & 1, rv = r.k == Val::Ptr ? true : r.v[i] != 0;
      out.v[i] = op == BO_LAnd ? (lv && rv) : (lv || rv);
    }
    return out;
  }
  Val l = eval(b->getLHS());
  Val r = eval(b->getRHS());
  if (b->getType()->isFloatingType() || b->getLHS()->getType()->isFloatingType()) {
    if (op == BO_Add || op == BO_Sub || op == BO_Mul || op == BO_Div) count_flops(1);
    return float_op(op, l, r, b->getType());
  }
  return arith(op, l, r, b->getType(), b->getLHS()->getType());
}

Val Sim::conditional(const ConditionalOperator* c) {
  Val cond = eval(c->getCond());
  bool unk = false;
  Mask t = truth(cond, unk);
  Mask saved = active_;
  if (unk) {
    notes_.insert("data-dependent condition at " + at(c) + ": both sides counted");
    eval(c->getTrueExpr());
    eval(c->getFalseExpr());
    return Val{};
  }
  Val tv, fv;
  active_ = t;
  if (active_) tv = eval(c->getTrueExpr());
  active_ = saved & ~t;
  if (active_) fv = eval(c->getFalseExpr());
  active_ = saved;
  if (!t) return fv;
  if (!(saved & ~t)) return tv;
  return select(cond, tv, fv);
}

}  // namespace gputune::pruner::traffic
