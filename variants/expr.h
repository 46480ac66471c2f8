/** \file variants/expr.h
 * Owns: the safe evaluator for the Python-expression subset that T1 files use in `Values`,
 * `Expression`, sizes and launch geometry: int/float/bool/str/None literals, lists and tuples, list
 * comprehensions (also as a call's only argument), `range`, `+ - * / // % **`, bitwise ops, chained
 * comparisons, `in`/`not in`, `and/or/not`, `x if c else y`, subscripts, and the builtins
 * min/max/len/int/float/bool/str/abs/sum/round/list. Never calls an interpreter.
 * Consumes: expression text and a Symbols table. Produces: Expr, evaluated against an Env.
 * Names are resolved to slots at parse time so that evaluating a condition for millions of points
 * costs no string look-ups.
 * Must not: know about jobs, CUDA or storage. */
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "variants/value.h"

namespace gputune {

/// A syntax or evaluation error; what() names the expression and, for syntax errors, the column.
class ExprError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Name -> slot table shared by the expressions evaluated against one Env.
class Symbols {
 public:
  int slot(const std::string& name);        ///< get or create
  int find(const std::string& name) const;  ///< -1 when absent
  const std::string& name(int slot) const { return names_[static_cast<size_t>(slot)]; }
  size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, int> index_;
};

/// Values bound to the slots of a Symbols table. An unbound slot is an undefined name.
struct Env {
  std::vector<Value> values;
  std::vector<char> bound;

  explicit Env(const Symbols& s) : values(s.size()), bound(s.size(), 0) {}
  void set(int slot, Value v) {
    grow(slot);
    values[static_cast<size_t>(slot)] = std::move(v);
    bound[static_cast<size_t>(slot)] = 1;
  }
  void unset(int slot) { grow(slot), bound[static_cast<size_t>(slot)] = 0; }
  void grow(int slot) {
    if (static_cast<size_t>(slot) >= values.size()) {
      values.resize(static_cast<size_t>(slot) + 1);
      bound.resize(static_cast<size_t>(slot) + 1, 0);
    }
  }
};

namespace detail {
struct Node;
}

/// A parsed expression. Immutable and cheap to copy (shared AST); safe to evaluate from many
/// threads with separate Envs.
class Expr {
 public:
  /// Parses `text`; throws ExprError naming the column and what was expected.
  static Expr parse(std::string_view text, Symbols& symbols);

  /// Evaluates; throws ExprError (undefined name, type error, division by zero, ...).
  /// The Env may be modified temporarily by comprehensions and is restored.
  Value eval(Env& env) const;

  const std::string& text() const { return text_; }
  /// Slots of the free names (not builtins, not comprehension variables), sorted, unique.
  const std::vector<int>& free_slots() const { return free_; }

 private:
  std::string text_;
  std::shared_ptr<const detail::Node> root_;
  std::vector<int> free_;
  const Symbols* symbols_ = nullptr;
};

/// Convenience: parse and evaluate `text` with the given name bindings.
Value eval_expression(std::string_view text,
                      const std::vector<std::pair<std::string, Value>>& bindings = {});

}  // namespace gputune
