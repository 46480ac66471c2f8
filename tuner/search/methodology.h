/** \file tuner/search/methodology.h
 * Owns: the community's yardstick for search strategies, the performance score of Willemsen,
 * Schoonhoven, van Werkhoven et al., "A methodology for comparing optimization algorithms for
 * auto-tuning" (FGCS 2024), computed as its package `autotuning_methodology` (PyPI, 1.1) computes
 * it, over measurements and over (simulated) time, from recorded spaces and the trajectories of
 * many seeds of a search.
 *
 * The score: at each point of a range of budgets, how far a strategy's best so far is from what
 * random search without replacement is expected to have found, relative to the optimum (0: as
 * random search, 1: the optimum at once, below 0: worse than random), averaged over the range.
 * The range runs from where random search is expected to get 1% of the way from the space's
 * median to its optimum to where it gets 95% of the way (cutoff p: optimum + (median - optimum)
 * x (1 - p)), in measurements or in time (measurements x the median cost of a configuration).
 * Random search's expected best after k draws is the time at the expected rank of the best of k
 * draws without replacement from the N valid times, round(k (N + 1) / (k + 1)) from the worst,
 * as the package computes it; over time, k is the time over the mean cost of a draw, and the curve
 * is the package's monotone cubic (PCHIP) interpolation. A strategy's curve over measurements is
 * the median over seeds of the rank of its best so far; over time, a decreasing isotonic
 * regression of the ranks of all seeds' bests against when they were found, bagged as the package
 * bags it (sklearn's BaggingRegressor: one estimator per seed, at least 3, each fitted to
 * round(n / sqrt(estimators)) points drawn with replacement, their predictions averaged). The
 * package draws from numpy's unseeded generator, so its score over time varies by a few
 * thousandths from call to call; here the draws come from a fixed seed, so a score is
 * reproducible (the two agree within 0.01: Methodology.ScoresAsThePublishedPackageDoes).
 *
 * Where the package has no answer this says why instead: a range that is empty (the optimum is
 * what random search finds first), a seed that ends before the range (a search that stopped keeps
 * its best; the package drops such seeds or fails).
 * Must not: run a search, read files or print. */
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gputune::tuner {

/// One configuration of a recorded space, as the score sees it.
struct ScoredConfig {
  std::optional<double> time_ms;  ///< nullopt: it failed (it still costs its compile and run)
  double compile_s = 0, benchmark_s = 0;
  double cost_s() const { return compile_s + benchmark_s; }
};

/// One seed of a search: each measurement (an index into the space, and the simulated time at
/// which it ended, in seconds since the search began), in the order the search took them.
struct Trajectory {
  std::vector<std::pair<std::size_t, double>> evaluations;
};

struct MethodologyScore {
  double over_measurements = 0, over_time = 0;
  /// Empty when both are scores; else why a score is NaN.
  std::string note;
};

class Methodology {
 public:
  /// The space: every configuration the measurements hold (failed ones too). Throws
  /// std::invalid_argument when there is no range to score over (fewer than two valid times, or
  /// random search expected at the 95% cutoff at once).
  explicit Methodology(std::vector<ScoredConfig> space, std::size_t resolution = 1000);

  /// The score of a strategy over these seeds.
  MethodologyScore score(const std::vector<Trajectory>& seeds) const;

  /// The range: measurements [first, last], seconds [first, last].
  std::size_t first_measurement() const { return fevals_start_; }
  std::size_t last_measurement() const { return fevals_end_; }
  double first_second() const { return time_start_; }
  double last_second() const { return time_end_; }
  double optimum_ms() const { return dist_.front(); }
  double median_ms() const { return median_; }
  /// The mean cost of a random draw (valid or not), seconds: what converts time to draws.
  double seconds_per_draw() const { return seconds_per_draw_; }
  /// Random search's expected best after k measurements (k >= 1), as the score takes it.
  double random_best(std::size_t k) const;
  /// How long a seed must run for the score: the range's last measurement and second, with the
  /// package's 10% margin.
  std::size_t measurements_needed() const;
  double seconds_needed() const;

 private:
  struct Cutoff {
    double value;
    std::size_t fevals;
  };
  Cutoff cutoff(double p) const;
  std::vector<double> random_over_time() const;
  double over_measurements(const std::vector<Trajectory>& seeds) const;
  double over_time(const std::vector<Trajectory>& seeds, std::string& note) const;
  /// The rank in dist_ of a recorded time (the first equal one).
  double rank(double ms) const;

  std::vector<ScoredConfig> space_;
  std::vector<double> dist_;  ///< the valid times, ascending
  double median_ = 0, seconds_median_ = 0, seconds_per_draw_ = 0;
  std::size_t resolution_;
  std::size_t fevals_start_ = 0, fevals_end_ = 0;
  double time_start_ = 0, time_end_ = 0;
  std::vector<double> time_range_;
};

/// Numerical pieces of the score, as numpy, scipy and scikit-learn compute them (exposed for
/// their tests).
namespace methodology_detail {
/// numpy.median.
double median(std::vector<double> v);
/// numpy.linspace(a, b, n).
std::vector<double> linspace(double a, double b, std::size_t n);
/// scipy.interpolate.PchipInterpolator(x, y)(at): x strictly increasing, at least two points.
std::vector<double> pchip(const std::vector<double>& x, const std::vector<double>& y,
                          const std::vector<double>& at);
/// sklearn.isotonic.IsotonicRegression(increasing=False, y_min=min(y), y_max=max(y),
/// out_of_bounds="clip").fit(x, y).predict(at).
std::vector<double> isotonic_decreasing(const std::vector<double>& x, const std::vector<double>& y,
                                        const std::vector<double>& at);
/// sklearn.ensemble.BaggingRegressor(that regression, n_estimators=estimators,
/// max_samples=1/sqrt(estimators), bootstrap=True).fit(x, y).predict(at), its draws from a
/// generator seeded with `seed`.
std::vector<double> isotonic_decreasing_bagged(const std::vector<double>& x,
                                               const std::vector<double>& y,
                                               const std::vector<double>& at,
                                               std::size_t estimators, unsigned long long seed);
}  // namespace methodology_detail

}  // namespace gputune::tuner
