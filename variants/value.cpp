#include "variants/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace gputune {

const char* Value::type_name() const {
  switch (v.index()) {
    case 0:
      return "NoneType";
    case 1:
      return "bool";
    case 2:
      return "int";
    case 3:
      return "float";
    case 4:
      return "str";
    default:
      return "list";
  }
}

bool Value::truthy() const {
  switch (v.index()) {
    case 0:
      return false;
    case 1:
      return std::get<bool>(v);
    case 2:
      return std::get<std::int64_t>(v) != 0;
    case 3:
      return std::get<double>(v) != 0.0;
    case 4:
      return !std::get<std::string>(v).empty();
    default:
      return !std::get<ListPtr>(v)->empty();
  }
}

std::int64_t Value::as_int() const {
  if (is_int()) return std::get<std::int64_t>(v);
  if (is_bool()) return std::get<bool>(v) ? 1 : 0;
  throw std::invalid_argument(std::string("expected an int, got ") + type_name() + " " + repr());
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(v);
  if (is_int() || is_bool()) return static_cast<double>(as_int());
  throw std::invalid_argument(std::string("expected a number, got ") + type_name() + " " + repr());
}

const std::string& Value::as_str() const {
  if (!is_str()) throw std::invalid_argument(std::string("expected a str, got ") + type_name());
  return std::get<std::string>(v);
}

const List& Value::as_list() const {
  if (!is_list()) throw std::invalid_argument(std::string("expected a list, got ") + type_name());
  return *std::get<ListPtr>(v);
}

std::string format_python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Python repr: shortest round-trip digits; scientific when exponent < -4 or >= 16.
  char digits[64];
  auto res = std::to_chars(digits, digits + sizeof digits, d, std::chars_format::scientific);
  std::string sci(digits, res.ptr);  // e.g. "1.5e+01"
  auto epos = sci.find('e');
  int exp10 = std::stoi(sci.substr(epos + 1));
  if (exp10 < -4 || exp10 >= 16) {
    std::string mant = sci.substr(0, epos);
    char buf[16];
    std::snprintf(buf, sizeof buf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return mant + buf;
  }
  res = std::to_chars(digits, digits + sizeof digits, d, std::chars_format::fixed);
  std::string fixed(digits, res.ptr);
  if (fixed.find('.') == std::string::npos) fixed += ".0";
  return fixed;
}

std::string Value::str() const {
  switch (v.index()) {
    case 0:
      return "None";
    case 1:
      return std::get<bool>(v) ? "True" : "False";
    case 2:
      return std::to_string(std::get<std::int64_t>(v));
    case 3:
      return format_python_float(std::get<double>(v));
    case 4:
      return std::get<std::string>(v);
    default: {
      std::string out = "[";
      const auto& l = *std::get<ListPtr>(v);
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + l[i].repr();
      return out + "]";
    }
  }
}

std::string Value::repr() const {
  if (!is_str()) return str();
  std::string out = "'";
  for (char c : std::get<std::string>(v)) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.v.index() != b.v.index()) return false;
  if (a.is_none()) return true;
  if (a.is_str()) return a.as_str() == b.as_str();
  const auto& la = a.as_list();
  const auto& lb = b.as_list();
  if (la.size() != lb.size()) return false;
  for (size_t i = 0; i < la.size(); ++i)
    if (!py_equal(la[i], lb[i])) return false;
  return true;
}

bool py_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_str() && b.is_str()) return a.as_str() < b.as_str();
  if (a.is_list() && b.is_list()) {
    const auto& la = a.as_list();
    const auto& lb = b.as_list();
    for (size_t i = 0; i < la.size() && i < lb.size(); ++i) {
      if (py_less(la[i], lb[i])) return true;
      if (py_less(lb[i], la[i])) return false;
    }
    return la.size() < lb.size();
  }
  throw std::invalid_argument(std::string("'<' not supported between instances of '") +
                              a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace gputune
