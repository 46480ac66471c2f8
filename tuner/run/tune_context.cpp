// One context of `gputune run` (tuner/run/run_stages.h: tune_context), top-down:
//   measure_default  the default configuration first, at once: the reference and the baseline
//   capture_resumed_reference  resumed: the reference outputs again, before anything new runs
//   start_search     the plan and the model's best cases (ModelWork), the strategy, the stream
//   search           compiles and measurements overlap: the strategy is asked as far ahead as
//                    the look-ahead, each cubin is measured as soon as it is ready, and each
//                    outcome is reported before the strategy is asked again (search_stream.h)
//   regret_sample    a few of what rule 4 dropped or the search skipped, timed anyway
//   store_dropped    what rule 4 dropped and nothing measured, stored with its rule
//   learn            the model's calibration and ranking, fitted on what was measured
//   name_winner      the top few re-measured; the fastest fresh median wins
// Every outcome is stored as it happens, and the fastest so far is the context's provisional
// winner, so a run stopped at any moment (Ctrl-C, a kill, a spent budget) still has one.
// ContextRun is declared in tuner/run/context_run.h; one configuration's trial, judging, measuring
// and storing are in context_trial.cpp, what is printed and learnt around the search in
// context_report.cpp.
// Must not: define how one configuration is judged, launched or stored (context_trial.cpp does;
// the stages call it).
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "pruner/rules.h"
#include "tuner/common/progress.h"
#include "tuner/measure/arguments.h"
#include "tuner/run/context_run.h"
#include "tuner/run/run_stages.h"

