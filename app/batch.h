/** \file app/batch.h
 * Owns: `gputune batch`, tuning a suite of jobs one after another (a nightly re-tune of a
 * benchmark suite): which jobs a suite names (suite files, folders of jobs, job files), running
 * each as its own `gputune run` process (run_restarting: a hung kernel restarts that job, a
 * crash ends that job and not the suite; Ctrl-C stops the job in hand and the suite), and the
 * suite's report: per job its exit code and run, and per context the run's best time against the
 * best time of the previous finished run of the same job on the same device and problem size
 * (db::Store::previous_best), flagging a regression when it is slower by more than a threshold.
 * Consumes: job files (checked with load_tuning_job before anything runs), the runs' rows (a
 * db::Store). Must not: tune in this process (the runs do), or touch the GPU; the one thing it
 * writes is the end of a run whose process was killed by a signal (left "running", it is ended
 * as failed, naming the signal).
 */
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "tuner/exit_codes.h"

namespace gputune::app {

/// A job of a suite, and where it was named (the suite file or folder, or "command line").
struct SuiteJob {
  std::filesystem::path file;
  std::string named_by;
  std::string document;  ///< the job file's text (how its runs are found in the database)
  std::string strategy;  ///< its search strategy (GPUTune.Search.Strategy or the default)
};

struct Suite {
  std::vector<SuiteJob> jobs;
  /// Files of a named folder that are neither jobs nor suites (e.g. a schema), one line each.
  std::vector<std::string> skipped;
};

/// The jobs `args` name, in order, each once: a job file (a T1 document, with
/// KernelSpecification), a suite file (`{"Suite": "name", "Jobs": ["relative/job.json", ...]}`,
/// paths relative to the suite file; an entry may itself be a folder or a suite), or a folder
/// (its `*.json` jobs and suites, by name). Every job is loaded (load_tuning_job) before anything
/// runs. Throws JobError naming the file and field.
Suite collect_suite(const std::vector<std::string>& args);

struct BatchOptions {
  std::string db_path;  ///< every job's runs go here (`run --db`)
  /// A context's best time this much slower than the previous run's (0.05: 5% slower) is a
  /// regression.
  double regression = 0.05;
  /// Passed to every `gputune run` after the job and `--db` (--no-gpu, --cache-dir, --budget...).
  std::vector<std::string> run_args;
  /// The --strategy in run_args, if any (empty: each job's own).
  std::string strategy;
  /// Restarts after hung kernels per job (run --max-restarts).
  int max_restarts = 10;
  /// Runs `gputune` with these words (after "gputune": "run", job, options) and returns its exit
  /// code. Default: run_restarting (a child process) with max_restarts.
  std::function<int(const std::vector<std::string>& words)> run;
  /// Checked between jobs (and after one that exits 5): true ends the suite.
  std::function<bool()> should_stop;
};

/// One context of a job's run: its best correct time, and the previous run's.
struct BatchContext {
  std::string label, device;
  std::optional<double> best_ms;
  std::optional<double> previous_ms;
  std::int64_t previous_run = 0;  ///< 0: no earlier finished run of this job and context
  bool regression = false;
  /// best / previous - 1 (0.12: 12% slower); only with both times.
  std::optional<double> change() const;
};

struct BatchItem {
  SuiteJob job;
  int exit_code = 0;
  bool ran = false;         ///< false: the suite stopped before this job
  std::int64_t run_id = 0;  ///< 0: the job stored no run (bad input found by `run`)
  std::string run_status;   ///< the run's status (done, interrupted, failed, ...)
  std::string run_message;  ///< the run's message (why it failed)
  /// `run --skip-unchanged` found nothing changed since run_id (an earlier run): no new run.
  bool unchanged = false;
  std::vector<BatchContext> contexts;
};

struct BatchReport {
  std::vector<BatchItem> items;
  std::string db_path;
  double regression = 0.05;
  bool interrupted = false;
  std::size_t regressions = 0;
  int exit_code = 0;
};

/// Runs the jobs in order; reads each one's run from the database after it ends.
BatchReport run_batch(const std::vector<SuiteJob>& jobs, const BatchOptions& options,
                      std::ostream& log);

/// The report's table and its one-line verdict.
void print_batch_report(const BatchReport& report, std::ostream& out);

}  // namespace gputune::app
