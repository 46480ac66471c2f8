/** \file tuner/compile/compile_and_inspect.h
 * Owns: the compile-and-inspect stage shared by `run` and `prune`: every configuration becomes a
 * Variant (source + -D options), is compiled by the NVRTC pool through the cubin cache, and has
 * its resources read from the cubin and the ptxas log.
 * Consumes: Job, kernel source, Configs. Produces: CompileReport.
 * Runs after: the space (variants/); before: the pruner's rules 1-3 (pruner/rules.h) and the
 * model's real predictions (model/predict.h).
 * Must not: launch or touch the database. */
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cuda/nvrtc.h"
#include "pruner/cubin.h"
#include "pruner/rules.h"
#include "variants/space.h"

namespace gputune::tuner {

struct Inspected {
  bool ok = false;     ///< compiled and resources read
  std::string reason;  ///< when !ok
  pruner::Resources res;
};

struct CompileReport {
  std::vector<cuda::CompiledVariant> compiled;
  std::vector<Inspected> inspected;
  std::size_t ok = 0, failed = 0, cached = 0;
};

/// Reads a compiled variant's resources (registers, shared memory, spills, parameter sizes) from
/// its cubin and NVRTC's ptxas log.
Inspected inspect_cubin(const cuda::CompiledVariant& c);

/// Checks the job's arguments against one compiled configuration's parameter sizes
/// (check_parameter_sizes in arguments.h): throws JobError when they differ. A job without
/// Arguments, or a variant whose resources were not read, is not checked.
void check_cubin_arguments(const Job& job, const Inspected& in, const Config& config);

/// The cubin cache for a --cache-dir option: "-" disables it, empty means the default folder.
cuda::CubinCache cache_for(const std::filesystem::path& option);

/// Compiles (compile_all) and reads each cubin's resources as it is compiled (on the compile
/// workers); `should_stop` as compile_all's. Without `keep_cubins` each cubin's bytes are dropped
/// once read (its hash, log and resources stay): what a run that measures nothing needs, since a
/// naive kernel's space of 500,000 variants holds some 25 GB of cubins.
CompileReport compile_and_inspect(const Job& job, const std::string& source,
                                  const std::vector<Config>& configs, const std::string& arch,
                                  const cuda::CubinCache& cache, int threads, bool progress,
                                  const std::function<bool()>& should_stop = {},
                                  bool keep_cubins = true);

/// Compiles configs[i] for each i in `which` and writes their entries of `into` (sized like
/// configs), adding to its counts: compiling a part of a plan after (or instead of) the rest.
void compile_into(CompileReport& into, const std::vector<std::size_t>& which, const Job& job,
                  const std::string& source, const std::vector<Config>& configs,
                  const std::string& arch, const cuda::CubinCache& cache, int threads,
                  bool progress, const std::function<bool()>& should_stop = {},
                  bool keep_cubins = true);

/// Checks the job's arguments against every compiled configuration's parameter sizes
/// (check_parameter_sizes in arguments.h); throws JobError at the first that differs. A job
/// without Arguments is not checked.
void check_arguments_against_cubins(const Job& job, const std::vector<Config>& configs,
                                    const CompileReport& cr);

/// The same check for the configurations `which`, compiled after the run's records exist (the
/// regret sample's): each that differs fails alone (inspected.ok false, the error its reason).
void fail_mismatched_arguments(const Job& job, const std::vector<Config>& configs,
                               const std::vector<std::size_t>& which, CompileReport& cr);

/// What the pruning rules need of each compiled config in one context (geometry from the job;
/// a config without a valid launch geometry is not judged).
std::vector<pruner::RuleInput> rule_inputs(const Job& job, const std::vector<Config>& configs,
                                           const ContextSpec& ctx, const CompileReport& cr);

}  // namespace gputune::tuner
