// Memory-traffic analysis with clang libTooling: see traffic.h for what it owns and its limits.
// Compiled with -fno-rtti (LLVM 14 is built without RTTI); only llvm::dyn_cast/isa are used.
#include "pruner/traffic.h"

#include <clang/AST/ASTContext.h>
#include <clang/AST/Attr.h>
#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/RecordLayout.h>
#include <clang/AST/Stmt.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Frontend/ASTUnit.h>
#include <clang/Tooling/Tooling.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "variants/cuda_parse.h"

namespace gputune::pruner {

namespace {

using namespace clang;

constexpr int W = 32;
using Lanes = std::array<std::int64_t, W>;
using Mask = std::uint32_t;

/// A value per lane. Sym is a value the analysis cannot compute but can compare between lanes:
/// lane l holds `S(s[l]) + v[l]`, where S(s) is an unknown quantity named by the symbol s and
/// s == 0 means none (v[l] is the whole value). Lanes whose symbols are equal hold the same
/// unknown: values loaded from one address in the same instruction, a scalar argument, and what
/// pure arithmetic makes of equal operands. With arr set, a Sym is an address into that array
/// whose per-lane base (S) depends on data.
struct Val {
  enum Kind : std::uint8_t { Unknown, Uninit, Int, Ptr, Sym, Flt };
  Kind k = Unknown;
  int arr = -1;  // Ptr (and Unknown or Sym addresses into a known array): which array
  Lanes v{};  // Int: values; Ptr: byte offsets from the array's start; Sym: known parts; Flt: the
              // bits of each lane's double (a float's value where the type is float)
  std::array<std::uint32_t, W> s{};  // Sym: symbols (0: none)
  static Val constant(std::int64_t c) {
    Val r;
    r.k = Int;
    r.v.fill(c);
    return r;
  }
  static Val floating(double d) {
    Val r;
    r.k = Flt;
    r.v.fill(std::bit_cast<std::int64_t>(d));
    return r;
  }
  double f(int l) const { return std::bit_cast<double>(v[static_cast<size_t>(l)]); }
  void set_f(int l, double d) { v[static_cast<size_t>(l)] = std::bit_cast<std::int64_t>(d); }
};

/// A well-mixed, never-zero 32-bit symbol of two words (splitmix64's finalizer).
std::uint32_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  const auto r = static_cast<std::uint32_t>(z ^ (z >> 32));
  return r ? r : 1;
}

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

struct ArrayDesc {
  std::string name;
  std::string space;  // global, shared, local, constant
  std::int64_t bytes = -1;
  const ArrayData* data = nullptr;  // its contents, where the job gives them (read-only arrays)
};

class Abort : public std::exception {
 public:
  explicit Abort(std::string m) : msg(std::move(m)) {}
  const char* what() const noexcept override { return msg.c_str(); }
  std::string msg;
};

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

class Sim {
 public:
  Sim(ASTContext& ctx, const TrafficInput& in) : ctx_(ctx), sm_(ctx.getSourceManager()), in_(in) {}

