#include "tuner/tools/replay_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <unordered_map>

#include "cuda/nvrtc.h"
#include "pruner/device_spec.h"
#include "pruner/model.h"
#include "pruner/rules.h"
#include "tuner/compile/candidate.h"
#include "tuner/compile/compile_and_inspect.h"
#include "tuner/compile/compile_pool.h"
#include "tuner/measure/arguments.h"
#include "tuner/model/predict.h"
#include "tuner/search/search_stream.h"
#include "tuner/search/strategy.h"
#include "variants/instantiate.h"

namespace gputune::tuner {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Every configuration's launch in the context and its best case from the source alone, as
/// `run` analyses the plan before compiling (tuner/run/model_work.cpp).
struct BestCases {
  ModelRun run;
  std::vector<double> best_case;      ///< ms; NaN: none
  std::vector<int> max_blocks;        ///< blocks per SM its launch allows (0: none)
  std::vector<std::int64_t> threads;  ///< per block (0: no launch)
  std::vector<LaunchGeometry> geometry;
  std::vector<char> launches;  ///< it has a launch in this context
};

BestCases analyse(const Job& job, const std::string& source, const std::vector<Config>& configs,
                  const ContextSpec& ctx, const pruner::DeviceLimits& limits, const Rates& rates,
                  const ReplayOptions& o) {
  const std::size_t n = configs.size();
  BestCases b;
  b.best_case.assign(n, kNaN);
  b.max_blocks.assign(n, 0);
  b.threads.assign(n, 0);
  b.geometry.resize(n);
  b.launches.assign(n, 0);
  std::vector<bool> usable(n, false);
  std::vector<pruner::Occupancy> occ(n);
  for (std::size_t i = 0; i < n; ++i) {
    try {
      b.geometry[i] = launch_geometry(job, configs[i], ctx);
      occ[i] = pruner::compute_occupancy(pruner::Resources{}, b.geometry[i].threads_per_block(),
                                         b.geometry[i].dynamic_smem, limits);
      b.threads[i] = b.geometry[i].threads_per_block();
      b.max_blocks[i] = occ[i].feasible ? occ[i].blocks_per_sm : 0;
      usable[i] = true;
      b.launches[i] = 1;
    } catch (const JobError&) {
    }
  }
  const ModelArguments args =
      model_arguments(make_arguments(job, ctx, ArgumentContents::SizesOnly));
  b.run = run_model(job, source, configs, ctx, args, usable, occ, rates, pruner::Calibration{},
                    o.threads ? o.threads : job.compile_threads, false,
                    TrafficCache{cache_for(o.cache_dir).dir()});
  for (std::size_t i = 0; i < n; ++i) {
    if (!usable[i] || !occ[i].feasible || !b.run.features[i].ok) continue;
    const pruner::Prediction p = pruner::best_case(b.run.features[i], *rates.rates,
                                                   pruner::Calibration{}, occ[i].blocks_per_sm);
    if (p.ok) b.best_case[i] = p.ms;
  }
  return b;
}

}  // namespace

