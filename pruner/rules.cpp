#include "pruner/rules.h"

#include <unordered_map>

namespace gputune::pruner {

PruneResult apply_rules(const std::vector<RuleInput>& in, const DeviceLimits& limits,
                        const PruneOptions& o) {
  PruneResult r;
  r.decisions.resize(in.size());
  r.counts = {{"resources", 0}, {"spills", 0}, {"duplicate", 0}};
  std::unordered_map<std::string, long> first_of;  // cubin + geometry -> kept index
  for (size_t i = 0; i < in.size(); ++i) {
    const RuleInput& v = in[i];
    Decision& d = r.decisions[i];
    if (!v.inspected) {
      d.kept = false;
      d.reason = "not compiled";
      continue;
    }
    ++r.judged;
    d.occupancy = compute_occupancy(v.res, v.grid, v.block, v.dynamic_smem, limits);
    if (!d.occupancy.feasible) {
      d.kept = false, d.rule = "resources", d.reason = d.occupancy.infeasible_reason;
      ++r.counts[0].removed;
      continue;
    }
    int spills = v.res.spill_stores >= 0 ? v.res.spill_stores + v.res.spill_loads : 0;
    if (o.max_spill_bytes >= 0 && spills > o.max_spill_bytes) {
      d.kept = false, d.rule = "spills";
      d.reason = std::to_string(spills) + " bytes of spill stores and loads > limit " +
                 std::to_string(o.max_spill_bytes);
      ++r.counts[1].removed;
      continue;
    }
    if (o.collapse_duplicates && !v.cubin_hash.empty()) {
      auto [it, inserted] = first_of.emplace(v.cubin_hash + "|" + v.geometry, static_cast<long>(i));
      if (!inserted) {
        d.kept = false, d.rule = "duplicate", d.duplicate_of = it->second;
        d.reason = "same cubin and launch geometry as variant " + std::to_string(it->second);
        ++r.counts[2].removed;
        continue;
      }
    }
    ++r.kept;
  }
  return r;
}

}  // namespace gputune::pruner
