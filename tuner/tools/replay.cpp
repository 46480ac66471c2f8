#include "tuner/tools/replay.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>

#include "cuda/nvrtc.h"
#include "db/interchange.h"
#include "db/snapshot.h"
#include "db/store.h"
#include "pruner/model.h"
#include "tuner/model/predict.h"
#include "tuner/search/methodology.h"
#include "tuner/search/portfolio.h"
#include "tuner/search/search_stream.h"
#include "tuner/search/strategy.h"
#include "tuner/tools/prune_command.h"
#include "tuner/tools/replay_model.h"
#include "tuner/tools/replay_search.h"

namespace gputune::tuner {

std::size_t measurements_to_reach(const std::vector<size_t>& order,
                                  const std::vector<std::optional<double>>& time, double optimum,
                                  double factor) {
  std::size_t n = 0;
  for (size_t i : order) {
    if (i >= time.size()) continue;
    ++n;
    if (time[i] && *time[i] <= optimum * factor) return n;
  }
  return n;
}

namespace {

/// The p-th percentile; NaN (a seed that stopped before getting there) counts as never, and a
/// percentile that is never is NaN.
double percentile(std::vector<double> v, double p) {
  for (double& x : v)
    if (std::isnan(x)) x = INFINITY;
  std::sort(v.begin(), v.end());
  const double at =
      v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
  return std::isinf(at) ? std::numeric_limits<double>::quiet_NaN() : at;
}

/// One strategy's score from the measurements each seed needed per tolerance.
StrategyScore score(std::string name, const std::vector<std::vector<double>>& per_seed,
                    const ReplayOptions& o) {
  StrategyScore s;
  s.strategy = std::move(name);
  s.seeds = static_cast<int>(per_seed.size());
  for (size_t t = 0; t < o.within.size(); ++t) {
    std::vector<double> v;
    for (auto& seed : per_seed) v.push_back(seed[t]);
    s.median_to.push_back(percentile(v, 0.5));
    s.p90_to.push_back(percentile(v, 0.9));
  }
  return s;
}

/// The measurements a visiting order needs to get within each tolerance of the optimum.
std::vector<double> reach_all(const std::vector<size_t>& order, const Recording& r,
                              const ReplayOptions& o, const ReplayReport& rep) {
  std::vector<double> n;
  for (double f : o.within)
    n.push_back(static_cast<double>(measurements_to_reach(order, r.time, rep.optimum_ms, f)));
  return n;
}

/// The methodology over the recorded configurations (tuner/search/methodology.h), and each recorded
/// space index's place in it (-1: not recorded).
struct Scoring {
  std::optional<Methodology> methodology;
  std::vector<long> at;
  std::string why_not;  ///< when there is no methodology
};

Scoring make_scoring(const Space& space, const Recording& r) {
  Scoring s;
  std::vector<ScoredConfig> configs;
  s.at.assign(space.size(), -1);
  for (size_t i = 0; i < space.size(); ++i)
    if (r.present[i]) {
      s.at[i] = static_cast<long>(configs.size());
      configs.push_back({r.time[i], r.compile_s[i], r.benchmark_s[i]});
    }
  if (r.costed == 0) {
    s.why_not =
        "the measurements do not say what each configuration cost (no compile or "
        "benchmark times): nothing to simulate time with";
    return s;
  }
  try {
    s.methodology.emplace(std::move(configs));
  } catch (const std::invalid_argument& e) {
    s.why_not = e.what();
  }
  return s;
}

/// A strategy's seeds scored: measurements to each tolerance and, with the methodology, its
/// performance scores.
StrategyScore score_seeds(const std::string& name, const std::vector<SearchSeed>& seeds,
                          const Recording& r, const ReplayOptions& o, const ReplayReport& rep,
                          const Scoring& scoring) {
  std::vector<std::vector<double>> per_seed;
  for (const SearchSeed& seed : seeds) {
    std::vector<double> reach = reach_all(seed.order, r, o, rep);
    // A tolerance the seed never got within (its stop rule ended it first): never.
    double best = INFINITY;
    for (size_t i : seed.order)
      if (r.time[i]) best = std::min(best, *r.time[i]);
    for (size_t t = 0; t < reach.size(); ++t)
      if (best > rep.optimum_ms * o.within[t]) reach[t] = std::numeric_limits<double>::quiet_NaN();
    per_seed.push_back(std::move(reach));
  }
  StrategyScore s = score(name, per_seed, o);
  if (o.score && scoring.methodology) {
    std::vector<Trajectory> t;
    for (const SearchSeed& seed : seeds) {
      Trajectory& one = t.emplace_back();
      for (size_t k = 0; k < seed.order.size(); ++k)
        one.evaluations.emplace_back(static_cast<size_t>(scoring.at[seed.order[k]]), seed.end_s[k]);
    }
    const MethodologyScore m = scoring.methodology->score(t);
    s.score_measurements = m.over_measurements, s.score_time = m.over_time;
    s.score_note = m.note;
  }
  return s;
}

/// The trajectories file (ReplayOptions::trajectories): the space first, then a line per seed.
class TrajectoryFile {
 public:
  explicit TrajectoryFile(const std::string& path) : path_(path) {
    if (path.empty()) return;
    out_.open(path, std::ios::binary | std::ios::trunc);
    if (!out_)
      throw std::runtime_error(path + ": cannot be written (" + std::strerror(errno) +
                               "). Fix: give --trajectories a file in a folder that exists and "
                               "that you can write to");
  }
  explicit operator bool() const { return out_.is_open(); }
  void space(const Space& space, const Recording& r, const std::string& source) {
    if (!*this) return;
    nlohmann::json configs = nlohmann::json::array();
    for (size_t i = 0; i < space.size(); ++i)
      if (r.present[i])
        configs.push_back({space.config(i).key(),
                           r.time[i] ? nlohmann::json(*r.time[i]) : nlohmann::json(),
                           r.compile_s[i], r.benchmark_s[i]});
    line({{"space", {{"source", source}, {"configurations", std::move(configs)}}}});
  }
  void seeds(const Space& space, const std::string& strategy, const std::vector<SearchSeed>& seeds,
             bool with_model) {
    if (!*this) return;
    for (size_t k = 0; k < seeds.size(); ++k) {
      nlohmann::json ev = nlohmann::json::array();
      for (size_t j = 0; j < seeds[k].order.size(); ++j)
        ev.push_back({space.config(seeds[k].order[j]).key(), seeds[k].end_s[j]});
      line({{"strategy", strategy},
            {"seed", k + 1},
            {"with_model", with_model},
            {"evaluations", std::move(ev)}});
    }
  }
  std::size_t lines() const { return lines_; }
  void close() {
    if (!*this) return;
    out_.close();
    if (!out_)
      throw std::runtime_error(path_ + ": writing the trajectories failed (" +
                               std::strerror(errno) + "). Fix: free space on its disk");
  }

