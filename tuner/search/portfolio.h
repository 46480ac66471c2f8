/** \file tuner/search/portfolio.h
 * Owns: the portfolio search (`--strategy portfolio`), gputune's search for a space whose
 * variants the model cannot predict, and the searcher model_guided hands its unpredicted variants
 * to: four searches of the valid space, each proposing one configuration at a time.
 *   - surrogate: a random forest (tuner/search/forest.h) fitted to log(measured time) over the
 *     parameters' values (failures counted as slower than the slowest), proposing the open
 *     configuration of highest expected improvement over the best;
 *   - local: a neighbour of one of the fastest measured configurations (one or two parameters
 *     moved to an adjacent or any value), the move a GPU programmer makes by hand;
 *   - recombination: each parameter's value from one of the fastest few (a genetic search's
 *     crossover), now and then one moved to an adjacent value;
 *   - random: a uniformly random open configuration.
 * It starts with a few configurations that cover the parameters' values; then each proposal comes
 * from a search drawn by fixed shares (PortfolioSettings::Shares). The shares are fixed, not
 * earned: a bandit that credits each search with how its proposals rank among what was measured
 * (as ATF's AUCBandit does) was fooled by plateaus and by deceptive basins on spaces held out from
 * its settings: a local search that lands next to the best beats most of what was measured and
 * never the optimum, and held 280 of 620 proposals on the benchmark hub's convolution on a W6600
 * and left Kernel Tuner's pnpoly on an RTX 3090 worse than random search (bench/results/
 * search-shares-vm-2026-12-07.md). Fixed shares keep every search in play: a wrong picture (a
 * surrogate fitted to a few points, a local optimum) holds at most its share. Where the model
 * predicts or earlier searches left a prior (set_predictions), its order is a fifth search with a
 * share of its own and the prediction one more feature of the forest.
 * Proposals may be asked for before earlier ones are reported (the stream's look-ahead).
 * Must not: compile, launch or touch the database. */
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "tuner/search/forest.h"
#include "tuner/search/strategy.h"
#include "variants/space.h"

namespace gputune::tuner {

/// The portfolio's settings.
struct PortfolioSettings {
  /// Proposals before the shares apply (covering the values the space holds); 0: two per
  /// parameter that has two values or more, from 8 to 24.
  std::size_t initial = 0;
  std::size_t pool = 4096;     ///< configurations the surrogate scores per refit (at most)
  double refit_growth = 0.08;  ///< refit the forest when measurements grow by this fraction
  std::size_t elites = 32;     ///< fastest configurations the local search starts from
  Forest::Options forest{};
  /// The surrogate's choice: 0 the highest expected improvement, 1 Thompson sampling (the
  /// fastest by one tree drawn at random per proposal).
  int acquisition = 0;
  /// The first proposals cover the parameters' values (false: uniformly random).
  bool covering_start = true;
  /// Mixed into the seed: other random choices for the same seed (for a benchmark's variance).
  std::uint64_t salt = 0;
  /// Searches on: bit 0 surrogate, 1 local, 2 random, 3 model order (with predictions),
  /// 4 recombination of the fastest.
  unsigned arms = 0x1F;
  /// Each search's share of the proposals after the start (among those on; they need not add up
  /// to 1). Chosen on the five spaces of issue #61 and five held out from the old bandit's
  /// settings, then checked on sixteen others (bench/results/search-shares-vm-2026-12-07.md).
  struct Shares {
    double surrogate = 0.25, local = 0.25, random = 0.15, recombination = 0.35;
    /// The model's order, where there are predictions: this share of all proposals, the others
    /// sharing the rest as above.
    double model = 0.25;
  } shares;
};

class Portfolio : public Strategy {
 public:
  using Options = PortfolioSettings;

  /// `configs`: the space (or the plan), all with the same parameters. `seed`: the random choices.
  Portfolio(const std::vector<Config>& configs, std::uint64_t seed)
      : Portfolio(configs, seed, Options{}) {}
  Portfolio(const std::vector<Config>& configs, std::uint64_t seed, Options options);

  std::optional<std::size_t> next() override;
  /// Also for a configuration it did not propose (the default, measured first).
  void report(std::size_t index, std::optional<double> ms) override;
  std::string name() const override { return "portfolio"; }

