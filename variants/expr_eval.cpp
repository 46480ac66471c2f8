// The expression evaluator's back half (expr.h): the tree of expr_node.h evaluated with Python's
// semantics for the subset (int64 with overflow an error, floats, strings, lists, comprehensions,
// the builtins) within its limits; Expr::eval and eval_expression. Parsing is expr.cpp's.
// Must not: read expression text itself (eval_expression parses through Expr::parse).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "variants/expr.h"
#include "variants/expr_node.h"

namespace gputune {

namespace {

using detail::Builtin;
using detail::Cmp;
using detail::Node;
using detail::NodePtr;
using detail::Op;
using detail::quoted;

[[noreturn]] void type_error(const std::string& what) { throw ExprError(what); }

// Python's integers are unbounded and its lists as long as memory allows; ours are int64 and
// capped, and going past either is an error, never a wrapped value, a hang or an exhausted machine.
constexpr std::int64_t kMaxElements = 10'000'000;  ///< list or string length, comprehension steps
/// List and string elements one evaluation may create in all (every list and string built,
/// copied or repeated counts): the per-list cap alone let a comprehension of repeated lists take
/// 3.1 GB (expr_fuzz, finding 9). At most about a gigabyte.
constexpr std::int64_t kMaxElementsPerEvaluation = 25'000'000;

/// What the running evaluation (Expr::eval, on this thread) may still create; -1: none runs.
thread_local std::int64_t t_elements_left = -1;

/// Counts `n` elements about to be created against the evaluation's budget.
void charge(std::uint64_t n) {
  if (t_elements_left < 0) return;
  if (n > static_cast<std::uint64_t>(t_elements_left))
    throw ExprError("the expression creates more than " +
                    std::to_string(kMaxElementsPerEvaluation) +
                    " list and string elements in all (gputune's limit per evaluation, so that "
                    "no expression can exhaust the machine's memory)");
  t_elements_left -= static_cast<std::int64_t>(n);
}

/// The budget of the outermost evaluation on this thread.
class ElementBudget {
 public:
  ElementBudget() : outer_(t_elements_left < 0) {
    if (outer_) t_elements_left = kMaxElementsPerEvaluation;
  }
  ~ElementBudget() {
    if (outer_) t_elements_left = -1;
  }
  ElementBudget(const ElementBudget&) = delete;
  ElementBudget& operator=(const ElementBudget&) = delete;

