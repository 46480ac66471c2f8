/** \file variants/job.h
 * Owns: Job, what the user asked for, read from a T1 file plus gputune's extension key "GPUTune";
 * JobError, the user's-fault error that names the file, the field and the fix.
 * Consumes: a JSON file. Produces: Job (plain data; expressions kept as text and checked for
 * syntax). Runs first; space.h and instantiate.h run after it. Must not: compile, launch, or touch
 * the database. */
#pragma once

#include <array>
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "variants/value.h"

namespace gputune {

namespace naive {
struct NaiveKernel;
}

/// An error in the user's input. what() reads "FILE: field F: problem. Fix: how."
class JobError : public std::runtime_error {
 public:
  JobError(const std::string& file, const std::string& field, const std::string& problem,
           const std::string& fix = {});
  std::string file, field, problem, fix;
};

struct Parameter {
  std::string name;
  std::string type;  // int, uint, float, bool, string
  List values;
  std::optional<Value> default_value;
};

struct Condition {
  std::string expression;
  std::vector<std::string> parameters;  // as listed in the file (informational)
};

/// Three expression strings ("1" where the file gives none).
struct Dim3Expr {
  std::string x = "1", y = "1", z = "1";
  const std::string& operator[](int d) const { return d == 0 ? x : d == 1 ? y : z; }
};

struct Argument {
  std::string name;
  std::string type;             // T1 type: float, int32, double, float4, ...
  std::string memory_type;      // Vector or Scalar
  std::string access;           // ReadOnly, WriteOnly, ReadWrite
  std::string size_expr = "1";  // number of elements (Vector)
  std::string fill_type = "Constant";
  std::string fill_value = "0";  // expression text (numbers become their text)
  std::string data_source;       // BinaryRaw file, resolved against the job's folder
  std::optional<std::uint64_t> seed;
  bool output = false;  // compared against the reference
};

struct ReferenceArgument {
  std::string name;
  std::string target;  // the Argument it checks
  std::string fill_type;
  std::string fill_value = "0";
  std::string data_source;
  std::optional<std::uint64_t> seed;
  std::string validation_method = "AbsoluteDifference";
  std::optional<double> threshold;
};

/// One input context to tune for: problem sizes and named input values.
struct ContextSpec {
  std::string name;                                   // label, e.g. "4096x4096"
  List problem_size;                                  // ProblemSize[i] in expressions
  std::vector<std::pair<std::string, Value>> values;  // extra names visible to expressions
};

struct Budget {
  std::optional<std::uint64_t> max_configurations;
  std::optional<double> max_seconds;
  std::optional<double> fraction;
};

struct MeasureSettings {
  int warmup = 3;
  int repeats = 20;
  bool flush_l2 = false;
  int remeasure_top = 3;
  double timeout_seconds = 10.0;
};

/// GPUTune.Pruner: the model-driven pruner's settings (used by `run` with model_guided, `prune`
/// and `replay`).
struct PrunerSettings {
  bool enabled = false;           ///< `run`: skip pruned variants (model_guided turns it on)
  bool explicit_enabled = false;  ///< GPUTune.Pruner.Enabled was written in the job
  double model_margin = 2.0;      ///< rule 4: drop variants predicted slower than margin x best
  int max_spill_bytes = 0;        ///< rule 2: spill bytes above this are pruned; < 0 disables
  int regret_sample = 5;          ///< pruned variants timed anyway, to report the regret
};

struct Job {
  std::filesystem::path file;  // the job file (errors name it; relative paths resolve against it)
  std::string name;            // BenchmarkName or the file stem
  // Kernel
  std::string kernel_name;
  std::filesystem::path kernel_file;  // resolved
  std::string language = "CUDA";
  std::vector<std::string> compiler_options;
  // Space
  std::vector<Parameter> parameters;
  std::vector<Condition> conditions;
  // Launch geometry
  Dim3Expr local_size;
  Dim3Expr global_size;
  std::string global_size_type = "OpenCL";           // OpenCL: total threads; CUDA: blocks
  std::array<std::vector<std::string>, 3> grid_div;  // Kernel Tuner's GridDivX/Y/Z
  bool use_grid_div = false;                         // ProblemSize / prod(GridDiv) defines the grid
  std::string shared_memory_expr = "0";              // dynamic shared memory bytes
  // Data
  std::vector<Argument> arguments;
  std::vector<ReferenceArgument> references;
  std::vector<ContextSpec> contexts;  // at least one
  // Search
  std::string strategy = "brute_force";  // brute_force | random | portfolio | model_guided
  /// Whether the job (T1 Search, GPUTune.Search.Strategy) or the command line named the search;
  /// if not, apply_default_strategy chooses it from the budget.
  bool search_named = false;
  std::uint64_t seed = 1;
  /// GPUTune.Search.ModelAnalyses: a space larger than this is not analysed and compiled whole
  /// under the model (model_guided, `prune`); the model searches it instead
  /// (tuner/model/space_search.h).
  std::uint64_t model_analyses = 20000;
  Budget budget;
  PrunerSettings pruner;
  // Verification and measurement
  double abs_tolerance = 1e-6;
  double rel_tolerance = 1e-4;
  MeasureSettings measure;
  // Target when no GPU is present
  std::string target_arch;  // e.g. "sm_90"; empty: the device's, or sm_90 without one
  int device_index = 0;
  // Work per launch, for GFLOP/s and GB/s (expressions; empty when not given)
  std::string flops_expr, bytes_expr;
  // Naive kernel (GPUTune.Naive): the kernel is one thread per output; gputune generates the
  // space and each variant's source (variants/naive/naive.h). Set by the tuner after analysis.
  bool naive = false;
  std::shared_ptr<const naive::NaiveKernel> naive_kernel;
  Dim3Expr naive_threads;      // the naive kernel's thread counts (its GlobalSize, OpenCL style)
  std::string naive_fallback;  // why the kernel is tuned over block shape only (outside the subset)
  std::string database;        // empty: default
  int compile_threads = 0;     // 0: one per core, capped
  std::string output_file;     // T1 General.OutputFile (informational)
  std::string document;        // the job file's text, as read (stored with every run)
  /// What the reader tolerated in the file (non-schema keys, quirks), to show the user.
  std::vector<std::string> notes;
};

/// Sets the search strategy (brute_force, random, portfolio or model_guided), as
/// GPUTune.Search.Strategy does: model_guided prunes, the others only where
/// GPUTune.Pruner.Enabled says so. Throws JobError naming `file` and `field` for another name.
void set_strategy(Job& job, const std::string& name, const std::string& file,
                  const std::string& field);

/// The search of a job that names none: model_guided where a budget limits what is measured
/// (Configurations, Seconds or a fraction: the figures of bench/results/peer-kernel-tuner-*
/// show it, and the portfolio search it becomes where the model cannot predict, ahead of
/// random search on every recorded space, while brute force's first N configurations are those
/// of the space's order) or the space is a naive kernel's (gputune's own, often hundreds of
/// thousands of variants); brute_force otherwise (the whole space is measured: the order does
/// not change the winner). A named search is left alone.
void apply_default_strategy(Job& job);

/// Reads and validates a T1 job file. Throws JobError naming the file, the field and the fix.
Job load_job(const std::filesystem::path& file);
/// Same, from an already parsed document (file is used for messages and relative paths).
Job parse_job(const nlohmann::json& doc, const std::filesystem::path& file);

/// Reads the kernel source named by the job; JobError if it is missing or unreadable, or (as
/// check_kernel_name) cannot define the kernel the job names.
std::string load_kernel_source(const Job& job);

/// JobError (field KernelSpecification.KernelName) when the kernel's name (without template
/// arguments or namespace) never occurs in `source` and the source includes no header of its own
/// that could define it (a quoted one, or one in angle brackets when the job names an include
/// folder); the message lists the source's __global__ functions, the closest first.
void check_kernel_name(const Job& job, const std::string& source);

/// The kernel's identity in the database: a content hash of its name and source.
std::string kernel_hash(const Job& job, const std::string& source);

/// The label of a context named by its problem size alone: its sizes joined by 'x', trailing
/// 1s left out ([4096, 4096, 1] -> "4096x4096"; [1, 1, 1] -> "1").
std::string context_label(const List& problem_size);

/// The expression environment names for a context: ProblemSize plus the context's values.
std::vector<std::pair<std::string, Value>> context_bindings(const ContextSpec& ctx);

/// Converts JSON to a Value (numbers, bools, strings, arrays, null).
Value json_to_value(const nlohmann::json& j);
/// Converts a Value to JSON (the inverse of json_to_value).
nlohmann::json value_to_json(const Value& v);

}  // namespace gputune