namespace gputune::tuner {

void ContextRun::run() {
  Stage stage(s_.log, "context " + ctx_.name);
  ctx_id_ = s_.store->upsert_context(s_.context_record(ctx_));
  if (s_.gpu)
    measurer_ =
        std::make_unique<Measurer>(*s_.gpu, *s_.dev, make_arguments(s_.job, ctx_), s_.job.measure,
                                   s_.job.abs_tolerance, s_.job.rel_tolerance);
  if (measurer_)
    for (auto& a : measurer_->arguments())
      need_reference_ = need_reference_ || (a.output && a.reference.empty());
  load_resumed();
  const bool started = measure_default() && capture_resumed_reference() && start_search();
  if (!started) {
    stopped();
    return;
  }
  search();
  report_search();
  if (!s_.rep.interrupted) {
    regret_sample();
    store_dropped();
  }
  learn();
  if (s_.rep.interrupted) {
    stopped();
    return;
  }
  name_winner();
  s_.rep.correct += correct_.size();
  s_.rep.failed += failures_;
}

/// The default configuration, compiled first of all (run_job queued it), measured at once:
/// without ReferenceArguments its outputs are what every later variant is verified against.
/// If it fails, the first variant that runs correctly becomes the reference.
bool ContextRun::measure_default() {
  if (s_.default_index < 0) return true;
  Candidate& c = s_.candidate(static_cast<std::size_t>(s_.default_index));
  if (!wait_compiled(s_, c)) return false;
  Trial& t = trial(c);
  measure(c, t, "");
  return true;
}

/// Waits for the plan and this context's model (they run on other cores while the default
/// was measured), then sets up the strategy and the stream.
bool ContextRun::start_search() {
  plan_ = work_.plan();
  say_messages();
  if (!plan_) return false;  // Ctrl-C stopped the model's search
  if (k_ == 0) store_plan();
  if (work_.models()) {
    model_ = work_.context(k_);
    say_messages();
    if (!model_) {  // Ctrl-C stopped the analysis
      s_.log << "gputune: model: stopped (Ctrl-C) after analysing part of the space\n";
      return false;
    }
    report_model();
  } else if (s_.use_model && !s_.dev) {
    if (k_ == 0)
      s_.log << "gputune: model: not run without a GPU (no rates to predict with; `gputune "
                "prune JOB --device NAME` ranks the variants for a GPU that is not here)\n";
  }
  if (!s_.opt.screen && model_) compile_whole_plan();
  if (s_.opt.should_stop && s_.opt.should_stop()) return false;
  if (!compile_resumed()) return false;
  const std::size_t n = plan_->index.size();
  SearchStream::Settings settings;
  settings.look_ahead = 2 * static_cast<std::size_t>(s_.pool->threads());
  settings.left_out = plan_->left_out;
  const bool rule4 = s_.job.pruner.enabled && model_ != nullptr;
  if (model_) {
    // The best cases, with the calibration as it is now (an earlier context may have refitted
    // it since the analysis ran).
    best_case_.assign(n, kNaN);
    for (std::size_t pos = 0; pos < n; ++pos)
      if (model_->max_blocks[pos] > 0 && model_->run.features[pos].ok)
        if (auto p = pruner::best_case(model_->run.features[pos], *s_.rates.rates, s_.calibration,
                                       model_->max_blocks[pos]);
            p.ok)
          best_case_[pos] = p.ms;
  }
  if (rule4) {
    settings.margin = s_.job.pruner.model_margin;
    settings.best_case = best_case_;
  }
  std::vector<pruner::ModelFeatures> features;
  std::vector<int> bound;
  if (model_) {
    features = model_->run.features;
    bound = model_->max_blocks;
    // What is compiled already (the default; everything, without the screen) is judged by its
    // real prediction from the start.
    for (std::size_t pos = 0; pos < n; ++pos) {
      auto it = s_.candidates.find(plan_->index[pos]);
      if (it == s_.candidates.end() || it->second.state != Candidate::Compile::kDone) continue;
      Trial& t = trial(it->second);
      if (!t.prediction.ok) continue;
      features[pos] = real_features(pos, t);
      bound[pos] = 0;
      if (rule4) settings.best_case[pos] = t.prediction.ms;
    }
  }
  if (s_.guided) {
    budget_ = budget_configurations(s_.job.budget, s_.space.size());
    settings.budget = budget_;
    std::vector<Config> configs;
    configs.reserve(n);
    for (std::size_t i : plan_->index) configs.push_back(s_.space.config(i));
    features.resize(n);
    auto guide = std::make_unique<ModelGuided>(
        std::move(features), s_.rates.rates.value_or(pruner::DeviceRates{}), s_.calibration,
        std::vector<bool>{}, configs, s_.job.seed, std::move(bound));
    guide_ = guide.get();
    strategy_ = std::move(guide);
    if (rule4) guide_->hold_back(std::vector<std::size_t>{}, settings.margin);
    learn_from_the_past();
  } else if (rule4) {
    // Everything rule 4 keeps is measured: compiled in order of best case (those without one
    // first: nothing bounds them), so that rule 4's best settles after a few compiles and
    // what it keeps is known early (the stream measures a variant once it surely keeps it).
    std::vector<std::size_t> order(n);
    for (std::size_t pos = 0; pos < n; ++pos) order[pos] = pos;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const double x = best_case_[a], y = best_case_[b];
      if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && !std::isnan(y);
      return x < y;
    });
    strategy_ = make_list(std::move(order));
    settings.exact = exact_ = true;
  } else {
    strategy_ = make_brute_force(n);  // the plan is the strategy's order already
  }
  stream_.emplace(*strategy_, guide_, std::move(settings));
  // What was measured before the stream (the default; a resumed run's), and what rule 4's best
  // starts from. The default's row was stored before the model had predicted it: it gets its
  // prediction now.
  for (auto& [index, t] : trials_) {
    const long pos = plan_->position(index);
    if (pos < 0) continue;
    Candidate& c = s_.candidate(index);
    if (t.measured && t.measurement_id && stored_.count(index) && t.prediction.ok)
      s_.store->set_predicted_ms(t.measurement_id, t.prediction.ms);
    if (t.measured && s_.job.pruner.enabled && c.usable() && t.launch &&
        judged_.insert(index).second)
      apply_rules(c, t);
    if (t.measured && c.usable() && t.launch && !c.compiled.cubin_hash.empty())
      measured_binaries_.insert(binary(c, t));
    if (t.prediction.ok && sets_best(t)) stream_->offer_best(t.prediction.ms);
    if (t.measured) stream_->add_measured(static_cast<std::size_t>(pos), t.time_ms);
  }
  return true;
}

/// A resumed run's measured configurations, compiled again (from the cache, as a rule) before
/// the search, when rule 3 is on: it keeps the first of each binary and launch, and without
/// theirs it would keep (and measure, counted against the budget) a configuration that the
/// interrupted process had pruned as the same binary as one it measured. False: Ctrl-C.
bool ContextRun::compile_resumed() {
  if (!s_.job.pruner.enabled) return true;
  std::vector<Candidate*> resumed;
  for (auto& [index, t] : trials_)
    if (t.measured) resumed.push_back(&s_.candidate(index));
  for (Candidate* c : resumed)
    if (c->state == Candidate::Compile::kNot) s_.pool->submit(*c);
  for (Candidate* c : resumed)
    if (!wait_compiled(s_, *c)) return false;
  return true;
}

