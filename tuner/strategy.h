/** \file tuner/strategy.h
 * Owns: search strategies, which choose the order in which configurations of a space are tried,
 * and the budget (configuration count, fraction, seconds) that stops them. Strategies see only the
 * space size and the outcomes so far, never the GPU, so they can be replayed from stored data.
 * Must not: compile, launch or touch the database. */
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pruner/model.h"
#include "variants/job.h"

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
/// A uniformly random permutation (seeded: the same seed gives the same order).
std::unique_ptr<Strategy> make_random(size_t space_size, std::uint64_t seed);
/// Measures in order of predicted time (the pruner's model); refits the model's calibration with
/// what was measured (after 4, 8, 16, ... measurements) and re-orders what is left; once it has
/// ranked the measured ones well (Spearman >= 0.5 over at least 6) it stops when the best measured
/// time cannot be beaten by any remaining prediction, even allowing for the most optimistic error
/// the model has shown so far (min measured/predicted, and at least 25%). Variants without a
/// prediction are not judged by the model: they come after the predicted ones and are never cut.
class ModelGuided : public Strategy {
 public:
  /// `excluded[i]`: never proposed (pruned by a rule); may be empty.
  ModelGuided(std::vector<pruner::ModelFeatures> features, pruner::DeviceRates rates,
              pruner::Calibration start, std::vector<bool> excluded = {});
  std::optional<size_t> next() override;
  void report(size_t index, std::optional<double> ms) override;
  std::string name() const override { return "model_guided"; }
  /// Why it stopped before trying everything (empty while it has not).
  const std::string& stop_reason() const { return stop_reason_; }
  const pruner::Calibration& calibration() const { return calibration_; }
  std::optional<double> predicted_ms(size_t i) const;
  /// Indices never proposed (not excluded), for a regret sample.
  std::vector<size_t> unvisited() const;

 private:
  void refit();
  bool can_stop() const;
  std::pair<double, double> best_and_ratio() const;
  std::vector<pruner::ModelFeatures> features_;
  pruner::DeviceRates rates_;
  pruner::Calibration calibration_;
  std::vector<double> predicted_;  // < 0: none
  std::vector<char> state_;        // 0 open, 1 proposed, 2 excluded
  std::vector<std::pair<size_t, double>> measured_;
  std::size_t next_refit_ = 4;
  std::string stop_reason_;
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
