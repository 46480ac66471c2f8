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

#include "db/store.h"
#include "tuner/common/exit_codes.h"

namespace gputune::app {

/// A job of a suite, and where it was named (the suite file or folder, or "command line").
struct SuiteJob {
  std::filesystem::path file;
  std::string named_by;
  std::string document;       ///< the job file's text (how its runs are found in the database)
  std::string strategy;       ///< its search strategy (GPUTune.Search.Strategy or the default)
  bool search_named = false;  ///< the job names its search (else a --budget chooses it)
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
  /// Re-measure a regression before reporting it (Confirmation); `batch --no-confirm` turns it
  /// off.
  bool confirm = true;
};

/// A regression re-measured before it is reported: the run's winner and the previous run's
/// winner, side by side in one `gputune run` of just those configurations in that context (a
/// temporary job beside the job file, into a temporary database), so that one noisy run is not a
/// regression. Confirmed when the winner re-measured is still slower than the previous run's best
/// by more than the threshold.
struct Confirmation {
  bool ran = false;                            ///< false: it could not re-measure (`note` says why)
  bool confirmed = false;                      ///< still slower when re-measured
  std::string winner_config, previous_config;  ///< configuration keys
  std::optional<double> winner_ms;             ///< the run's winner, re-measured
  std::optional<double> previous_config_ms;    ///< the previous winner, re-measured beside it
  std::string note;                            ///< what the two re-measurements say
};

/// One context of a job's run: its best correct time, and the previous run's.
struct BatchContext {
  std::string label, device;
  std::int64_t context_id = 0, previous_context_id = 0;
  std::optional<double> best_ms;
  std::optional<double> previous_ms;
  std::int64_t previous_run = 0;  ///< 0: no earlier finished run of this job and context
  /// Slower than the previous run by more than the threshold (or nothing correct where there was
  /// something), and, where it could be re-measured, confirmed.
  bool regression = false;
  std::optional<Confirmation> confirmation;  ///< for a regression found by the run's times
  /// best / previous - 1 (0.12: 12% slower); only with both times.
  std::optional<double> change() const;
};

struct BatchItem {
  SuiteJob job;
  int exit_code = 0;
  bool ran = false;                         ///< false: the suite stopped before this job
  std::int64_t run_id = 0;                  ///< 0: the job stored no run (bad input found by `run`)
  std::optional<db::RunStatus> run_status;  ///< the run's status; none without a run
  /// The run's status as every report prints it ("" without a run).
  std::string status_text() const { return run_status ? std::string(db::text(*run_status)) : ""; }
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

/// Fills `item.contexts` from its run (item.run_id): each context's best against the previous
/// finished run of the same job (db::Store::previous_best); a regression (slower by more than the
/// threshold in a finished run, or nothing correct where there was something) is re-measured
/// (Confirmation) when `options.confirm`, and stays one only if confirmed or if it could not be
/// re-measured.
void compare_contexts(db::Store& store, BatchItem& item, const BatchOptions& options,
                      std::ostream& log);

/// The suite's exit code: interrupted 5; else the most serious of the jobs' own codes (internal
/// error, bad input, no correct variant, no device); else 7 for a regression; else 0.
int suite_exit_code(const BatchReport& report);

/// The report of the jobs' newest runs in the database, without running anything (`batch
/// --report-only`: after `gputune db merge` of the shards of a SLURM array): each job's newest
/// run, compared as run_batch compares, regressions confirmed as there (where no GPU is present
/// the confirmation says it could not run).
BatchReport report_batch(const std::vector<SuiteJob>& jobs, const BatchOptions& options,
                         std::ostream& log);

/// The report's table and its one-line verdict.
void print_batch_report(const BatchReport& report, std::ostream& out);

/// The report as Markdown (a table per job: context, best, previous, change, verdict, and what
/// the confirmation re-measured) and as JSON (the same, machine-readable).
std::string batch_report_markdown(const BatchReport& report);
std::string batch_report_json(const BatchReport& report);

}  // namespace gputune::app