/// The search: compiles overlap measurements; the GPU waits only for a compile it needs.
void ContextRun::search() {
  Progress prog("measure " + ctx_.name, guided_total(), s_.opt.progress && measurer_ != nullptr);
  std::size_t steps = 0;
  for (;;) {
    if (s_.opt.should_stop && s_.opt.should_stop()) {
      s_.rep.interrupted = true;
      stream_->stop();
      break;
    }
    while (auto pos = stream_->next_to_compile()) {
      Candidate& c = s_.candidate(plan_->index[*pos]);
      in_order_.push_back(*pos);
      if (c.state == Candidate::Compile::kDone) continue;
      waiting_.insert(c.index);
      if (c.state == Candidate::Compile::kNot) s_.pool->submit(c);
    }
    judge_ready();
    while (Candidate* done = s_.pool->poll()) on_compiled(*done);
    if (auto pos = stream_->next_to_measure()) {
      Candidate& c = s_.candidate(plan_->index[*pos]);
      const bool readmitted = guide_ && stream_->dropped(*pos);
      readmitted_measured_ += readmitted;
      std::optional<double> t =
          measure(c, trial(c),
                  readmitted ? "readmitted: pruned by rule model under the starting calibration, "
                               "predicted within the margin by the model refitted on this run's "
                               "measurements"
                             : "");
      stream_->measured(*pos, t);
      prog.update(++steps, failures_, best_ms_);
      if (s_.out_of_time) {
        stream_->stop();
        not_run_for_time();
      }
      continue;
    }
    if (stream_->done()) break;
    if (Candidate* done = s_.pool->wait(std::chrono::milliseconds(100))) on_compiled(*done);
  }
  prog.finish();
  steps_ = steps;
}

/// The time budget is spent: a strategy without feedback planned the rest, which is stored as
/// not run (without compiling it), so `show` says what the budget cut.
void ContextRun::not_run_for_time() {
  if (guide_) return;  // a search plans as it goes: nothing more was planned
  for (std::size_t pos = 0; pos < plan_->index.size(); ++pos) {
    Candidate& c = s_.candidate(plan_->index[pos]);
    Trial& t = trial(c, /*launch=*/false);
    if (t.measured || stored_.count(c.index)) continue;
    db::MeasurementRecord row = measurement_row(keys(c), c, t);
    row.status = db::Status::kTimeout;
    row.reason = "not run: the job's time budget was spent";
    ++failures_;
    store(c, t, row);
  }
}

