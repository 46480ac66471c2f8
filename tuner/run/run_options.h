/** \file tuner/run/run_options.h
 * Owns: what the caller of `gputune run` decides beside the job (RunOptions): the database, the
 * cache, the workers, the hooks the daemon's workers and the hang watch use.
 * Consumes: nothing (plain values; app/ fills them from a command line, app/daemon.cpp from a
 * queued job). Produces: RunOptions for run_job (tuner/run/pipeline.h).
 * Must not: hold what the run finds out (that is RunReport, tuner/run/run_report.h). */
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace gputune::tuner {

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

}  // namespace gputune::tuner