 private:
  void line(const nlohmann::json& j) {
    out_ << j.dump() << "\n";
    ++lines_;
  }
  std::string path_;
  std::ofstream out_;
  std::size_t lines_ = 0;
};

bool wanted(const ReplayOptions& o, const std::string& name) {
  return o.strategies.empty() ||
         std::find(o.strategies.begin(), o.strategies.end(), name) != o.strategies.end();
}

/// The pruner's rules at the job's margin against the recorded times: what they keep, the regret
/// that costs, and which recorded launch failures rule 1 predicted.
void score_rules(const PruneReport& pr, const Space& space, const Recording& r, ReplayReport& rep) {
  double best_kept = INFINITY;
  for (size_t i = 0; i < space.size(); ++i) {
    const auto& d = pr.rows[i].decision;
    if (d.kept) ++rep.kept;
    if (!r.present[i]) continue;
    if (!r.time[i]) {
      ++rep.failures_recorded;
      if (d.rule == "resources") ++rep.failures_predicted;
    } else {
      if (d.rule == "resources") ++rep.valid_rejected;
      if (d.kept && *r.time[i] < best_kept) best_kept = *r.time[i];
    }
  }
  rep.fraction_pruned = 1.0 - static_cast<double>(rep.kept) / static_cast<double>(space.size());
  rep.regret = best_kept / rep.optimum_ms;
  for (auto& c : pr.counts) rep.removed_by_rule[c.rule] = c.removed;
}

/// Rule 4 again at other margins, from what rules 1-3 decided and the same predictions.
void sweep_margins(const PruneReport& pr, const Space& space, const Recording& r,
                   ReplayReport& rep) {
  std::vector<pruner::Decision> before_rule4(space.size());
  std::vector<pruner::Prediction> predictions(space.size());
  for (size_t i = 0; i < space.size(); ++i) {
    before_rule4[i] = pr.rows[i].decision;
    if (before_rule4[i].rule == "model")
      before_rule4[i].kept = true, before_rule4[i].rule.clear(), before_rule4[i].reason.clear();
    predictions[i].ok = pr.rows[i].predicted_ms.has_value();
    predictions[i].ms = pr.rows[i].predicted_ms.value_or(0);
    predictions[i].bound = pr.rows[i].bound;
  }
  std::vector<double> margins(std::begin(kSweptMargins), std::end(kSweptMargins));
  if (std::find(margins.begin(), margins.end(), pr.margin) == margins.end())
    margins.push_back(pr.margin);
  std::sort(margins.begin(), margins.end());
  auto point_at = [&](double margin) {
    std::vector<pruner::Decision> d = before_rule4;
    pruner::apply_model_rule(d, predictions, margin);
    ReplayReport::MarginPoint point{margin, 0, 0, INFINITY};
    double best = INFINITY;
    for (size_t i = 0; i < space.size(); ++i) {
      point.kept += d[i].kept;
      if (d[i].kept && r.present[i] && r.time[i]) best = std::min(best, *r.time[i]);
    }
    point.fraction_pruned =
        1.0 - static_cast<double>(point.kept) / static_cast<double>(space.size());
    point.regret = best / rep.optimum_ms;
    return point;
  };
  for (double margin : margins) rep.margin_sweep.push_back(point_at(margin));
  // The margins at which rule 4's kept set changes: each kept variant's prediction over the
  // best (rule 4 keeps what is predicted at most margin x the best; the tiny excess keeps
  // the variant that sets the margin against rounding). What a margin prunes falls as it
  // grows, so the widest kept set that still prunes enough is found by bisection.
  const double best_prediction = pruner::model_rule_best(before_rule4, predictions);
  std::vector<double> steps;
  for (size_t i = 0; i < space.size(); ++i)
    if (before_rule4[i].kept && predictions[i].ok && best_prediction > 0)
      steps.push_back(predictions[i].ms / best_prediction * (1 + 1e-12));
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  if (!steps.empty()) {
    const ReplayReport::MarginPoint tightest = point_at(steps.front());
    rep.tightest_pruned = tightest.fraction_pruned;
    if (tightest.fraction_pruned >= kTargetPruned) {
      size_t lo = 0, hi = steps.size();  // steps[lo] prunes enough; steps[hi] (if any) not
      while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        (point_at(steps[mid]).fraction_pruned >= kTargetPruned ? lo : hi) = mid;
      }
      rep.at_target_pruned = point_at(steps[lo]);
    }
  }
}

/// model_guided, fed the recorded times, as `gputune run` searches: pruned variants
/// (rules 1-3) are never proposed; what the model rule pruned is held back until a refit
/// readmits it.
void score_guided_with_model(const PruneReport& pr, const Space& space, const Recording& r,
                             const ReplayOptions& o, size_t look_ahead, ReplayReport& rep) {
  std::vector<bool> excluded(space.size());
  for (size_t i = 0; i < space.size(); ++i) {
    const std::string& rule = pr.rows[i].decision.rule;
    excluded[i] = rule == "resources" || rule == "duplicate" || rule == "spills";
  }
  std::vector<Config> configs;  // for the learned parameter effects
  configs.reserve(space.size());
  for (size_t i = 0; i < space.size(); ++i) configs.push_back(space.config(i));
  // Each configuration is ordered by its best case until it is compiled, as `run` orders it;
  // rules 1-2 are found as each compiles, and rule 4 holds back what can no longer come within
  // the margin. What rule 3 calls a duplicate here is measured as recorded, as the streamed
  // replay measures it (tuner/tools/replay_model.cpp): the recording timed each configuration as
  // built where it was measured, and this machine's compiler may make two of them one binary.
  std::vector<int> bound(space.size(), 0);
  std::vector<double> best_case(space.size(), NAN);
  for (size_t i = 0; i < space.size(); ++i) {
    bound[i] = pr.rows[i].best_case_blocks;
    if (bound[i] > 0 && pr.features[i].ok)
      if (auto p = pruner::best_case(pr.features[i], *pr.rates, pr.calibration, bound[i]); p.ok)
        best_case[i] = p.ms;
  }
  ModelGuided g(pr.features, *pr.rates, pr.calibration, {}, configs, 0, bound);
  g.hold_back(std::vector<size_t>{}, pr.margin);
  SearchStream::Settings settings;
  settings.look_ahead = look_ahead;
  settings.margin = pr.margin;
  settings.best_case = best_case;
  SearchStream stream(g, &g, settings);
  std::map<size_t, CompileVerdict> compiled;  // what each compile gave (asked again: the same)
  auto compile = [&](size_t i) {
    if (auto it = compiled.find(i); it != compiled.end()) return it->second;
    CompileVerdict& v = compiled[i];
    const pruner::Decision& d = pr.rows[i].decision;
    if (!pr.rows[i].compiled || (excluded[i] && d.rule != "duplicate")) return v;
    if (pr.rows[i].predicted_ms) {
      v.prediction = *pr.rows[i].predicted_ms;
      g.refine(i, pr.features[i]);
    }
    v.sets_best = true;  // kept by rules 1-2, or the same binary as one they keep
    v.usable = true;
    return v;
  };
  std::vector<size_t> order;
  double best = INFINITY;
  auto measure = [&](size_t i) -> std::optional<double> {
    if (!r.present[i]) return std::nullopt;
    order.push_back(i);
    if (r.time[i] && *r.time[i] < best) best = *r.time[i];
    return r.time[i];
  };
  if (r.def) {
    const CompileVerdict v = compile(*r.def);
    if (v.sets_best) stream.offer_best(v.prediction);
    stream.add_measured(*r.def, measure(*r.def));
  }
  simulate_stream(stream, compile, measure);
  // As for the others, except that a tolerance its stop rule ended it before is NaN.
  std::vector<double> reach = reach_all(order, r, o, rep);
  for (size_t t = 0; t < reach.size(); ++t)
    if (best > rep.optimum_ms * o.within[t]) reach[t] = std::numeric_limits<double>::quiet_NaN();
  rep.strategies.push_back(score("model_guided", {reach}, o));
  rep.guided_stopped_after = order.size();
  rep.guided_compiled = compiled.size();
  rep.guided_best_ratio = best / rep.optimum_ms;
}

/// The pruner (prune_job, every configuration analysed) against the recorded times: its rules,
/// rule 4 at other margins, the model's ranking, and model_guided with the model.
void score_pruner(const Job& job, const Space& space, const Recording& r, const ReplayOptions& o,
                  size_t look_ahead, ReplayReport& rep) {
  PruneRunOptions po;
  po.device = o.device, po.store = false, po.cache_dir = o.cache_dir, po.threads = o.threads;
  po.context = r.context;
  po.model_analyses = std::numeric_limits<std::uint64_t>::max();  // scored row by row: all
  PruneReport pr = prune_job(job, po);
  rep.pruner_scored = true;
  rep.predicted_device = pr.device, rep.predicted_context = pr.context;
  score_rules(pr, space, r, rep);
  rep.job_margin = pr.margin;
  if (pr.rates) sweep_margins(pr, space, r, rep);
  // The model's ranking against the recorded times.
  std::vector<double> pred, meas;
  for (size_t i = 0; i < space.size(); ++i)
    if (r.present[i] && r.time[i] && pr.rows[i].predicted_ms) {
      pred.push_back(*pr.rows[i].predicted_ms);
      meas.push_back(*r.time[i]);
    }
  rep.predicted_and_measured = pred.size();
  rep.spearman = pruner::spearman(pred, meas);
  if (pr.rates) score_guided_with_model(pr, space, r, o, look_ahead, rep);
  rep.pruner_note =
      pr.rates ? "model rates from " + pr.rates_source : "model not scored: " + pr.rates_source;
}

}  // namespace

