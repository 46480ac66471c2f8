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
/// By the job's strategy name ("brute_force", "random"). Throws std::invalid_argument.
std::unique_ptr<Strategy> make_strategy(const std::string& name, size_t space_size,
                                        std::uint64_t seed);

/// How many configurations the budget allows at most (count and fraction; seconds are checked while
/// running).
size_t budget_configurations(const Budget& b, size_t space_size);

/// The first `budget_configurations` indices the strategy proposes (strategies without feedback).
std::vector<size_t> plan(Strategy& s, size_t limit);

}  // namespace gputune::tuner
