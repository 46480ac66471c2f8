#include "pruner/rules.h"

#include <sstream>
#include <unordered_map>

namespace gputune::pruner {

std::string launch_key(const std::array<std::int64_t, 3>& grid,
                       const std::array<std::int64_t, 3>& block, std::int64_t dynamic_smem) {
  std::ostringstream key;
  key << grid[0] << "," << grid[1] << "," << grid[2] << "/" << block[0] << "," << block[1] << ","
      << block[2] << "/" << dynamic_smem;
  return key.str();
}

Decision judge_variant(const RuleInput& v, long index, const DeviceLimits& limits,
                       const PruneOptions& o, std::unordered_map<std::string, long>& kept) {
  Decision d;
  d.occupancy = compute_occupancy(v.res, v.grid, v.block, v.dynamic_smem, limits);
  if (!d.occupancy.feasible) {
    d.kept = false, d.rule = "resources", d.reason = d.occupancy.infeasible_reason;
    return d;
  }
  int spills = v.res.spill_stores >= 0 ? v.res.spill_stores + v.res.spill_loads : 0;
  if (o.max_spill_bytes >= 0 && spills > o.max_spill_bytes) {
    d.kept = false, d.rule = "spills";
    d.reason = std::to_string(spills) + " bytes of spill stores and loads > limit " +
               std::to_string(o.max_spill_bytes);
    return d;
  }
  if (o.collapse_duplicates && !v.cubin_hash.empty()) {
    auto [it, inserted] = kept.emplace(v.cubin_hash + "|" + v.geometry, index);
    if (!inserted && it->second != index) {
      d.kept = false, d.rule = "duplicate", d.duplicate_of = it->second;
      d.reason = "same cubin and launch geometry as variant " + std::to_string(it->second);
    }
  }
  return d;
}

PruneResult apply_rules(const std::vector<RuleInput>& in, const DeviceLimits& limits,
                        const PruneOptions& o) {
  PruneResult r;
  r.decisions.resize(in.size());
  r.counts = {{"resources", 0}, {"spills", 0}, {"duplicate", 0}};
  std::unordered_map<std::string, long> first_of;  // cubin + geometry -> kept index
  for (size_t i = 0; i < in.size(); ++i) {
    Decision& d = r.decisions[i];
    if (!in[i].inspected) {
      d.kept = false;
      d.reason = "not compiled";
      continue;
    }
    ++r.judged;
    d = judge_variant(in[i], static_cast<long>(i), limits, o, first_of);
    for (auto& c : r.counts) c.removed += c.rule == d.rule;
    r.kept += d.kept;
  }
  return r;
}

double model_rule_best(const std::vector<Decision>& decisions,
                       const std::vector<Prediction>& predictions) {
  // The best over every variant rules 1-2 keep: a duplicate is the same binary as a kept one,
  // so its prediction counts too (and the screen, which cannot know which of a group of
  // identical binaries will represent it, gets the same best).
  double best = -1;
  for (size_t i = 0; i < decisions.size(); ++i)
    if ((decisions[i].kept || decisions[i].rule == "duplicate") && predictions[i].ok &&
        (best < 0 || predictions[i].ms < best))
      best = predictions[i].ms;
  return best;
}

std::string model_rule_reason(const Prediction* prediction, double best_case_ms, double margin,
                              double best_ms) {
  std::ostringstream r;
  r.precision(3);
  if (prediction && prediction->ok)
    r << "predicted " << prediction->ms << " ms (" << prediction->bound << "-bound)";
  else
    r << "not compiled: at best " << best_case_ms << " ms at any occupancy its launch allows";
  r << ", more than " << margin << " x the best prediction " << best_ms << " ms";
  return r.str();
}

std::size_t apply_model_rule(std::vector<Decision>& decisions,
                             const std::vector<Prediction>& predictions, double margin) {
  const double best = model_rule_best(decisions, predictions);
  if (best <= 0) return 0;
  std::size_t removed = 0;
  for (size_t i = 0; i < decisions.size(); ++i) {
    auto& d = decisions[i];
    if (!d.kept || !predictions[i].ok || !model_rule_drops(predictions[i].ms, best, margin))
      continue;
    d.kept = false;
    d.rule = "model";
    d.reason = model_rule_reason(&predictions[i], 0, margin, best);
    ++removed;
  }
  return removed;
}

}  // namespace gputune::pruner
