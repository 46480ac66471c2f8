// model_guided on a real generated space against a SYNTHETIC truth: how many measurements it needs
// to get within 5% of the optimum with and without the learned parameter effects
// (tuner::ParameterEffects), and random search as the baseline. No GPU and no measurement: the
// space, the pruner's decisions and the model's features are the real ones of JOB for DEVICE
// (`gputune prune`), the "measured" times are the model's own prediction times an error the model
// does not see: one log-normal factor per parameter value (sigma SIGMA, the part of the error a
// parameter explains) times one per variant (sigma NOISE, the rest). What it shows is the
// mechanism under that assumption, not how the model fares on a GPU.
//
// With DRIFT (>= 0) it also simulates a second context (another problem size) whose per-value
// factors are the first's plus a change of their own (sigma DRIFT): model_guided on the second
// context cold, started from what its search of the first measured (the prior a run's later
// contexts and later runs get from the database, ParameterEffects::from_past; the first search is
// capped at the job's budget of configurations), and started from an unrelated context's
// measurements (fresh factors), which shows what a misleading prior costs.
//
// With TRUTH (a calibration's JSON, e.g. '{"flops": 0.5}'), the truth is predicted with that
// calibration instead of the one the pruner used: a GPU whose terms the starting calibration
// mis-scales. Two more rows then compare what the model rule (rule 4, the job's margin) pruned:
// held back and readmitted by the refits (what `gputune run` does), and excluded for good (what it
// did before). The optimum is over everything rules 1-3 keep, so the rule's regret counts.
//
// Usage: guided_sim JOB DEVICE [SEEDS=50] [SIGMA=0.15] [NOISE=0.05] [CACHE_DIR] [DRIFT] [TRUTH]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tuner/common/tuning_job.h"
#include "tuner/search/strategy.h"
#include "tuner/tools/prune_command.h"

using namespace gputune;

