/** \file tuner/tools/replay_search.h
 * Owns: replaying searches over recorded measurements as `run` performs them
 * (tuner/tools/replay.cpp's searches): the recording laid over the job's space, and each strategy
 * streamed in simulated time (tuner/search/search_stream.h's simulate_timed_stream: compile workers
 * and the look-ahead overlapping the measurements), one seed at a time, until it is within the
 * tolerance asked for and has run as long as the score needs. Must not: launch anything, write SQL
 * or print. */
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tuner/search/portfolio.h"
#include "variants/space.h"

namespace gputune::tuner {

/// The recorded measurements laid over the job's space: what every strategy and the pruner are
/// scored against.
struct Recording {
  /// Per space index: the recorded time (nullopt: it failed, or is not recorded).
  std::vector<std::optional<double>> time;
  std::vector<char> present;  ///< per space index: recorded
  /// Per space index: what compiling and benchmarking it cost (seconds; 0 where not recorded).
  std::vector<double> compile_s, benchmark_s;
  std::size_t costed = 0;          ///< recorded configurations with a compile or benchmark time
  std::optional<std::size_t> def;  ///< the job's default configuration, when recorded
  std::string context;             ///< where the pruner predicts (context_for_file)
  double optimum_ms = 0;
};

/// One seed of a search: the space indices it measured, in order, and when each measurement
/// ended (simulated seconds since the search began, the default's compile and measurement first).
struct SearchSeed {
  std::vector<std::size_t> order;
  std::vector<double> end_s;
};

/// How far each seed runs: until it has a time within `tightest` x the optimum, and at least
/// `measurements` measurements and `seconds` of simulated time (what the score's range needs);
/// or until the strategy has nothing more.
struct Horizon {
  double tightest = 1.05;
  std::size_t measurements = 0;
  double seconds = 0;
};

/// How `run` streams a search: compile workers, and compiles asked for ahead of the outcomes.
struct StreamShape {
  std::size_t workers = 1, look_ahead = 1;
  PortfolioSettings portfolio;  ///< the portfolio search's settings
};

/// brute_force (one seed), random and portfolio (seeds 1..seeds) and model_guided without the
/// model (every variant unpredicted), over the recorded configurations of `space`.
std::vector<SearchSeed> replay_without_model(const std::string& strategy, const Space& space,
                                             const Recording& r, int seeds, const Horizon& h,
                                             const StreamShape& shape);

/// The strategies replay_without_model knows.
const std::vector<std::string>& strategies_without_model();

/// Runs one seed of `strategy` (brute_force, random, portfolio, model_guided) over `configs`
/// (the recorded configurations, in space order) as the stream, `index[k]` the space index of
/// configs[k].
SearchSeed stream_recorded(const std::string& strategy, const std::vector<Config>& configs,
                           const std::vector<std::size_t>& index, const Recording& r,
                           std::uint64_t seed, const Horizon& h, const StreamShape& shape);

}  // namespace gputune::tuner
