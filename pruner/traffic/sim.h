/** \file pruner/traffic/sim.h
 * Internal to gputune_traffic (the libTooling traffic analysis; what it does and its limits:
 * pruner/traffic.h). Owns: the symbolic warp simulator, class Sim, declared once here; its member
 * functions are defined across this folder by purpose:
 *   values.cpp     the value domain (Val, symbols, per-lane integers and floats): arithmetic,
 *                  conversions, merging;
 *   eval.cpp       the evaluation of expressions over it (casts, operators, conditionals);
 *   accesses.cpp   global and shared memory: addresses, loads and stores, sectors per warp
 *                  request, bank conflicts, load rounds, a thread's local arrays;
 *   execution.cpp  the driver (analyse_traffic, Sim::run), statements, calls and barriers, the
 *                  report;
 *   loops.cpp      loops: trip counts, sampling, unrolling and its control instructions, the
 *                  hoisting of conversions.
 * Must not: be included outside pruner/traffic/ (it exposes clang types), use RTTI (LLVM 14 is
 * built without it: the library is compiled with -fno-rtti; only llvm::dyn_cast/isa are used), or
 * hold state outside a Sim (one per analysis: analyse_traffic is thread-safe). */
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/AST/Expr.h>
#include <clang/AST/Stmt.h>
#include <clang/Basic/SourceManager.h>

#include <array>
#include <bit>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "pruner/traffic.h"

namespace gputune::pruner::traffic {

using namespace clang;  // (this namespace is the analysis's own: only pruner/traffic/ is in it)

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
inline std::uint32_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  const auto r = static_cast<std::uint32_t>(z ^ (z >> 32));
  return r ? r : 1;
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

class Sim {
 public:
  Sim(ASTContext& ctx, const TrafficInput& in) : ctx_(ctx), sm_(ctx.getSourceManager()), in_(in) {}

  void run(const FunctionDecl* kernel, TrafficReport& rep);  // execution.cpp
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
  struct Pattern {
    const VarDecl* iv = nullptr;
    const Expr* bound = nullptr;
    BinaryOperatorKind cmp = BO_LT;
    const Expr* step = nullptr;  // null: +-1
    int sign = 1;
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
  std::uint64_t loads_ = 0;  ///< load instructions executed (values.cpp: loaded)
  double flops_ = 0;
  double conversions_ = 0;  ///< I2F, F2I, F2F warp instructions (loops.cpp: count_conversion)
  std::unordered_map<const Stmt*, std::unordered_set<const VarDecl*>> varying_;  ///< varying_of
  std::optional<int> hint_;  ///< the unroll pragma on the statement being entered
  double control_ = 0;       ///< loop control warp instructions (loops.cpp: count_control)

  int line_of(SourceLocation l) const { return static_cast<int>(sm_.getPresumedLineNumber(l)); }
  std::string at(const Stmt* s) const {
    return "line " + std::to_string(line_of(s->getBeginLoc()));
  }

  std::int64_t size_of(QualType t) const {
    if (t->isIncompleteType() || t->isDependentType()) return 0;
    return static_cast<std::int64_t>(ctx_.getTypeSizeInChars(t).getQuantity());
  }
  static bool known(const Val& v) { return v.k == Val::Int || v.k == Val::Ptr || v.k == Val::Flt; }
  static bool is_address(const Val& v) {
    return v.arr >= 0 && (v.k == Val::Ptr || v.k == Val::Sym);
  }

  // ---------------------------------------------------------------- values.cpp
  std::int64_t wrap(QualType t, std::int64_t v) const;
  std::optional<std::int64_t> folded(const Expr* e);
  static double as_type(double x, QualType t);
  std::optional<Val> float_arith(BinaryOperatorKind op, const Val& a, const Val& b,
                                 QualType rt) const;
  Val float_op(BinaryOperatorKind op, const Val& a, const Val& b, QualType rt) const;
  std::optional<Val> float_cast(CastKind k, const Val& v, QualType to) const;
  static Val opaque(std::uint64_t key, std::initializer_list<const Val*> ops);
  static Val uniform(std::uint32_t sym);
  static Val offset_ptr(Val base, const Val& idx, std::int64_t sz, int sign);
  Val loaded(const Val& a, QualType t);
  std::optional<Val> from_data(const Val& a, QualType t) const;
  void merge(Val& cur, const Val& rhs) const;
  Mask truth(const Val& c, bool& unknown) const;
  void count_flops(double per_lane);
  std::optional<Val> builtin(const MemberExpr* m);
  Val var_value(const VarDecl* v);
  void assign_var(const VarDecl* v, const Val& rhs);
  Val arith(BinaryOperatorKind op, const Val& a, const Val& b, QualType rt, QualType lt);
  static BinaryOperatorKind base_op(BinaryOperatorKind op);
  Val select(const Val& c, const Val& t, const Val& f);
  // ---------------------------------------------------------------- eval.cpp
  Val eval(const Expr* e);
  Val cast(const CastExpr* c, const Expr* sub);
  Val unary(const UnaryOperator* u);
  Val binary(const BinaryOperator* b);
  Val conditional(const ConditionalOperator* c);

  // ---------------------------------------------------------------- accesses.cpp
  int array_for(const VarDecl* v, const std::string& space, std::int64_t bytes);
  double relative_sectors(const Val& a, std::int64_t bytes, bool& grouped) const;
  void record(const Expr* site, const Val& a, std::int64_t bytes, bool store);
  Val addr(const Expr* e);
  std::string space_of(const VarDecl* v) const;
  Val load(const Expr* lv);
  bool is_memory(const Expr* e);
  void store(const Expr* lhs, const Val& value, const Expr* site);
  void remember_local(int arr, const Val& at, const Val& value);
  void forget_local(int arr);
  Val recall_local(const Val& at) const;

  // ---------------------------------------------------------------- execution.cpp
  void bind_params();
  Val call(const CallExpr* c);
  void exec(const Stmt* s);
  void finish(TrafficReport& rep);

  // ---------------------------------------------------------------- loops.cpp
  const std::unordered_set<const VarDecl*>* varying_of(const Stmt* loop_stmt,
                                                       std::initializer_list<const Stmt*> parts);
  static bool invariant(const Stmt* e, const std::unordered_set<const VarDecl*>& varying);
  void count_conversion(const CastExpr* c, const Expr* operand);
  std::optional<int> unroll_hint(const AttributedStmt* a) const;
  std::optional<std::int64_t> static_trips(const Stmt* init, const Expr* cond, const Expr* inc);
  int unroll_factor(std::optional<int> hint, const Stmt* init, const Expr* cond, const Expr* inc,
                    bool do_while);
  void count_control(std::int64_t trips, int unroll, double weight);
  static const VarDecl* as_var(const Expr* e);
  std::optional<Pattern> pattern(const Expr* cond, const Expr* inc);
  std::optional<std::int64_t> trip_count(const Pattern& p);
  static std::optional<std::int64_t> trips_of(BinaryOperatorKind cmp, std::int64_t x,
                                              std::int64_t e, std::int64_t s);
  void loop(const Stmt* init, const Expr* cond, const Expr* inc, const Stmt* body, bool do_while,
            const Stmt* where);
  void sampled(const Pattern& p, std::int64_t trips, const Stmt* body,
               const std::unordered_set<const VarDecl*>& assigned,
               const std::unordered_set<const VarDecl*>& declared,
               const std::unordered_set<const VarDecl*>* varying, int unroll);
};

}  // namespace gputune::pruner::traffic