namespace {

struct Result {
  std::optional<size_t> to5;  // measurements until one within 5% of the optimum
  size_t measured = 0;        // before the strategy stopped (or ran out)
  double best_ratio = 0;      // best measured / optimum when it stopped
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

/// The synthetic truth's calibration: the pruner's, with the fields `text` (a calibration's
/// JSON) names replaced.
pruner::Calibration truth_calibration_from(const pruner::Calibration& pruner_calibration,
                                           const char* text) {
  pruner::Calibration truth_calibration = pruner_calibration;
  // Fields the text names replace the pruner's; the rest stay.
  pruner::Calibration named = pruner::Calibration::from_json(text);
  const auto given = nlohmann::json::parse(text);
  for (auto [key, field] :
       std::initializer_list<std::pair<const char*, double pruner::Calibration::*>>{
           {"overhead_us", &pruner::Calibration::overhead_us},
           {"dram", &pruner::Calibration::dram},
           {"l2", &pruner::Calibration::l2},
           {"shared", &pruner::Calibration::shared},
           {"flops", &pruner::Calibration::flops},
           {"saturating_warps", &pruner::Calibration::saturating_warps}})
    if (given.contains(key)) truth_calibration.*field = named.*field;
  return truth_calibration;
}

/// What the simulation runs on, said before its results.
void say_setup(const char* job, const std::string& device, std::size_t n, std::size_t proposable,
               double sigma, double noise, int seeds, const pruner::Calibration* truth,
               double margin, std::size_t held) {
  if (truth)
    std::printf("truth calibration %s; the model rule (margin %.2f) pruned %zu variants\n",
                truth->json().c_str(), margin, held);
  std::printf(
      "job %s, device %s: %zu configurations, %zu proposable (rules 1-3 keep them, with a "
      "prediction); synthetic truth: prediction x per-value factors (sigma %.2f) x "
      "per-variant noise (sigma %.2f); %d seeds\n",
      job, device.c_str(), n, proposable, sigma, noise, seeds);
}

/// One line per strategy: measurements to within 5% of the optimum (median, p90), the seeds that
/// stopped before it, and how many were measured.
void print_results(const std::map<std::string, std::vector<Result>>& results,
                   std::size_t proposable) {
  std::printf("%-32s %14s %12s %22s %18s\n", "strategy", "to 5% (median)", "to 5% (p90)",
              "stopped before 5%", "measured (median)");
  for (auto& [name, rs] : results) {
    std::vector<double> to5, measured, short_ratio;
    for (auto& r : rs) {
      // A search that stopped before reaching 5% counts as needing everything it could measure.
      to5.push_back(r.to5 ? static_cast<double>(*r.to5) : static_cast<double>(proposable));
      measured.push_back(static_cast<double>(r.measured));
      if (!r.to5) short_ratio.push_back(r.best_ratio);
    }
    char stopped[64];
    if (short_ratio.empty())
      std::snprintf(stopped, sizeof stopped, "0 of %zu", rs.size());
    else
      std::snprintf(stopped, sizeof stopped, "%zu of %zu (median %.2fx)", short_ratio.size(),
                    rs.size(), percentile(short_ratio, 0.5));
    std::printf("%-32s %14.0f %12.0f %22s %18.0f\n", name.c_str(), percentile(to5, 0.5),
                percentile(to5, 0.9), stopped, percentile(measured, 0.5));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s JOB DEVICE [SEEDS] [SIGMA] [NOISE] [CACHE_DIR] [DRIFT] [TRUTH]\n",
                 argv[0]);
    return 2;
  }
  const int seeds = argc > 3 ? std::stoi(argv[3]) : 50;
  const double sigma = argc > 4 ? std::stod(argv[4]) : 0.15;
  const double noise = argc > 5 ? std::stod(argv[5]) : 0.05;
  const double drift = argc > 7 ? std::stod(argv[7]) : -1;
  const bool miscalibrated = argc > 8;
  Job job = tuner::load_tuning_job(argv[1]);
  tuner::PruneRunOptions po;
  po.device = argv[2], po.store = false;
  if (argc > 6) po.cache_dir = argv[6];
  tuner::PruneReport pr = tuner::prune_job(job, po);
  if (!pr.rates) {
    std::fprintf(stderr, "no rates for the model: %s\n", pr.rates_source.c_str());
    return 1;
  }
  const size_t n = pr.rows.size();
  std::vector<Config> configs;
  std::vector<bool> excluded(n);
  std::vector<size_t> candidates;  // what model_guided may propose: rules 1-3 keep it, predicted
  for (size_t i = 0; i < n; ++i) {
    configs.push_back(pr.rows[i].config);
    const auto& rule = pr.rows[i].decision.rule;
    excluded[i] = rule == "resources" || rule == "duplicate" || rule == "spills";
    if (!excluded[i] && pr.features[i].ok) candidates.push_back(i);
  }
  std::vector<double> predicted(n, 0), truth_model(n, 0);
  const pruner::Calibration truth_calibration =
      miscalibrated ? truth_calibration_from(pr.calibration, argv[8]) : pr.calibration;
  std::vector<bool> by_model(n), excluded_with_model(n);
  size_t held = 0;
  for (size_t i = 0; i < n; ++i) {
    by_model[i] = pr.rows[i].decision.rule == "model";
    excluded_with_model[i] = excluded[i] || by_model[i];
    held += by_model[i] && !excluded[i];
  }
  for (size_t i : candidates) {
    predicted[i] = pruner::predict(pr.features[i], *pr.rates, pr.calibration).ms;
    truth_model[i] = pruner::predict(pr.features[i], *pr.rates, truth_calibration).ms;
  }
  say_setup(argv[1], pr.device, n, candidates.size(), sigma, noise, seeds,
            miscalibrated ? &truth_calibration : nullptr, job.pruner.model_margin, held);
  std::map<std::string, std::vector<Result>> results;
  std::vector<double> readmitted_counts;  // per seed, by the held-back search
  int optimum_pruned = 0;                 // seeds whose optimum rule 4 pruned
  for (int seed = 1; seed <= seeds; ++seed) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
    std::normal_distribution<double> value_effect(0, sigma), variant_effect(0, noise);
    std::map<std::pair<size_t, std::string>, double> effect;  // (parameter, value) -> log factor
    // A context's truth: per-value factors from `effect_of` (drawn once per value), per-variant
    // noise drawn fresh.
    auto make_truth =
        [&](const std::function<double(const std::pair<size_t, std::string>&)>& effect_of) {
          std::vector<double> t(n, INFINITY);
          for (size_t i : candidates) {
            double f = variant_effect(rng);
            for (size_t p = 0; p < configs[i].values.size(); ++p) {
              auto key = std::make_pair(p, configs[i].values[p].str());
              auto it = effect.find(key);
              if (it == effect.end()) it = effect.emplace(key, effect_of(key)).first;
              f += it->second;
            }
            t[i] = truth_model[i] * std::exp(f);
          }
          return t;
        };
    std::vector<double> truth = make_truth([&](auto&) { return value_effect(rng); });
    double optimum = *std::min_element(truth.begin(), truth.end());
    auto run = [&](tuner::Strategy& s, size_t cap = SIZE_MAX,
                   std::vector<tuner::ParameterEffects::Past>* past = nullptr) {
      Result r;
      double best = INFINITY;
      for (auto i = s.next(); i; i = s.next()) {
        if (!std::isfinite(truth[*i])) {  // not proposable (random search): not a measurement
          s.report(*i, std::nullopt);
          continue;
        }
        ++r.measured;
        best = std::min(best, truth[*i]);
        if (!r.to5 && truth[*i] <= optimum * 1.05) r.to5 = r.measured;
        s.report(*i, truth[*i]);
        if (past) {
          tuner::ParameterEffects::Past m;
          m.search = "first";
          for (size_t p = 0; p < configs[*i].values.size(); ++p)
            m.values[(*configs[*i].names)[p]] = configs[*i].values[p].str();
          m.log_residual = std::log(truth[*i] / predicted[*i]);
          past->push_back(std::move(m));
        }
        if (r.measured >= cap) break;
      }
      r.best_ratio = best / optimum;
      return r;
    };
    tuner::ModelGuided alone(pr.features, *pr.rates, pr.calibration, excluded);
    results["model_guided (model alone)"].push_back(run(alone));
    tuner::ModelGuided learned(pr.features, *pr.rates, pr.calibration, excluded, configs);
    results["model_guided (learned effects)"].push_back(run(learned));
    auto random = tuner::make_random(n, static_cast<std::uint64_t>(seed));
    results["random"].push_back(run(*random));
    if (miscalibrated) {
      tuner::ModelGuided readmitting(pr.features, *pr.rates, pr.calibration, excluded, configs);
      readmitting.hold_back(by_model, job.pruner.model_margin);
      results["rule 4 held back, readmitted"].push_back(run(readmitting));
      readmitted_counts.push_back(static_cast<double>(readmitting.readmitted().size()));
      optimum_pruned += by_model[static_cast<size_t>(std::min_element(truth.begin(), truth.end()) -
                                                     truth.begin())];
      tuner::ModelGuided excluding(pr.features, *pr.rates, pr.calibration, excluded_with_model,
                                   configs);
      results["rule 4 excluded (before)"].push_back(run(excluding));
    }
    if (drift < 0) continue;
    // The first context, searched as a run would (within the job's budget), and what it teaches.
    std::vector<tuner::ParameterEffects::Past> past;
    {
      tuner::ModelGuided first(pr.features, *pr.rates, pr.calibration, excluded, configs);
      run(first, tuner::budget_configurations(job.budget, n), &past);
    }
    const auto prior = tuner::ParameterEffects::from_past(past).learned();
    auto second = [&](const char* name, const tuner::ParameterEffects::Prior* with) {
      tuner::ModelGuided g(pr.features, *pr.rates, pr.calibration, excluded, configs);
      if (with) g.set_prior(*with);
      results[name].push_back(run(g));
    };
    // The second context: the same values' factors, each changed by its own drift.
    std::normal_distribution<double> change(0, drift);
    auto first_effect = effect;
    effect.clear();
    truth = make_truth([&](const auto& key) { return first_effect.at(key) + change(rng); });
    optimum = *std::min_element(truth.begin(), truth.end());
    second("context 2: model_guided cold", nullptr);
    second("context 2: from context 1", &prior);
    // An unrelated context: fresh factors, so the prior misleads.
    effect.clear();
    truth = make_truth([&](auto&) { return value_effect(rng); });
    optimum = *std::min_element(truth.begin(), truth.end());
    second("unrelated: model_guided cold", nullptr);
    second("unrelated: from context 1", &prior);
  }
  if (miscalibrated)
    std::printf(
        "rule 4 pruned the optimum in %d of %d seeds; the held-back search readmitted a "
        "median of %.0f (p90 %.0f) of the %zu it pruned\n",
        optimum_pruned, seeds, percentile(readmitted_counts, 0.5),
        percentile(readmitted_counts, 0.9), held);
  print_results(results, candidates.size());
  return 0;
}
