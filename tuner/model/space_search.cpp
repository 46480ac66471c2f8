#include "tuner/model/space_search.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "tuner/common/progress.h"
#include "tuner/measure/arguments.h"
#include "tuner/model/compile_screen.h"

namespace gputune::tuner {

namespace {

constexpr double kUnjudged = std::numeric_limits<double>::infinity();

}  // namespace

std::string ModelSearch::summary(std::size_t space_size, std::size_t limit) const {
  std::ostringstream out;
  out.precision(4);
  out << "the space holds " << grouped(space_size) << " configurations, more than the "
      << grouped(limit) << " the model analyses (GPUTune.Search.ModelAnalyses): ";
  if (!model) {
    out << grouped(chosen.size())
        << " spread over it are compiled (every value of every parameter, then pairs of values) "
           "and the other "
        << grouped(space_size - chosen.size()) << " are left out, because " << why_not;
    return out.str();
  }
  out << "it searched it and " << grouped(chosen.size()) << " are compiled (" << grouped(spread)
      << " spread over it, " << grouped(near) << " near the best it judged"
      << (coupled ? " (" + grouped(coupled) + " of them two parameters away)" : "") << ", in "
      << rounds << (rounds == 1 ? " round" : " rounds") << "); best case " << best_ms << " ms at "
      << best_key << "; the other " << grouped(space_size - chosen.size()) << " are left out";
  return out.str();
}

namespace {

/// A configuration reached from another by a move: how far, where, and whether two parameters
/// moved.
struct Reach {
  std::uint32_t distance;
  std::size_t pos;
  bool coupled;  // two parameters moved
};

/// The configurations one move away from position `i`, nearest first: each parameter to each of
/// its other values (distance: how many values along). With `coupled_moves`, a move the conditions
/// forbid is repaired by one step of one other parameter, one step further away.
std::vector<Reach> neighbours(const Space& space, std::size_t i, bool coupled_moves) {
  const std::size_t params = space.names->size();
  std::vector<std::uint32_t> idx(params);
  for (std::size_t p = 0; p < params; ++p) idx[p] = space.value_index(i, p);
  // Nearest values first, so that a round cut short by the limit keeps the closest moves.
  // A move the conditions forbid (block x up under `bx*by <= 1024`, `use_shared == 1 or
  // tile_k == 16`) is repaired by one step of one other parameter, one step further away:
  // the space's boundary is walked along, not stopped at.
  std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>> moves;
  for (std::size_t p = 0; p < params; ++p)
    for (std::uint32_t v = 0; v < space.values[p].size(); ++v)
      if (v != idx[p]) {
        std::vector<std::uint32_t> to = idx;
        to[p] = v;
        moves.push_back({v > idx[p] ? v - idx[p] : idx[p] - v, std::move(to)});
      }
  std::stable_sort(moves.begin(), moves.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Reach> reach;
  for (const auto& [d, to] : moves) {
    if (const long j = space.find(to); j >= 0) {
      reach.push_back({d, static_cast<std::size_t>(j), false});
      continue;
    }
    if (!coupled_moves) continue;
    for (std::size_t q = 0; q < params; ++q) {
      if (to[q] != idx[q]) continue;  // the parameter moved
      for (const int step : {-1, 1}) {
        if ((step < 0 && to[q] == 0) || (step > 0 && to[q] + 1 >= space.values[q].size())) continue;
        std::vector<std::uint32_t> fixed = to;
        fixed[q] = static_cast<std::uint32_t>(static_cast<int>(fixed[q]) + step);
        if (const long j = space.find(fixed); j >= 0)
          reach.push_back({d + 1, static_cast<std::size_t>(j), true});
      }
    }
  }
  std::stable_sort(reach.begin(), reach.end(),
                   [](const Reach& a, const Reach& b) { return a.distance < b.distance; });
  return reach;
}

}  // namespace

ModelSearch search_by_model(const Job& job, const std::string& source, const Space& space,
                            const std::vector<const ContextSpec*>& contexts,
                            const pruner::DeviceLimits& limits, const Rates& rates,
                            const pruner::Calibration& calibration, const cuda::CubinCache& cache,
                            const ModelSearchOptions& o) {
  ModelSearch r;
  const std::size_t n = space.size();
  const std::size_t limit = std::max<std::size_t>(o.limit, 2);
  const long def = space.find(default_key(job));
  std::vector<std::size_t> first = spread(space, std::min(n, rates.rates ? limit / 2 : limit), def);
  r.spread = first.size();

  // Score: the geometric mean of the best cases over the contexts (lower is better); a
  // configuration without one in some context is not judged (+inf) and never expanded.
  std::unordered_map<std::size_t, double> score;
  std::vector<double> best_first_ms;  // per scored position, in `evaluated` order
  std::vector<std::size_t> evaluated;
  ScreenOptions so;
  so.threads = o.threads, so.should_stop = o.should_stop;
  Progress progress("model search", limit, o.progress);
  // Each context's arguments once, not once per batch (an index array may be 64 MiB).
  std::vector<ModelArguments> args;
  if (rates.rates)
    for (const ContextSpec* c : contexts)
      args.push_back(model_arguments(make_arguments(job, *c, ArgumentContents::SizesOnly)));
  auto evaluate = [&](const std::vector<std::size_t>& batch) {
    std::vector<Config> configs;
    configs.reserve(batch.size());
    for (std::size_t i : batch) configs.push_back(space.config(i));
    std::vector<double> sum(batch.size(), 0.0), first_ms(batch.size(), kUnjudged);
    for (std::size_t c = 0; c < contexts.size(); ++c) {
      bool stopped = false;
      const std::vector<double> best = best_cases(job, source, configs, *contexts[c], args[c],
                                                  limits, rates, calibration, cache, so, &stopped);
      if (stopped) r.interrupted = true;
      for (std::size_t k = 0; k < batch.size(); ++k) {
        sum[k] += best[k] > 0 ? std::log(best[k]) : kUnjudged;  // NaN > 0 is false
        if (c == 0) first_ms[k] = best[k];
      }
    }
    for (std::size_t k = 0; k < batch.size(); ++k) {
      const double s = contexts.empty() ? kUnjudged : sum[k] / static_cast<double>(contexts.size());
      score[batch[k]] = s;
      evaluated.push_back(batch[k]);
      best_first_ms.push_back(first_ms[k]);
      if (std::isfinite(s)) ++r.judged;
    }
    progress.update(evaluated.size(), 0, std::nullopt);
  };

  if (rates.rates && !contexts.empty()) evaluate(first);
  if (!rates.rates || contexts.empty() || r.judged == 0 || r.interrupted) {
    r.why_not = !rates.rates ? "there are no device rates to search it by (" + rates.source + ")"
                : contexts.empty() ? std::string("the job has no context to model")
                : r.interrupted    ? std::string("the search was interrupted")
                                   : "the model judged none of the " + grouped(first.size()) +
                                      " it analysed (see the analysis errors)";
    // Nothing to search by: what was spread is what is compiled (the whole limit, when there
    // was no model to spend half of it on).
    if (rates.rates && !r.interrupted && first.size() < std::min(n, limit)) {
      first = spread(space, std::min(n, limit), def);
      r.spread = first.size();
    }
    r.chosen = first;
    std::sort(r.chosen.begin(), r.chosen.end());
    progress.finish();
    return r;
  }
  r.model = true;

  // Best first: each round expands the best judged configurations not yet expanded, until the
  // round holds enough new ones to keep the analysis workers busy, and analyses them. `open`
  // holds the judged, unexpanded ones by (score, position): the lowest comes out first.
  const int threads = o.threads ? o.threads : job.compile_threads;
  const std::size_t cores =
      static_cast<std::size_t>(threads > 0 ? threads : cuda::default_compile_threads());
  const std::size_t round_target = std::max<std::size_t>(8, 2 * cores);
  using Open = std::pair<double, std::size_t>;
  std::priority_queue<Open, std::vector<Open>, std::greater<>> open;
  auto push_judged = [&](std::size_t from) {
    for (std::size_t k = from; k < evaluated.size(); ++k)
      if (std::isfinite(score[evaluated[k]])) open.push({score[evaluated[k]], evaluated[k]});
  };
  push_judged(0);
  while (evaluated.size() < limit && !r.interrupted) {
    std::vector<std::size_t> batch;
    std::unordered_map<std::size_t, char> queued;
    const std::size_t room = limit - evaluated.size();
    while (!open.empty() && batch.size() < std::min(round_target, room)) {
      const std::size_t i = open.top().second;
      open.pop();
      const std::vector<Reach> reach = neighbours(space, i, o.coupled_moves);
      for (const Reach& m : reach) {
        if (batch.size() >= room) break;
        if (score.count(m.pos) || queued.count(m.pos)) continue;
        queued[m.pos] = 1;
        batch.push_back(m.pos);
        if (m.coupled) ++r.coupled;
      }
    }
    if (batch.empty()) break;  // every judged configuration's neighbourhood was looked at
    const std::size_t before = evaluated.size();
    evaluate(batch);
    push_judged(before);
    r.near += batch.size();
    ++r.rounds;
  }
  progress.finish();

  std::size_t best_k = 0;  // the lowest score, the lowest position among equals
  for (std::size_t k = 1; k < evaluated.size(); ++k) {
    const double a = score[evaluated[k]], b = score[evaluated[best_k]];
    if (a < b || (a == b && evaluated[k] < evaluated[best_k])) best_k = k;
  }
  r.best_key = space.config(evaluated[best_k]).key();
  r.best_ms = best_first_ms[best_k];
  r.chosen = evaluated;
  std::sort(r.chosen.begin(), r.chosen.end());
  return r;
}

}  // namespace gputune::tuner