namespace {

/// What every seed of a guided replay shares: the recording, the analysis, the compiles (what
/// one seed compiled the next finds compiled), the pruner as model_guided has it, and what the
/// seeds learn about the model (real predictions of what was compiled, and what ever was).
struct GuidedSeeds {
  const Job& job;
  const Recording& r;
  const Horizon& h;
  const StreamShape& shape;
  const BestCases& b;
  const pruner::DeviceRates& rates;
  const pruner::DeviceLimits& limits;
  const std::vector<Config>& configs;
  pruner::PruneOptions po;
  bool pruner = true;
  double margin = 0;
  std::function<const Candidate&(std::size_t)> compiled;  ///< waits for its compile
  std::function<void(std::size_t)> submit;                ///< asks for its compile
  std::vector<double> predicted;                          ///< NaN: not compiled and predicted
  std::vector<char> ever;                                 ///< compiled by some seed
};

/// One seed of model_guided, streamed as `run` streams it over the recorded times. The first
/// seed also fills what the report says of the search (where it stopped, its best, the rules).
SearchSeed replay_seed(GuidedSeeds& w, int seed, GuidedReplay& g) {
  const Recording& r = w.r;
  const BestCases& b = w.b;
  ModelGuided guide(b.run.features, w.rates, pruner::Calibration{}, {}, w.configs,
                    static_cast<std::uint64_t>(seed), b.max_blocks);
  guide.hold_back(std::vector<std::size_t>{}, w.margin);
  SearchStream::Settings settings;
  settings.look_ahead = w.shape.look_ahead;
  settings.margin = w.margin;
  settings.best_case = b.best_case;
  SearchStream stream(guide, &guide, settings);
  std::unordered_map<std::string, long> binaries;  // rule 3's (off: stays empty)
  std::map<std::size_t, CompileVerdict> verdicts;  // asked again (readmitted): the same
  std::map<std::string, std::size_t> removed;
  auto compile = [&](std::size_t pos) {
    if (auto it = verdicts.find(pos); it != verdicts.end()) return it->second;
    CompileVerdict& v = verdicts[pos];
    const Candidate& c = w.compiled(pos);
    w.ever[pos] = 1;
    if (!c.usable() || !b.launches[pos]) return v;
    try {
      check_cubin_arguments(w.job, c.inspected, c.config);
    } catch (const JobError&) {
      if (pos == (r.def ? *r.def : pos)) throw;  // the default's: the job's arguments are wrong
      return v;
    }
    pruner::RuleInput in;
    in.inspected = true;
    in.res = c.inspected.res;
    in.cubin_hash = c.compiled.cubin_hash;
    const LaunchGeometry& geo = b.geometry[pos];
    in.grid = geo.grid, in.block = geo.block, in.dynamic_smem = geo.dynamic_smem;
    in.geometry = pruner::launch_key(geo.grid, geo.block, geo.dynamic_smem);
    pruner::Decision d;
    if (w.pruner)
      d = pruner::judge_variant(in, static_cast<long>(pos), w.limits, w.po, binaries);
    else
      d.occupancy = pruner::compute_occupancy(in.res, b.threads[pos], geo.dynamic_smem, w.limits);
    if (!d.kept) ++removed[d.rule];
    const pruner::ModelFeatures f =
        pruner::features_from(b.run.traffic[pos], d.occupancy, b.threads[pos]);
    const pruner::Prediction p = pruner::predict(f, w.rates, guide.calibration());
    if (p.ok) {
      guide.refine(pos, f);
      v.prediction = p.ms;
      w.predicted[pos] = pruner::predict(f, w.rates, pruner::Calibration{}).ms;
    }
    v.usable = v.sets_best = d.kept;
    return v;
  };
  SearchSeed out;
  double best = INFINITY;
  auto measure = [&](std::size_t pos) -> std::optional<double> {
    if (!r.present[pos]) return std::nullopt;
    out.order.push_back(pos);
    if (r.time[pos] && *r.time[pos] < best) best = *r.time[pos];
    return r.time[pos];
  };
  auto enough = [&](double now) {
    return best <= r.optimum_ms * w.h.tightest && out.order.size() >= w.h.measurements &&
           now >= w.h.seconds;
  };
  double clock = 0;
  if (r.def) {
    const CompileVerdict v = compile(*r.def);
    if (v.sets_best) stream.offer_best(v.prediction);
    clock = r.compile_s[*r.def] + r.benchmark_s[*r.def];
    const std::optional<double> t = measure(*r.def);
    if (r.present[*r.def]) out.end_s.push_back(clock);
    stream.add_measured(*r.def, t);
  }
  const auto timed = simulate_timed_stream(
      stream, compile, measure, [&](std::size_t pos) { return r.compile_s[pos]; },
      [&](std::size_t pos) { return r.benchmark_s[pos]; }, w.shape.workers, clock, enough,
      w.submit);
  for (const TimedMeasurement& m : timed)
    if (r.present[m.pos]) out.end_s.push_back(m.end_s);
  if (seed == 1) {
    g.stopped_after = guide.stop_reason().empty() ? 0 : out.order.size();
    g.best_ratio = best / r.optimum_ms;
    g.removed_by_rule = removed;
    g.removed_by_rule["model"] = stream.dropped_by_model().size();
  }
  return out;
}

}  // namespace

