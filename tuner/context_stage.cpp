// One context of `gputune run` (tuner/run_stages.h: tune_context), top-down:
//   measure_default  the default configuration first, at once: the reference and the baseline
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
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <list>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <unordered_set>

#include "pruner/rules.h"
#include "tuner/arguments.h"
#include "tuner/hang_watch.h"
#include "tuner/measure.h"
#include "tuner/measurement_row.h"
#include "tuner/model_work.h"
#include "tuner/progress.h"
#include "tuner/run_stages.h"
#include "tuner/search_stream.h"
#include "tuner/strategy.h"

namespace gputune::tuner {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// How many of the newest verified times (with a prediction, for the predicted variants) a
/// search learns from before it starts.
constexpr int kPastMeasurements = 5000;

/// What earlier contexts and runs measured of kernel `kernel` on the device: the prior of a
/// model-guided search (ParameterEffects::from_past). `residuals`: the times with a prediction,
/// as log(measured / predicted), for the predicted variants; otherwise every verified time as
/// log(time), for the variants without a prediction (from_past centres each search on its mean).
/// `imported` (when given) counts those from imported Kernel Tuner caches of a device of the same
/// name (times only: an import has no predictions).
std::vector<ParameterEffects::Past> past_measurements(db::Store& store, std::int64_t device_id,
                                                      const std::string& kernel,
                                                      std::int64_t run_id, std::int64_t ctx_id,
                                                      bool residuals,
                                                      std::size_t* imported = nullptr) {
  std::vector<ParameterEffects::Past> out;
  for (const auto& row :
       residuals ? store.predicted_times(device_id, kernel, run_id, ctx_id, kPastMeasurements)
                 : store.verified_times(device_id, kernel, run_id, ctx_id, kPastMeasurements)) {
    auto params = nlohmann::json::parse(row.params_json, nullptr, false);
    if (!params.is_object()) continue;
    if (imported && row.imported) ++*imported;
    ParameterEffects::Past m;
    m.search = std::to_string(row.run_id) + "/" + std::to_string(row.context_id);
    for (const auto& [name, value] : params.items()) m.values[name] = json_to_value(value).str();
    m.log_residual = std::log(residuals ? row.time_ms / row.predicted_ms : row.time_ms);
    out.push_back(std::move(m));
  }
  return out;
}

class ContextRun {
 public:
  ContextRun(RunState& s, ModelWork& work, std::size_t k)
      : s_(s), work_(work), k_(k), ctx_(s.job.contexts[k]) {}

