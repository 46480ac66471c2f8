/** \file tuner/run/pipeline.h
 * Owns: the order of the stages of `gputune run`, in one place (like Halide's Lower.cpp):
 * job -> space -> the run's row -> the default configuration compiled and measured at once while
 * the model plans and analyses on other cores -> per context, a stream: the strategy proposes,
 * the NVRTC pool compiles a bounded look-ahead, each cubin is measured (GPU) as soon as it is
 * ready and its outcome reported back -> every outcome stored as it comes (the fastest so far is
 * the provisional winner) -> re-measure the top few -> winners. The stages live in the files
 * tuner/run/run_stages.h names. Each is logged; with GPUTUNE_TIME_STAGES set, timed.
 * Consumes: Job, RunOptions. Produces: RunReport (and rows in the database).
 * Runs after: the command line (app/cli_tuning.cpp) and the job's loading (common/tuning_job.h);
 * before: nothing in tuner/ (export, batch reports and the dashboard read what it stored).
 * Must not: parse command lines (main.cpp does) or write SQL (db/ does). */
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "tuner/common/exit_codes.h"
#include "variants/job.h"

namespace gputune::tuner {

struct DeviceInfo;  // tuner/measure/device_info.h

struct RunOptions {
  std::string db_path;              ///< empty: job's GPUTune.Database, else the default
  std::string arch;                 ///< override the target architecture
  std::filesystem::path cache_dir;  ///< empty: CubinCache::default_dir(); "-": no cache
  int threads = 0;                  ///< compile workers (0: job's or default)
  bool progress = false;            ///< live progress line on stderr
  bool no_gpu = false;              ///< behave as if no device were present
  std::ostream* log = nullptr;      ///< stage log (stderr when null)
  /// With the pruner on and the device's rates known, compile only what rule 4 could keep
  /// (tuner/model/compile_screen.h); false compiles every planned configuration.
  bool screen = true;
  /// The words of the `gputune run` command that started this (after "gputune"): a run that stops
  /// early says how to go on with the same options and `--resume RUN`. Empty: `run JOB [--db DB]`.
  std::vector<std::string> command_line;
  /// The job's budget was replaced on the command line (--budget): a resumed run goes on with it
  /// rather than with the budget it planned with.
  bool budget_given = false;
  /// Skip the job (exit 0, nothing compiled or stored) when a finished run of the same job and
  /// strategy already measured every context as it is now: the same kernel source, device,
  /// driver, toolkit and problem sizes (db::Store::unchanged_run). Needs a device.
  bool skip_unchanged = false;
  // Hooks for the daemon's workers.
  std::optional<std::int64_t>
      resume_run;  ///< continue this run, skipping measured (context, variant) pairs
  std::function<void(std::int64_t run_id)> on_run_started;
  /// Called before each variant is measured on the GPU (a crash or hang is blamed on it).
  std::function<void(std::int64_t context_id, std::int64_t variant_id)> on_measure_start;
  /// Checked between variants; true stops the run (status "interrupted").
  std::function<bool()> should_stop;
  /// A variant's measurement that has not returned after this many seconds is stored as
  /// `timeout` and ends the process (tuner/run/hang_watch.h); 0: no limit (the daemon's workers,
  /// whose supervisor kills them instead).
  double hang_limit_s = 0;
  /// Where the HangWatch also reports a hang (a supervisor's pipe, tuner/run/hang_watch.h); -1:
  /// none.
  int hang_report_fd = -1;
  /// Seconds of the job's time budget (GPUTune.Budget.Seconds) that earlier processes of this
  /// run spent measuring (an automatic restart after a hang carries them over).
  double budget_spent_s = 0;
};

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

/// Runs the whole pipeline. Throws JobError (bad input) and db::DbError (bad database) before
/// anything is written; other failures are recorded per variant.
RunReport run_job(const Job& job, const RunOptions& options);

/// The device a job runs on (GPUTune.Device.Index, or --gpu): throws JobError naming that field
/// and the devices there are when it does not exist. Needs an available driver.
DeviceInfo job_device(const Job& job, const std::string& source = {},
                      const std::string& field = "GPUTune.Device.Index");

/// The final table of best configurations, as printed by `gputune run`.
void print_report(const RunReport& r, std::ostream& out);

}  // namespace gputune::tuner