  /// Never proposes these.
  void exclude(const std::vector<std::size_t>& which);
  /// Proposes only configurations `allowed` says yes to (besides its own bookkeeping); a search
  /// that owns this one (model_guided) says which of its variants are open to it. Empty: all.
  void set_filter(std::function<bool(std::size_t)> allowed) { allowed_ = std::move(allowed); }
  /// Another search proposed configuration i: it is not proposed again here.
  void taken(std::size_t i);
  /// The model's predicted times (ms; NaN or <= 0: none), for the forest and the model's order.
  void set_predictions(const std::vector<double>& predicted_ms);
  /// Whether the order of the predictions is one of its searches (the fourth; without it they are
  /// only the surrogate's feature: model_guided gives its portfolio no model predictions, only
  /// the times a prior from earlier searches guesses for the unpredicted variants).
  void use_prediction_order(bool on) {
    o_.arms = on ? o_.arms | (1u << kModel) : o_.arms & ~(1u << kModel);
  }
  /// Open configurations left (neither proposed nor excluded).
  std::size_t open() const { return open_.size(); }
  /// Proposals per search so far: surrogate, local, random, model, recombination.
  const std::vector<std::size_t>& proposals_by_search() const { return uses_; }
  /// Which search proposed configuration i (-1: none, the default or not proposed).
  int proposed_by(std::size_t i) const { return i < by_.size() ? by_[i] : -1; }
  static const char* search_name(int arm);

 private:
  enum Arm { kSurrogate = 0, kLocal = 1, kRandom = 2, kModel = 3, kRecombine = 4, kArms = 5 };
  std::size_t params() const { return ranks_.size(); }
  const std::uint32_t* row(std::size_t i) const {
    return params() == 0 ? nullptr : &x_[i * params()];  // a space without parameters has no rows
  }
  std::uint64_t hash(const std::uint32_t* r) const;
  long find(const std::vector<std::uint32_t>& r) const;
  void close(std::size_t i);  ///< no longer open
  int choose_arm();
  bool allowed(std::size_t i) const { return state_[i] == 0 && (!allowed_ || allowed_(i)); }
  std::optional<std::size_t> propose_random();
  std::optional<std::size_t> propose_local();
  std::optional<std::size_t> propose_surrogate();
  std::optional<std::size_t> propose_model();
  std::optional<std::size_t> propose_recombined();
  /// The first proposals: the one that shows the most parameter values not seen yet (then the
  /// least seen), among a random sample of the open ones: a space-filling start.
  std::optional<std::size_t> propose_covering();
  void cover(std::size_t i);
  void refit();
  /// The forest expects configuration i to fail (a failure's value, more than halfway).
  bool likely_fails(std::size_t i) const;
  /// The forest's features of configuration i (its ranks, and the prediction where there is one).
  void features(std::size_t i, std::uint32_t* out) const;

  Options o_;
  std::mt19937_64 rng_;
  std::vector<std::uint32_t> ranks_;  ///< per parameter with two or more values: how many
  std::vector<std::uint32_t> x_;      ///< per configuration and parameter: the value's rank
  std::unordered_multimap<std::uint64_t, std::uint32_t> at_;  ///< hash of ranks -> index
  std::vector<char> state_;           ///< 0 open, 1 proposed, 2 reported, 3 excluded
  std::vector<std::size_t> open_;     ///< the open configurations (unordered)
  std::vector<std::size_t> open_at_;  ///< per configuration: its place in open_
  std::vector<int> by_;               ///< per configuration: the search that proposed it
  // Measurements: (index, log time; NaN: failed), and the fastest so far, fastest first.
  std::vector<std::pair<std::size_t, double>> measured_;
  std::vector<std::pair<double, std::size_t>> elites_;
  std::vector<std::vector<std::uint32_t>> seen_;  ///< per parameter and rank: proposed or measured
  std::vector<std::vector<std::size_t>> frequency_;  ///< per parameter and rank: configurations
  std::vector<std::size_t> uses_;                    ///< per search: its proposals
  std::size_t proposals_ = 0;
  std::function<bool(std::size_t)> allowed_;
  // Surrogate: the forest, the measurements it saw, and the pool ranked by expected improvement.
  std::optional<Forest> forest_;
  std::size_t fitted_at_ = 0;
  double fail_line_ = INFINITY;
  std::vector<std::size_t> ranked_;
  std::vector<std::size_t> pool_;  ///< what the surrogate chooses from (Thompson sampling)
  std::size_t ranked_at_ = 0;
  // The model: predicted log times (NaN: none) as a feature's rank, and its order.
  std::vector<double> predicted_;
  std::vector<std::uint32_t> predicted_rank_;
  std::uint32_t predicted_ranks_ = 0;
  std::vector<std::size_t> model_order_;
  std::size_t model_at_ = 0;
};

}  // namespace gputune::tuner