ReplayReport replay(const Job& job, const std::string& file, const ReplayOptions& o) {
  for (const std::string& name : o.strategies)
    if (std::find(strategies_without_model().begin(), strategies_without_model().end(), name) ==
        strategies_without_model().end())
      throw std::invalid_argument("--strategies: unknown strategy '" + name +
                                  "' (replay scores brute_force, random, model_guided, portfolio)");
  ReplayReport rep;
  Space space = build_space(job);
  rep.space_size = space.size();
  // Every search is scored as `run` streams it: compile workers, and a look-ahead of compiles
  // (two per compile worker).
  const size_t workers =
      o.compile_workers ? o.compile_workers : static_cast<size_t>(cuda::default_compile_threads());
  const size_t look_ahead = o.look_ahead ? o.look_ahead : 2 * workers;
  rep.look_ahead = look_ahead;
  rep.compile_workers = workers;
  TrajectoryFile trajectories(o.trajectories);  // before the work: a path that fails, fails now
  const Recording r = read_recording(job, space, file, o, rep);
  rep.within = o.within;
  Scoring scoring;
  Horizon horizon;
  horizon.tightest = *std::min_element(o.within.begin(), o.within.end());
  if (o.score || trajectories) {
    scoring = make_scoring(space, r);
    if (scoring.methodology) {
      const Methodology& m = *scoring.methodology;
      horizon.measurements = m.measurements_needed();
      horizon.seconds = m.seconds_needed();
      std::ostringstream range;
      range << std::setprecision(3) << "from " << m.first_measurement() << " to "
            << m.last_measurement() << " measurements, and from " << m.first_second() << " to "
            << m.last_second() << " s (random search 1% to 95% of the way from the median "
            << m.median_ms() << " ms to the optimum " << m.optimum_ms() << " ms)";
      rep.score_range = range.str();
    } else {
      rep.score_range = "not scored: " + scoring.why_not;
    }
  }
  trajectories.space(space, r, rep.source.empty() ? file : rep.source);
  const bool with_model = !o.device.empty() && std::filesystem::exists(job.kernel_file);
  const StreamShape shape{workers, look_ahead, o.portfolio};
  const bool guided_asked =
      std::find(o.strategies.begin(), o.strategies.end(), "model_guided") != o.strategies.end();
  for (const std::string& name : strategies_without_model()) {
    // model_guided with the model is scored below, when the pruner is; without it, it searches
    // as portfolio does (the same row), scored only when asked for by name.
    if (!wanted(o, name) || (name == "model_guided" && (with_model || !guided_asked))) {
      if (name == "model_guided" && !with_model && wanted(o, "portfolio"))
        rep.guided_note =
            "model_guided without the model (every variant unpredicted) searches as portfolio "
            "does: its row is portfolio's";
      continue;
    }
    const std::vector<SearchSeed> seeds =
        replay_without_model(name, space, r, o.seeds, horizon, shape);
    rep.strategies.push_back(score_seeds(name, seeds, r, o, rep, scoring));
    trajectories.seeds(space, name, seeds, false);
    if (name == "model_guided")
      rep.guided_note =
          "model_guided without the model (every variant unpredicted) searches as portfolio does";
  }
  // The pruner needs the kernel source (to compile) and a device.
  if (o.device.empty()) {
    rep.pruner_note = "pruner not scored: give --device NAME";
  } else if (!std::filesystem::exists(job.kernel_file)) {
    rep.pruner_note =
        "pruner not scored: the kernel source " + job.kernel_file.string() + " is not available";
  } else if (o.prune_report) {
    score_pruner(job, space, r, o, look_ahead, rep);
  } else {
    // model_guided as `run` streams it: only what the search asks for is compiled.
    const GuidedReplay g = replay_guided(job, space, r, o, o.model_seeds, horizon, shape);
    rep.predicted_device = g.device, rep.predicted_context = g.context;
    if (!g.scored) {
      rep.pruner_note = g.note;
    } else {
      StrategyScore s = score_seeds("model_guided", g.seeds, r, o, rep, scoring);
      s.with_model = true;
      rep.strategies.push_back(std::move(s));
      trajectories.seeds(space, "model_guided", g.seeds, true);
      rep.model_streamed = true;
      rep.guided_stopped_after = g.stopped_after;
      rep.guided_compiled = g.compiled;
      rep.guided_best_ratio = g.best_ratio;
      rep.spearman = g.spearman;
      rep.predicted_and_measured = g.predicted_and_measured;
      rep.removed_by_rule = g.removed_by_rule;
      rep.model_predicted = g.predicted;
      rep.pruner_note = "model rates from " + g.rates_source +
                        "; the pruner's report over the whole space: --prune-report (it "
                        "compiles every configuration)";
    }
  }
  trajectories.close();
  rep.trajectories_written = trajectories.lines();
  return rep;
}

}  // namespace gputune::tuner
