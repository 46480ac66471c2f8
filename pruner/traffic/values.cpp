// The traffic analysis's value domain (see sim.h for the layout of pruner/traffic/): values per
// lane (integers, floats, addresses, symbols for what cannot be computed), their arithmetic,
// conversions and merging; eval.cpp evaluates expressions over them. Owns: Sim's members listed
// under values.cpp in sim.h. Must not: count memory traffic (accesses.cpp records it; eval reaches
// it through load, store and addr) or walk statements (execution.cpp, loops.cpp).
#include <clang/AST/ExprCXX.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>

#include "pruner/traffic/sim.h"

namespace gputune::pruner::traffic {

namespace {

/// What lane l of a value is, as a symbol equal between lanes exactly when their values are
/// (an Int lane and a Sym lane without a symbol are the same number); nullopt when unknown.
std::optional<std::uint32_t> identity(const Val& x, int l) {
  const auto v = static_cast<std::uint64_t>(x.v[static_cast<size_t>(l)]);
  switch (x.k) {
    case Val::Int:
      return mix(1, v);
    case Val::Sym: {
      const std::uint32_t s = x.s[static_cast<size_t>(l)];
      return s ? mix(mix(2, s), v) : mix(1, v);
    }
    case Val::Ptr:
      return mix(mix(3, static_cast<std::uint64_t>(x.arr)), v);
    case Val::Flt:
      return mix(14, v);
    default:
      return std::nullopt;
  }
}

/// The symbol of k * S(s), for an address's scaled index (0 stays 0).
std::uint32_t scaled(std::uint32_t s, std::int64_t k) {
  return s == 0 || k == 1 ? s : mix(mix(5, static_cast<std::uint64_t>(k)), s);
}
/// The symbol of S(a) + S(b).
std::uint32_t summed(std::uint32_t a, std::uint32_t b) {
  if (!a || !b) return a | b;
  return mix(mix(8, std::min(a, b)), std::max(a, b));
}

}  // namespace

// ---------------------------------------------------------------- integers
std::int64_t Sim::wrap(QualType t, std::int64_t v) const {
  if (t->isBooleanType()) return v != 0;
  if (!t->isIntegralOrEnumerationType()) return v;
  auto bits = ctx_.getTypeSize(t);
  bool sgn = t->isSignedIntegerOrEnumerationType();
  switch (bits) {
    case 8:
      return sgn ? static_cast<std::int8_t>(v) : static_cast<std::uint8_t>(v);
    case 16:
      return sgn ? static_cast<std::int16_t>(v) : static_cast<std::uint16_t>(v);
    case 32:
      return sgn ? static_cast<std::int32_t>(v) : static_cast<std::uint32_t>(v);
    default:
      return v;
  }
}

std::optional<std::int64_t> Sim::folded(const Expr* e) {
  auto it = const_cache_.find(e);
  if (it != const_cache_.end()) return it->second;
  std::optional<std::int64_t> r;
  if (!e->isValueDependent() && e->getType()->isIntegralOrEnumerationType() &&
      !e->HasSideEffects(ctx_)) {
    Expr::EvalResult res;
    if (e->EvaluateAsInt(res, ctx_)) r = res.Val.getInt().getExtValue();
  }
  const_cache_[e] = r;
  return r;
}

// ---------------------------------------------------------------- floating point
/// A value of floating type `t` as the GPU holds it: a float is rounded to single precision.
double Sim::as_type(double x, QualType t) {
  return t->isSpecificBuiltinType(BuiltinType::Float) ? static_cast<double>(static_cast<float>(x))
                                                      : x;
}

/// `a op b` on floating values known per lane (arithmetic gives Flt, a comparison Int).
std::optional<Val> Sim::float_arith(BinaryOperatorKind op, const Val& a, const Val& b,
                                    QualType rt) const {
  if (a.k != Val::Flt || b.k != Val::Flt) return std::nullopt;
  const bool cmp =
      op == BO_LT || op == BO_GT || op == BO_LE || op == BO_GE || op == BO_EQ || op == BO_NE;
  if (!cmp && op != BO_Add && op != BO_Sub && op != BO_Mul && op != BO_Div) return std::nullopt;
  Val r = cmp ? Val::constant(0) : Val::floating(0);
  for (int l = 0; l < W; ++l) {
    const double x = a.f(l), y = b.f(l);
    switch (op) {
      case BO_Add:
        r.set_f(l, as_type(x + y, rt));
        break;
      case BO_Sub:
        r.set_f(l, as_type(x - y, rt));
        break;
      case BO_Mul:
        r.set_f(l, as_type(x * y, rt));
        break;
      case BO_Div:
        r.set_f(l, as_type(x / y, rt));
        break;
      default:
        r.v[static_cast<size_t>(l)] = op == BO_LT   ? x < y
                                      : op == BO_GT ? x > y
                                      : op == BO_LE ? x <= y
                                      : op == BO_GE ? x >= y
                                      : op == BO_EQ ? x == y
                                                    : x != y;
    }
  }
  return r;
}

/// `a op b` of floating type: computed where both are known per lane, else a new unknown,
/// equal where the operands are.
Val Sim::float_op(BinaryOperatorKind op, const Val& a, const Val& b, QualType rt) const {
  if (auto v = float_arith(op, a, b, rt)) return *v;
  return opaque(mix(10, op), {&a, &b});
}

/// A conversion to or from a floating type of a value known per lane. Floating to integer
/// truncates toward zero and saturates at the type's range, as the GPU's cvt.rzi does (NaN: 0).
std::optional<Val> Sim::float_cast(CastKind k, const Val& v, QualType to) const {
  if (k == CK_IntegralToFloating && v.k == Val::Int) {
    Val r = Val::floating(0);
    for (int l = 0; l < W; ++l)
      r.set_f(l, as_type(static_cast<double>(v.v[static_cast<size_t>(l)]), to));
    return r;
  }
  if (v.k != Val::Flt) return std::nullopt;
  if (k == CK_FloatingCast) {
    Val r = v;
    for (int l = 0; l < W; ++l) r.set_f(l, as_type(v.f(l), to));
    return r;
  }
  if (k == CK_FloatingToBoolean) {
    Val r = Val::constant(0);
    for (int l = 0; l < W; ++l) r.v[static_cast<size_t>(l)] = v.f(l) != 0;
    return r;
  }
  if (k == CK_FloatingToIntegral) {
    const auto bits = static_cast<int>(ctx_.getTypeSize(to));
    const bool sgn = to->isSignedIntegerOrEnumerationType();
    const double lo = sgn ? -std::ldexp(1.0, bits - 1) : 0.0;
    // (64-bit ranges end just short of 2^63, which an int64 cannot hold.)
    const double hi =
        std::min(sgn ? std::ldexp(1.0, bits - 1) - 1 : std::ldexp(1.0, bits) - 1, 9.2e18);
    Val r = Val::constant(0);
    for (int l = 0; l < W; ++l) {
      const double x = v.f(l);
      r.v[static_cast<size_t>(l)] =
          static_cast<std::int64_t>(std::isnan(x) ? 0.0 : std::clamp(std::trunc(x), lo, hi));
    }
    return r;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- symbols
/// The result of a pure operation `key` on values the analysis cannot compute: equal on the
/// lanes where every operand is equal (a Sym per lane), unknown when an operand is unknown.
Val Sim::opaque(std::uint64_t key, std::initializer_list<const Val*> ops) {
  Val r;
  r.k = Val::Sym;
  for (int l = 0; l < W; ++l) {
    std::uint32_t h = mix(9, key);
    for (const Val* o : ops) {
      auto id = identity(*o, l);
      if (!id) return Val{};
      h = mix(h, *id);
    }
    r.s[static_cast<size_t>(l)] = h;
  }
  return r;
}

Val Sim::uniform(std::uint32_t sym) {
  Val r;
  r.k = Val::Sym;
  r.s.fill(sym);
  return r;
}

/// `base + sign * idx` for an address (Ptr, or Sym with arr) and an index of `sz`-byte
/// elements (Int or Sym): a Ptr when no lane has a symbol left, else an address Sym.
Val Sim::offset_ptr(Val base, const Val& idx, std::int64_t sz, int sign) {
  bool sym = false;
  for (int l = 0; l < W; ++l) {
    const auto i = static_cast<size_t>(l);
    const std::uint32_t is = idx.k == Val::Sym ? scaled(idx.s[i], sign * sz) : 0;
    base.s[i] = base.k == Val::Sym ? summed(base.s[i], is) : is;
    base.v[i] += sign * idx.v[i] * sz;
    sym |= base.s[i] != 0;
  }
  base.k = sym ? Val::Sym : Val::Ptr;
  return base;
}

/// The value a load of type `t` from address `a` gives: from an array whose contents the job
/// gives, the values themselves (where every active lane's element lies inside it); else lanes
/// that read the same address now read the same value (a fresh symbol per load instruction
/// executed, so a store in between is no matter).
Val Sim::loaded(const Val& a, QualType t) {
  if (!is_address(a)) return Val{};
  if (auto v = from_data(a, t)) return *v;
  ++loads_;
  Val r;
  r.k = Val::Sym;
  for (int l = 0; l < W; ++l) r.s[static_cast<size_t>(l)] = mix(mix(6, loads_), *identity(a, l));
  return r;
}

std::optional<Val> Sim::from_data(const Val& a, QualType t) const {
  if (a.k != Val::Ptr) return std::nullopt;
  const ArrayData* d = arrays_[static_cast<size_t>(a.arr)].data;
  if (!d || !d->bytes) return std::nullopt;
  const std::int64_t n = size_of(t);
  const bool fp = t->isRealFloatingType(), in = t->isIntegralOrEnumerationType();
  if (!(fp && (n == 4 || n == 8)) && !(in && (n == 1 || n == 2 || n == 4 || n == 8)))
    return std::nullopt;
  const auto& bytes = *d->bytes;
  Val r = fp ? Val::floating(0) : Val::constant(0);
  for (int l = 0; l < W; ++l) {
    if (!(active_ >> l & 1)) continue;
    const std::int64_t off = a.v[static_cast<size_t>(l)];
    if (off < 0 || off % n || off + n > static_cast<std::int64_t>(bytes.size()))
      return std::nullopt;
    const unsigned char* p = bytes.data() + off;
    if (fp) {
      double x = 0;
      if (n == 4) {
        float f = 0;
        std::memcpy(&f, p, 4);
        x = f;
      } else {
        std::memcpy(&x, p, 8);
      }
      r.set_f(l, x);
    } else {
      std::uint64_t u = 0;
      std::memcpy(&u, p, static_cast<size_t>(n));  // little-endian, as the GPU
      r.v[static_cast<size_t>(l)] = wrap(t, static_cast<std::int64_t>(u));
    }
  }
  return r;
}

/// `cur = rhs` on the active lanes, keeping the others.
void Sim::merge(Val& cur, const Val& rhs) const {
  auto as_sym = [](Val& x) {
    if (x.k == Val::Int) {
      x.k = Val::Sym;
      x.s.fill(0);
    }
  };
  if (cur.k != rhs.k && (cur.k == Val::Int || cur.k == Val::Sym) &&
      (rhs.k == Val::Int || rhs.k == Val::Sym) && cur.arr == rhs.arr) {
    Val r = rhs;
    as_sym(cur);
    as_sym(r);
    return merge(cur, r);
  }
  if (cur.k == Val::Uninit) {
    Val keep = cur;
    cur = rhs;
    for (int l = 0; l < W; ++l)
      if (!(active_ >> l & 1)) {
        cur.v[static_cast<size_t>(l)] = keep.v[static_cast<size_t>(l)];
        cur.s[static_cast<size_t>(l)] = keep.s[static_cast<size_t>(l)];
      }
    return;
  }
  if (cur.k == rhs.k && cur.arr == rhs.arr) {
    for (int l = 0; l < W; ++l)
      if (active_ >> l & 1) {
        cur.v[static_cast<size_t>(l)] = rhs.v[static_cast<size_t>(l)];
        cur.s[static_cast<size_t>(l)] = rhs.s[static_cast<size_t>(l)];
      }
    return;
  }
  const int arr = rhs.arr == cur.arr ? rhs.arr : -1;
  cur = Val{};  // mixing kinds across lanes: unknown
  cur.arr = arr;
}

Mask Sim::truth(const Val& c, bool& unknown) const {
  unknown = false;
  if (c.k == Val::Ptr) return active_;
  if (c.k != Val::Int) {
    unknown = true;
    return active_;
  }
  Mask m = 0;
  for (int l = 0; l < W; ++l)
    if (c.v[l]) m |= Mask(1) << l;
  return m & active_;
}

void Sim::count_flops(double per_lane) {
  if (active_) flops_ += per_lane * std::popcount(active_) * weight_;
}

std::optional<Val> Sim::builtin(const MemberExpr* m) {
  auto* d = dyn_cast<DeclRefExpr>(m->getBase()->IgnoreParenImpCasts());
  if (!d) return std::nullopt;
  std::string base = d->getDecl()->getNameAsString();
  std::string f = m->getMemberDecl()->getNameAsString();
  int dim = f == "x" ? 0 : f == "y" ? 1 : f == "z" ? 2 : -1;
  if (dim < 0) return std::nullopt;
  if (base == "threadIdx") {
    Val r;
    r.k = Val::Int;
    r.v = tid_[static_cast<size_t>(dim)];
    return r;
  }
  if (base == "blockIdx") return Val::constant(bid_[static_cast<size_t>(dim)]);
  if (base == "blockDim") return Val::constant(in_.block[static_cast<size_t>(dim)]);
  if (base == "gridDim") return Val::constant(in_.grid[static_cast<size_t>(dim)]);
  return std::nullopt;
}

Val Sim::var_value(const VarDecl* v) {
  auto it = vars_.find(v);
  if (it != vars_.end()) return it->second;
  if (v->getType()->isIntegralOrEnumerationType()) {
    if (const APValue* c = v->evaluateValue(); c && c->isInt())
      return Val::constant(c->getInt().getExtValue());
  }
  if (v->getNameAsString() == "warpSize") return Val::constant(32);
  return Val{};
}

void Sim::assign_var(const VarDecl* v, const Val& rhs) { merge(vars_[v], rhs); }

Val Sim::arith(BinaryOperatorKind op, const Val& a, const Val& b, QualType rt, QualType lt) {
  if (is_address(a) && (b.k == Val::Int || b.k == Val::Sym) && (op == BO_Add || op == BO_Sub))
    return offset_ptr(a, b, size_of(lt->getPointeeType()), op == BO_Add ? 1 : -1);
  if ((a.k == Val::Int || a.k == Val::Sym) && is_address(b) && op == BO_Add)
    return arith(op, b, a, rt, rt);
  if (a.k == Val::Sym || b.k == Val::Sym) {
    // Adding or subtracting a known number keeps the symbol (`sample + shift`); anything
    // else is a new unknown, equal where the operands are.
    const bool integral = rt->isIntegralOrEnumerationType() && !rt->isBooleanType();
    if (integral && a.k == Val::Sym && b.k == Val::Int && (op == BO_Add || op == BO_Sub)) {
      Val r = a;
      for (int l = 0; l < W; ++l) r.v[l] += (op == BO_Add ? 1 : -1) * b.v[l];
      return r;
    }
    if (integral && a.k == Val::Int && b.k == Val::Sym && op == BO_Add) {
      Val r = b;
      for (int l = 0; l < W; ++l) r.v[l] += a.v[l];
      return r;
    }
    return opaque(mix(13, op), {&a, &b});
  }
  if (a.k == Val::Ptr && b.k == Val::Ptr && op == BO_Sub && a.arr == b.arr) {
    Val r;
    r.k = Val::Int;
    std::int64_t sz = std::max<std::int64_t>(1, size_of(lt->getPointeeType()));
    for (int l = 0; l < W; ++l) r.v[l] = (a.v[l] - b.v[l]) / sz;
    return r;
  }
  if (a.k != Val::Int || b.k != Val::Int) return Val{};
  Val r;
  r.k = Val::Int;
  bool uns = lt->isUnsignedIntegerOrEnumerationType();
  for (int l = 0; l < W; ++l) {
    std::int64_t x = a.v[l], y = b.v[l], z = 0;
    switch (op) {
      case BO_Add:
        z = x + y;
        break;
      case BO_Sub:
        z = x - y;
        break;
      case BO_Mul:
        z = x * y;
        break;
      case BO_Div:
        if (y == 0) {
          if (active_ >> l & 1) return Val{};
          z = 0;
        } else {
          z = uns ? static_cast<std::int64_t>(static_cast<std::uint64_t>(x) /
                                              static_cast<std::uint64_t>(y))
                  : x / y;
        }
        break;
      case BO_Rem:
        if (y == 0) {
          if (active_ >> l & 1) return Val{};
          z = 0;
        } else {
          z = uns ? static_cast<std::int64_t>(static_cast<std::uint64_t>(x) %
                                              static_cast<std::uint64_t>(y))
                  : x % y;
        }
        break;
      case BO_Shl:
        z = (y >= 0 && y < 63) ? static_cast<std::int64_t>(static_cast<std::uint64_t>(x) << y) : 0;
        break;
      case BO_Shr:
        z = (y >= 0 && y < 63) ? x >> y : 0;
        break;
      case BO_And:
        z = x & y;
        break;
      case BO_Or:
        z = x | y;
        break;
      case BO_Xor:
        z = x ^ y;
        break;
      case BO_LT:
        z = uns ? static_cast<std::uint64_t>(x) < static_cast<std::uint64_t>(y) : x < y;
        break;
      case BO_GT:
        z = uns ? static_cast<std::uint64_t>(x) > static_cast<std::uint64_t>(y) : x > y;
        break;
      case BO_LE:
        z = uns ? static_cast<std::uint64_t>(x) <= static_cast<std::uint64_t>(y) : x <= y;
        break;
      case BO_GE:
        z = uns ? static_cast<std::uint64_t>(x) >= static_cast<std::uint64_t>(y) : x >= y;
        break;
      case BO_EQ:
        z = x == y;
        break;
      case BO_NE:
        z = x != y;
        break;
      default:
        return Val{};
    }
    r.v[l] = wrap(rt, z);
  }
  return r;
}

BinaryOperatorKind Sim::base_op(BinaryOperatorKind op) {
  switch (op) {
    case BO_AddAssign:
      return BO_Add;
    case BO_SubAssign:
      return BO_Sub;
    case BO_MulAssign:
      return BO_Mul;
    case BO_DivAssign:
      return BO_Div;
    case BO_RemAssign:
      return BO_Rem;
    case BO_ShlAssign:
      return BO_Shl;
    case BO_ShrAssign:
      return BO_Shr;
    case BO_AndAssign:
      return BO_And;
    case BO_OrAssign:
      return BO_Or;
    case BO_XorAssign:
      return BO_Xor;
    default:
      return op;
  }
}

Val Sim::select(const Val& c, const Val& t, const Val& f) {
  if (t.k != f.k || t.arr != f.arr || !known(t)) return Val{};
  Val r = t;
  for (int l = 0; l < W; ++l) r.v[l] = c.v[l] ? t.v[l] : f.v[l];
  return r;
}

}  // namespace gputune::pruner::traffic
