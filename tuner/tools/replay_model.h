/** \file tuner/tools/replay_model.h
 * Owns: replaying model_guided with the model as `run` streams it (tuner/tools/replay.cpp's search
 * with the kernel source and a device): every configuration's best case from its source alone (the
 * traffic analysis, cached on disk, at the most blocks per SM its launch allows), then the search
 * compiles with NVRTC only what it asks for (on the compile workers, as the stream asks), judges
 * each compiled variant by rules 1-3 and refines its prediction with its real occupancy, holds
 * back what rule 4 drops, and measures the recorded times, in simulated time. So a replay with
 * the model costs the compiles of the search, not of the space (`replay --prune-report` compiles
 * the space for the pruner's report).
 * Must not: launch anything, write SQL or print. */
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "tuner/tools/replay.h"
#include "tuner/tools/replay_search.h"
#include "variants/job.h"
#include "variants/space.h"

namespace gputune::tuner {

struct GuidedReplay {
  std::vector<SearchSeed> seeds;
  std::string device, context, rates_source;  ///< what the model predicted for
  bool scored = false;                        ///< false: no rates (note says why)
  std::string note;
  std::size_t predicted = 0;  ///< configurations with a best case
  std::size_t compiled = 0;   ///< distinct configurations compiled over all seeds
  /// The first seed: measurements before its stop rule ended it (0: it did not stop), its best
  /// over the optimum, and what rules 1-3 and rule 4 removed of what it compiled.
  std::size_t stopped_after = 0;
  double best_ratio = 0;
  std::map<std::string, std::size_t> removed_by_rule;
  /// The real predictions of the compiled configurations against their recorded times.
  double spearman = 0;
  std::size_t predicted_and_measured = 0;
};

/// model_guided with the model over `seeds` seeds (each seed's portfolio beside the model draws
/// differently; what is compiled once is compiled for all).
GuidedReplay replay_guided(const Job& job, const Space& space, const Recording& r,
                           const ReplayOptions& o, int seeds, const Horizon& h,
                           const StreamShape& shape);

}  // namespace gputune::tuner