/// A few configurations rule 4 dropped or the search skipped, timed anyway: the regret the
/// pruning and the search's stop would have caused. What the model's search left out and
/// drew at random for this is always among them.
void ContextRun::regret_sample() {
  if (!s_.use_model || !measurer_) return;
  // The candidates: every planned configuration not measured here that a rule pruned or (model
  // guided) the search skipped, whatever is known of it yet; the same list, so the same
  // seeded draw, whether or not the plan was compiled whole first.
  std::vector<std::size_t> pick, from_left_out;
  for (std::size_t pos = 0; pos < plan_->index.size(); ++pos) {
    auto it = trials_.find(plan_->index[pos]);
    if (it != trials_.end() && it->second.measured) continue;
    (plan_->left_out[pos] ? from_left_out : pick).push_back(pos);
  }
  std::mt19937_64 rng(s_.job.seed);
  std::shuffle(pick.begin(), pick.end(), rng);
  const auto wanted = static_cast<std::size_t>(std::max(0, s_.job.pruner.regret_sample));
  // Walked in the drawn order until `wanted` are timed: one that turns out, once compiled, to
  // be the same binary as one measured, or a launch that fails (rules 1 and 3), is no sample
  // of anything; one that does not compile or launch is counted. What the search left out and
  // drew at random is always timed.
  const std::optional<double> best_kept = best_ms_;
  std::optional<double> best_sample;
  std::size_t timed = 0, unusable = 0, not_samples = 0, left_out_timed = 0;
  std::vector<std::size_t> walk = std::move(from_left_out);
  const std::size_t always = walk.size();
  walk.insert(walk.end(), pick.begin(), pick.end());
  const std::size_t workers = static_cast<std::size_t>(s_.pool->threads());
  for (std::size_t w = 0; w < walk.size() && (w < always || timed - left_out_timed < wanted); ++w) {
    if (s_.opt.should_stop && s_.opt.should_stop()) {
      s_.rep.interrupted = true;
      break;
    }
    // Compiled a little ahead of the walk: no further than what is still wanted, one per
    // worker at most (the sample costs what it times, and what turns out no sample).
    const std::size_t still = (w < always ? always - w : 0) + (wanted - (timed - left_out_timed));
    for (std::size_t a = w; a < std::min({walk.size(), w + workers, w + still}); ++a)
      if (Candidate& c = s_.candidate(plan_->index[walk[a]]); c.state == Candidate::Compile::kNot)
        s_.pool->submit(c);
    const std::size_t pos = walk[w];
    Candidate& c = s_.candidate(plan_->index[pos]);
    const bool from_search = plan_->left_out[pos] != 0;
    if (!wait_compiled(s_, c)) {
      s_.rep.interrupted = true;
      break;
    }
    if (resumed_samples_.count(c.index)) {  // timed as a sample before an interruption
      left_out_timed += from_search;
      ++timed;
      if (auto ms = measure(c, trial(c), ""); ms && (!best_sample || *ms < *best_sample))
        best_sample = ms;
      continue;
    }
    Trial& t = trial(c);
    if (!c.usable() || !t.launch) {
      ++unusable;
      store_unlaunchable(c, t);
      continue;
    }
    if (s_.job.pruner.enabled &&
        (!t.occupancy.feasible || measured_binaries_.count(binary(c, t)))) {
      ++not_samples;
      continue;
    }
    left_out_timed += from_search;
    ++timed;
    const std::string why = stream_->dropped(pos) ? "pruned by rule model"
                            : !t.decision.kept    ? "pruned by rule " + t.decision.rule
                            : guide_              ? "skipped by " + s_.job.strategy
                                                  : std::string("pruned by rule model");
    if (auto ms = measure(c, t, "regret sample (" + why + ")");
        ms && (!best_sample || *ms < *best_sample))
      best_sample = ms;
  }
  if (!best_kept || s_.rep.interrupted || walk.empty()) return;
  const double regret = best_sample && *best_sample < *best_kept ? *best_kept / *best_sample : 1.0;
  s_.rep.regret = regret;
  s_.rep.regret_sampled += timed;
  s_.log << "gputune: regret sample: " << timed << " pruned or skipped variants timed"
         << (left_out_timed ? " (" + std::to_string(left_out_timed) +
                                  " of them left out by the model's search)"
                            : std::string())
         << (unusable ? " (" + std::to_string(unusable) + " more could not run)" : "")
         << (not_samples ? " (" + std::to_string(not_samples) +
                               " more, compiled for it, were pruned by rule 1 or 3: a launch "
                               "that fails, or the same binary as one measured)"
                         : "")
         << "; best " << (best_sample ? *best_sample : 0) << " ms against the measured best "
         << *best_kept << " ms: regret " << regret
         << (regret > 1 ? " (the pruning missed a faster variant)" : "") << "\n";
}

/// What rule 4 dropped and nothing measured: stored with its rule and its prediction (the best
/// case when it was never compiled).
void ContextRun::store_dropped() {
  if (!stream_) return;
  const double best = stream_->best_prediction();
  for (std::size_t pos : stream_->dropped_by_model()) {
    Candidate& c = s_.candidate(plan_->index[pos]);
    Trial& t = trial(c, /*launch=*/false);
    if (t.measured || stored_.count(c.index)) continue;
    const std::string why =
        pruner::model_rule_reason(&t.prediction, best_case_[pos], s_.job.pruner.model_margin, best);
    t.decision.kept = false, t.decision.rule = "model", t.decision.reason = why;
    if (!t.prediction.ok) t.best_case_ms = best_case_[pos];
    db::MeasurementRecord row = measurement_row(keys(c), c, t);
    row.status = db::Status::kConstraints;
    row.reason = "pruned by rule model: " + why;
    store(c, t, row);
  }
}

