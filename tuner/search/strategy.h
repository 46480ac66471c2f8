/** \file tuner/search/strategy.h
 * Owns: search strategies, which choose the order in which configurations of a space are tried,
 * and the budget (configuration count, fraction, seconds) that stops them. Strategies see only the
 * space size and the outcomes so far, never the GPU, so they can be replayed from stored data.
 * Runs inside: the search stream (search/search_stream.h), which asks it for the next
 * configuration and reports each outcome back; in `run` (run/tune_context.cpp) and in `replay`
 * (tools/replay_search.cpp) alike.
 * Must not: compile, launch or touch the database. */
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pruner/model.h"
#include "variants/job.h"
#include "variants/space.h"

namespace gputune::tuner {

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// Next configuration index to try, or nullopt when the strategy has nothing left.
  virtual std::optional<size_t> next() = 0;
  /// Feedback: the time of a tried configuration (nullopt when it failed).
  virtual void report(size_t /*index*/, std::optional<double> /*ms*/) {}
  virtual std::string name() const = 0;
};

/// Every configuration in space order.
std::unique_ptr<Strategy> make_brute_force(size_t space_size);
/// These indices, in this order (a plan ordered by something else than the space).
std::unique_ptr<Strategy> make_list(std::vector<size_t> order);
/// A uniformly random permutation (seeded: the same seed gives the same order).
std::unique_ptr<Strategy> make_random(size_t space_size, std::uint64_t seed);
/// What the model misses, learned from what was measured: log(measured / predicted) fitted as an
/// intercept plus one effect per value of each tuning parameter (an additive model in log space,
/// by backfitting with a ridge penalty of one measurement, so a value measured once moves half as
/// far as its residual says). A parameter whose cost the model gets wrong (a caching choice it
/// mis-costs, a block shape whose latency it does not see) shows up as an effect shared by every
/// variant with that value; effects add up, so a combination not measured yet is predicted from
/// its values' effects. A value not measured yet has no effect (the model's word stands).
class ParameterEffects {
 public:
  /// What earlier measurements taught: the log effect of parameter values, by the parameter's
  /// name and the value's text (Value::str()).
  using Prior = std::map<std::string, std::map<std::string, double>>;
  /// One measurement of another search (an earlier context or run): its parameter values as text,
  /// log(measured / predicted), and the search it belongs to (residuals are centred per search, so
  /// that a context the model misses as a whole teaches nothing about the parameters).
  struct Past {
    std::string search;
    std::map<std::string, std::string> values;
    double log_residual = 0;
  };

  /// The configurations in space order (all with the same parameters).
  explicit ParameterEffects(const std::vector<Config>& configs);
  /// Fitted to measurements of other searches; learned() is then the prior they make.
  static ParameterEffects from_past(const std::vector<Past>& past);
  /// Fits the effects to (configuration index, log(measured / predicted)) pairs.
  void fit(const std::vector<std::pair<size_t, double>>& residuals);
  /// Sum of configuration i's effects, in log space (0 before any fit): what to multiply its
  /// prediction by is exp(log_factor(i)).
  double log_factor(size_t i) const;
  /// As log_factor, but a value not measured yet counts as good as the best measured value of
  /// its parameter (and never worse than 0): what the stop rule allows for.
  double log_factor_bound(size_t i) const;
  /// How little is known about configuration i's effects, from 1 (none of its values measured)
  /// towards 0 (each measured often): sqrt(mean over parameters of 1 / (measurements of its value
  /// + the ridge)). Times the error of a prediction made before any learning, it is about the
  /// error left in prediction times exp(log_factor(i)).
  double spread(size_t i) const;
  /// Starts from what other searches learned: in order_factor (never in log_factor, the
  /// bound or the spread, so the stop rule judges this search by its own measurements alone),
  /// a value's prior effect counts as one measurement of it, so a value measured c times here
  /// keeps 1/(c + 1) of it, times prior_trust(). Values and parameters not in this space are
  /// ignored.
  void set_prior(const Prior& prior);
  /// The effects of the values the last fit measured, with what is left of the prior on values
  /// this search has not measured: what this search teaches the next one.
  Prior learned() const;
  /// Values of this space that the prior speaks for.
  size_t prior_values() const;
  /// How much of the prior the order keeps, from 1 (before any measurement, or borne out) to 0
  /// (this search's measurements are unrelated to it, or contradict it): the slope of the
  /// residuals on the prior's effects, pulled towards 1 by 8 pseudo-measurements. A prior from
  /// another problem size that does not hold here stops steering the search.
  double prior_trust() const { return prior_trust_; }
  /// log_factor with the prior: what the search orders by.
  double order_factor(size_t i) const;
  /// Records that configuration i was tried (measured or failed).
  void note_tried(size_t i);
  /// Whether configuration i has a parameter value no configuration tried so far has.
  bool has_untried_value(size_t i) const;
  /// Per parameter and value, none marked: the shape `unshown` takes.
  std::vector<std::vector<char>> no_values() const;
  /// How many of configuration i's values `shown` has not marked; with `mark`, marks them.
  size_t unshown(size_t i, std::vector<std::vector<char>>& shown, bool mark) const;
  /// Measurements the last fit used.
  size_t samples() const { return samples_; }
  /// The `n` largest effects of measured values, largest first: "cache_in=readonly 0.71x,
  /// block_size_x=32 1.20x" (empty before a fit or when none reaches 5%).
  std::string summary(size_t n) const;

