/** \file tuner/model/space_search.h
 * Owns: the structure-first search of a space too large to analyse and compile whole (the naive
 * mm's 576,460 variants: hours of traffic analysis and days of compiling on two cores).
 * The model's best case of a configuration (compile_screen.h: its prediction at the most blocks per
 * SM its launch allows, from the source alone) needs no compile, so the model itself searches the
 * space: half the analyses go to configurations spread over it (every value of every parameter,
 * then pairs of values: `spread`), the rest to the neighbourhoods of the best judged so far (one
 * parameter changed to any of its values, nearest first; a change the conditions forbid, such as
 * block x up under `bx * by <= 1024`, repaired by one step of a second parameter), best first. What
 * it looked at is what `run` and `prune` then compile and rule on; the rest of the space is left
 * out, and they say so. Consumes: Job, source, Space, contexts, device limits and rates. Produces:
 * the positions to compile, with how they were found. Must not: compile, launch, or write SQL. */
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/nvrtc.h"
#include "pruner/model.h"
#include "tuner/model/predict.h"
#include "variants/job.h"
#include "variants/space.h"

namespace gputune::tuner {

struct ModelSearchOptions {
  std::size_t limit = 20000;  ///< configurations analysed at most (Job::model_analyses)
  int threads = 0;
  bool progress = false;
  std::function<bool()> should_stop;  ///< Ctrl-C: analyse nothing more
  /// Repair a move the conditions forbid by one step of a second parameter (false: single moves
  /// only, as bench/model_search_bench --single-moves measures).
  bool coupled_moves = true;
};

struct ModelSearch {
  std::vector<std::size_t> chosen;  ///< positions in the space, ascending: what was looked at
  std::size_t spread = 0;           ///< of them spread over the space
  std::size_t near = 0;             ///< of them neighbours of the best judged so far
  std::size_t coupled = 0;  ///< of `near`, reached by a move the conditions forbid, repaired
                            ///< by one step of a second parameter
  std::size_t rounds = 0;   ///< neighbourhood rounds
  std::size_t judged = 0;   ///< with a best case in every context
  bool model = false;       ///< false: no rates, or nothing judged: the spread alone
  std::string why_not;      ///< when `model` is false: why
  std::string best_key;     ///< the best judged configuration (lowest geometric mean)
  double best_ms = 0;       ///< its best case in the first context
  bool interrupted = false;

  /// One line for the log and the prune report: what was looked at, of how many, and why.
  std::string summary(std::size_t space_size, std::size_t limit) const;
};

/// Chooses at most `options.limit` positions of `space` to compile (the default configuration
/// always among them). Without the device's rates, or when the model judges none of the spread,
/// the spread alone is chosen (`model` false). Deterministic.
ModelSearch search_by_model(const Job& job, const std::string& source, const Space& space,
                            const std::vector<const ContextSpec*>& contexts,
                            const pruner::DeviceLimits& limits, const Rates& rates,
                            const pruner::Calibration& calibration, const cuda::CubinCache& cache,
                            const ModelSearchOptions& options);

}  // namespace gputune::tuner
