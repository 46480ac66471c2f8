/** \file tuner/model/compile_screen.h
 * Owns: the compile screen, rule 4 applied before compiling. The traffic model reads a variant's
 * source, not its cubin; only its occupancy needs the cubin, and registers and static shared
 * memory can only lower that. So every configuration gets a best case (pruner::best_case at the
 * occupancy its thread count and dynamic shared memory allow), configurations are compiled in
 * order of it, a batch at a time, and after each batch those whose best case is more than
 * margin x the best prediction among the compiled variants that rules 1-2 keep are set aside
 * (branch and bound: that best only falls as more are compiled); what is set aside when nothing
 * else could come within the margin is never compiled: rule 4 would drop it whatever its
 * registers. Used by `run` (when the pruner is on and the device's rates are known) and by
 * `prune --screen`.
 * Consumes: Job, source, Configs, contexts, device limits and rates. Produces: a CompileReport
 * over every config (screened ones left uncompiled) and the screened set with reasons.
 * Runs after: the best cases (model/predict.h); before: the compile (compile/) of what it keeps.
 * Must not: launch anything or write SQL. */
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pruner/rules.h"
#include "tuner/compile/compile_and_inspect.h"
#include "tuner/model/predict.h"

namespace gputune::tuner {

struct ScreenOptions {
  double margin = 2.0;         ///< rule 4's margin
  pruner::PruneOptions rules;  ///< rules 1-3, applied to what was compiled
  int threads = 0;
  bool progress = false;
  std::size_t batch = 0;            ///< configurations compiled per round (0: 4 per worker, >= 32)
  std::vector<std::size_t> always;  ///< compiled whatever their best case (the reference)
  std::function<bool()> should_stop;  ///< Ctrl-C: analyse and compile nothing more
  bool keep_cubins = true;            ///< false: drop each cubin once read (nothing will run)
};

struct ScreenResult {
  CompileReport compile;            ///< per config; screened ones are not compiled (ok false)
  std::vector<char> screened;       ///< per config
  std::vector<std::string> reason;  ///< per screened config: its best case against the best
  std::size_t count = 0;            ///< screened configurations
  std::size_t rounds = 0;           ///< compile rounds
  bool interrupted = false;  ///< ScreenOptions::should_stop: stopped; nothing counts as screened
};

ScreenResult compile_screened(const Job& job, const std::string& source,
                              const std::vector<Config>& configs,
                              const std::vector<const ContextSpec*>& contexts,
                              const pruner::DeviceLimits& limits, const Rates& rates,
                              const pruner::Calibration& calibration, const std::string& arch,
                              const cuda::CubinCache& cache, const ScreenOptions& options);

/// The screen's best case of each configuration in one context: the model's prediction at the most
/// blocks per SM its thread count and dynamic shared memory allow (registers and static shared
/// memory can only lower that), from its source alone; NaN where there is none (not analysed, no
/// launch). Uses `options.threads`, `progress` and `should_stop` (stopped: `*interrupted` set).
/// `args`: the context's (model_arguments(make_arguments(job, context, SizesOnly))), built once
/// by a caller that asks for many batches.
std::vector<double> best_cases(const Job& job, const std::string& source,
                               const std::vector<Config>& configs, const ContextSpec& context,
                               const ModelArguments& args, const pruner::DeviceLimits& limits,
                               const Rates& rates, const pruner::Calibration& calibration,
                               const cuda::CubinCache& cache, const ScreenOptions& options,
                               bool* interrupted = nullptr);

/// Rule 4's decision for every screened configuration (kept false, rule "model", the screen's
/// reason); returns how many. `run` and `prune` add these to rule 4's count.
std::size_t mark_screened(std::vector<pruner::Decision>& decisions, const ScreenResult& screen);

}  // namespace gputune::tuner
