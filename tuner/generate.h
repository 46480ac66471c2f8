/** \file tuner/generate.h
 * Owns: the naive-kernel entry points of the tuner: loading a job whose kernel is naive
 * (GPUTune.Naive: analyse it, generate its space and geometry, or fall back to block shape only
 * with the reason), and `gputune generate` (analysis report, variant files, a CPU check of every
 * written variant against the naive kernel). The analysis and the code are variants/naive.h's;
 * the CPU check is cpu_emulator.h's.
 * Must not: launch on a GPU or touch the database. */
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "variants/job.h"
#include "variants/naive.h"

namespace gputune::tuner {

/// For a naive job: analyses the kernel and applies the generated space (naive::apply_to_job);
/// for a kernel outside the subset, sets job.naive_fallback and tunes block shape only.
/// Nothing for other jobs.
void prepare_naive(Job& job);

/// load_job + prepare_naive: what every command that tunes uses.
Job load_tuning_job(const std::filesystem::path& file);

/// Checks variants of a naive kernel against the kernel itself on the CPU (cpu_emulator.h):
/// arguments sized and filled as the job says for `ctx`, every output compared with the job's
/// tolerance. Returns one line per variant that differs or fails (empty: all agree); a misaligned
/// vector load fails. `vector_loads`, when given, receives the vector loads all variants made.
std::vector<std::string> check_on_cpu(const Job& job, const std::string& naive_source,
                                      const naive::NaiveKernel& k,
                                      const std::vector<naive::Choice>& variants,
                                      const ContextSpec& ctx, int jobs = 2,
                                      unsigned long long* vector_loads = nullptr);

struct GenerateOptions {
  std::filesystem::path kernel_file;
  std::string kernel;
  std::filesystem::path out_dir;         ///< empty: print the analysis only
  std::filesystem::path job_file;        ///< optional: a naive job, for --check's arguments
  size_t limit = 64;                     ///< variant files written at most (0: all)
  bool check = false;                    ///< run every written variant on the CPU
  std::vector<std::int64_t> check_size;  ///< ProblemSize for --check (default: the job's first)
};

/// `gputune generate`: prints the analysis, writes variants; returns the exit code.
int generate(const GenerateOptions& o);

}  // namespace gputune::tuner
