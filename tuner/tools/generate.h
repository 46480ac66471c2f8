/** \file tuner/tools/generate.h
 * Owns: `gputune generate` (analysis report, variant files, a CPU check of every
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
  /// Read the kernel as written, without the rewrites of other spellings of the same structure
  /// (naive::analyse_naive): what they add, side by side.
  bool as_written = false;
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