 private:
  bool outer_;
};

[[noreturn]] void overflow(const char* what) {
  type_error(std::string("integer overflow in ") + what +
             ": the result does not fit in 64 bits (gputune's integers are int64)");
}
std::int64_t add_int(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow("+");
  return r;
}
std::int64_t sub_int(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow("-");
  return r;
}
std::int64_t mul_int(std::int64_t a, std::int64_t b, const char* what = "*") {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow(what);
  return r;
}
std::int64_t neg_int(std::int64_t a) { return sub_int(0, a); }
std::int64_t pow_int(std::int64_t base, std::int64_t e) {
  std::int64_t r = 1;
  for (;;) {
    if (e & 1) r = mul_int(r, base, "**");
    e >>= 1;
    if (e == 0) return r;
    base = mul_int(base, base, "**");
  }
}
std::int64_t shift_int(std::int64_t x, std::int64_t y, bool left) {
  if (y < 0) type_error("negative shift count");
  if (!left) return y >= 63 ? (x < 0 ? -1 : 0) : x >> y;
  if (x == 0) return 0;
  if (y >= 63) overflow("<<");
  return mul_int(x, std::int64_t{1} << y, "<<");
}
/// A float as an int the way int() truncates it; an error where Python raises OverflowError or
/// ValueError (infinity, NaN, beyond 64 bits).
std::int64_t float_to_int(double x) {
  double t = std::trunc(x);
  if (!(t >= -0x1p63 && t < 0x1p63))
    type_error("cannot convert float " + Value(x).repr() + " to a 64-bit integer");
  return static_cast<std::int64_t>(t);
}
/// Refuses a list or string longer than kMaxElements; `elements` is its length, or (for a length
/// that would not even fit in 64 bits) any value above the cap.
void check_length(std::uint64_t elements, const char* what) {
  if (elements > static_cast<std::uint64_t>(kMaxElements))
    type_error(std::string(what) + " of more than " + std::to_string(kMaxElements) + " elements");
  charge(elements);
}

std::int64_t floordiv(std::int64_t a, std::int64_t b) {
  if (b == -1) return neg_int(a);
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
std::int64_t pymod(std::int64_t a, std::int64_t b) {
  if (b == -1) return 0;
  std::int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

Value arith(Op op, const Value& a, const Value& b) {
  if (op == Op::Add && a.is_str() && b.is_str()) {
    check_length(a.as_str().size() + b.as_str().size(), "a string");
    return Value(a.as_str() + b.as_str());
  }
  if (op == Op::Add && a.is_list() && b.is_list()) {
    check_length(a.as_list().size() + b.as_list().size(), "a list");
    List l = a.as_list();
    l.insert(l.end(), b.as_list().begin(), b.as_list().end());
    return Value(std::move(l));
  }
  if (op == Op::Mul && (a.is_list() || a.is_str()) && (b.is_int() || b.is_bool())) {
    std::int64_t n = std::max<std::int64_t>(b.as_int(), 0);
    if (a.is_str()) {
      auto len = static_cast<std::int64_t>(a.as_str().size());
      if (len == 0) return a;  // "" * 10**18 is "", at once (expr_fuzz: it looped 10**18 times)
      if (n > kMaxElements / len) check_length(UINT64_MAX, "a repeated string");
      charge(static_cast<std::uint64_t>(len * n));
      std::string s;
      s.reserve(static_cast<size_t>(len * n));
      for (std::int64_t i = 0; i < n; ++i) s += a.as_str();
      return Value(s);
    }
    auto len = static_cast<std::int64_t>(a.as_list().size());
    if (len == 0) return a;  // [] * 10**18 likewise
    if (n > kMaxElements / len) check_length(UINT64_MAX, "a repeated list");
    charge(static_cast<std::uint64_t>(len * n));
    List l;
    l.reserve(static_cast<size_t>(len * n));
    for (std::int64_t i = 0; i < n; ++i) l.insert(l.end(), a.as_list().begin(), a.as_list().end());
    return Value(std::move(l));
  }
  if (op == Op::Mul && (b.is_list() || b.is_str()) && (a.is_int() || a.is_bool()))
    return arith(op, b, a);
  if (!a.is_number() || !b.is_number())
    type_error(std::string("unsupported operand types: '") + a.type_name() + "' and '" +
               b.type_name() + "'");
  bool ints = !a.is_float() && !b.is_float();
  switch (op) {
    case Op::Add:
      return ints ? Value(add_int(a.as_int(), b.as_int())) : Value(a.as_double() + b.as_double());
    case Op::Sub:
      return ints ? Value(sub_int(a.as_int(), b.as_int())) : Value(a.as_double() - b.as_double());
    case Op::Mul:
      return ints ? Value(mul_int(a.as_int(), b.as_int())) : Value(a.as_double() * b.as_double());
    case Op::Div:
      if (b.as_double() == 0.0) type_error("division by zero");
      return Value(a.as_double() / b.as_double());
    case Op::FloorDiv:
      if (b.as_double() == 0.0) type_error("integer division by zero");
      return ints ? Value(floordiv(a.as_int(), b.as_int()))
                  : Value(std::floor(a.as_double() / b.as_double()));
    case Op::Mod:
      if (b.as_double() == 0.0) type_error("modulo by zero");
      if (ints) return Value(pymod(a.as_int(), b.as_int()));
      {
        double m = std::fmod(a.as_double(), b.as_double());
        if (m != 0 && ((m < 0) != (b.as_double() < 0))) m += b.as_double();
        return Value(m);
      }
    case Op::Pow:
      if (ints && b.as_int() >= 0) return Value(pow_int(a.as_int(), b.as_int()));
      return Value(std::pow(a.as_double(), b.as_double()));
    default:
      break;
  }
  if (!ints) type_error("bitwise operator on a float");
  std::int64_t x = a.as_int(), y = b.as_int();
  switch (op) {
    case Op::BitAnd:
      return Value(x & y);
    case Op::BitOr:
      return Value(x | y);
    case Op::BitXor:
      return Value(x ^ y);
    case Op::Shl:
      return Value(shift_int(x, y, true));
    case Op::Shr:
      return Value(shift_int(x, y, false));
    default:
      type_error("unknown operator");
  }
}

bool contains(const Value& container, const Value& item) {
  if (container.is_list()) {
    for (const auto& e : container.as_list())
      if (py_equal(e, item)) return true;
    return false;
  }
  if (container.is_str() && item.is_str())
    return container.as_str().find(item.as_str()) != std::string::npos;
  type_error(std::string("argument of type '") + container.type_name() + "' is not iterable");
}

bool compare(Cmp c, const Value& a, const Value& b) {
  switch (c) {
    case Cmp::Lt:
      return py_less(a, b);
    case Cmp::Gt:
      return py_less(b, a);
    case Cmp::Le:
      return !py_less(b, a);
    case Cmp::Ge:
      return !py_less(a, b);
    case Cmp::Eq:
      return py_equal(a, b);
    case Cmp::Ne:
      return !py_equal(a, b);
    case Cmp::In:
      return contains(b, a);
    case Cmp::NotIn:
      return !contains(b, a);
    case Cmp::Is:
      return a.v.index() == b.v.index() && py_equal(a, b);
    case Cmp::IsNot:
      return !(a.v.index() == b.v.index() && py_equal(a, b));
  }
  return false;
}

/// The elements `v` iterates over: a list's own (no copy; lists are immutable and shared), or a
/// string's characters, made in `chars`.
const List& elements(const Value& v, List& chars) {
  if (v.is_list()) return v.as_list();
  if (v.is_str()) {
    charge(v.as_str().size());
    chars.clear();
    for (char c : v.as_str()) chars.push_back(Value(std::string(1, c)));
    return chars;
  }
  type_error(std::string("'") + v.type_name() + "' object is not iterable");
}

class Evaluator {
 public:
  Evaluator(Env& env, const Symbols& syms) : env_(env), syms_(syms) {}

  Value eval(const Node& n) {
    switch (n.op) {
      case Op::Const:
        return n.constant;
      case Op::Name: {
        auto s = static_cast<size_t>(n.slot);
        if (s >= env_.bound.size() || !env_.bound[s])
          type_error("name '" + syms_.name(n.slot) + "' is not defined");
        return env_.values[s];
      }
      case Op::List: {
        List l;
        charge(n.kids.size());
        l.reserve(n.kids.size());
        for (auto& k : n.kids) l.push_back(eval(*k));
        return Value(std::move(l));
      }
      case Op::Comp: {
        List out;
        comp(n, 0, out);
        return Value(std::move(out));
      }
      case Op::Call:
        return call(n);
      case Op::Subscript: {
        Value c = eval(*n.kids[0]);
        Value i = eval(*n.kids[1]);
        if (!(i.is_int() || i.is_bool())) type_error("indices must be integers");
        std::int64_t k = i.as_int();
        if (c.is_str()) {
          std::int64_t sz = static_cast<std::int64_t>(c.as_str().size());
          if (k < 0) k += sz;
          if (k < 0 || k >= sz) type_error("string index out of range");
          return Value(std::string(1, c.as_str()[static_cast<size_t>(k)]));
        }
        const List& l =
            c.is_list()
                ? c.as_list()
                : (type_error(std::string("'") + c.type_name() + "' object is not subscriptable"),
                   c.as_list());
        std::int64_t sz = static_cast<std::int64_t>(l.size());
        if (k < 0) k += sz;
        if (k < 0 || k >= sz)
          type_error("list index " + std::to_string(i.as_int()) + " out of range (length " +
                     std::to_string(sz) + ")");
        return l[static_cast<size_t>(k)];
      }
      case Op::Slice: {
        Value c = eval(*n.kids[0]);
        List chars;
        const List& l = elements(c, chars);
        std::int64_t sz = static_cast<std::int64_t>(l.size());
        auto bound = [&](const NodePtr& k, std::int64_t dflt) {
          if (!k) return dflt;
          std::int64_t v = eval(*k).as_int();
          if (v < 0) v += sz;
          return std::clamp<std::int64_t>(v, 0, sz);
        };
        std::int64_t lo = bound(n.kids[1], 0), hi = bound(n.kids[2], sz);
        if (lo < hi) charge(static_cast<std::uint64_t>(hi - lo));
        if (c.is_str())
          return Value(
              lo < hi ? c.as_str().substr(static_cast<size_t>(lo), static_cast<size_t>(hi - lo))
                      : "");
        List out;
        for (std::int64_t k = lo; k < hi; ++k) out.push_back(l[static_cast<size_t>(k)]);
        return Value(std::move(out));
      }
      case Op::Neg: {
        Value a = eval(*n.kids[0]);
        if (a.is_float()) return Value(-a.as_double());
        if (a.is_int() || a.is_bool()) return Value(neg_int(a.as_int()));
        type_error(std::string("bad operand type for unary -: '") + a.type_name() + "'");
      }
      case Op::Pos: {
        Value a = eval(*n.kids[0]);
        if (!a.is_number())
          type_error(std::string("bad operand type for unary +: '") + a.type_name() + "'");
        return a.is_bool() ? Value(a.as_int()) : a;
      }
      case Op::Invert:
        return Value(~eval(*n.kids[0]).as_int());
      case Op::Not:
        return Value(!eval(*n.kids[0]).truthy());
      case Op::And: {
        Value a = eval(*n.kids[0]);
        return a.truthy() ? eval(*n.kids[1]) : a;
      }
      case Op::Or: {
        Value a = eval(*n.kids[0]);
        return a.truthy() ? a : eval(*n.kids[1]);
      }
      case Op::IfElse:
        return eval(*n.kids[0]).truthy() ? eval(*n.kids[1]) : eval(*n.kids[2]);
      case Op::Compare: {
        Value left = eval(*n.kids[0]);
        for (size_t i = 0; i < n.cmps.size(); ++i) {
          Value right = eval(*n.kids[i + 1]);
          if (!compare(n.cmps[i], left, right)) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      default:
        return arith(n.op, eval(*n.kids[0]), eval(*n.kids[1]));
    }
  }

 private:
  Env& env_;
  const Symbols& syms_;
  std::int64_t steps_ = 0;  ///< comprehension iterations in this evaluation

  void comp(const Node& n, size_t level, List& out) {
    if (level == n.clauses.size()) {
      charge(1);
      out.push_back(eval(*n.kids[0]));
      return;
    }
    const auto& cl = n.clauses[level];
    const Value iterable = eval(*cl.iter);  // held: `items` may be its own list
    List chars;
    const List& items = elements(iterable, chars);
    auto s = static_cast<size_t>(cl.slot);
    env_.grow(cl.slot);
    Value saved = env_.values[s];
    char saved_bound = env_.bound[s];
    for (auto& item : items) {
      if (++steps_ > kMaxElements)
        type_error("a comprehension runs more than " + std::to_string(kMaxElements) + " steps");
      env_.set(cl.slot, item);
      bool ok = true;
      for (auto& c : cl.conds)
        if (!eval(*c).truthy()) {
          ok = false;
          break;
        }
      if (ok) comp(n, level + 1, out);
    }
    env_.values[s] = std::move(saved);
    env_.bound[s] = saved_bound;
  }

  // range(stop), range(start, stop[, step]), as Python's: a list, bounded by the budget.
  Value range(const std::vector<Value>& args) {
    std::int64_t start = 0, stop, step = 1;
    if (args.size() == 1)
      stop = args[0].as_int();
    else
      start = args[0].as_int(), stop = args[1].as_int();
    if (args.size() == 3) step = args[2].as_int();
    if (step == 0) type_error("range() arg 3 must not be zero");
    // Its length, in unsigned arithmetic: stop - start need not fit in 64 signed bits.
    using U = std::uint64_t;
    U len = 0;
    if (step > 0 && start < stop)
      len = (U(stop) - U(start) - 1) / U(step) + 1;
    else if (step < 0 && start > stop)
      len = (U(start) - U(stop) - 1) / (U(0) - U(step)) + 1;
    check_length(len, "range()");
    List l;
    l.reserve(static_cast<size_t>(len));
    // Element k is start + k * step, in modular arithmetic: it lies between start and stop,
    // but stepping one past the last element could overflow.
    for (U k = 0; k < len; ++k)
      l.push_back(Value(static_cast<std::int64_t>(U(start) + k * U(step))));
    return Value(std::move(l));
  }
  // round(x[, digits]), as Python's.
  Value round(const std::vector<Value>& args) {
    double x = args[0].as_double();
    if (args.size() == 1) {
      // banker's rounding under the default FE_TONEAREST
      return Value(float_to_int(std::nearbyint(x)));
    }
    // Python: beyond a double's 17 significant digits x is returned as it is, and far enough
    // left of the point it is a zero of x's sign.
    std::int64_t digits = args[1].as_int();
    if (digits > 330 || !std::isfinite(x)) return Value(x);
    if (digits < -330) return Value(std::copysign(0.0, x));
    double scale = std::pow(10.0, static_cast<double>(digits));
    double r = std::nearbyint(x * scale) / scale;
    return Value(std::isfinite(r) ? r : x);
  }
  // min(...) or max(...), as Python's: of its arguments, or of the one sequence given.
  Value extreme(const std::vector<Value>& args, bool min) {
    const char* nm = min ? "min" : "max";
    if (args.empty()) type_error(std::string(nm) + "() expected at least 1 argument");
    List chars;
    const List& items = args.size() == 1 ? elements(args[0], chars) : args;
    if (items.empty()) type_error(std::string(nm) + "() arg is an empty sequence");
    Value best = items[0];
    for (size_t i = 1; i < items.size(); ++i) {
      bool better = min ? py_less(items[i], best) : py_less(best, items[i]);
      if (better) best = items[i];
    }
    return best;
  }
  Value call(const Node& n) {
    std::vector<Value> args;
    for (auto& k : n.kids) args.push_back(eval(*k));
    auto need = [&](size_t lo, size_t hi, const char* name) {
      if (args.size() < lo || args.size() > hi)
        type_error(std::string(name) + "() takes " + std::to_string(lo) +
                   (hi != lo ? "-" + std::to_string(hi) : "") + " arguments, got " +
                   std::to_string(args.size()));
    };
    switch (n.builtin) {
      case Builtin::Range:
        need(1, 3, "range");
        return range(args);
      case Builtin::Min:
      case Builtin::Max:
        return extreme(args, n.builtin == Builtin::Min);
      case Builtin::Len:
        need(1, 1, "len");
        if (args[0].is_str()) return Value(static_cast<std::int64_t>(args[0].as_str().size()));
        {
          List chars;
          return Value(static_cast<std::int64_t>(elements(args[0], chars).size()));
        }
      case Builtin::Int:
        need(1, 1, "int");
        if (args[0].is_float()) return Value(float_to_int(args[0].as_double()));
        if (args[0].is_str()) {
          try {
            return Value(static_cast<std::int64_t>(std::stoll(args[0].as_str())));
          } catch (...) {
            type_error("invalid literal for int(): " + args[0].repr());
          }
        }
        return Value(args[0].as_int());
      case Builtin::Float:
        need(1, 1, "float");
        if (args[0].is_str()) {
          try {
            return Value(std::stod(args[0].as_str()));
          } catch (...) {
            type_error("could not convert string to float: " + args[0].repr());
          }
        }
        return Value(args[0].as_double());
      case Builtin::Bool:
        need(1, 1, "bool");
        return Value(args[0].truthy());
      case Builtin::Str:
        need(1, 1, "str");
        {
          Value s(args[0].str());  // a list's text (bounded by what the budget let it build)
          charge(s.as_str().size());
          return s;
        }
      case Builtin::Abs:
        need(1, 1, "abs");
        if (args[0].is_float()) return Value(std::fabs(args[0].as_double()));
        return Value(args[0].as_int() < 0 ? neg_int(args[0].as_int()) : args[0].as_int());
      case Builtin::Sum: {
        need(1, 2, "sum");
        Value acc = args.size() == 2 ? args[1] : Value(static_cast<std::int64_t>(0));
        List chars;
        for (auto& e : elements(args[0], chars)) acc = arith(Op::Add, acc, e);
        return acc;
      }
      case Builtin::Round:
        need(1, 2, "round");
        return round(args);
      case Builtin::ListFn:
        need(0, 1, "list");
        if (args.empty()) return Value(List{});
        if (args[0].is_list()) return args[0];  // the same immutable list
        {
          List chars;
          return Value(List(elements(args[0], chars)));
        }
    }
    type_error("unknown builtin");
  }
};

}  // namespace

Value Expr::eval(Env& env) const {
  if (!root_) throw ExprError("evaluating an empty expression");
  try {
    ElementBudget budget;
    return Evaluator(env, *symbols_).eval(*root_);
  } catch (const ExprError& e) {
    throw ExprError("in expression " + quoted(text_) + ": " + e.what());
  } catch (const std::invalid_argument& e) {
    throw ExprError("in expression " + quoted(text_) + ": " + e.what());
  }
}

Value eval_expression(std::string_view text,
                      const std::vector<std::pair<std::string, Value>>& bindings) {
  Symbols syms;
  for (auto& [name, _] : bindings) syms.slot(name);
  Expr e = Expr::parse(text, syms);
  Env env(syms);
  for (auto& [name, v] : bindings) env.set(syms.find(name), v);
  return e.eval(env);
}

}  // namespace gputune
