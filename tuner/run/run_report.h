/** \file tuner/run/run_report.h
 * Owns: what one `gputune run` found out and tells its caller (RunReport): its exit code, run id
 * and message, what it compiled, screened and timed, the best configuration per context, and how
 * it used its time; and the table `gputune run` prints from it.
 * Consumes: what the run's stages count. Produces: RunReport for app/ (the exit code, the table),
 * batch and the daemon (the run id, the message).
 * Must not: hold options (tuner/run/run_options.h) or anything the database does not also keep
 * (the report is a summary; the rows are the record). */
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "tuner/common/exit_codes.h"

namespace gputune::tuner {

struct BestRow {
  std::string context;
  std::string config_key, params_json;
  double time_ms = 0;
  std::optional<double> gflops, gbps;
  int registers = 0;
  double occupancy = 0;
  std::optional<double> default_ms;  ///< the default configuration's time, for the speedup
  /// The fastest first-pass time of a run that stopped before re-measuring: its provisional
  /// winner.
  bool provisional = false;
};

struct RunReport {
  int exit_code = kExitOk;
  std::int64_t run_id = 0;
  std::string db_path;
  std::string message;  ///< one line for the user
  std::string device;   ///< name, or "none"
  std::string arch;
  std::size_t space_size = 0, planned = 0, compiled_ok = 0, compile_failed = 0, cached = 0;
  std::size_t screened = 0;  ///< planned but not compiled: rule 4 judged them from their source
  /// The model's search of a space larger than GPUTune.Search.ModelAnalyses (empty: none ran).
  std::string model_search;
  std::size_t correct = 0, failed = 0;
  bool timed = false;
  bool interrupted = false;
  /// A variant lost the process's CUDA context (stored as runtime; the run is interrupted): this
  /// process can run nothing more on the GPU, a new one resumes the run.
  bool context_lost = false;
  bool unchanged = false;     ///< skip_unchanged found run_id: nothing was compiled or stored
  std::vector<BestRow> best;  ///< per context
  // The model (model_guided strategy or GPUTune.Pruner.Enabled), last context.
  std::optional<double> spearman;  ///< predicted vs measured rank correlation
  std::optional<double> regret;    ///< best measured / best of the regret sample (1: no loss)
  std::size_t regret_sampled = 0;
  // How the run used its time (the stage log prints them with GPUTUNE_TIME_STAGES).
  std::optional<double> first_measurement_s;  ///< from the start to the first GPU outcome stored
  double gpu_s = 0;                           ///< in the measurer: launches, copies, verification
  double wall_s = 0;                          ///< the whole run
};

/// The final table of best configurations, as printed by `gputune run`.
void print_report(const RunReport& r, std::ostream& out);

}  // namespace gputune::tuner
