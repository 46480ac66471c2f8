/** \file tuner/generate.h
 * Owns: the naive-kernel entry points of the tuner: loading a job whose kernel is naive
 * (GPUTune.Naive: analyse it, generate its space and geometry, or fall back to block shape only
 * with the reason), and `gputune generate` (analysis report, variant files, a CPU check of every
 * written variant against the naive kernel). The analysis and the code are
 * variants/naive/naive.h's; the CPU check is cpu_check.h's.
 * Must not: launch on a GPU or touch the database. */
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "variants/job.h"
#include "variants/naive/naive.h"

namespace gputune::tuner {

/// For a naive job: analyses the kernel and applies the generated space (naive::apply_to_job);
/// for a kernel outside the subset, sets job.naive_fallback and tunes block shape only.
/// Nothing for other jobs.
void prepare_naive(Job& job);

/// load_job + prepare_naive: what every command that tunes uses.
Job load_tuning_job(const std::filesystem::path& file);

struct GenerateOptions {
  std::filesystem::path kernel_file;
  std::string kernel;
  std::filesystem::path out_dir;   ///< empty: print the analysis only
  std::filesystem::path job_file;  ///< optional: a naive job, for --check's arguments
  size_t limit = 64;               ///< variant files written at most (0: all)
  /// One configuration only, by its key (`best`, `show`, `prune` print it) or as a JSON object
  /// (a line of `space --list`); without out_dir its source goes to stdout, the analysis to stderr.
  std::string config;
  bool check = false;                    ///< run every written variant on the CPU
  std::vector<std::int64_t> check_size;  ///< ProblemSize for --check (default: the job's first)
};

/// `gputune generate`: prints the analysis, writes variants; returns the exit code.
int generate(const GenerateOptions& o);

/// For a configuration of a naive job (its stored document and file): the `gputune generate`
/// command that writes that variant's source (`--config KEY`), since a naive kernel's winner is
/// generated code that no #define of the kernel file gives (with --job: the space the run built).
/// Nothing for a parametric job, or a document that is not a naive job's.
std::optional<std::string> generate_command(const std::string& job_document,
                                            const std::string& job_file, const std::string& key);

}  // namespace gputune::tuner
