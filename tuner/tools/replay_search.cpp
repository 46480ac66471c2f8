#include "tuner/tools/replay_search.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "pruner/model.h"
#include "tuner/search/portfolio.h"
#include "tuner/search/search_stream.h"
#include "tuner/search/strategy.h"

namespace gputune::tuner {

const std::vector<std::string>& strategies_without_model() {
  static const std::vector<std::string> names = {"brute_force", "random", "portfolio",
                                                 "model_guided"};
  return names;
}

SearchSeed stream_recorded(const std::string& strategy, const std::vector<Config>& configs,
                           const std::vector<std::size_t>& index, const Recording& r,
                           std::uint64_t seed, const Horizon& h, const StreamShape& shape) {
  const std::size_t n = configs.size();
  std::unique_ptr<Strategy> s;
  ModelGuided* guide = nullptr;
  if (strategy == "brute_force") {
    s = make_brute_force(n);
  } else if (strategy == "random") {
    s = make_random(n, seed);
  } else if (strategy == "portfolio") {
    s = std::make_unique<Portfolio>(configs, seed, shape.portfolio);
  } else if (strategy == "model_guided") {
    // Without the model: every variant unpredicted.
    auto g =
        std::make_unique<ModelGuided>(std::vector<pruner::ModelFeatures>(n), pruner::DeviceRates{},
                                      pruner::Calibration{}, std::vector<bool>{}, configs, seed);
    guide = g.get();
    s = std::move(g);
  } else {
    throw std::invalid_argument("unknown strategy '" + strategy + "'");
  }
  SearchStream::Settings settings;
  settings.look_ahead = shape.look_ahead;
  SearchStream stream(*s, guide, settings);
  SearchSeed out;
  double best = INFINITY;
  auto measure = [&](std::size_t k) {
    const std::size_t i = index[k];
    out.order.push_back(i);
    if (r.time[i] && *r.time[i] < best) best = *r.time[i];
    return r.time[i];
  };
  auto enough = [&](double now) {
    return best <= r.optimum_ms * h.tightest && out.order.size() >= h.measurements &&
           now >= h.seconds;
  };
  double clock = 0;
  if (r.def) {
    // `run` compiles and measures the default first, whatever the strategy.
    const auto k = static_cast<std::size_t>(std::lower_bound(index.begin(), index.end(), *r.def) -
                                            index.begin());
    clock = r.compile_s[*r.def] + r.benchmark_s[*r.def];
    const std::optional<double> t = measure(k);
    out.end_s.push_back(clock);
    stream.add_measured(k, t);
  }
  if (r.def && enough(clock)) return out;
  const auto timed = simulate_timed_stream(
      stream,
      [](std::size_t) {
        return CompileVerdict{true, NAN, false};
      },
      measure, [&](std::size_t k) { return r.compile_s[index[k]]; },
      [&](std::size_t k) { return r.benchmark_s[index[k]]; }, shape.workers, clock, enough);
  for (const TimedMeasurement& m : timed) out.end_s.push_back(m.end_s);
  return out;
}

std::vector<SearchSeed> replay_without_model(const std::string& strategy, const Space& space,
                                             const Recording& r, int seeds, const Horizon& h,
                                             const StreamShape& shape) {
  // Only the recorded configurations are searched: the others would be skipped unmeasured anyway.
  std::vector<std::size_t> index;
  std::vector<Config> configs;
  for (std::size_t i = 0; i < space.size(); ++i)
    if (r.present[i]) index.push_back(i), configs.push_back(space.config(i));
  std::vector<SearchSeed> out;
  const int count = strategy == "brute_force" ? 1 : seeds;
  for (int seed = 1; seed <= count; ++seed)
    out.push_back(
        stream_recorded(strategy, configs, index, r, static_cast<std::uint64_t>(seed), h, shape));
  return out;
}

}  // namespace gputune::tuner