  void run() {
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
    if (!measure_default() || !start_search()) {
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

 private:
  // --- Stages -----------------------------------------------------------------------------

  /// The default configuration, compiled first of all (run_job queued it), measured at once:
  /// without ReferenceArguments its outputs are what every later variant is verified against.
  /// If it fails, the first variant that runs correctly becomes the reference.
  bool measure_default() {
    if (s_.default_index < 0) return true;
    Candidate& c = s_.candidate(static_cast<std::size_t>(s_.default_index));
    if (!wait_compiled(s_, c)) return false;
    Trial& t = trial(c);
    measure(c, t, "");
    return true;
  }

  /// Waits for the plan and this context's model (they run on other cores while the default
  /// was measured), then sets up the strategy and the stream.
  bool start_search() {
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
      if (t.prediction.ok && sets_best(t)) stream_->offer_best(t.prediction.ms);
      if (t.measured) stream_->add_measured(static_cast<std::size_t>(pos), t.time_ms);
    }
    return true;
  }

  /// The search: compiles overlap measurements; the GPU waits only for a compile it needs.
  void search() {
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
  void not_run_for_time() {
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
  void regret_sample() {
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
    for (std::size_t w = 0; w < walk.size() && (w < always || timed - left_out_timed < wanted);
         ++w) {
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
      if (!wait_compiled(s_, c)) {
        s_.rep.interrupted = true;
        break;
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
      const bool from_search = plan_->left_out[pos] != 0;
      left_out_timed += from_search;
      ++timed;
      const std::string why = stream_->dropped(pos) ? "pruned by rule model"
                              : !t.decision.kept    ? "pruned by rule " + t.decision.rule
                              : guide_              ? std::string("skipped by model_guided")
                                                    : std::string("pruned by rule model");
      if (auto ms = measure(c, t, "regret sample (" + why + ")");
          ms && (!best_sample || *ms < *best_sample))
        best_sample = ms;
    }
    if (!best_kept || s_.rep.interrupted || walk.empty()) return;
    const double regret =
        best_sample && *best_sample < *best_kept ? *best_kept / *best_sample : 1.0;
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
  void store_dropped() {
    if (!stream_) return;
    const double best = stream_->best_prediction();
    for (std::size_t pos : stream_->dropped_by_model()) {
      Candidate& c = s_.candidate(plan_->index[pos]);
      Trial& t = trial(c, /*launch=*/false);
      if (t.measured || stored_.count(c.index)) continue;
      const std::string why = pruner::model_rule_reason(&t.prediction, best_case_[pos],
                                                        s_.job.pruner.model_margin, best);
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
  void learn() {
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
      s_.store->save_calibration(s_.device_id, s_.run_id, fit.samples, fit.rms_log_error,
                                 fit.json());
      s_.log << "gputune: model: calibration fitted on " << fit.samples
             << " measurements (rms log error " << fit.rms_log_error << ")\n";
    }
  }

  /// Re-measures the top few before naming a winner: the fastest of fresh medians wins (the run's
  /// provisional winner is replaced by it).
  void name_winner() {
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
      Trial& t = trial(c);
      db::MeasurementRecord row = measurement_row(keys(c), c, t);
      Outcome o = launch(c, t, row, reference_.empty() ? nullptr : &reference_, nullptr);
      set_outcome(row, o, t);
      row.reason = "re-measurement of a top-" + std::to_string(top) + " variant" +
                   (o.reason.empty() ? "" : ": " + o.reason);
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
  void stopped() {
    s_.rep.interrupted = s_.rep.interrupted || (s_.opt.should_stop && s_.opt.should_stop());
    if (!correct_.empty()) {
      auto best = std::min_element(correct_.begin(), correct_.end());
      s_.rep.best.push_back(best_row(best->second, best->first, true));
    }
    s_.rep.correct += correct_.size();
    s_.rep.failed += failures_;
  }

  // --- One configuration ------------------------------------------------------------------

  RowKeys keys(Candidate& c) { return {s_.run_id, ctx_id_, s_.variant_id(c)}; }

  /// Its trial in this context, with its launch and (once compiled) its occupancy.
  Trial& trial(Candidate& c, bool launch = true) {
    Trial& t = trials_[c.index];
    if (launch && !t.launch && t.geometry_error.empty()) {
      try {
        t.launch = instantiate_launch(s_.job, c.config, ctx_);
      } catch (const JobError& e) {
        t.geometry_error = e.problem;
      }
    }
    if (t.launch && c.usable() && t.occupancy.blocks_per_sm == 0 && t.occupancy.feasible)
      t.occupancy = pruner::compute_occupancy(c.inspected.res, t.launch->geometry.grid,
                                              t.launch->geometry.block,
                                              t.launch->geometry.dynamic_smem, s_.limits);
    if (t.launch && c.usable() && model_ && !t.prediction.ok)
      if (const long pos = plan_ ? plan_->position(c.index) : -1; pos >= 0) {
        t.prediction = pruner::predict(real_features(static_cast<std::size_t>(pos), t),
                                       *s_.rates.rates, s_.calibration);
        t.best_case_ms = best_case_[static_cast<std::size_t>(pos)];
      }
    return t;
  }

  pruner::ModelFeatures real_features(std::size_t pos, const Trial& t) const {
    return pruner::features_from(model_->run.traffic[pos], t.occupancy,
                                 model_->threads_per_block[pos]);
  }

  /// The binary and launch of a compiled configuration, as rule 3 keys it: equal ones compute
  /// and time the same.
  static std::string binary(const Candidate& c, const Trial& t) {
    const LaunchGeometry& g = t.launch->geometry;
    return c.compiled.cubin_hash + "|" + pruner::launch_key(g.grid, g.block, g.dynamic_smem);
  }

  static bool sets_best(const Trial& t) {
    return t.decision.kept || t.decision.rule == "duplicate";
  }

  void on_compiled(Candidate& c) {
    check_compiled(s_, c);
    waiting_.erase(c.index);
    judge_ready();
  }

  /// Judges the proposed configurations that are compiled: as each is ready, or (a strategy
  /// without feedback, which measures everything rule 4 keeps) in the order they were proposed,
  /// so that which of a group of identical binaries is kept does not depend on which compile
  /// finished first.
  void judge_ready() {
    const bool ordered = exact_;
    for (auto it = in_order_.begin(); it != in_order_.end();) {
      if (waiting_.count(plan_->index[*it])) {
        if (ordered) break;
        ++it;
        continue;
      }
      const std::size_t pos = *it;
      it = in_order_.erase(it);
      judge(pos);
    }
  }

  /// A proposed configuration is compiled: rules 1-3 (with the pruner on), its real prediction
  /// (which refines the model_guided order), and whether the stream measures it.
  void judge(std::size_t pos) {
    Candidate& c = s_.candidate(plan_->index[pos]);
    Trial& t = trial(c);
    if (!c.usable() || !t.launch) {
      store_unlaunchable(c, t);
      stream_->compiled(pos, false, kNaN, false);
      return;
    }
    if (s_.job.pruner.enabled && judged_.insert(c.index).second) apply_rules(c, t);
    if (guide_ && t.prediction.ok) guide_->refine(pos, real_features(pos, t));
    if (!t.decision.kept) {
      db::MeasurementRecord row = measurement_row(keys(c), c, t);
      row.status = db::Status::kConstraints;
      row.reason = "pruned by rule " + t.decision.rule + ": " + t.decision.reason;
      store(c, t, row);
    }
    // The same binary and launch as one measured here: its outcome is known without a launch,
    // and the search learns it (it is no measurement of the budget).
    if (t.decision.rule == "duplicate" && t.decision.duplicate_of >= 0)
      if (auto twin = trials_.find(static_cast<std::size_t>(t.decision.duplicate_of));
          twin != trials_.end() && twin->second.measured) {
        stream_->known(pos, twin->second.time_ms, t.prediction.ok ? t.prediction.ms : kNaN);
        return;
      }
    stream_->compiled(pos, t.decision.kept, t.prediction.ok ? t.prediction.ms : kNaN, sets_best(t));
  }

  /// Rules 1-3 (pruner::judge_variant) on one compiled configuration, in this context: its
  /// launch would fail, it spills beyond the limit, or it is the same binary and launch as one
  /// kept before it here.
  void apply_rules(Candidate& c, Trial& t) {
    pruner::RuleInput in;
    in.inspected = true;
    in.res = c.inspected.res;
    in.cubin_hash = c.compiled.cubin_hash;
    const LaunchGeometry& g = t.launch->geometry;
    in.grid = g.grid, in.block = g.block, in.dynamic_smem = g.dynamic_smem;
    in.geometry = pruner::launch_key(g.grid, g.block, g.dynamic_smem);
    t.decision = pruner::judge_variant(in, static_cast<long>(c.index), s_.limits, s_.rule_options,
                                       binaries_);
    if (t.decision.rule == "duplicate")  // named by its configuration, not its space index
      t.decision.reason =
          "same cubin and launch geometry as configuration " +
          s_.candidate(static_cast<std::size_t>(t.decision.duplicate_of)).config.key();
    if (!t.decision.kept) ++removed_[t.decision.rule];
  }

  /// Measures (or, without a GPU, records) a configuration; its time when correct.
  std::optional<double> measure(Candidate& c, Trial& t, const std::string& note) {
    const RowKeys k = keys(c);
    if (s_.already.count({ctx_id_, k.variant_id})) return resumed(c, t);
    db::MeasurementRecord row = measurement_row(k, c, t);
    std::optional<double> result;
    if (!set_unlaunchable(row, c, t)) {
      if (!measurer_) {
        row.status = db::Status::kCompiled;
        row.reason = "not timed: no CUDA device (" + s_.no_device_reason + ")";
        if (!t.occupancy.feasible)
          row.reason += "; predicted launch failure: " + t.occupancy.infeasible_reason;
      } else if (s_.out_of_time || Clock::now() > s_.deadline) {
        s_.out_of_time = true;
        row.status = db::Status::kTimeout;
        row.reason = "not run: the job's time budget was spent";
      } else {
        const bool is_ref = need_reference_ && reference_.empty();
        Outcome o =
            launch(c, t, row, is_ref ? nullptr : &reference_, is_ref ? &reference_ : nullptr);
        set_outcome(row, o, t);
        if (o.status == db::Status::kCorrect) {
          result = o.median_ms;
          correct_.emplace_back(o.median_ms, c.index);
          if (!best_ms_ || o.median_ms < *best_ms_) best_ms_ = o.median_ms;
          if (c.is_default) default_ms_ = o.median_ms;
          if (is_ref) {
            row.reason = "reference: later variants are verified against these outputs";
            if (!c.is_default)
              s_.log << "gputune: note: the default configuration is not available; reference "
                        "outputs come from "
                     << c.config.key() << "\n";
          }
        } else {
          if (is_ref) reference_.clear();  // outputs captured before a later failure
          if (!t.occupancy.feasible)
            row.reason +=
                " (the resource model predicted this: " + t.occupancy.infeasible_reason + ")";
        }
      }
    }
    if (row.status.failed()) ++failures_;
    if (!note.empty()) row.reason += (row.reason.empty() ? "" : "; ") + note;
    t.time_ms = result;
    store(c, t, row);
    t.measured = true;
    if (c.usable() && t.launch && !c.compiled.cubin_hash.empty())
      measured_binaries_.insert(binary(c, t));
    if (row.status.timed() && !s_.first_measurement_s)
      s_.first_measurement_s = std::chrono::duration<double>(Clock::now() - s_.started).count();
    if (result && *result <= *best_ms_)  // the fastest so far: the provisional winner
      s_.store->offer_winner(ctx_id_, t.measurement_id, /*provisional=*/true);
    return result;
  }

  /// Runs a configuration on the GPU (Measurer::run, the job's repeats), watched: the daemon is
  /// told which variant is in flight, and a launch that never returns stores `row` as timeout
  /// (HangWatch). Counts the GPU's time.
  Outcome launch(Candidate& c, Trial& t, const db::MeasurementRecord& row,
                 const std::vector<std::vector<unsigned char>>* expected,
                 std::vector<std::vector<unsigned char>>* capture) {
    if (s_.opt.on_measure_start) s_.opt.on_measure_start(ctx_id_, row.variant_id);
    if (s_.hang_watch) s_.hang_watch->begin(row, "configuration " + c.config.key());
    const Clock::time_point t0 = Clock::now();
    Outcome o = measurer_->run(c.compiled, *t.launch, expected, capture, s_.job.measure.repeats);
    s_.gpu_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    if (s_.hang_watch) s_.hang_watch->end();
    return o;
  }

  /// A configuration measured before an interruption: what it measured then counts now (the
  /// reference outputs are not stored: they are captured again from it).
  std::optional<double> resumed(Candidate& c, Trial& t) {
    t.measured = true;
    auto it = resumed_ms_.find(s_.variant_id(c));
    if (it == resumed_ms_.end()) return std::nullopt;
    t.time_ms = it->second;
    t.measurement_id = resumed_mid_[c.variant_id];
    if (measurer_ && need_reference_ && reference_.empty() && c.usable() && t.launch) {
      Outcome o = measurer_->run(c.compiled, *t.launch, nullptr, &reference_, 1);
      if (o.status != db::Status::kCorrect) reference_.clear();
    }
    return t.time_ms;
  }

  /// What this run measured in this context before it was interrupted (a resume).
  void load_resumed() {
    if (s_.already.empty()) return;
    for (auto& m : s_.store->measurements(s_.run_id, ctx_id_))
      if (m.status == db::Status::kCorrect && m.reason.rfind("re-measurement", 0) != 0 &&
          m.time_ms) {
        const long i = s_.space.find(m.config_key);
        if (i < 0) continue;
        Candidate& c = s_.candidate(static_cast<std::size_t>(i));
        c.variant_id = m.variant_id;
        resumed_ms_[m.variant_id] = *m.time_ms;
        resumed_mid_[m.variant_id] = m.id;
        correct_.emplace_back(*m.time_ms, c.index);
        Trial& t = trials_[c.index];
        t.measurement_id = m.id, t.measured = true, t.time_ms = m.time_ms;
        if (!best_ms_ || *m.time_ms < *best_ms_) best_ms_ = m.time_ms;
        if (c.is_default) default_ms_ = m.time_ms;
      }
  }

  void store_unlaunchable(Candidate& c, Trial& t) {
    if (t.measured || stored_.count(c.index) || s_.already.count({ctx_id_, s_.variant_id(c)}))
      return;
    db::MeasurementRecord row = measurement_row(keys(c), c, t);
    if (!set_unlaunchable(row, c, t)) return;
    ++failures_;
    store(c, t, row);
  }

  void store(Candidate& c, Trial& t, db::MeasurementRecord& row) {
    // A pair this run stored before it was interrupted is not stored twice.
    if (s_.already.count({ctx_id_, row.variant_id})) return;
    t.measurement_id = s_.store->add_measurement(row);
    stored_.insert(c.index);
    ++s_.done_total;
    if (s_.done_total % 64 == 0)
      s_.store->update_run_progress(s_.run_id, s_.done_total, s_.seconds_spent());
  }

  // --- Around the search ------------------------------------------------------------------

  void say_messages() {
    for (const std::string& line : work_.take_messages()) s_.log << line << "\n";
  }

  /// The plan, stored with the run once it is known (model_guided: `run --resume` goes on with
  /// it), and what it plans in every context.
  void store_plan() {
    s_.rep.planned = plan_->index.size();
    s_.rep.model_search = plan_->summary;
    s_.store->set_run_total(
        s_.run_id, static_cast<std::int64_t>(plan_->index.size() * s_.job.contexts.size()));
    if (!s_.guided) return;
    db::RunPlan rp;
    rp.searched = plan_->searched;
    rp.summary = plan_->summary;
    if (plan_->searched)
      for (std::size_t pos = 0; pos < plan_->index.size(); ++pos)
        (plan_->left_out[pos] ? rp.left_out : rp.chosen)
            .push_back(s_.space.config(plan_->index[pos]).key());
    s_.store->save_run_plan(s_.run_id, rp);
  }

  void report_model() {
    const ModelRun& m = model_->run;
    std::size_t predicted = 0;
    for (double b : model_->best_case) predicted += std::isfinite(b);
    s_.log << "gputune: model: " << predicted << " of " << model_->best_case.size()
           << " variants predicted (from their source: the best case at any occupancy their "
              "launch allows, refined once compiled; "
           << m.analyses_cached << " analyses from the cache); rates from " << s_.rates.source
           << "; calibration "
           << (s_.calibration.samples
                   ? "fitted on " + std::to_string(s_.calibration.samples) + " measurements"
                   : std::string("default"))
           << "\n";
    if (m.not_analysed)
      s_.log << "gputune: model: " << m.not_analysed
             << " variants not analysed (judged by the resource rules only): " << m.first_error
             << "\n";
  }

  /// --no-screen: every planned configuration is compiled first, so rule 4 and the search judge
  /// each by its real prediction from the start (slower: the reference the stream is checked
  /// against).
  void compile_whole_plan() {
    if (k_ > 0) return;  // the candidates serve every context
    Stage st(s_.log, "compile");
    Progress prog("compile", plan_->index.size(), s_.opt.progress);
    std::vector<Candidate*> all;
    for (std::size_t i : plan_->index) {
      Candidate& c = s_.candidate(i);
      if (c.state == Candidate::Compile::kNot) s_.pool->submit(c);
      all.push_back(&c);
    }
    std::size_t done = 0;
    for (Candidate* c : all) {
      if (!wait_compiled(s_, *c)) return;
      prog.update(++done, 0, std::nullopt);
    }
    prog.finish();
  }

  /// model_guided starts from what earlier contexts of this run and earlier runs of the kernel on
  /// this device learned about its parameters, until its own measurements take over.
  void learn_from_the_past() {
    if (!measurer_) return;
    auto past =
        past_measurements(*s_.store, s_.device_id, s_.job.kernel_name, s_.run_id, ctx_id_, true);
    if (!past.empty()) {
      auto before = ParameterEffects::from_past(past);
      guide_->set_prior(before.learned());
      std::string taught = before.summary(4);
      s_.log << "gputune: model_guided: starts from what " << past.size()
             << " earlier measurements of kernel '" << s_.job.kernel_name
             << "' on this device taught ("
             << (guide_->effects() ? guide_->effects()->prior_values() : 0)
             << " parameter values of this space; "
             << (taught.empty() ? "no value off by 5% or more" : taught) << ")\n";
    }
    std::size_t imported = 0;
    if (guide_->unpredicted_effects())
      if (auto times = past_measurements(*s_.store, s_.device_id, s_.job.kernel_name, s_.run_id,
                                         ctx_id_, false, &imported);
          !times.empty()) {
        auto before = ParameterEffects::from_past(times);
        guide_->set_unpredicted_prior(before.learned());
        std::string taught = before.summary(4);
        s_.log << "gputune: model_guided: variants without a prediction start from what "
               << times.size() << " earlier measured times of kernel '" << s_.job.kernel_name
               << "' on this device"
               << (imported ? " (" + std::to_string(imported) +
                                  " of them from imported Kernel Tuner caches)"
                            : std::string())
               << " taught (" << guide_->unpredicted_effects()->prior_values()
               << " parameter values of this space; "
               << (taught.empty() ? "no value off by 5% or more" : taught) << ")\n";
      }
  }

  /// What the search did and learned, for the log.
  void report_search() {
    if (s_.job.pruner.enabled) {
      s_.log << "gputune: pruner: resources " << removed_["resources"] << " spills "
             << removed_["spills"] << " duplicate " << removed_["duplicate"] << " model "
             << stream_->dropped_by_model().size() << " (removed per rule";
      std::size_t never = 0;
      for (std::size_t pos : stream_->dropped_by_model())
        if (!s_.candidates.count(plan_->index[pos]) ||
            s_.candidates.at(plan_->index[pos]).state == Candidate::Compile::kNot) {
          ++never;
          s_.screened.insert(plan_->index[pos]);
        }
      if (s_.opt.screen && never > 0)
        s_.log << "; rule 4 judged " << never
               << " of them from their source alone and never compiled them";
      s_.log << ")\n";
    }
    if (!guide_) return;
    if (stream_->parked() > 0)
      s_.log << "gputune: model_guided: " << stream_->parked()
             << " times a compiled variant waited, its real prediction behind the best case of "
                "one not compiled yet, which was compiled first (it is measured in the order of "
                "real predictions)\n";
    if (!guide_->stop_reason().empty())
      s_.log << "gputune: model_guided stopped after " << steps_ << " of " << plan_->index.size()
             << " variants: " << guide_->stop_reason() << "\n";
    const std::size_t held =
        stream_->dropped_by_model().size() - stream_->left_out_excluded().size();
    if (held > 0) {
      s_.log << "gputune: model_guided: refits on this run's measurements readmitted "
             << guide_->readmitted().size() << " of the " << held
             << " variants the model rule held back (" << readmitted_measured_
             << " of them measured by the search)\n";
    }
    if (guide_->effects() && guide_->effects()->samples() > 0) {
      std::string misses = guide_->effects()->summary(6);
      s_.log << "gputune: model_guided: what the model misses per parameter value (measured / "
                "predicted against the average, learned from "
             << guide_->effects()->samples() << " measurements and used to order the rest): "
             << (misses.empty() ? "no value off by 5% or more" : misses);
      if (guide_->effects()->prior_values() > 0)
        s_.log << "; what earlier searches taught kept " << std::fixed << std::setprecision(2)
               << guide_->effects()->prior_trust() << std::defaultfloat
               << " of its weight (1: borne out here, 0: not)";
      s_.log << "\n";
    }
    if (guide_->unpredicted_effects() && guide_->unpredicted_measured() > 0) {
      std::string fast = guide_->unpredicted_effects()->summary(6);
      s_.log << "gputune: model_guided: " << guide_->unpredicted_measured()
             << " variants without a prediction were measured in the order their parameter "
                "values' measured times suggest (time against the average: "
             << (fast.empty() ? "no value off by 5% or more" : fast) << ")\n";
    }
  }

  std::size_t guided_total() const {
    return s_.guided ? std::min(budget_, plan_->index.size()) : plan_->index.size();
  }

  BestRow best_row(std::size_t index, double ms, bool provisional) {
    Candidate& c = s_.candidate(index);
    Trial& t = trial(c);
    BestRow b;
    b.context = ctx_.name, b.config_key = c.config.key(), b.params_json = c.config.json();
    b.time_ms = ms;
    if (t.launch && t.launch->flops) b.gflops = *t.launch->flops / (ms * 1e-3) / 1e9;
    if (t.launch && t.launch->bytes) b.gbps = *t.launch->bytes / (ms * 1e-3) / 1e9;
    b.registers = c.inspected.res.registers;
    b.occupancy = t.occupancy.occupancy;
    b.default_ms = default_ms_;
    b.provisional = provisional;
    return b;
  }

  RunState& s_;
  ModelWork& work_;
  const std::size_t k_;
  const ContextSpec& ctx_;
  std::int64_t ctx_id_ = 0;
  std::unique_ptr<Measurer> measurer_;
  bool need_reference_ = false;
  std::vector<std::vector<unsigned char>> reference_;
  const Plan* plan_ = nullptr;
  const ContextModel* model_ = nullptr;
  std::vector<double> best_case_;  // per plan position, with the current calibration (NaN: none)
  std::unique_ptr<Strategy> strategy_;
  ModelGuided* guide_ = nullptr;
  std::optional<SearchStream> stream_;
  std::size_t budget_ = std::numeric_limits<std::size_t>::max();
  std::unordered_map<std::size_t, Trial> trials_;  // by space index
  std::unordered_set<std::size_t> waiting_;        // space indices the stream waits for
  std::list<std::size_t> in_order_;  // positions proposed and not judged yet, in proposal order
  std::unordered_set<std::size_t> stored_;             // space indices with a row here
  std::unordered_set<std::size_t> judged_;             // space indices rules 1-3 judged
  std::unordered_map<std::string, long> binaries_;     // cubin + launch -> first kept (space index)
  std::unordered_set<std::string> measured_binaries_;  // cubin + launch measured here
  std::map<std::string, std::size_t> removed_;         // per rule 1-3
  std::map<std::int64_t, double> resumed_ms_;          // by variant id
  std::map<std::int64_t, std::int64_t> resumed_mid_;
  std::vector<std::pair<double, std::size_t>> correct_;  // (first-pass median, space index)
  std::optional<double> best_ms_, default_ms_;
  std::size_t failures_ = 0, steps_ = 0;
  std::size_t readmitted_measured_ = 0;  // readmitted variants the search measured
  bool exact_ = false;  // rule 4 exactly as over the whole plan (search_stream.h), judged in order
};

}  // namespace

void tune_context(RunState& s, ModelWork& work, std::size_t k) { ContextRun(s, work, k).run(); }

}  // namespace gputune::tuner
