/** \file db/interchange.h
 * Owns: moving measurements between the database and community file formats: reading Kernel
 * Tuner cache files (.json or .json.gz) and T4 results field by field, importing either as
 * measurements of their device, and exporting T4 results (one tuning problem per file, named in
 * metadata.gputune) from the database.
 * Must not: know about CUDA; all SQL stays in store.cpp. */
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "db/store.h"

namespace gputune::db {

struct ImportSummary {
  std::int64_t run_id = 0;
  std::int64_t measurements = 0, correct = 0, failed = 0;
  std::string kernel, device, context;
  double best_ms = 0;
  std::string best_key;
  /// A T4 file's: where its parameters' order came from ("the file's order", "the order of K
  /// already in the database", "name order (the file keeps none)"); "" for a Kernel Tuner cache.
  std::string parameter_order;
};

/// Reads a whole file, gunzipping when it is gzip-compressed. Throws std::runtime_error naming it.
std::string read_maybe_gzip(const std::string& path);

/// One configuration of a measurement file.
struct RecordedEntry {
  std::string id;                 ///< Kernel Tuner: its cache key; T4: "results[i]"
  nlohmann::json params;          ///< an object: parameter name -> value (Kernel Tuner: the entry)
  std::optional<double> time_ms;  ///< nullopt: it failed
  std::string failure;            ///< without a time: Kernel Tuner's error name, T4's invalidity
  std::vector<double> samples_ms;
  std::optional<double> gbps, gflops, compile_ms;
  /// What benchmarking it took: Kernel Tuner's benchmark_time; T4's times.benchmark, else the
  /// sum of its runtimes (what a replay charges a measurement in simulated time).
  std::optional<double> benchmark_ms;
};

/// A Kernel Tuner cache file or a T4 results file, every field it uses checked for its kind.
struct MeasurementFile {
  enum class Format { KernelTuner, T4 } format = Format::KernelTuner;
  /// Kernel Tuner's kernel_name and device_name; a gputune T4 export's metadata.gputune kernel
  /// and device ("" if absent).
  std::string kernel, device;
  std::string context;  ///< a gputune T4 export's context label ("" if absent)
  /// The parameters in order: Kernel Tuner's tune_params_keys, a gputune T4 export's
  /// metadata.gputune.parameters (empty if absent).
  std::vector<std::string> keys;
  nlohmann::json problem_size;  ///< Kernel Tuner's or metadata.gputune's (null if absent)
  nlohmann::json header;        ///< the document without its cache / results
  std::vector<RecordedEntry> entries;
};

/// Reads a measurement file. Throws std::runtime_error naming the file, the field and what it
/// should be for anything malformed: a wrong kind of value, a time that is negative or not finite.
MeasurementFile read_measurement_file(const std::string& path);

/// A measurement file's problem size (a number or a list of them) as whole numbers, padded to
/// three with 1s as a job's ProblemSize is; empty when absent or not all whole numbers.
std::vector<std::int64_t> whole_problem_size(const nlohmann::json& problem_size);

/// Kernel Tuner's text of a parameter value in a configuration key (Python's str()); throws
/// std::invalid_argument for a JSON object.
std::string kernel_tuner_key_text(const nlohmann::json& value);

/// What `gputune import` is told on its command line: each non-empty one replaces what the file
/// says (a T4 file from elsewhere names none of them).
struct ImportNames {
  std::string kernel, device, context;
};

/// Imports a Kernel Tuner cache file (keys: device_name, kernel_name, problem_size,
/// tune_params_keys, cache) or a T4 results file (a gputune export names its kernel, device,
/// context, problem size and parameter order in metadata.gputune; any other needs `names` for the
/// kernel and the device, and takes its parameter order from a stored kernel of that name with
/// the same parameters, else name order) as a run of measurements of that device. A file with
/// no problem size, put in a context label the database holds for that kernel and device, joins
/// that context. All-or-nothing: one transaction. Throws
/// std::runtime_error naming the file, the field and the fix for malformed or incomplete input.
ImportSummary import_measurements(Store& store, const std::string& path,
                                  const ImportNames& names = {});

/// T4 document (schema_version, metadata, results) of a run's timed measurements (all runs when
/// run_id is 0). Variants compiled but never timed are left out. A T4 file is one tuning
/// problem: one kernel in one context (label) on one device, named in metadata.gputune with
/// its parameters in the job's order (each configuration lists them in that order). Where
/// the run measured several, `context` (a context label) and `kernel` (a kernel name) pick one;
/// throws std::invalid_argument listing them, with the options that pick each, when the choice
/// is left open or matches nothing.
std::string export_t4(Store& store, std::int64_t run_id, const std::string& context = {},
                      const std::string& kernel = {});

}  // namespace gputune::db