 private:
  size_t params() const { return names_.size(); }
  std::vector<std::string> names_;                // parameters with at least two values
  std::vector<std::vector<std::string>> values_;  // per parameter: its distinct values
  std::vector<std::uint32_t> of_;                 // config i, parameter p: of_[i * params() + p]
  std::vector<std::vector<double>> beta_;         // per parameter and value: the effect
  std::vector<std::vector<int>> count_;           // per parameter and value: measurements
  std::vector<double> unmeasured_;  // per parameter: min(0, best measured effect), for the bound
  std::vector<std::vector<double>> prior_;  // per parameter and value: the prior effect (0: none)
  std::vector<std::vector<char>> has_prior_;
  double prior_trust_ = 1;
  std::vector<std::vector<char>> tried_;  // per parameter and value: some variant with it tried
  size_t samples_ = 0;
  ParameterEffects() = default;
  /// What is left of the prior on parameter p's value v: a value measured c times keeps
  /// 1/(c + 1) of it, times prior_trust().
  double prior_left(size_t p, size_t v) const;
  void index(const std::vector<std::string>& all, size_t n,
             const std::function<std::string(size_t, size_t)>& value_of);
};

/// Measures in order of predicted time (the pruner's model); refits the model's calibration with
/// what was measured (after 4, 8, 16, ... measurements) and re-orders what is left; given the
/// configurations, it also learns each parameter value's effect the model misses
/// (ParameterEffects, refitted after every 4 measurements) and orders by the prediction times
/// that effect, so among variants the model cannot tell apart (a DRAM-bound stencil's thousands
/// of equal predictions) the measurements decide. Once the model has ranked the measured ones
/// well (Spearman >= 0.5 and Spearman x sqrt(n - 1) >= 2) it stops when the best measured time
/// cannot be beaten by any remaining prediction (with the learned effects, less two spreads of the
/// predictions' error times what is not yet known of the variant's values: ParameterEffects::
/// spread), even allowing for the most optimistic error shown so far (min measured/predicted, and
/// at least 25%); all of them judge each measurement against the effects learned before it, never
/// against a fit that includes it. Before it stops, each parameter value of an open variant that
/// no tried variant had is tried once, so the stop never rests on a guess.
///
/// Given the configurations, the portfolio search (tuner/search/portfolio.h) searches beside the
/// model: after the model's first kModelFirst proposals measured (which, while the model is not
/// trusted, break its ties by the parameter values they show: spread_start), the model proposes
/// while it leads (the fastest so far is not the portfolio's, and one of its last kModelStale
/// proposals was a new best or it ranks the faster half of what was measured well), the portfolio
/// at least kExploreFloor of the time; while it does not, the portfolio proposes as it would alone
/// and the model kModelFloor of the time, to show it has found something again. The stop rule waits
/// while the fastest so far is one the portfolio found. So a model that is wrong for this kernel,
/// or tells the slow from the fast but not the fastest from the fast, cannot hold the search, or
/// stop it, while a right one keeps it. Variants without a prediction (a kernel the analysis could
/// not read) are not judged by the model: they are the portfolio's, never cut (without the
/// configurations: a seeded random order after the predicted ones); a search without any prediction
/// is the portfolio search. What earlier searches measured (set_unpredicted_prior) starts the
/// portfolio with their order. What the model rule pruned under the starting calibration is held
/// back (hold_back), not lost: a refitted model that predicts a held variant within the margin
/// readmits it.
class Portfolio;