GuidedReplay replay_guided(const Job& job, const Space& space, const Recording& r,
                           const ReplayOptions& o, int seeds, const Horizon& h,
                           const StreamShape& shape) {
  GuidedReplay g;
  const pruner::DeviceSpec spec = pruner::find_device(o.device);
  const Rates rates = rates_for_spec(spec);
  g.device = spec.name;
  g.rates_source = rates.source;
  if (!rates.rates) {
    g.note = "model not scored: " + rates.source;
    return g;
  }
  g.scored = true;
  const pruner::DeviceLimits& limits = spec.limits;
  const std::string arch = limits.arch();
  const ContextSpec* ctx = &job.contexts.front();
  for (const ContextSpec& c : job.contexts)
    if (c.name == r.context) ctx = &c;
  g.context = ctx->name;
  const std::string source = load_kernel_source(job);
  const std::size_t n = space.size();
  std::vector<Config> configs;
  configs.reserve(n);
  for (std::size_t i = 0; i < n; ++i) configs.push_back(space.config(i));
  const BestCases b = analyse(job, source, configs, *ctx, limits, rates, o);
  for (double v : b.best_case) g.predicted += std::isfinite(v);

  // The compiles, on the compile workers as the stream asks for them.
  const cuda::CubinCache cache = cache_for(o.cache_dir);
  std::vector<Candidate> cands(n);
  for (std::size_t i = 0; i < n; ++i) cands[i].index = i, cands[i].config = configs[i];
  CompilePool pool(static_cast<int>(shape.workers),
                   [&](Candidate& c) { compile_candidate(job, source, arch, cache, c, false); });
  GuidedSeeds w{job, r, h, shape, b, *rates.rates, limits, configs, {}, true, 0, {}, {}, {}, {}};
  w.submit = [&](std::size_t pos) {
    if (cands[pos].state == Candidate::Compile::kNot) pool.submit(cands[pos]);
  };
  w.compiled = [&](std::size_t pos) -> const Candidate& {
    w.submit(pos);
    while (cands[pos].state != Candidate::Compile::kDone) pool.wait(std::chrono::milliseconds(50));
    return cands[pos];
  };
  w.po.max_spill_bytes = job.pruner.max_spill_bytes;
  // No rule 3 here: it merges what this machine's compiler makes one binary, but the recording
  // timed each configuration as built where it was measured (the hub's convolution: read_only 0
  // and 1 are one cubin here, 1.0x and 1.5x the optimum on the A4000). Each is measured as
  // recorded; reported as failed, the optimum itself went unmeasured.
  w.po.collapse_duplicates = false;
  // The pruner as model_guided has it: on, unless the job turns it off.
  w.pruner = !job.pruner.explicit_enabled || job.pruner.enabled;
  w.margin = w.pruner ? job.pruner.model_margin : 0;
  w.predicted.assign(n, kNaN);
  w.ever.assign(n, 0);
  for (int seed = 1; seed <= seeds; ++seed) g.seeds.push_back(replay_seed(w, seed, g));
  pool.drop_queued();
  std::vector<double> pred, meas;
  for (std::size_t i = 0; i < n; ++i) {
    g.compiled += w.ever[i];
    if (std::isfinite(w.predicted[i]) && r.present[i] && r.time[i])
      pred.push_back(w.predicted[i]), meas.push_back(*r.time[i]);
  }
  g.predicted_and_measured = pred.size();
  g.spearman = pred.size() >= 2 ? pruner::spearman(pred, meas) : 0;
  return g;
}

}  // namespace gputune::tuner
