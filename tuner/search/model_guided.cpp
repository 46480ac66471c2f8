// ModelGuided (tuner/search/strategy.h): the model's order, refined as variants compile, with the
// stop rule, rule 4's held-back variants and the portfolio for what the model cannot predict.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "tuner/search/portfolio.h"
#include "tuner/search/strategy.h"

namespace gputune::tuner {

namespace {

// How many spreads of the predictions' error the stop rule allows a variant whose parameter
// values' effects are not yet known.
constexpr double kStopZ = 2.0;

/// The sample standard deviation of at least two values.
double sample_sd(const std::vector<double>& x) {
  const double n = static_cast<double>(x.size());
  const double mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  return std::sqrt(ss / (n - 1));
}

/// A seeded pseudo-random key per index (splitmix64): the random order of unpredicted variants.
std::uint64_t shuffle_key(size_t i, std::uint64_t seed) {
  std::uint64_t z = static_cast<std::uint64_t>(i) + seed * 0x9e3779b97f4a7c15ULL + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

ModelGuided::ModelGuided(std::vector<pruner::ModelFeatures> features, pruner::DeviceRates rates,
                         pruner::Calibration start, std::vector<bool> excluded,
                         const std::vector<Config>& configs, std::uint64_t seed,
                         std::vector<int> best_case_blocks)
    : features_(std::move(features)),
      best_case_blocks_(std::move(best_case_blocks)),
      rates_(rates),
      calibration_(start),
      seed_(seed) {
  best_case_blocks_.resize(features_.size(), 0);
  state_.assign(features_.size(), 0);
  reported_.assign(features_.size(), 0);
  covering_.assign(features_.size(), 0);
  for (size_t i = 0; i < excluded.size() && i < state_.size(); ++i)
    if (excluded[i]) state_[i] = 2;
  predicted_.assign(features_.size(), -1);
  for (size_t i = 0; i < features_.size(); ++i) predicted_[i] = predict(i);
  order_by_ = predicted_;
  const bool with_configs = configs.size() == features_.size() && !configs.empty();
  if (with_configs) effects_.emplace(configs), shown_ = effects_->no_values();
  if (with_configs &&
      std::any_of(best_case_blocks_.begin(), best_case_blocks_.end(), [](int b) { return b > 0; }))
    occupancy_.emplace(configs);
  by_.assign(features_.size(), 0);
  if (with_configs) {
    // The portfolio beside the model: it proposes open variants (unpredicted ones only once the
    // model is done) as it would without a model: the model's order is neither one of its
    // searches nor its surrogate's feature (on the benchmark hub's convolution, where the model
    // tells slow from fast but not the fastest from the fast, that feature cost the portfolio a
    // median of 90 to 109 measurements to 5% over 5 seeds); explore_now() chooses between the two.
    PortfolioSettings ps;
    ps.arms &= ~(1u << 3);
    explorer_ = std::make_unique<Portfolio>(configs, seed, ps);
    // What rule 4 held back was judged by the model: while the model has not ranked the fastest
    // of what was measured well, that judgement is no reason to keep it from the portfolio.
    explorer_->set_filter([this](size_t i) {
      return (state_[i] == 0 || (state_[i] == 3 && !fast_trusted_)) &&
             (!unpredicted_only_ || predicted_[i] < 0);
    });
    for (size_t i = 0; i < state_.size(); ++i)
      if (state_[i] == 2) explorer_->exclude({i});
    coin_ = std::make_unique<std::mt19937_64>(seed * 0x2545f4914f6cdd1dULL + 7);
    return;
  }
  // Without configurations: the unpredicted variants in a seeded random order.
  for (size_t i = 0; i < state_.size(); ++i)
    if (state_[i] == 0 && predicted_[i] < 0) unpredicted_order_.push_back(i);
  std::sort(unpredicted_order_.begin(), unpredicted_order_.end(),
            [&](size_t a, size_t b) { return shuffle_key(a, seed_) < shuffle_key(b, seed_); });
}

ModelGuided::~ModelGuided() = default;

bool ModelGuided::explore_now() {
  // After the model's first proposals, the one whose proposals find the fastest proposes: the
  // model while it leads (the portfolio at least its floor), the portfolio while it does not
  // (the model its floor, to show it has found something again). A model that tells slow from
  // fast but not the fastest from the fast (the benchmark hub's convolution) would otherwise
  // hold the search: its proposals beat most of what was measured, never the best.
  if (!explorer_ || model_proposed_ < kModelFirst) return false;
  std::uniform_real_distribution<double> u(0, 1);
  return leads() ? u(*coin_) < kExploreFloor : u(*coin_) >= kModelFloor;
}

bool ModelGuided::leads() const {
  return (best_index_ >= by_.size() || by_[best_index_] != 1) &&
         (model_stale_ < kModelStale || fast_trusted_);
}

std::optional<size_t> ModelGuided::next_unpredicted() {
  if (explorer_) {
    unpredicted_only_ = true;
    const std::optional<size_t> pick = explorer_->next();
    unpredicted_only_ = false;
    if (pick) by_[*pick] = 1, ++explored_;
    return pick;
  }
  while (unpredicted_at_ < unpredicted_order_.size() &&
         state_[unpredicted_order_[unpredicted_at_]] != 0)
    ++unpredicted_at_;
  if (unpredicted_at_ == unpredicted_order_.size()) return std::nullopt;
  return unpredicted_order_[unpredicted_at_];
}

double ModelGuided::predict(size_t i) const {
  const pruner::Prediction p =
      best_case_blocks_[i] > 0
          ? pruner::best_case(features_[i], rates_, calibration_, best_case_blocks_[i])
          : pruner::predict(features_[i], rates_, calibration_);
  return p.ok ? p.ms : -1;
}

void ModelGuided::refine(size_t i, const pruner::ModelFeatures& features) {
  if (i >= features_.size()) return;
  const double best_case = best_case_blocks_[i] > 0 ? predict(i) : -1;
  features_[i] = features;
  best_case_blocks_[i] = 0;
  const bool had = predicted_[i] > 0;
  predicted_[i] = predict(i);
  // How far its registers and static shared memory put it above its best case: learned per
  // parameter value (the values that cost registers show it in every variant with them), and
  // used to order the variants not compiled yet.
  if (occupancy_ && best_case > 0 && predicted_[i] > 0) {
    refined_.emplace_back(i, std::log(predicted_[i] / best_case));
    occupancy_->fit(refined_);
    reorder();
  }
  // A variant ordered by its best case that has no prediction now (an infeasible occupancy) is
  // not proposed by the model any more; one with a prediction keeps its place in the order.
  if (had && predicted_[i] <= 0 && (state_[i] == 0 || state_[i] == 3)) {
    if (state_[i] == 3) --held_;
    state_[i] = 2;
  }
  order_by_[i] = order_of(i);
}

double ModelGuided::order_of(size_t i) const {
  if (predicted_[i] <= 0) return -1;
  if (!effects_) return predicted_[i];
  return predicted_[i] * std::exp(effects_->order_factor(i)) * occupancy_factor(i);
}

double ModelGuided::occupancy_factor(size_t i) const {
  if (!occupancy_ || best_case_blocks_[i] <= 0) return 1.0;
  return std::exp(std::max(0.0, occupancy_->log_factor(i)));
}

std::optional<double> ModelGuided::predicted_ms(size_t i) const {
  if (i >= predicted_.size() || predicted_[i] < 0) return std::nullopt;
  return predicted_[i];
}

double ModelGuided::foresight(size_t k) const {
  size_t i = measured_[k].first;
  if (predicted_[i] <= 0) return -1;
  return predicted_[i] * std::exp(effect_when_measured_[k]);
}

double ModelGuided::stop_bound(size_t i, double error) const {
  if (!effects_) return predicted_[i];
  return predicted_[i] *
         std::exp(effects_->log_factor_bound(i) - kStopZ * error * effects_->spread(i));
}

ModelGuided::Evidence ModelGuided::evidence() const {
  // The best measured time; the model's most optimistic error so far (min measured/predicted,
  // with the parameter effects learned before that measurement), never less than 25%; and the
  // spread of those errors (log), what a prediction made before learning missed by.
  Evidence e;
  std::vector<double> errors;
  for (size_t k = 0; k < measured_.size(); ++k) {
    double ms = measured_[k].second, p = foresight(k);
    if (e.best < 0 || ms < e.best) e.best = ms;
    if (p > 0) e.ratio = std::min(e.ratio, ms / p), errors.push_back(std::log(ms / p));
  }
  if (errors.size() >= 2) e.error = sample_sd(errors);
  return e;
}

namespace {

/// Whether predictions `p` rank the times `m` well: Spearman >= 0.5, and significant as well as
/// large: rho * sqrt(n - 1) >= 2 (about 2% one-sided for a model that ranks at random) needs
/// rho >= 0.89 over 6 measurements and rho >= 0.5 over 17; checked after every measurement, a
/// weaker test lets chance alone stop the search.
bool ranks_well(const std::vector<double>& p, const std::vector<double>& m) {
  const double rho = pruner::spearman(p, m);
  return rho >= 0.5 && rho * std::sqrt(static_cast<double>(p.size() - 1)) >= 2;
}

}  // namespace

void ModelGuided::judge_ranking() {
  // Each measurement against what the model predicted before it (the calibration aside).
  std::vector<std::pair<double, double>> mp;  // (measured, foresight)
  for (size_t k = 0; k < measured_.size(); ++k)
    if (const double f = foresight(k); f > 0) mp.emplace_back(measured_[k].second, f);
  std::vector<double> p, m;
  for (auto& [ms, f] : mp) m.push_back(ms), p.push_back(f);
  // Trust the model only once it has ranked what was measured well (over >= 6).
  trusted_ = mp.size() >= 6 && ranks_well(p, m);
  // The same test on the faster half (over >= 6 of >= 12): a model that only tells the slow
  // from the fast passes the first and fails this one.
  fast_trusted_ = false;
  if (mp.size() < 12) return;
  std::sort(mp.begin(), mp.end());
  p.clear(), m.clear();
  for (size_t k = 0; k < mp.size() / 2; ++k) m.push_back(mp[k].first), p.push_back(mp[k].second);
  fast_trusted_ = ranks_well(p, m);
}

bool ModelGuided::can_stop() const {
  // Only a model that ranks what was measured well, and whose order found the best so far: if
  // the portfolio beside it found something faster, the model does not know where the fastest
  // are, whatever it predicts of the rest.
  if (!trusted_ || (best_index_ < by_.size() && by_[best_index_] == 1)) return false;
  const Evidence e = evidence();
  for (size_t i = 0; i < state_.size(); ++i)
    if (state_[i] == 0 && predicted_[i] > 0 && stop_bound(i, e.error) * e.ratio < e.best)
      return false;
  return true;
}

std::optional<size_t> ModelGuided::next() {
  constexpr size_t none = static_cast<size_t>(-1);
  size_t first = none;  // the open predicted variant ordered first
  auto choose = [&] {
    first = none;
    for (size_t i = 0; i < state_.size(); ++i)
      if (state_[i] == 0 && predicted_[i] > 0 && (first == none || order_by_[i] < order_by_[first]))
        first = i;
  };
  choose();
  // Before the predicted variants run out or the search stops, the held ones are judged by a
  // model refitted on everything measured, not on what the last scheduled refit saw.
  if (stop_reason_.empty() && refitted_at_ < measured_.size() && held_ > 0 &&
      (first == none || can_stop())) {
    refit();
    refit_effects();
    choose();
  }
  std::optional<size_t> pick;
  if (first != none) pick = first;
  const bool any_predicted_open = pick.has_value();
  if (any_predicted_open && stop_reason_.empty() && can_stop()) {
    // The bound counts a value never tried as good as its parameter's best measured value: a
    // guess. Before the search stops, every value an open variant has is tried once (the best
    // ordered variant with one), so that the stop rests on what each value was measured to do.
    if (effects_) {
      std::optional<size_t> cover;
      for (size_t i = 0; i < state_.size(); ++i)
        if (state_[i] == 0 && predicted_[i] > 0 && effects_->has_untried_value(i) &&
            (!cover || order_by_[i] < order_by_[*cover]))
          cover = i;
      if (cover) {
        covering_[*cover] = 1;  // confirm() keeps it: the value, not the order, is why it runs
        by_[*cover] = 2;
        if (explorer_) explorer_->taken(*cover);
        return propose(*cover);
      }
    }
    const Evidence e = evidence();
    double fastest = INFINITY;  // the lowest prediction of an open variant, as can_stop saw it
    for (size_t i = 0; i < state_.size(); ++i)
      if (state_[i] == 0 && predicted_[i] > 0) fastest = std::min(fastest, stop_bound(i, e.error));
    std::ostringstream r;
    r.precision(4);
    r << "the best measured time " << e.best << " ms cannot be beaten: the fastest remaining "
      << "prediction is " << fastest << " ms";
    if (effects_)
      r << " (with what is not yet known of its parameter values' effects, at " << kStopZ
        << " times the predictions' spread of " << e.error << " in log)";
    r << ", and even " << 1 / e.ratio
      << "x faster (the model's most optimistic error so far, at least 1.25x) it would not win";
    stop_reason_ = r.str();
  }
  if (!stop_reason_.empty()) pick.reset();
  // Beside the model's order, the portfolio's proposals, as explore_now() draws (not again after a
  // compiled proposal went back for one the model orders before it: that is the model's turn).
  const bool again = put_back_;
  put_back_ = false;
  if (pick && !again && explore_now())
    if (const std::optional<size_t> alt = explorer_->next()) {
      by_[*alt] = 1, ++explored_;
      return propose(*alt);
    }
  if (pick) {
    pick = spread_start(*pick);
    by_[*pick] = 2;
    ++model_made_;
    if (explorer_) explorer_->taken(*pick);
    return propose(*pick);
  }
  pick = next_unpredicted();  // not judged by the model, so never cut
  if (pick) return propose(*pick);
  return std::nullopt;
}

size_t ModelGuided::spread_start(size_t first) {
  // The model's first proposals, while it has not ranked what was measured well: among the
  // variants it orders as alike (within kModelTie of the best-ordered; at most kModelSpread of
  // them), the one that shows the most parameter values no earlier proposal of the start did
  // (the best-ordered among equals). The model has no opinion between them, and space order
  // (what breaks the tie otherwise) puts the start in one corner of the space: a DRAM-bound
  // kernel's thousands of equal predictions all with the smallest block, say.
  if (!effects_ || trusted_ || !explorer_ || model_made_ >= kModelFirst) return first;
  size_t pick = first;
  // The best-ordered first. What was measured without being proposed (the default) is not
  // counted: when its outcome arrives depends on the stream's timing, and the order must not.
  if (model_made_ > 0) {
    std::vector<std::pair<double, size_t>> best;
    for (size_t i = 0; i < state_.size(); ++i)
      if (state_[i] == 0 && predicted_[i] > 0 && (i >= sample_only_.size() || !sample_only_[i]))
        best.emplace_back(order_by_[i], i);
    const size_t k = std::min(kModelSpread, best.size());
    std::partial_sort(best.begin(), best.begin() + static_cast<long>(k), best.end());
    size_t most = 0;
    for (size_t r = 0; r < k && best[r].first <= (1 + kModelTie) * best[0].first; ++r)
      if (const size_t n = effects_->unshown(best[r].second, shown_, false); n > most)
        most = n, pick = best[r].second;
  }
  effects_->unshown(pick, shown_, true);
  if (pick != first) covering_[pick] = 1;  // confirm() keeps it: its values are why it runs
  return pick;
}

size_t ModelGuided::propose(size_t i) {
  if (state_[i] == 3) --held_;  // the portfolio's, past a rule-4 judgement not to be trusted
  state_[i] = 1;  // its values count as tried once it is reported (measured or failed)
  return i;
}

bool ModelGuided::confirm(size_t i) {
  if (i >= state_.size() || state_[i] != 1 || reported_[i] || predicted_[i] <= 0 || covering_[i] ||
      by_[i] == 1)
    return true;
  // Past its first proposals, a model that has not ranked the fastest of what was measured well
  // is not worth a compile to order by: its proposal is measured as proposed.
  if (explorer_ && !fast_trusted_ && model_proposed_ >= kModelFirst) return true;
  // The open variants not compiled yet are ordered by their best case, a bound no compile can
  // lower: if one of them is ordered before i's compiled prediction, it could be faster, and it
  // goes first (i stays compiled and open, its prediction now its real one).
  for (size_t j = 0; j < state_.size(); ++j)
    if (state_[j] == 0 && predicted_[j] > 0 && best_case_blocks_[j] > 0 &&
        order_by_[j] < order_by_[i]) {
      state_[i] = 0;
      put_back_ = true;
      return false;
    }
  return true;
}

void ModelGuided::report(size_t index, std::optional<double> ms) {
  if (index >= state_.size()) return;
  // A measurement it did not propose (the pipeline measures the default first) is tried too.
  if (state_[index] == 3) --held_;
  if (state_[index] == 0 || state_[index] == 3) state_[index] = 1;
  if (effects_) effects_->note_tried(index);
  reported_[index] = 1;
  const bool timed = ms && *ms > 0;
  const bool new_best = timed && (best_index_ >= state_.size() || *ms < best_ms_);
  if (explorer_) {
    // Whether the model still leads: its proposals since its last new best (a new best of the
    // portfolio's takes the lead from it until the model's proposals beat that).
    if (by_[index] == 2) ++model_proposed_, model_stale_ = new_best ? 0 : model_stale_ + 1;
    explorer_->report(index, ms);
  }
  if (!timed) return;
  if (predicted_[index] < 0) ++unpredicted_measured_;
  if (new_best) best_index_ = index, best_ms_ = *ms;
  measured_.emplace_back(index, *ms);
  effect_when_measured_.push_back(effects_ ? effects_->log_factor(index) : 0.0);
  if (measured_.size() >= next_refit_) {
    refit();
    next_refit_ *= 2;
    refit_effects();
  } else if (measured_.size() % 4 == 0) {
    refit_effects();
  }
  if (predicted_[index] > 0) judge_ranking();
}

void ModelGuided::set_prior(const ParameterEffects::Prior& prior) {
  if (!effects_) return;
  effects_->set_prior(prior);
  reorder();
}

void ModelGuided::set_unpredicted_prior(const ParameterEffects::Prior& prior) {
  if (!explorer_ || !effects_) return;
  bool unpredicted = false;
  for (size_t i = 0; i < state_.size(); ++i) unpredicted = unpredicted || predicted_[i] < 0;
  if (!unpredicted) return;
  // The prior's picture of the times (its effects, a log factor per configuration) is the
  // portfolio's start and a feature of its surrogate, as a model's prediction would be.
  ParameterEffects times = *effects_;
  times.fit({});
  times.set_prior(prior);
  unpredicted_prior_values_ = times.prior_values();
  std::vector<double> guess(state_.size(), NAN);
  for (size_t i = 0; i < state_.size(); ++i)
    if (predicted_[i] < 0) guess[i] = std::exp(times.order_factor(i));
  explorer_->set_predictions(guess);
  explorer_->use_prediction_order(true);
}

void ModelGuided::refit_effects() {
  if (effects_) {
    std::vector<std::pair<size_t, double>> residuals;
    for (auto& [i, ms] : measured_)
      if (predicted_[i] > 0) residuals.emplace_back(i, std::log(ms / predicted_[i]));
    effects_->fit(residuals);
  }
  reorder();
  readmit();
}

void ModelGuided::reorder() {
  for (size_t i = 0; i < predicted_.size(); ++i) order_by_[i] = order_of(i);
}

void ModelGuided::refit() {
  std::vector<pruner::ModelFeatures> f;
  std::vector<double> m;
  for (auto& [i, ms] : measured_)
    if (features_[i].ok) f.push_back(features_[i]), m.push_back(ms);
  refitted_at_ = measured_.size();
  pruner::Calibration c = pruner::calibrate(f, m, rates_, calibration_);
  if (c.samples == 0) return;
  calibration_ = c;
  for (size_t i = 0; i < features_.size(); ++i) predicted_[i] = predict(i);
  reorder();
  judge_ranking();
}

void ModelGuided::hold_back(const std::vector<bool>& held, double margin) {
  std::vector<size_t> which;
  for (size_t i = 0; i < held.size() && i < state_.size(); ++i)
    if (held[i]) which.push_back(i);
  hold_back(which, margin);
}

void ModelGuided::hold_back(const std::vector<size_t>& which, double margin) {
  margin_ = margin;
  // A proposed variant is held only while it has not been reported: what was measured stays so.
  for (size_t i : which) {
    if (i >= state_.size() || (state_[i] != 0 && state_[i] != 1)) continue;
    if (state_[i] == 1 && reported_[i]) continue;
    if (predicted_[i] > 0)
      state_[i] = 3, ++held_;
    else
      state_[i] = 2;  // no prediction: nothing to readmit it by
  }
  std::erase_if(unpredicted_order_, [&](size_t i) { return state_[i] != 0; });
  unpredicted_at_ = std::min(unpredicted_at_, unpredicted_order_.size());
}

void ModelGuided::exclude(const std::vector<size_t>& which) {
  for (size_t i : which)
    if (i < state_.size() && (state_[i] == 0 || state_[i] == 3)) {
      if (state_[i] == 3) --held_;
      state_[i] = 2;
    }
  std::erase_if(unpredicted_order_, [&](size_t i) { return state_[i] != 0; });
  unpredicted_at_ = std::min(unpredicted_at_, unpredicted_order_.size());
}

void ModelGuided::readmit() {
  // The model rule as the pruner applies it (prediction > margin x the best prediction among
  // what the other rules kept), with the refitted calibration and what the measurements taught
  // about each parameter value (the learned effects, not their optimistic bound).
  if (held_ == 0) return;
  auto now = [&](size_t i) {
    return predicted_[i] * (effects_ ? std::exp(effects_->log_factor(i)) : 1.0);
  };
  double best = INFINITY;
  for (size_t i = 0; i < state_.size(); ++i)
    if (state_[i] != 2 && predicted_[i] > 0) best = std::min(best, now(i));
  for (size_t i = 0; i < state_.size(); ++i)
    if (state_[i] == 3 && predicted_[i] > 0 && now(i) <= margin_ * best) {
      state_[i] = 0, --held_;
      readmitted_.push_back(i);
    }
}

std::vector<size_t> ModelGuided::unvisited() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < state_.size(); ++i)
    if (state_[i] == 0) out.push_back(i);
  return out;
}

}  // namespace gputune::tuner