class ModelGuided : public Strategy {
 public:
  /// The model's proposals measured before the portfolio proposes, and the portfolio's share at
  /// least while the model leads.
  static constexpr size_t kModelFirst = 8;
  static constexpr double kExploreFloor = 0.125;
  /// While the model does not lead (see leads()), its share of the proposals.
  static constexpr double kModelFloor = 0.0625;
  /// The model leads while one of its last kModelStale measured proposals was a new best.
  static constexpr size_t kModelStale = 8;
  /// While the model is not trusted, each of its first kModelFirst proposals after the first is,
  /// among the open variants it orders within kModelTie of the best-ordered (kModelSpread of them
  /// at most), the one that shows the most parameter values its earlier proposals did not.
  static constexpr size_t kModelSpread = 16;
  static constexpr double kModelTie = 1e-3;
  /// `excluded[i]`: never proposed (pruned by a rule); may be empty.
  /// `configs`: the space's configurations, for the learned parameter effects (empty: ordered
  /// by the model alone). `seed`: the random order of unpredicted variants before any of them
  /// is measured (and of ties after). `best_case_blocks[i]` > 0: variant i is not compiled yet,
  /// so its occupancy is not known; it is predicted by its best case (pruner::best_case at up to
  /// that many blocks per SM: what its thread count and dynamic shared memory allow) until
  /// refine() gives its real features. Empty or 0: features[i] are final.
  ModelGuided(std::vector<pruner::ModelFeatures> features, pruner::DeviceRates rates,
              pruner::Calibration start, std::vector<bool> excluded = {},
              const std::vector<Config>& configs = {}, std::uint64_t seed = 0,
              std::vector<int> best_case_blocks = {});
  ~ModelGuided() override;
  std::optional<size_t> next() override;
  /// Also for a configuration it did not propose (the default, measured first): it is never
  /// proposed afterwards, and its values count as tried.
  void report(size_t index, std::optional<double> ms) override;
  std::string name() const override { return "model_guided"; }
  /// Why it stopped before trying everything (empty while it has not).
  const std::string& stop_reason() const { return stop_reason_; }
  const pruner::Calibration& calibration() const { return calibration_; }
  std::optional<double> predicted_ms(size_t i) const;
  /// Indices never proposed (not excluded), for a regret sample.
  std::vector<size_t> unvisited() const;
  /// The parameter effects learned so far (nullptr without configurations).
  const ParameterEffects* effects() const { return effects_ ? &*effects_ : nullptr; }
  /// The portfolio search beside the model (nullptr without configurations).
  const Portfolio* explorer() const { return explorer_.get(); }
  /// Proposals the portfolio made so far (the rest are the model's).
  size_t explored() const { return explored_; }
  /// Whether the portfolio (not the model's order) proposed variant i.
  bool explored(size_t i) const { return i < by_.size() && by_[i] == 1; }
  /// Whether rule 4 may judge variant i by its real prediction once compiled: not the
  /// portfolio's proposal while the model has not ranked the fastest measured well (the portfolio
  /// proposed it because the model's order is not to be trusted yet, and a compile rule 4 then
  /// drops is one spent for nothing).
  bool judged_by_model(size_t i) const { return !(explored(i) && !fast_trusted_); }
  /// Variants without a prediction measured with a time so far (those measured before the search
  /// began, as a resumed run's, included).
  size_t unpredicted_measured() const { return unpredicted_measured_; }
  /// Values of this space that set_unpredicted_prior's prior spoke for.
  size_t unpredicted_prior_values() const { return unpredicted_prior_values_; }
  /// Orders the search by what other searches learned (ParameterEffects::set_prior) until its
  /// own measurements take over; the stop rule is not changed. Without configurations, ignored.
  void set_prior(const ParameterEffects::Prior& prior);
  /// As set_prior, for the variants without a prediction: a prior learned from earlier searches'
  /// times (each search centred on its own mean) is the portfolio's first order and a feature of
  /// its surrogate (as a model's prediction would be). Without such variants or configurations,
  /// ignored.
  void set_unpredicted_prior(const ParameterEffects::Prior& prior);
  /// `held[i]`: pruned by the model rule (predicted slower than `margin` x the best prediction)
  /// under the calibration it started with. Held variants are not proposed; each refit of the
  /// calibration or of the learned parameter effects (the scheduled ones, and one on everything
  /// measured before the search stops or runs out of open variants) re-applies the rule with
  /// the refitted model times the learned effects, and readmits, to be proposed like the others,
  /// each held variant now predicted within `margin` x the best prediction. A held variant without
  /// a prediction is excluded. May be called again as the search goes (a streaming run learns
  /// what rule 4 drops as variants compile): it holds back open variants, and proposed ones not
  /// reported yet (rule 4 dropped them on the prediction their compile gave).
  void hold_back(const std::vector<bool>& held, double margin);
  /// The same for a list of indices.
  void hold_back(const std::vector<size_t>& which, double margin);
  /// Never proposes these (open or held ones; what was proposed stays so).
  void exclude(const std::vector<size_t>& which);
  /// `which[i]`: in the space only for the regret sample (drawn from what the model's search of
  /// a large space left out, to be timed as that). The start's spread over tied predictions
  /// (spread_start) does not pick them: measured by the search, they would not sample what it
  /// left out.
  void sample_only(std::vector<char> which) { sample_only_ = std::move(which); }
  /// Proposed variant i was compiled (refine() gave its real prediction): true when it is still
  /// to be measured now, false when an open variant not compiled yet is ordered before it by
  /// its best case (a bound its compile cannot beat): i goes back to the open variants, compiled,
  /// and that one is proposed first. So the variants are measured in the order of their real
  /// predictions, as if everything had been compiled, while only what could come first is.
  /// A variant proposed to try a parameter value before the search stops is always measured
  /// (putting it back would propose it again: the stream would never end).
  bool confirm(size_t i);
  /// Of compiled proposals waiting for the GPU, which to measure first (lower first): the
  /// portfolio's proposals and the parameter values tried before a stop first (they were asked
  /// for as such), then the model's by its order.
  double measure_order(size_t i) const {
    if (i >= order_by_.size() || by_[i] == 1 || covering_[i]) return -INFINITY;
    return order_by_[i] > 0 ? order_by_[i] : INFINITY;
  }
  /// Whether variant i is held back now.
  bool held_back(size_t i) const { return i < state_.size() && state_[i] == 3; }
  /// Variant i was compiled: `features` with its real occupancy replace the best-case ones it was
  /// ordered by (see the constructor's `best_case_blocks`), for its prediction, the calibration
  /// fitted on it and the readmission of held variants.
  void refine(size_t i, const pruner::ModelFeatures& features);
  /// The held variants readmitted so far, in the order they were.
  const std::vector<size_t>& readmitted() const { return readmitted_; }
  /// Variants still held back.
  size_t held() const { return held_; }

