/** \file pruner/rules.h
 * Owns: the pruning rules applied before anything runs, each reported with how many variants it
 * removed: (1) resources: the launch would fail (threads, registers, shared memory against the
 * device, with the allocation granularities the hardware uses); (2) spills: local-memory spill
 * traffic above a threshold; (3) duplicates: identical cubin and launch geometry as a variant kept
 * earlier (a parameter with no effect on the code), so equal variants are timed once; (4) model:
 * predicted slower than a margin x the best prediction (apply_model_rule; the predictions are
 * pruner/model.h's, which tuner/model/predict.h computes over a context's variants, in parallel).
 * Consumes: Resources, cubin hashes, launch geometry, DeviceLimits, Predictions. Produces:
 * PruneResult, Decisions.
 * Must not: include cuda.h, launch anything, or touch the database. */
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "pruner/cubin.h"
#include "pruner/model.h"
#include "pruner/occupancy.h"

namespace gputune::pruner {

struct RuleInput {
  bool inspected = false;  ///< compiled and resources read; others are not judged here
  Resources res;
  std::string cubin_hash;
  std::string geometry;  ///< launch geometry key (grid, block, dynamic smem)
  std::int64_t dynamic_smem = 0;
  std::array<std::int64_t, 3> grid{1, 1, 1};   ///< the launch's, checked for its shape
  std::array<std::int64_t, 3> block{1, 1, 1};  ///< likewise; its product is the threads per block
};

struct PruneOptions {
  int max_spill_bytes = 0;  ///< spill stores + loads above this are pruned; < 0 disables
  bool collapse_duplicates = true;
};

struct Decision {
  bool kept = true;
  std::string rule;  ///< "resources", "spills", "duplicate", "model"; empty when kept
  std::string reason;
  long duplicate_of = -1;  ///< index of the identical variant kept
  Occupancy occupancy;
};

struct RuleCount {
  std::string rule;
  std::size_t removed = 0;
};

struct PruneResult {
  std::vector<Decision> decisions;  ///< one per input
  std::vector<RuleCount> counts;    ///< in rule order
  std::size_t kept = 0, judged = 0;
};

PruneResult apply_rules(const std::vector<RuleInput>& in, const DeviceLimits& limits,
                        const PruneOptions& options);

/// Rules 1-3 for one inspected variant, in order (apply_rules applies this to each in turn; a
/// run that streams, to each as it compiles): `kept` maps the binary and launch of each variant
/// kept so far to its `index`, and gets this one's when it is kept. A variant judged before (the
/// same index) is not its own duplicate.
Decision judge_variant(const RuleInput& in, long index, const DeviceLimits& limits,
                       const PruneOptions& options, std::unordered_map<std::string, long>& kept);

/// The launch part of a variant's duplicate key: grid, block and dynamic shared memory.
std::string launch_key(const std::array<std::int64_t, 3>& grid,
                       const std::array<std::int64_t, 3>& block, std::int64_t dynamic_smem);

/// Rule 4: among kept decisions with a prediction (predictions[i] is decisions[i]'s), drop those
/// predicted slower than margin x the best prediction of the variants rules 1-2 keep (duplicates
/// included: the same binary as a kept one): kept false, rule "model", the prediction in the
/// reason. Returns how many it removed. `prune` applies it after the model stage, replay sweeps it
/// over margins. (`run` applies the same margin as it streams, tuner/search/search_stream.h, and
/// the screen, tuner/model/compile_screen.h, before compiling: to best cases from the source alone,
/// which no real prediction undercuts.)
std::size_t apply_model_rule(std::vector<Decision>& decisions,
                             const std::vector<Prediction>& predictions, double margin);
/// Rule 4's test, wherever it is applied (here on a context's compiled variants; before compiling
/// on best cases in tuner/model/compile_screen.cpp; as the stream compiles in
/// tuner/search/search_stream.cpp): a variant predicted (or at best) slower than `margin` x the
/// best prediction cannot win. False when either time is unknown (NaN).
constexpr bool model_rule_drops(double predicted_ms, double best_ms, double margin) {
  return predicted_ms > margin * best_ms;
}

/// Why rule 4 dropped a variant, as every rule-4 decision says it: its prediction (or, not
/// compiled, its best case at any occupancy), the margin and the best prediction.
std::string model_rule_reason(const Prediction* prediction, double best_case_ms, double margin,
                              double best_ms);

/// The prediction rule 4 measures its margin from (-1 when no kept variant has one).
double model_rule_best(const std::vector<Decision>& decisions,
                       const std::vector<Prediction>& predictions);

}  // namespace gputune::pruner
