/** \file tuner/run/model_work.h
 * Owns: the plan of a run, and the model's work that runs beside its first measurements. The plan
 * is the whole space (model_guided), the plan a resumed run stored, the first configurations a
 * strategy without feedback proposes within the budget (the default first), or, for a space
 * larger than GPUTune.Search.ModelAnalyses, what the model's search chose
 * (tuner/model/space_search.h) with the regret sample's draws from what it left out. The search
 * and, where the model runs, each context's analysis of the plan from the source alone (its best
 * cases: no cubin needed) run on a thread of their own (and their own workers), so that the default
 * configuration is compiled and measured at once; the caller waits for each result when it needs it
 * and prints the messages the work left. Must not: compile, launch, or touch the database. */
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tuner/run/run_stages.h"

namespace gputune::tuner {

/// One context's model of the plan before compiling.
struct ContextModel {
  ModelRun run;                   ///< per plan position: traffic reports, best-case features
  std::vector<double> best_case;  ///< per position: the best case in ms (NaN: none)
  std::vector<int> max_blocks;    ///< per position: blocks per SM its launch allows (0: none)
  std::vector<std::int64_t> threads_per_block;  ///< per position (0: no launch)
};

class ModelWork {
 public:
  /// Starts the work for `s` (prepared: space, device, rates; the plan's search when
  /// `plan.searched` is to be filled, i.e. `search`).
  ModelWork(const RunState& s, Plan plan, bool search);
  /// Stops the work (what is analysed stays in the cache) and waits for its thread.
  ~ModelWork();
  ModelWork(const ModelWork&) = delete;
  ModelWork& operator=(const ModelWork&) = delete;

  /// Waits for the plan. nullptr when Ctrl-C stopped the search. Rethrows what the work threw.
  const Plan* plan();
  /// Waits for context k's model; nullptr where the model does not run (no rates) or Ctrl-C
  /// stopped it. Rethrows what the work threw.
  const ContextModel* context(std::size_t k);
  /// The messages the work left since the last call, for the log.
  std::vector<std::string> take_messages();
  /// Whether the model runs for this run (model_guided or the pruner on, and rates known).
  bool models() const { return models_; }

 private:
  void work();
  bool stopping() const;
  void say(const std::string& line);

  const RunState& s_;
  const bool search_;
  const bool models_;
  std::atomic<bool> cancel_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Plan plan_;
  bool plan_ready_ = false, plan_stopped_ = false;
  std::vector<std::optional<ContextModel>> contexts_;
  std::size_t contexts_ready_ = 0;
  std::exception_ptr error_;
  std::vector<std::string> messages_;
  std::thread thread_;  // last: started once everything above is set
};

/// The plan that needs no search (see ModelWork): for model_guided, the whole space, or the plan
/// a resumed run stored (throws JobError when the space no longer holds it); for the other
/// strategies, their first configurations within the budget with the default first. `search`
/// is set when the model must search a space larger than its analyses instead.
Plan plan_without_search(RunState& s, bool& search);

}  // namespace gputune::tuner
