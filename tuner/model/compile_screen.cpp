#include "tuner/model/compile_screen.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "cuda/nvrtc.h"
#include "pruner/rules.h"
#include "tuner/common/progress.h"
#include "tuner/measure/arguments.h"
#include "variants/instantiate.h"

namespace gputune::tuner {

namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

/// One context's model of every configuration before compiling.
struct ContextModel {
  const ContextSpec* ctx = nullptr;
  ModelRun model;               ///< features at the optimistic occupancy
  std::vector<double> best_ms;  ///< best case per config; NaN: none (must be compiled)
};

ContextModel model_before_compile(const Job& job, const std::string& source,
                                  const std::vector<Config>& configs, const ContextSpec& ctx,
                                  const ModelArguments& args, const pruner::DeviceLimits& limits,
                                  const Rates& rates, const pruner::Calibration& calibration,
                                  const ScreenOptions& o, const TrafficCache& traffic_cache) {
  const size_t n = configs.size();
  ContextModel cm;
  cm.ctx = &ctx;
  std::vector<bool> usable(n, false);
  std::vector<pruner::Occupancy> occ(n);
  for (size_t i = 0; i < n; ++i) {
    try {
      LaunchGeometry g = launch_geometry(job, configs[i], ctx);
      // No registers and no static shared memory: the most blocks per SM the variant can get.
      occ[i] = pruner::compute_occupancy(pruner::Resources{}, g.threads_per_block(), g.dynamic_smem,
                                         limits);
      usable[i] = true;
    } catch (const JobError&) {
    }
  }
  cm.model = run_model(job, source, configs, ctx, args, usable, occ, rates, calibration,
                       o.threads ? o.threads : job.compile_threads, o.progress, traffic_cache,
                       o.should_stop);
  cm.best_ms.assign(n, kNone);
  for (size_t i = 0; i < n; ++i) {
    if (!usable[i] || !occ[i].feasible || !cm.model.features[i].ok) continue;
    pruner::Prediction p =
        pruner::best_case(cm.model.features[i], *rates.rates, calibration, occ[i].blocks_per_sm);
    if (p.ok) cm.best_ms[i] = p.ms;
  }
  return cm;
}

/// The best prediction among the compiled configurations rules 1-2 keep, with their real
/// occupancy: what rule 4 will measure every other variant against (or a larger value, while
/// not everything is compiled: the best only falls as more are). NaN when none has one.
double best_compiled(const Job& job, const std::vector<Config>& configs, const ContextModel& cm,
                     const CompileReport& compiled, const pruner::DeviceLimits& limits,
                     const Rates& rates, const pruner::Calibration& calibration,
                     const pruner::PruneOptions& rules) {
  pruner::PruneOptions no_collapse = rules;  // rule 4's best counts duplicates too
  no_collapse.collapse_duplicates = false;
  pruner::PruneResult pr =
      pruner::apply_rules(rule_inputs(job, configs, *cm.ctx, compiled), limits, no_collapse);
  double best = kNone;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!pr.decisions[i].kept || !cm.model.features[i].ok) continue;
    pruner::ModelFeatures f = cm.model.features[i];
    f.blocks_per_sm = pr.decisions[i].occupancy.blocks_per_sm;
    f.active_warps = pr.decisions[i].occupancy.active_warps;
    pruner::Prediction p = pruner::predict(f, *rates.rates, calibration);
    if (p.ok && !(p.ms >= best)) best = p.ms;
  }
  return best;
}

/// The order the screen compiles in: `first`, what must be compiled whatever the model says (the
/// reference, and what has no best case in some context: not analysed, no launch), then `order`,
/// the rest by its best case relative to the context's smallest, the smallest over contexts.
struct CompileOrder {
  std::vector<size_t> first, order;
};

CompileOrder compile_order(size_t n, const std::vector<size_t>& always,
                           const std::vector<ContextModel>& models) {
  std::vector<double> priority(n, std::numeric_limits<double>::infinity());
  std::vector<size_t> first;
  std::vector<char> in_first(n, 0);
  for (size_t i : always)
    if (i < n && !in_first[i]) first.push_back(i), in_first[i] = 1;
  for (const ContextModel& cm : models) {
    double lowest = kNone;
    for (double b : cm.best_ms)
      if (!(b >= lowest)) lowest = b;
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(cm.best_ms[i])) {
        if (!in_first[i]) first.push_back(i), in_first[i] = 1;
        continue;
      }
      priority[i] = std::min(priority[i], cm.best_ms[i] / lowest);
    }
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (!in_first[i]) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return priority[a] < priority[b]; });
  return {std::move(first), std::move(order)};
}

/// Marks what was never compiled as screened, with a reason quoting the final best: what rule 4
/// measures every compiled variant against.
void explain_screened(ScreenResult& r, const std::vector<char>& done,
                      const std::vector<ContextModel>& models, const std::vector<double>& best,
                      double margin) {
  const size_t n = done.size();
  for (size_t i = 0; i < n; ++i) {
    if (done[i]) continue;
    r.screened[i] = 1;
    ++r.count;
    std::ostringstream why;
    why.precision(3);
    why << "not compiled: at best " << models[0].best_ms[i] << " ms at any occupancy, more than "
        << margin << " x the best prediction " << best[0] << " ms"
        << (models.size() > 1 ? " (first context; in every context)" : "");
    r.reason[i] = why.str();
  }
}

}  // namespace