  void run(const FunctionDecl* kernel, TrafficReport& rep) {
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
  static constexpr std::int64_t kEdgeBlocks = 8;

 private:
  struct Frame {
    Val ret;
    bool has_ret = false;
  };
  struct LoopCtx {
    Mask brk = 0, cont = 0;
    /// What an iteration may change: the variables the loop assigns or declares (its counter
    /// included). An expression that reads none of them, and no memory, is the same in every
    /// iteration: the compiler computes it once, before the loop.
    const std::unordered_set<const VarDecl*>* varying = nullptr;
    double entry_weight = 1;                  ///< weight_ where the loop was entered
    std::unordered_set<const Expr*> hoisted;  ///< conversions already counted at the entry
  };

  ASTContext& ctx_;
  SourceManager& sm_;
  const TrafficInput& in_;
  const FunctionDecl* kernel_ = nullptr;
  std::array<std::int64_t, 3> bid_{};
  std::array<Lanes, 3> tid_{};
  std::vector<ArrayDesc> arrays_;
  std::unordered_map<const VarDecl*, int> array_of_;
  std::unordered_map<const VarDecl*, Val> vars_;
  std::map<std::pair<int, std::int64_t>, std::pair<Val, Mask>> local_vals_;  ///< remember_local
  std::map<std::pair<const Expr*, bool>, Access> accesses_;
  std::unordered_map<const Expr*, std::optional<std::int64_t>> const_cache_;
  std::set<std::string> notes_;
  std::vector<Frame> frames_;
  std::vector<LoopCtx> loops_;
  std::vector<const FunctionDecl*> call_stack_;
  double weight_ = 1;
  Mask active_ = 0;
  // ------------------------------------------------------- memory-level parallelism
  // A warp's global loads come in rounds: loads the warp can issue before it must wait for one
  // of them. A round ends at a barrier and at each iteration a loop keeps after unrolling (a
  // loop unrolled by U batches the loads of U iterations: each iteration then counts 1/U of a
  // round); a fully unrolled loop's loads stay in their round. load_rounds_ sums rounds over the
  // grid as the other totals do (the model's latency term: rounds x latency / resident warps).
  double load_rounds_ = 0;
  bool round_open_ = false;
  double round_scale_ = 1;  ///< what the next round counts: 1, or 1/U after a loop's iteration
  void end_round(double next_scale) {
    round_open_ = false;
    round_scale_ = next_scale;
  }
  long steps_ = 0;
  static constexpr long kMaxSteps = 4'000'000;
  static constexpr int kMaxIterations = 4096;

  int line_of(SourceLocation l) const { return static_cast<int>(sm_.getPresumedLineNumber(l)); }
  std::string at(const Stmt* s) const {
    return "line " + std::to_string(line_of(s->getBeginLoc()));
  }

  std::int64_t size_of(QualType t) const {
    if (t->isIncompleteType() || t->isDependentType()) return 0;
    return static_cast<std::int64_t>(ctx_.getTypeSizeInChars(t).getQuantity());
  }

  int array_for(const VarDecl* v, const std::string& space, std::int64_t bytes) {
    auto it = array_of_.find(v);
    if (it != array_of_.end()) return it->second;
    arrays_.push_back({v->getNameAsString(), space, bytes});
    int id = static_cast<int>(arrays_.size() - 1);
    array_of_[v] = id;
    return id;
  }

  void bind_params() {
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

  // ---------------------------------------------------------------- integers
  std::int64_t wrap(QualType t, std::int64_t v) const {
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

  std::optional<std::int64_t> folded(const Expr* e) {
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

  static bool known(const Val& v) { return v.k == Val::Int || v.k == Val::Ptr || v.k == Val::Flt; }

  // ---------------------------------------------------------------- floating point
  /// A value of floating type `t` as the GPU holds it: a float is rounded to single precision.
  static double as_type(double x, QualType t) {
    return t->isSpecificBuiltinType(BuiltinType::Float) ? static_cast<double>(static_cast<float>(x))
                                                        : x;
  }
  /// `a op b` on floating values known per lane (arithmetic gives Flt, a comparison Int).
  std::optional<Val> float_arith(BinaryOperatorKind op, const Val& a, const Val& b,
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
  Val float_op(BinaryOperatorKind op, const Val& a, const Val& b, QualType rt) const {
    if (auto v = float_arith(op, a, b, rt)) return *v;
    return opaque(mix(10, op), {&a, &b});
  }
  /// A conversion to or from a floating type of a value known per lane. Floating to integer
  /// truncates toward zero and saturates at the type's range, as the GPU's cvt.rzi does (NaN: 0).
  std::optional<Val> float_cast(CastKind k, const Val& v, QualType to) const {
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
  static Val opaque(std::uint64_t key, std::initializer_list<const Val*> ops) {
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
  static Val uniform(std::uint32_t sym) {
    Val r;
    r.k = Val::Sym;
    r.s.fill(sym);
    return r;
  }
  /// `base + sign * idx` for an address (Ptr, or Sym with arr) and an index of `sz`-byte
  /// elements (Int or Sym): a Ptr when no lane has a symbol left, else an address Sym.
  static Val offset_ptr(Val base, const Val& idx, std::int64_t sz, int sign) {
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
  static bool is_address(const Val& v) {
    return v.arr >= 0 && (v.k == Val::Ptr || v.k == Val::Sym);
  }
  /// The value a load of type `t` from address `a` gives: from an array whose contents the job
  /// gives, the values themselves (where every active lane's element lies inside it); else lanes
  /// that read the same address now read the same value (a fresh symbol per load instruction
  /// executed, so a store in between is no matter).
  Val loaded(const Val& a, QualType t) {
    if (!is_address(a)) return Val{};
    if (auto v = from_data(a, t)) return *v;
    ++loads_;
    Val r;
    r.k = Val::Sym;
    for (int l = 0; l < W; ++l) r.s[static_cast<size_t>(l)] = mix(mix(6, loads_), *identity(a, l));
    return r;
  }
  std::uint64_t loads_ = 0;

  std::optional<Val> from_data(const Val& a, QualType t) const {
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
  void merge(Val& cur, const Val& rhs) const {
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

  Mask truth(const Val& c, bool& unknown) const {
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

  void count_flops(double per_lane) {
    if (active_) flops_ += per_lane * std::popcount(active_) * weight_;
  }
  double flops_ = 0;

  // ---------------------------------------------------------------- conversions
  // A conversion between an integer and a floating type, or between float and double, is a warp
  // instruction of its own (I2F, F2I, F2F) that runs at a fraction of the FP32 rate. One whose
  // operand is a constant expression is folded by the compiler and costs nothing; one whose
  // operand no enclosing loop changes is hoisted out of the loops it does not depend on and
  // counted once per entry of the outermost of them.
  double conversions_ = 0;

  /// The variables a loop's iterations may change (cached per loop statement).
  const std::unordered_set<const VarDecl*>* varying_of(const Stmt* loop_stmt,
                                                       std::initializer_list<const Stmt*> parts) {
    auto [it, fresh] = varying_.try_emplace(loop_stmt);
    if (fresh)
      for (const Stmt* p : parts) assigned_vars(p, it->second), declared_vars(p, it->second);
    return &it->second;
  }
  std::unordered_map<const Stmt*, std::unordered_set<const VarDecl*>> varying_;

  /// Whether `e` reads none of `varying` and no memory (a load might see another value).
  static bool invariant(const Stmt* e, const std::unordered_set<const VarDecl*>& varying) {
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

  void count_conversion(const CastExpr* c, const Expr* operand) {
    if (!active_ || operand->isValueDependent() || operand->isEvaluatable(ctx_)) return;
    size_t k = loops_.size();
    while (k > 0 && loops_[k - 1].varying && invariant(operand, *loops_[k - 1].varying)) --k;
    if (k == loops_.size()) {
      conversions_ += weight_;
    } else if (loops_[k].hoisted.insert(c).second) {
      conversions_ += loops_[k].entry_weight;
    }
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
  static constexpr double kControlPerIteration = 3;
  static constexpr int kDefaultUnroll = 4;
  static constexpr std::int64_t kFullUnrollTrips = 32;
  static constexpr int kFull = 0;  ///< unroll factor "all of it"
  std::optional<int> hint_;        ///< the unroll pragma on the statement being entered
  double control_ = 0;

  /// The unroll pragma of an attributed loop: its count, kFull for `#pragma unroll`, 1 for
  /// `#pragma nounroll`; nullopt without one (or with a count clang cannot evaluate).
  std::optional<int> unroll_hint(const AttributedStmt* a) const {
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
  std::optional<std::int64_t> static_trips(const Stmt* init, const Expr* cond, const Expr* inc) {
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
  int unroll_factor(std::optional<int> hint, const Stmt* init, const Expr* cond, const Expr* inc,
                    bool do_while) {
    if (hint && *hint != kFull) return *hint;
    auto t = do_while ? std::nullopt : static_trips(init, cond, inc);
    if (t && *t <= kFullUnrollTrips) return kFull;
    return kDefaultUnroll;
  }

  void count_control(std::int64_t trips, int unroll, double weight) {
    if (unroll == kFull || trips <= 0) return;
    const std::int64_t left = trips / unroll + trips % unroll;
    control_ += kControlPerIteration * static_cast<double>(left) * weight;
  }

  // ---------------------------------------------------------------- memory
  static constexpr const char* kUncoalescedNote =
      "address depends on data or an unknown value: counted as uncoalesced";
  static constexpr const char* kRelativeNote =
      "address depends on loaded data: lanes that share the data-dependent part are counted as "
      "they lie relative to each other (at an average alignment), other lanes in sectors of "
      "their own";

  /// 32-byte sectors one warp request touches when its address is a Sym: lanes are grouped by
  /// symbol; lanes without one touch known sectors, and each group with one lies at an unknown
  /// base, so it counts the sectors its offsets touch averaged over every alignment of that base
  /// to a sector (in steps of gcd(element size, 32), where such bases fall). Groups are never
  /// assumed to share a sector.
  double relative_sectors(const Val& a, std::int64_t bytes, bool& grouped) const {
    std::vector<std::pair<std::uint32_t, std::int64_t>> lanes;
    for (int l = 0; l < W; ++l)
      if (active_ >> l & 1)
        lanes.emplace_back(a.s[static_cast<size_t>(l)], a.v[static_cast<size_t>(l)]);
    std::sort(lanes.begin(), lanes.end());
    const std::int64_t step = std::gcd<std::int64_t>(bytes, 32);
    double total = 0;
    std::vector<std::int64_t> sec;
    for (size_t i = 0; i < lanes.size();) {
      size_t j = i;
      while (j < lanes.size() && lanes[j].first == lanes[i].first) ++j;
      const bool known_base = lanes[i].first == 0;
      grouped |= !known_base && j - i > 1;
      double sum = 0;
      int alignments = 0;
      for (std::int64_t base = 0; base < (known_base ? 1 : 32); base += step, ++alignments) {
        sec.clear();
        for (size_t k = i; k < j; ++k) {
          const std::int64_t lo = base + lanes[k].second;
          for (std::int64_t x = lo >> 5; x <= (lo + bytes - 1) >> 5; ++x) sec.push_back(x);
        }
        std::sort(sec.begin(), sec.end());
        sum += static_cast<double>(std::unique(sec.begin(), sec.end()) - sec.begin());
      }
      total += sum / alignments;
      i = j;
    }
    return total;
  }

  void record(const Expr* site, const Val& a, std::int64_t bytes, bool store) {
    if (a.arr < 0 || !active_ || bytes <= 0) return;
    const ArrayDesc& d = arrays_[static_cast<size_t>(a.arr)];
    if (d.space != "global" && d.space != "shared") return;
    Access& acc = accesses_[{site, store}];
    if (acc.line == 0) {
      PresumedLoc p = sm_.getPresumedLoc(site->getExprLoc());
      acc.line = p.isValid() ? static_cast<int>(p.getLine()) : 0;
      acc.column = p.isValid() ? static_cast<int>(p.getColumn()) : 0;
      acc.array = d.name;
      acc.space = d.space;
      acc.kind = store ? "store" : "load";
      acc.element_bytes = static_cast<int>(bytes);
    }
    int n = std::popcount(active_);
    double w = weight_;
    if (d.space == "global" && !store && !round_open_) {
      load_rounds_ += w * round_scale_;
      round_open_ = true;
    }
    acc.requests += w;
    acc.bytes += w * n * static_cast<double>(bytes);
    if (d.space == "global") {
      double ideal = std::max<double>(1, std::ceil(n * static_cast<double>(bytes) / 32.0));
      acc.ideal += w * ideal;
      if (a.k == Val::Sym) {
        bool grouped = false;
        acc.sectors += w * relative_sectors(a, bytes, grouped);
        acc.analysed = false;
        if (grouped)
          acc.note = kRelativeNote;
        else if (acc.note.empty())
          acc.note = kUncoalescedNote;
        return;
      }
      if (a.k != Val::Ptr) {
        acc.analysed = false;
        if (acc.note.empty()) acc.note = kUncoalescedNote;
        acc.sectors += w * n * std::max<double>(1, std::ceil(static_cast<double>(bytes) / 32.0));
        return;
      }
      std::int64_t sec[W * 8];
      int k = 0;
      for (int l = 0; l < W; ++l) {
        if (!(active_ >> l & 1)) continue;
        for (std::int64_t s = a.v[l] >> 5; s <= (a.v[l] + bytes - 1) >> 5 && k < W * 8; ++s)
          sec[k++] = s;
      }
      std::sort(sec, sec + k);
      acc.sectors += w * static_cast<double>(std::unique(sec, sec + k) - sec);
    } else {
      // Shared memory: 32 banks of 4 bytes; an access of e bytes per lane is served in phases of
      // 128/e lanes; each phase takes as many wavefronts as the most distinct words in one bank.
      int per_phase =
          static_cast<int>(std::max<std::int64_t>(1, 128 / std::max<std::int64_t>(4, bytes)));
      double ideal = 0, waves = 0;
      for (int p0 = 0; p0 < W; p0 += per_phase) {
        Mask pm = 0;
        for (int l = p0; l < std::min(W, p0 + per_phase); ++l) pm |= Mask(1) << l;
        pm &= active_;
        if (!pm) continue;
        ideal += 1;
        if (a.k != Val::Ptr) {
          waves += std::popcount(pm);
          continue;
        }
        std::vector<std::int64_t> words;
        for (int l = p0; l < std::min(W, p0 + per_phase); ++l) {
          if (!(pm >> l & 1)) continue;
          for (std::int64_t wd = a.v[l] >> 2; wd <= (a.v[l] + bytes - 1) >> 2; ++wd)
            words.push_back(wd);
        }
        std::sort(words.begin(), words.end());
        words.erase(std::unique(words.begin(), words.end()), words.end());
        int per_bank[32] = {};
        int worst = 1;
        for (auto wd : words) worst = std::max(worst, ++per_bank[((wd % 32) + 32) % 32]);
        waves += worst;
      }
      if (a.k != Val::Ptr) acc.analysed = false;
      acc.ideal += w * ideal;
      acc.wavefronts += w * waves;
    }
    if (!acc.analysed && acc.note.empty()) acc.note = kUncoalescedNote;
  }

  /// The address an lvalue denotes: Ptr into a tracked array, Unknown with arr set (an index we
  /// cannot evaluate), or Unknown with arr -1 (a local variable, not memory we track).
  Val addr(const Expr* e) {
    e = e->IgnoreParens();
    if (auto* s = dyn_cast<ArraySubscriptExpr>(e)) {
      Val base = eval(s->getBase());
      Val idx = eval(s->getIdx());
      std::int64_t sz = size_of(s->getType());
      if (!is_address(base) || (idx.k != Val::Int && idx.k != Val::Sym)) {
        Val r;
        r.arr = base.arr;
        return r;
      }
      return offset_ptr(base, idx, sz, 1);
    }
    if (auto* u = dyn_cast<UnaryOperator>(e); u && u->getOpcode() == UO_Deref)
      return eval(u->getSubExpr());
    if (auto* d = dyn_cast<DeclRefExpr>(e)) {
      if (auto* v = dyn_cast<VarDecl>(d->getDecl())) {
        if (v->getType()->isArrayType()) {
          Val r;
          r.k = Val::Ptr;
          r.arr = array_for(v, space_of(v), size_of(v->getType()));
          return r;
        }
      }
      return Val{};
    }
    if (auto* m = dyn_cast<MemberExpr>(e)) {
      Val base = m->isArrow() ? eval(m->getBase()) : addr(m->getBase());
      if (is_address(base))
        if (auto* f = dyn_cast<FieldDecl>(m->getMemberDecl())) {
          std::int64_t off = static_cast<std::int64_t>(ctx_.getFieldOffset(f) / 8);
          for (auto& x : base.v) x += off;
        }
      return base;
    }
    eval(e);
    return Val{};
  }

  std::string space_of(const VarDecl* v) const {
    if (v->hasAttr<CUDASharedAttr>()) return "shared";
    if (v->hasAttr<CUDAConstantAttr>()) return "constant";
    if (v->hasGlobalStorage()) return "global";
    return "local";
  }

  Val load(const Expr* lv) {
    const Expr* e = lv->IgnoreParens();
    if (auto* d = dyn_cast<DeclRefExpr>(e)) {
      if (auto* v = dyn_cast<VarDecl>(d->getDecl())) {
        if (!v->getType()->isArrayType()) return var_value(v);
      }
    }
    if (auto* m = dyn_cast<MemberExpr>(e)) {
      if (auto b = builtin(m)) return *b;
      if (!m->isArrow() && !is_memory(m->getBase())) return Val{};
    }
    Val a = addr(e);
    if (a.arr >= 0 && arrays_[static_cast<size_t>(a.arr)].space == "local") return recall_local(a);
    if (a.arr >= 0) record(e, a, size_of(lv->getType()), false);
    return loaded(a, lv->getType());
  }

  /// Whether an lvalue is in memory we track (not a local scalar or struct variable).
  bool is_memory(const Expr* e) {
    e = e->IgnoreParens();
    if (auto* d = dyn_cast<DeclRefExpr>(e)) {
      auto* v = dyn_cast<VarDecl>(d->getDecl());
      return v && v->getType()->isArrayType() && space_of(v) != "local";
    }
    if (auto* m = dyn_cast<MemberExpr>(e)) return m->isArrow() || is_memory(m->getBase());
    return true;  // subscripts and dereferences: decided by addr()
  }

  std::optional<Val> builtin(const MemberExpr* m) {
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

  Val var_value(const VarDecl* v) {
    auto it = vars_.find(v);
    if (it != vars_.end()) return it->second;
    if (v->getType()->isIntegralOrEnumerationType()) {
      if (const APValue* c = v->evaluateValue(); c && c->isInt())
        return Val::constant(c->getInt().getExtValue());
    }
    if (v->getNameAsString() == "warpSize") return Val::constant(32);
    return Val{};
  }

  void assign_var(const VarDecl* v, const Val& rhs) { merge(vars_[v], rhs); }

  /// Stores to an lvalue: a local variable takes the value; memory records a store.
  void store(const Expr* lhs, const Val& value, const Expr* site) {
    const Expr* e = lhs->IgnoreParens();
    if (auto* d = dyn_cast<DeclRefExpr>(e)) {
      if (auto* v = dyn_cast<VarDecl>(d->getDecl()); v && !v->getType()->isArrayType()) {
        assign_var(v, value);
        return;
      }
    }
    if (auto* m = dyn_cast<MemberExpr>(e); m && !m->isArrow() && !is_memory(m->getBase())) return;
    Val a = addr(e);
    if (a.arr >= 0 && arrays_[static_cast<size_t>(a.arr)].space == "local") {
      if (a.k == Val::Ptr)
        remember_local(a.arr, a, value);
      else
        forget_local(a.arr);  // an element we cannot tell: none of the array is known now
      return;
    }
    if (a.arr >= 0) record(site, a, size_of(lhs->getType()), true);
  }

  /// Values of a thread's local arrays (`bool gt_ok[2][4]` in the generated code, indexed by
  /// unrolled constants), per element and lane, so that branches on them are decided per lane
  /// rather than counted both ways.
  void remember_local(int arr, const Val& at, const Val& value) {
    for (int l = 0; l < W; ++l) {
      if (!(active_ >> l & 1)) continue;
      auto& [v, known] = local_vals_[{arr, at.v[l]}];
      if (value.k == Val::Int) {
        v.v[l] = value.v[l];
        known |= Mask(1) << l;
      } else {
        known &= ~(Mask(1) << l);
      }
    }
  }
  void forget_local(int arr) {
    for (auto it = local_vals_.lower_bound({arr, std::numeric_limits<std::int64_t>::min()});
         it != local_vals_.end() && it->first.first == arr;)
      it = local_vals_.erase(it);
  }
  Val recall_local(const Val& at) const {
    if (at.k != Val::Ptr) return Val{};
    Val out = Val::constant(0);
    for (int l = 0; l < W; ++l) {
      if (!(active_ >> l & 1)) continue;
      auto it = local_vals_.find({at.arr, at.v[l]});
      if (it == local_vals_.end() || !(it->second.second >> l & 1)) return Val{};
      out.v[l] = it->second.first.v[l];
    }
    return out;
  }

  Val arith(BinaryOperatorKind op, const Val& a, const Val& b, QualType rt, QualType lt) {
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
          z = (y >= 0 && y < 63) ? static_cast<std::int64_t>(static_cast<std::uint64_t>(x) << y)
                                 : 0;
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

  static BinaryOperatorKind base_op(BinaryOperatorKind op) {
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

  Val select(const Val& c, const Val& t, const Val& f) {
    if (t.k != f.k || t.arr != f.arr || !known(t)) return Val{};
    Val r = t;
    for (int l = 0; l < W; ++l) r.v[l] = c.v[l] ? t.v[l] : f.v[l];
    return r;
  }

  Val eval(const Expr* e) {
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

  Val cast(const CastExpr* c, const Expr* sub) {
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
            (c->getCastKind() != CK_FloatingCast ||
             size_of(c->getType()) != size_of(sub->getType())))
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

  Val unary(const UnaryOperator* u) {
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

  Val binary(const BinaryOperator* b) {
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

  Val conditional(const ConditionalOperator* c) {
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

  Val call(const CallExpr* c) {
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
    // A pipelined variant's asynchronous copy (kCpAsync, variants/naive/emitter.cpp): a load
    // from global memory on the lanes whose `ok` holds (the others copy nothing: zero-fill), a
    // store to the shared buffer on every lane. Its commit and wait move no data.
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
  void exec(const Stmt* s) {
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

  struct Pattern {
    const VarDecl* iv = nullptr;
    const Expr* bound = nullptr;
    BinaryOperatorKind cmp = BO_LT;
    const Expr* step = nullptr;  // null: +-1
    int sign = 1;
  };

  static const VarDecl* as_var(const Expr* e) {
    if (auto* d = dyn_cast<DeclRefExpr>(e->IgnoreParenImpCasts()))
      return dyn_cast<VarDecl>(d->getDecl());
    return nullptr;
  }

  std::optional<Pattern> pattern(const Expr* cond, const Expr* inc) {
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
  std::optional<std::int64_t> trip_count(const Pattern& p) {
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
  static std::optional<std::int64_t> trips_of(BinaryOperatorKind cmp, std::int64_t x,
                                              std::int64_t e, std::int64_t s) {
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

  void loop(const Stmt* init, const Expr* cond, const Expr* inc, const Stmt* body, bool do_while,
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
  void sampled(const Pattern& p, std::int64_t trips, const Stmt* body,
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
    for (int l = 0; l < W; ++l)
      end.v[l] = wrap(p.iv->getType(), v0.v[l] + p.sign * trips * st.v[l]);
    vars_[p.iv] = end;
    active_ = entry;
  }

  void finish(TrafficReport& rep) {
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
};

}  // namespace

TrafficReport analyse_traffic(const TrafficInput& in) {
  TrafficReport rep;
  ParsedCuda parsed = parse_cuda(in.source + instance_reference(in.kernel_name), in.options,
                                 "kernel.cu", "gputune-traffic");
  if (!parsed.ast) {
    rep.error = "clang could not parse the kernel: " + parsed.error;
    return rep;
  }
  std::unique_ptr<ASTUnit> ast = std::move(parsed.ast);
  ASTContext& ctx = ast->getASTContext();
  const FunctionDecl* kernel = find_kernel(ctx, in.kernel_name);
  if (!kernel) {
    rep.error = "no __global__ function named '" + in.kernel_name + "' with a body";
    return rep;
  }
  rep.parsed = true;
  try {
    Sim sim(ctx, in);
    sim.run(kernel, rep);
  } catch (const Abort& a) {
    rep.error = a.msg;
  }
  rep.notes.insert(rep.notes.begin(), parsed.notes.begin(), parsed.notes.end());
  return rep;
}

}  // namespace gputune::pruner
