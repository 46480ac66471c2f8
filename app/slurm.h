/** \file app/slurm.h
 * Owns: `gputune batch --slurm`: a suite as a SLURM job array. The plan (a pure function of the
 * suite, the database and the options: which jobs each array task tunes, the shard databases, the
 * text of the array script and of the dependent merge script), writing the two scripts and their
 * folders beside the database, and `--submit` (sbatch for the array, then sbatch for the merge
 * with --dependency=afterany on it).
 * Consumes: the suite's jobs (collect_suite, already loaded and checked), the batch options each
 * task passes on. Must not: tune, open the database, or talk to SLURM other than through the
 * `sbatch` program (the scripts run `gputune batch`, `gputune db merge` and the report on the
 * nodes).
 */
#pragma once

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace gputune::app {

struct SlurmOptions {
  std::string partition;       ///< `#SBATCH --partition`; empty: the cluster's default
  std::string gres = "gpu:1";  ///< each array task's `#SBATCH --gres`; "none": no --gres line
  /// Array tasks; 0: one per job. Jobs go to tasks in turn (job k to task k % tasks), so a task's
  /// shard keeps the same jobs from night to night while the suite does not change.
  std::size_t tasks = 0;
  /// At most this many tasks at once (`--array=0-N%M`): the nodes (GPUs) of the partition's
  /// type to use; 0: as many as SLURM gives.
  std::size_t nodes_per_type = 0;
};

/// Everything `batch --slurm` writes, as text: no file is touched to make it.
struct SlurmPlan {
  std::filesystem::path db;          ///< the merged database (absolute)
  std::filesystem::path shards;      ///< <db>.shards: task-<i>.db, one per array task
  std::filesystem::path logs;        ///< <db>.logs: the tasks' and the merge's output
  std::filesystem::path array_file;  ///< <db>.sbatch
  std::filesystem::path merge_file;  ///< <db>.merge.sbatch
  std::vector<std::vector<std::filesystem::path>> task_jobs;  ///< per task, its job files
  std::string array_script, merge_script;
  /// The shell command that submits both by hand, the merge after the array.
  std::string submit_command;
};

/// What is given to plan_slurm besides the options.
struct SlurmSuite {
  std::vector<std::string> suite_args;           ///< what `batch` was given (for the report)
  std::vector<std::filesystem::path> job_files;  ///< the suite's jobs, in order (collect_suite)
  std::string db;                                ///< --db as given (made absolute)
  /// The batch options every task passes on after `--db SHARD` (--budget 4, --skip-unchanged...).
  std::vector<std::string> batch_args;
  /// The options the report passes on after `--report-only` (--regression 5).
  std::vector<std::string> report_args;
  std::string gputune;  ///< the binary the nodes run (absolute)
};

/// The plan: paths made absolute (against the current folder), every path and word quoted for the
/// shell (and for sbatch's own reading of `#SBATCH` lines). Throws JobError (file "command line")
/// for options it cannot express: --tasks 0 of an empty suite, a path with a line break.
SlurmPlan plan_slurm(const SlurmSuite& suite, const SlurmOptions& options);

/// Creates the shard and log folders and writes both scripts (executable). Throws
/// std::runtime_error naming the file that could not be written.
void write_slurm_files(const SlurmPlan& plan);

/// sbatch could not be run, or refused a script; what() names the fix.
class SlurmError : public std::runtime_error {
 public:
  SlurmError(const std::string& what, int exit_code)
      : std::runtime_error(what), exit_code(exit_code) {}
  int exit_code;  ///< what `gputune batch` exits with: 1 sbatch missing, 2 refused
};

struct SlurmSubmission {
  std::string array_job, merge_job;  ///< the job ids sbatch printed
};

/// `sbatch --parsable ARRAY`, then `sbatch --parsable --dependency=afterany:ID MERGE` (the
/// program found on $PATH as `sbatch`). Throws SlurmError.
SlurmSubmission submit_slurm(const SlurmPlan& plan, const std::string& sbatch = "sbatch");

/// The binary the scripts run: $GPUTUNE (made absolute when it names a path), else this
/// process's own executable.
std::string gputune_binary();

}  // namespace gputune::app
