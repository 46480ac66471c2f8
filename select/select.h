/** \file select/select.h
 * gputune::select: the tuned configuration for the input an application has, at run time.
 *
 *   auto table = gputune::select::Table::open("matmul.decisions.json");   // or a gputune .db
 *   if (!table) { std::cerr << table.error().message << "\n"; return 1; }
 *   auto choice = table->choose("matmul", {"NVIDIA H100 80GB HBM3", "sm_90"}, {{2048}});
 *   if (choice) launch(choice->grid, choice->block, choice->defines());
 *
 * Owns: answering (kernel, device, input) from a decision table: an exact match of device and
 * context first (measured), else a prediction from the contexts tuned on that device (or on a
 * device of the same architecture): nearest problem size in log space, or the decision tree fitted
 * at export where leave-one-out said it does better. Every answer says how it was obtained, from
 * which contexts, and how far from the best that way was in leave-one-out; the launch geometry the
 * job's rules give for the input comes with it. Errors are values: nothing here throws unless
 * the caller asks (value_or_throw).
 * Consumes: a decision file (`gputune export --decisions`) or a gputune database.
 * Must not: compile or launch (kernel.h does), or write to a database. */
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "select/decision_table.h"

namespace gputune::select {

struct Error {
  enum class Code {
    kUnknownKernel,  ///< no kernel of that name in the table
    kUnknownDevice,  ///< neither the device nor its architecture was tuned
    kBadInput,       ///< the input lacks problem sizes or values the kernel's contexts have
    kBadFile,        ///< unreadable, not JSON, fields missing or mistyped
    kWrongVersion,   ///< a decision file of another version
    kNotGputune,     ///< a database that is not gputune's
    kNoDriver,       ///< no CUDA driver or device (kernel.h)
    kCompile,        ///< NVRTC refused the chosen variant (kernel.h)
    kLaunch,         ///< the driver refused a load or launch (kernel.h)
  };
  Code code;
  std::string message;  ///< names what is missing and, where there is one, the fix
};
const char* to_string(Error::Code code);

/// Thrown only by value_or_throw.
class SelectError : public std::runtime_error {
 public:
  explicit SelectError(Error e) : std::runtime_error(e.message), error(std::move(e)) {}
  Error error;
};

/// A value or an Error.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}
  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T* operator->() const { return &std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<1>(v_); }
  /// The value, or SelectError with the error.
  const T& value_or_throw() const& {
    if (!ok()) throw SelectError(error());
    return value();
  }
  T value_or_throw() && {
    if (!ok()) throw SelectError(error());
    return std::get<0>(std::move(v_));
  }

 private:
  std::variant<T, Error> v_;
};

/// The GPU to choose for: its name as the driver gives it, and its architecture ("sm_90"; "" when
/// unknown: then only a device of that name matches).
struct Device {
  std::string name;
  std::string arch;
};

/// The application's input: its problem size (as the job's ProblemSize, as many dimensions as
/// the kernel was tuned with) and the job's other input values by name.
struct Input {
  Input(std::vector<std::int64_t> size = {}, std::map<std::string, double> named = {})
      : problem_size(std::move(size)), values(std::move(named)) {}
  std::vector<std::int64_t> problem_size;
  std::map<std::string, double> values = {};  ///< (initialised: `Input{{2048}}` is warning-free)
};

struct Choice {
  std::string kernel;
  std::string device;  ///< the device whose contexts answered (may differ from the one asked)
  How how = How::kMeasured;
  std::string config;  ///< configuration key ("32,8,1,0,0")
  /// Parameter names and values as the compiler gets them (-Dname=value), in parameter order.
  std::vector<std::pair<std::string, std::string>> params;
  std::vector<std::string> from;      ///< labels of the contexts the answer came from
  std::optional<double> measured_ms;  ///< kMeasured: the winner's time
  /// How far from the best this way was, leave-one-out over the device's contexts (none for a
  /// measured answer or a device with a single context).
  std::optional<LooFigures> expected;
  /// The launch the job's rules give for the input. None known (has_geometry false, and
  /// geometry_note says why) for a kernel whose job carries no launch rules gputune can read,
  /// such as one imported from a Kernel Tuner cache: the configuration still stands.
  bool has_geometry = false;
  std::string geometry_note;
  std::array<std::int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  std::int64_t dynamic_smem = 0;

  /// "-Dname=value" for each parameter.
  std::vector<std::string> defines() const;
  /// One line: what was chosen, how, from what, and how sure.
  std::string explain() const;
};

/// A loaded decision table. Cheap to copy (shared, immutable); safe to use from many threads.
class Table {
 public:
  /// A decision file or a gputune database (told apart by their first bytes).
  static Result<Table> open(const std::string& path) noexcept;
  /// A decision file's text; `origin` names it in errors.
  static Result<Table> parse(std::string_view text, const std::string& origin) noexcept;
  /// An already built table.
  static Result<Table> from(DecisionTable table) noexcept;

  /// The configuration for `kernel` on `device` for `input`, with its launch geometry. Answers
  /// for an input asked before come from a memo (the warm lookup: well under a microsecond).
  Result<Choice> choose(std::string_view kernel, const Device& device,
                        const Input& input) const noexcept;

  /// Kernel names in the table.
  std::vector<std::string> kernels() const;
  const DecisionTable& data() const;
  /// The job and source of a kernel (for kernel.h); null when the table has no such kernel.
  const KernelTable* kernel(std::string_view name) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace gputune::select
