/** \file db/status.h
 * Owns: what happened to one variant in one context, a measurement's status: T4's categories
 * (correct, compile, runtime, correctness, timeout, constraints) plus `compiled` (compiled and
 * inspected, never timed: no GPU, or `prune`), and its one text form, which the database stores
 * and T4 files carry. Only `correct` measurements can win.
 * Must not: know why (the measurement's reason says that) or decide anything.
 */
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace gputune::db {

class Status {
 public:
  enum Code : std::uint8_t {
    kUnset,  ///< not decided yet (a record being built); the store refuses it
    kCorrect,
    kCompile,
    kRuntime,
    kCorrectness,
    kTimeout,
    kConstraints,
    kCompiled,
    kInvalid,  ///< a text that names no status (at run time); the store refuses it
  };
  /// The text of each status but kUnset, in Code order: the database's and T4's.
  static constexpr std::array<std::string_view, 7> kTexts = {
      "correct", "compile", "runtime", "correctness", "timeout", "constraints", "compiled"};

  constexpr Status() = default;
  constexpr Status(Code code) : code_(code) {}
  /// Its text (`m.status == "correct"`, a row's column). Any other text is kInvalid, which no
  /// status equals and the store refuses; in a constant expression it does not compile. Text that
  /// may be anything, read from a file or a request, goes through parse().
  constexpr Status(const char* text) : code_(code_of(text)) {}
  Status(const std::string& text) : code_(code_of(text)) {}

  /// The status a text names, or nothing.
  static constexpr std::optional<Status> parse(std::string_view text) {
    for (std::size_t i = 0; i < kTexts.size(); ++i)
      if (kTexts[i] == text) return Status(static_cast<Code>(i + 1));
    return std::nullopt;
  }

  constexpr Code code() const { return code_; }
  /// The one text form ("" for kUnset).
  constexpr std::string_view text() const {
    return code_ == kUnset ? std::string_view() : code_ == kInvalid ? "invalid" : kTexts[code_ - 1];
  }
  /// A status the store takes: neither kUnset nor kInvalid.
  constexpr bool valid() const { return code_ != kUnset && code_ != kInvalid; }
  std::string str() const { return std::string(text()); }
  /// The text, where a string is wanted (a map's key, a message).
  operator std::string() const { return str(); }
  constexpr bool operator==(const Status&) const = default;

  /// Timed on the GPU, whatever the outcome: what a measurement of the budget is.
  constexpr bool timed() const {
    return code_ == kCorrect || code_ == kRuntime || code_ == kCorrectness || code_ == kTimeout;
  }
  /// Neither correct nor merely compiled: a failure of some kind.
  constexpr bool failed() const { return code_ != kCorrect && code_ != kCompiled; }

 private:
  static constexpr Code code_of(std::string_view text) {
    if (auto s = parse(text)) return s->code_;
    if (std::is_constant_evaluated()) throw std::invalid_argument("unknown measurement status");
    return kInvalid;
  }
  Code code_ = kUnset;
};

inline std::ostream& operator<<(std::ostream& out, Status s) { return out << s.text(); }
inline std::string operator+(const std::string& a, Status s) { return a + s.str(); }
inline std::string operator+(Status s, const std::string& b) { return s.str() + b; }
/// As JSON (nlohmann's json and ordered_json): its text.
template <class Json>
void to_json(Json& j, Status s) {
  j = s.str();
}

}  // namespace gputune::db
