/** \file variants/value.h
 * Owns: Value, the dynamically typed value of T1 expressions (Python semantics for the subset T1
 * files use: None, bool, int, float, str, list) and its Python-compatible formatting. Consumes:
 * nothing. Produces: Value, used by expr.h, space.h and every stage that carries parameters. Must
 * not: know about CUDA, NVRTC or SQLite. */
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace gputune {

struct Value;
using List = std::vector<Value>;

/// A Python value. Lists are shared and immutable once built, so copying a Value is cheap.
struct Value {
  struct None {
    bool operator==(const None&) const = default;
  };
  using ListPtr = std::shared_ptr<const List>;
  std::variant<None, bool, std::int64_t, double, std::string, ListPtr> v;

  Value() = default;
  Value(bool b) : v(b) {}
  Value(int i) : v(static_cast<std::int64_t>(i)) {}
  Value(std::int64_t i) : v(i) {}
  Value(double d) : v(d) {}
  Value(const char* s) : v(std::string(s)) {}
  Value(std::string s) : v(std::move(s)) {}
  Value(List l) : v(std::make_shared<const List>(std::move(l))) {}

  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<std::int64_t>(v); }
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_str() const { return std::holds_alternative<std::string>(v); }
  bool is_list() const { return std::holds_alternative<ListPtr>(v); }

  /// Python type name: "NoneType", "bool", "int", "float", "str", "list".
  const char* type_name() const;
  /// Python truthiness.
  bool truthy() const;
  /// Integer value of a bool/int (throws for others).
  std::int64_t as_int() const;
  /// Numeric value of a bool/int/float (throws for others).
  double as_double() const;
  const std::string& as_str() const;
  const List& as_list() const;

  /// Python `str(x)` (Kernel Tuner builds its cache keys from this).
  std::string str() const;
  /// Python `repr(x)` (strings quoted).
  std::string repr() const;
};

/// Python `==` (1 == 1.0 == True).
bool py_equal(const Value& a, const Value& b);
/// Python `<`; throws TypeError-like std::invalid_argument for unorderable types.
bool py_less(const Value& a, const Value& b);

/// Python float formatting (`repr(float)`): shortest round-trip digits, ".0" for integral values.
std::string format_python_float(double d);

}  // namespace gputune