/// The model learns from what was measured: a calibration per device, and how well its
/// ranking (before this fit) matched the measurements.
void ContextRun::learn() {
  if (!s_.use_model || !measurer_ || !s_.rates.rates) return;
  std::vector<pruner::ModelFeatures> f;
  std::vector<double> ms, pred;
  for (auto& [t, index] : correct_) {
    const Trial& tr = trials_.at(index);
    const long pos = plan_ ? plan_->position(index) : -1;
    if (!tr.prediction.ok || !model_ || pos < 0) continue;
    f.push_back(real_features(static_cast<std::size_t>(pos), tr));
    ms.push_back(t);
    pred.push_back(tr.prediction.ms);
  }
  if (pred.size() >= 3) {
    s_.rep.spearman = pruner::spearman(pred, ms);
    s_.log << "gputune: model: Spearman rank correlation " << *s_.rep.spearman << " over "
           << pred.size() << " measured variants\n";
  }
  pruner::Calibration fit = pruner::calibrate(f, ms, *s_.rates.rates, s_.calibration);
  if (fit.samples > 0) {
    s_.calibration = fit;
    s_.store->save_calibration(s_.device_id, s_.run_id, fit.samples, fit.rms_log_error, fit.json());
    s_.log << "gputune: model: calibration fitted on " << fit.samples
           << " measurements (rms log error " << fit.rms_log_error << ")\n";
  }
}

/// Re-measures the top few before naming a winner: the fastest of fresh medians wins (the run's
/// provisional winner is replaced by it).
void ContextRun::name_winner() {
  if (!measurer_ || correct_.empty()) return;
  std::sort(correct_.begin(), correct_.end());
  const std::size_t top = std::min<std::size_t>(
      correct_.size(), static_cast<std::size_t>(s_.job.measure.remeasure_top));
  // Until a fresh median exists, the first pass's fastest is the winner.
  std::size_t winner = correct_[0].second;
  std::int64_t winner_mid = trials_.at(winner).measurement_id;
  double winner_ms = correct_[0].first;
  bool fresh = false;
  for (std::size_t r = 0; r < top; ++r) {
    Candidate& c = s_.candidate(correct_[r].second);
    // Re-measured before an interruption: that result counts, and is not measured again.
    if (auto done = remeasured_.find(s_.variant_id(c)); done != remeasured_.end()) {
      const Remeasured& m = done->second;
      if (m.time_ms && (!fresh || *m.time_ms < winner_ms))
        winner_ms = *m.time_ms, winner_mid = m.measurement_id, winner = c.index, fresh = true;
      continue;
    }
    // A configuration measured before an interruption was never compiled by this process.
    if (!wait_compiled(s_, c)) break;  // Ctrl-C
    Trial& t = trial(c);
    if (!c.usable() || !t.launch) continue;
    db::MeasurementRecord row = measurement_row(keys(c), c, t);
    const std::string role = "re-measurement of a top-" + std::to_string(top) + " variant";
    row.reason = role;  // kept should the launch hang or lose the context (set_failed)
    Outcome o = launch(c, t, row, reference_.empty() ? nullptr : &reference_, nullptr);
    set_outcome(row, o, t);
    row.reason = role + (o.reason.empty() ? "" : ": " + o.reason);
    const std::int64_t mid = s_.store->add_measurement(row);
    if (o.status == db::Status::kCorrect && (!fresh || o.median_ms < winner_ms)) {
      winner_ms = o.median_ms, winner_mid = mid, winner = c.index;
      fresh = true;
    }
  }
  s_.store->offer_winner(ctx_id_, winner_mid);
  s_.rep.best.push_back(best_row(winner, winner_ms, false));
}

/// Ctrl-C (or a search the model's work could not finish): what was measured stays, with its
/// fastest as the context's provisional winner.
void ContextRun::stopped() {
  s_.rep.interrupted = s_.rep.interrupted || (s_.opt.should_stop && s_.opt.should_stop());
  if (!correct_.empty()) {
    auto best = std::min_element(correct_.begin(), correct_.end());
    s_.rep.best.push_back(best_row(best->second, best->first, true));
  }
  s_.rep.correct += correct_.size();
  s_.rep.failed += failures_;
}

void tune_context(RunState& s, ModelWork& work, std::size_t k) { ContextRun(s, work, k).run(); }

}  // namespace gputune::tuner