 private:
  void refit();
  /// Readmits the held variants the current calibration and learned effects predict within
  /// margin_ of the best (after every refit of either, and before the search stops or runs out).
  void readmit();
  void refit_effects();
  void reorder();
  /// Marks configuration i proposed (its values tried) and returns it.
  size_t propose(size_t i);
  /// The model's proposal instead of `first` at the start (see the .cpp).
  size_t spread_start(size_t first);
  /// The open unpredicted variant to try next (nullopt: none left).
  std::optional<size_t> next_unpredicted();
  /// Whether the next proposal is the portfolio's rather than the model's.
  bool explore_now();
  /// The model leads: the fastest so far is not the portfolio's, and one of the model's last
  /// kModelStale reported proposals was a new best or it ranks the faster half well.
  bool leads() const;
  bool can_stop() const;
  /// Sets trusted_ (the model has ranked what was measured well enough to be trusted: the stop
  /// rule's test) and fast_trusted_ (the same test on the faster half, 12 measurements at least).
  void judge_ranking();
  struct Evidence {
    double best = -1;    // the best measured time
    double ratio = 0.8;  // min measured / foresight, at most 0.8
    double error = 0;    // standard deviation of log(measured / foresight)
  };
  Evidence evidence() const;
  /// What the stop rule allows an open variant: its prediction times the effects' bound, less
  /// kStopZ times `error` times what is not known of its values' effects (spread).
  double stop_bound(size_t i, double error) const;
  /// Measurement k's prediction: the current calibration, the effects learned before it.
  double foresight(size_t k) const;
  /// Variant i's prediction under the current calibration (its best case while not compiled);
  /// < 0: none.
  double predict(size_t i) const;
  /// For a variant not compiled yet: how far the compiled ones with its parameter values came
  /// out above their best case (registers and static shared memory cost occupancy), as a factor
  /// of at least 1 for its order; 1 once it is compiled.
  double occupancy_factor(size_t i) const;
  /// What next() orders variant i by: its prediction times the learned effects (and, not
  /// compiled yet, the occupancy factor); -1 without a prediction.
  double order_of(size_t i) const;
  std::optional<ParameterEffects> occupancy_;       // log(real / best case), per value
  std::vector<std::pair<size_t, double>> refined_;  // what occupancy_ is fitted to
  std::vector<pruner::ModelFeatures> features_;
  std::vector<int> best_case_blocks_;  // per variant: > 0 while predicted by its best case
  pruner::DeviceRates rates_;
  pruner::Calibration calibration_;
  std::vector<double> predicted_;  // < 0: none
  std::vector<double> order_by_;   // predicted_ times the learned effects: the order of next()
  std::optional<ParameterEffects> effects_;
  std::vector<char> state_;     // 0 open, 1 proposed, 2 excluded, 3 held (readmittable)
  std::vector<char> reported_;  // per variant: report() was called for it
  std::vector<char> covering_;  // proposed to try a parameter value before the search stops
  std::vector<std::vector<char>> shown_;  // per parameter and value: proposed by the start
  std::vector<char> sample_only_;         // per variant: the regret sample's, not the spread's
  double margin_ = 0;                     // of the held variants' model rule
  size_t held_ = 0;                       // variants in state 3
  std::vector<size_t> readmitted_;
  std::vector<std::pair<size_t, double>> measured_;
  /// Per measurement: the learned effect (log factor) of its variant before it was measured, so
  /// the stop rule judges the effects by what they predicted, not by what they were fitted to.
  std::vector<double> effect_when_measured_;
  std::size_t next_refit_ = 4;
  std::size_t refitted_at_ = 0;  // measurements the last refit saw
  std::string stop_reason_;
  // The portfolio beside the model; what it may propose now (any open variant, or only the
  // unpredicted ones once the model has stopped or has nothing left); per variant: proposed by it
  // (1) or by the model (2); the coin explore_now() draws between the two.
  std::unique_ptr<Portfolio> explorer_;
  bool unpredicted_only_ = false;
  bool put_back_ = false;      ///< confirm() put the last proposal back
  bool trusted_ = false;       ///< judge_ranking() after the last measurement: all of it
  bool fast_trusted_ = false;  ///< and its faster half
  size_t best_index_ = static_cast<size_t>(-1);  ///< the fastest measured so far
  double best_ms_ = 0;
  std::vector<char> by_;
  std::unique_ptr<std::mt19937_64> coin_;
  size_t explored_ = 0, model_proposed_ = 0, unpredicted_prior_values_ = 0;
  size_t model_made_ = 0;   ///< the model's proposals so far (model_proposed_: those reported)
  size_t model_stale_ = 0;  ///< the model's reported proposals since its last new best
  size_t unpredicted_measured_ = 0;
  // Without configurations: the unpredicted variants in a seeded random order.
  std::vector<size_t> unpredicted_order_;
  size_t unpredicted_at_ = 0;
  std::uint64_t seed_ = 0;
};

/// By the job's strategy name ("brute_force", "random"). Throws std::invalid_argument.
std::unique_ptr<Strategy> make_strategy(const std::string& name, size_t space_size,
                                        std::uint64_t seed);

/// How many configurations the budget allows at most (count and fraction; seconds are checked while
/// running).
size_t budget_configurations(const Budget& b, size_t space_size);

/// The first `budget_configurations` indices the strategy proposes (strategies without feedback).
std::vector<size_t> plan(Strategy& s, size_t limit);

}  // namespace gputune::tuner