std::vector<double> best_cases(const Job& job, const std::string& source,
                               const std::vector<Config>& configs, const ContextSpec& context,
                               const ModelArguments& args, const pruner::DeviceLimits& limits,
                               const Rates& rates, const pruner::Calibration& calibration,
                               const cuda::CubinCache& cache, const ScreenOptions& options,
                               bool* interrupted) {
  if (!rates.rates) return std::vector<double>(configs.size(), kNone);
  ContextModel cm = model_before_compile(job, source, configs, context, args, limits, rates,
                                         calibration, options, TrafficCache{cache.dir()});
  if (interrupted)
    *interrupted = cm.model.interrupted || (options.should_stop && options.should_stop());
  return std::move(cm.best_ms);
}

ScreenResult compile_screened(const Job& job, const std::string& source,
                              const std::vector<Config>& configs,
                              const std::vector<const ContextSpec*>& contexts,
                              const pruner::DeviceLimits& limits, const Rates& rates,
                              const pruner::Calibration& calibration, const std::string& arch,
                              const cuda::CubinCache& cache, const ScreenOptions& o) {
  const size_t n = configs.size();
  ScreenResult r;
  r.compile.compiled.resize(n);
  r.compile.inspected.resize(n);
  r.screened.assign(n, 0);
  r.reason.resize(n);
  std::vector<char> done(n, 0);
  auto compile = [&](const std::vector<size_t>& which, bool progress) {
    if (which.empty()) return;
    compile_into(r.compile, which, job, source, configs, arch, cache,
                 o.threads ? o.threads : job.compile_threads, progress, o.should_stop,
                 o.keep_cubins);
    for (size_t i : which) done[i] = 1;
    ++r.rounds;
  };
  if (!rates.rates || contexts.empty()) {  // no model: compile everything
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    compile(all, o.progress);
    return r;
  }

  // Ctrl-C: nothing more is analysed or compiled, and nothing is called screened.
  auto stopped = [&] {
    r.interrupted = r.interrupted || (o.should_stop && o.should_stop());
    return r.interrupted;
  };
  std::vector<ContextModel> models;
  for (const ContextSpec* c : contexts) {
    models.push_back(
        model_before_compile(job, source, configs, *c,
                             model_arguments(make_arguments(job, *c, ArgumentContents::SizesOnly)),
                             limits, rates, calibration, o, TrafficCache{cache.dir()}));
    if (models.back().model.interrupted || stopped()) {
      r.interrupted = true;
      return r;
    }
  }

  CompileOrder plan = compile_order(n, o.always, models);
  std::vector<size_t>& first = plan.first;
  const std::vector<size_t>& order = plan.order;

  const int threads = o.threads ? o.threads : job.compile_threads;
  const size_t cores = static_cast<size_t>(threads > 0 ? threads : cuda::default_compile_threads());
  const size_t batch = o.batch ? o.batch : std::max<size_t>(32, 4 * cores);
  // Branch and bound: compile in order of the best case, a batch at a time; after each batch the
  // best prediction among what rules 1-2 keep (it only falls) decides which of the rest could
  // still come within the margin. Once none can, the rest is screened. A configuration is
  // hopeless when its best case exceeds margin x the best in every context.
  std::vector<double> best(models.size(), kNone);
  auto hopeless = [&](size_t i) {
    for (size_t c = 0; c < models.size(); ++c)
      if (std::isnan(best[c]) || !pruner::model_rule_drops(models[c].best_ms[i], best[c], o.margin))
        return false;
    return true;
  };
  // One progress line over the rounds: compiled so far of compiled plus what could still come
  // within the margin.
  Progress progress("compile (screen)", n, o.progress);
  // A round that did not lower the bar doubles the next one (up to 16 batches), so that once the
  // bar settles, compile workers do not wait at the end of many small rounds; one that lowered it
  // starts again from a batch.
  size_t compiled = 0, next = 0, round_size = batch;
  std::vector<size_t> round = first;
  while (true) {
    for (; round.size() < first.size() + round_size && next < order.size(); ++next)
      if (!done[order[next]] && !hopeless(order[next])) round.push_back(order[next]);
    if (round.empty()) break;  // what is left (if anything) cannot come within the margin
    compile(round, false);
    if (stopped()) return r;
    compiled += round.size();
    round.clear();
    first.clear();
    bool lowered = false;
    for (size_t c = 0; c < models.size(); ++c) {
      const double b =
          best_compiled(job, configs, models[c], r.compile, limits, rates, calibration, o.rules);
      lowered = lowered || (!std::isnan(b) && !(b >= best[c]));
      best[c] = b;
    }
    round_size = lowered ? batch : std::min(2 * round_size, 16 * batch);
    if (!o.progress) continue;  // counting what is still open is for the progress line alone
    size_t open = 0;
    for (size_t k = next; k < order.size(); ++k) open += !done[order[k]] && !hopeless(order[k]);
    progress.set_total(compiled + open);
    progress.update(compiled, r.compile.failed, std::nullopt);
  }
  progress.finish();
  explain_screened(r, done, models, best, o.margin);
  return r;
}

std::size_t mark_screened(std::vector<pruner::Decision>& decisions, const ScreenResult& screen) {
  for (size_t i = 0; i < decisions.size() && i < screen.screened.size(); ++i)
    if (screen.screened[i]) {
      decisions[i].kept = false;
      decisions[i].rule = "model";
      decisions[i].reason = screen.reason[i];
    }
  return screen.count;
}

}  // namespace gputune::tuner
