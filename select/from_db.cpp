/** \file select/from_db.cpp
 * Owns: building a decision table from a gputune database (db::tuned_kernels), keeping as
 * candidates each context's winner and its next fastest configurations, then fitting each
 * device's rule (fit.cpp). */
#include <algorithm>
#include <set>

#include "db/decisions.h"
#include "select/decision_table.h"

namespace gputune::select {

namespace {

std::vector<std::int64_t> size_of(const std::string& json_text) {
  std::vector<std::int64_t> out;
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_array())
    for (const auto& v : j)
      if (v.is_number()) out.push_back(std::max<std::int64_t>(1, v.get<std::int64_t>()));
  while (out.size() < 3) out.push_back(1);
  return out;
}

std::map<std::string, double> values_of(const std::string& json_text) {
  std::map<std::string, double> out;
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_object())
    for (const auto& [name, v] : j.items())
      if (v.is_number()) out[name] = v.get<double>();
  return out;
}

}  // namespace

DecisionTable table_from_store(db::Store& store, const std::string& kernel,
                               int candidates_per_input) {
  DecisionTable t;
  t.origin = store.db().path();
  for (const db::TunedKernel& tk : db::tuned_kernels(store, kernel)) {
    KernelTable k;
    k.name = tk.name, k.hash = tk.hash, k.job_document = tk.job_document, k.source = tk.source;
    k.parameters = tk.parameters;
    // Candidates: every context's winner and its next fastest, on every device.
    std::set<std::string> candidates;
    for (const db::TunedDevice& d : tk.devices)
      for (const db::TunedContext& c : d.contexts) {
        candidates.insert(c.winner_key);
        std::vector<std::pair<double, std::string>> by_time;
        for (const auto& [key, t] : c.times_ms) by_time.emplace_back(t, key);
        std::sort(by_time.begin(), by_time.end());
        for (size_t i = 0; i < by_time.size() && static_cast<int>(i) < candidates_per_input; ++i)
          candidates.insert(by_time[i].second);
      }
    for (const std::string& key : candidates) {
      auto it = tk.params_json.find(key);
      if (it != tk.params_json.end())
        k.configs.emplace(key, nlohmann::ordered_json::parse(it->second));
    }
    for (const db::TunedDevice& td : tk.devices) {
      DeviceTable d;
      d.name = td.name, d.arch = td.arch, d.sm_count = td.sm_count;
      for (const db::TunedContext& c : td.contexts) {
        if (!k.configs.count(c.winner_key)) continue;
        TunedInput in;
        in.label = c.label, in.size = size_of(c.problem_size_json);
        in.values = values_of(c.values_json), in.winner = c.winner_key, in.best_ms = c.best_ms;
        for (const auto& [key, t] : c.times_ms)
          if (k.configs.count(key)) in.times_ms[key] = t;
        d.inputs.push_back(std::move(in));
      }
      fit(d);
      k.devices.push_back(std::move(d));
    }
    t.kernels.push_back(std::move(k));
  }
  return t;
}

}  // namespace gputune::select
