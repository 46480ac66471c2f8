/** \file tuner/emulator/cpu_check.h
 * Owns: checking a job's kernels on the CPU (cpu_emulator.h), where no GPU is needed: `gputune
 * check` runs configurations of any job at a small problem size and compares every output with
 * the reference the GPU run would use (ReferenceArguments, else the default configuration; the
 * naive kernel itself for generated variants), and checks the job's arguments against the
 * parameters the kernel declares (count, pointer or value, element size) before anything runs.
 * Consumes: Job, ContextSpec, configurations. Produces: CheckReport.
 * Must not: touch the GPU driver or the database. */
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "variants/job.h"
#include "variants/naive/naive.h"
#include "variants/space.h"

namespace gputune::tuner {

class CpuModule;
struct HostArgument;

/// How a job's arguments differ from what a kernel takes; `why` is empty when they do not.
struct SignatureMismatch {
  std::string field;  ///< the job's field: KernelSpecification.Arguments[i], or the list
  std::string why;
};

/// Whether kernel i of `m` takes the job's arguments: one per argument, a pointer for each Vector,
/// a value for each Scalar, elements of the same size and kind (integer or floating point).
SignatureMismatch signature_mismatch(const CpuModule& m, size_t i,
                                     const std::vector<HostArgument>& args,
                                     const std::string& kernel);

/// The job's first context, or one whose ProblemSize is `size` (named like "37x29") when given.
ContextSpec context_of_size(const Job& job, const std::vector<std::int64_t>& size);
/// The size `check` runs a naive job at when no --size is given: the context's ProblemSize with
/// each dimension above 64 replaced by 37, 29, 23 in turn (primes, so no block or tile divides
/// them) and the rest (a filter width) kept; empty when nothing is above 64.
std::vector<std::int64_t> small_naive_size(const ContextSpec& ctx);

/// Checks variants of a naive kernel against the kernel itself on the CPU: arguments sized and
/// filled as the job says for `ctx`, every written array compared with the job's tolerance.
/// Returns one line per variant that differs or fails (empty: all agree); a misaligned vector
/// load fails. `vector_loads`, when given, receives the vector loads all variants made. Throws
/// EmulatorInterrupted when interrupt_cpu_launches() stops it.
std::vector<std::string> check_on_cpu(const Job& job, const std::string& naive_source,
                                      const naive::NaiveKernel& k,
                                      const std::vector<naive::Choice>& variants,
                                      const ContextSpec& ctx, int jobs = 2,
                                      unsigned long long* vector_loads = nullptr);

/// CPU seconds one emulated launch may use by default before it is stopped and reported.
inline constexpr double kCheckTimeout = 60;

struct CheckOptions {
  /// ProblemSize to run at (empty: the job's first context; a naive job's shrunk by
  /// small_naive_size)
  std::vector<std::int64_t> size;
  size_t limit = 1000;  ///< configurations checked at most, spread over the space (0: all)
  int jobs = 2;         ///< host compiler processes
  double timeout_s = kCheckTimeout;  ///< CPU seconds per launch before it is stopped (0: none)
};

struct ConfigCheck {
  std::string key;      ///< Config::key()
  std::string problem;  ///< empty: agrees with the reference; else how it differs or failed
};

struct CheckReport {
  ContextSpec context;
  size_t space_size = 0;
  std::string reference;  ///< what outputs were compared with, in words
  std::vector<ConfigCheck> checked;
  std::vector<std::string> notes;  ///< e.g. compiler options the host compiler does not get
  bool interrupted = false;  ///< interrupt_cpu_launches() stopped it: `checked` is what came before
  size_t failures() const;
};

/// Runs up to `o.limit` configurations of the job on the CPU (the default configuration always)
/// and compares their outputs with the reference. Throws JobError for bad input (including
/// arguments the kernel does not take) and EmulatorError when the host compiler rejects the code
/// (EmulatorInterrupted when interrupted before anything was checked; an interrupt after that
/// ends the report early, marked `interrupted`).
CheckReport check_job(const Job& job, const CheckOptions& o);

/// `gputune check`: loads the job, checks it, prints one line per configuration that differs and
/// a summary; returns the exit code (0 all agree, 6 some differ or fail, 2 bad input, 5
/// interrupted: what was checked before is printed).
int check_command(const std::filesystem::path& job_file, const CheckOptions& o, std::ostream& out,
                  std::ostream& err);

}  // namespace gputune::tuner
