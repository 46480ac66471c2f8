/** \file db/status.h
 * Owns: the statuses the database keeps, each with its one text form (what the schema's CHECK
 * allows, what T4 files and the JSON API carry): a measurement's (Status), a run's (RunStatus)
 * and a queued job's (QueueStatus). RunStatus and QueueStatus convert to and from text only
 * through text() and parse_*(), so a misspelt status does not compile.
 *
 * Status: what happened to one variant in one context, a measurement's status: T4's categories
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

namespace detail {
/// The value whose text is `t` in `texts` (the value of texts[i] is first + i), or nothing: how
/// every status here is read from text.
template <class T, std::size_t N>
constexpr std::optional<T> find_text(const std::array<std::string_view, N>& texts,
                                     std::string_view t, std::size_t first = 0) {
  for (std::size_t i = 0; i < N; ++i)
    if (texts[i] == t) return static_cast<T>(first + i);
  return std::nullopt;
}
}  // namespace detail

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
  /// Its text, said so (`Status("correct")`): never an implicit conversion, so a misspelt status
  /// is not compared or stored by accident. Any other text is kInvalid, which no status equals
  /// and the store refuses; in a constant expression it does not compile. Text that may be
  /// anything, read from a file or a request, goes through parse().
  explicit constexpr Status(const char* text) : code_(code_of(text)) {}
  explicit Status(const std::string& text) : code_(code_of(text)) {}

  /// The status a text names, or nothing.
  static constexpr std::optional<Status> parse(std::string_view text) {
    if (auto code = detail::find_text<Code>(kTexts, text, kCorrect)) return Status(*code);
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
/// As JSON (nlohmann's json and ordered_json): its text.
template <class Json>
void to_json(Json& j, Status s) {
  j = s.str();
}

/// What became of a run (runs.status). `running` is also what a run killed by a signal leaves
/// behind until `batch` or a resume ends it.
enum class RunStatus : std::uint8_t {
  kRunning,
  kDone,         ///< measured what it planned (or spent its budget)
  kNoDevice,     ///< compiled and inspected, timed nothing (no GPU)
  kFailed,       ///< stopped by an error, or nothing compiled
  kInterrupted,  ///< stopped early (Ctrl-C, a signal, a hung kernel); `--resume` goes on
  kImported,     ///< the measurements of an imported file (`gputune import`)
};
/// A queued job's place in the daemon's queue (queue.status).
enum class QueueStatus : std::uint8_t {
  kQueued,
  kRunning,
  kDone,
  kFailed,
  kCancelled,
  kNoDevice,
};

namespace detail {
inline constexpr std::array<std::string_view, 6> kRunStatusTexts = {
    "running", "done", "no_device", "failed", "interrupted", "imported"};
inline constexpr std::array<std::string_view, 6> kQueueStatusTexts = {
    "queued", "running", "done", "failed", "cancelled", "no_device"};
}  // namespace detail

/// The one text form, as stored and as the JSON API and reports print it.
constexpr std::string_view text(RunStatus s) {
  return detail::kRunStatusTexts[static_cast<std::size_t>(s)];
}
constexpr std::string_view text(QueueStatus s) {
  return detail::kQueueStatusTexts[static_cast<std::size_t>(s)];
}
/// The status a text names, or nothing (a stored row of another version, a request's field).
constexpr std::optional<RunStatus> parse_run_status(std::string_view t) {
  return detail::find_text<RunStatus>(detail::kRunStatusTexts, t);
}
constexpr std::optional<QueueStatus> parse_queue_status(std::string_view t) {
  return detail::find_text<QueueStatus>(detail::kQueueStatusTexts, t);
}
inline std::ostream& operator<<(std::ostream& out, RunStatus s) { return out << text(s); }
inline std::ostream& operator<<(std::ostream& out, QueueStatus s) { return out << text(s); }
template <class Json>
void to_json(Json& j, RunStatus s) {
  j = std::string(text(s));
}
template <class Json>
void to_json(Json& j, QueueStatus s) {
  j = std::string(text(s));
}

}  // namespace gputune::db
