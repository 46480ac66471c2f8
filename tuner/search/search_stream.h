/** \file tuner/search/search_stream.h
 * Owns: one context's search as a stream of compiles and measurements. It asks the strategy for
 * the next configuration only as far ahead as the look-ahead allows (configurations compiling, or
 * compiled and not yet measured) and never past the budget (measurements), hands back compiled
 * configurations to measure in the order they became ready, and reports each outcome to the
 * strategy before asking it again. It also applies rule 4 as it learns: a configuration whose
 * best case (the model's prediction at the most blocks per SM its launch allows, from its source
 * alone) is above margin x the best prediction of a compiled configuration can never be kept by
 * rule 4 (its real prediction is no lower, that best only falls), so it is held back
 * (model_guided, which a refit may readmit) or skipped (other strategies) without compiling; a
 * compiled configuration is judged by its real prediction.
 * Pure bookkeeping, so that `run` drives it with its compile pool and measurer and `replay` with
 * recorded times (compiles finishing in the order they were asked for), and both perform the same
 * search. Positions are indices into the run's plan, as the strategy numbers them.
 * Runs after: the plan and the best cases; before: each compile (compile/compile_pool.h) and
 * measurement (measure/measure.h) that its driver performs.
 * Must not: compile, launch, or touch the database. */
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tuner/search/strategy.h"

namespace gputune::tuner {

class SearchStream {
 public:
  struct Settings {
    /// Configurations compiling, or compiled and not measured, at most (at least 1).
    std::size_t look_ahead = 4;
    /// Measurements at most (one that failed counts). What compiled and cannot be launched (it
    /// did not compile, rules 1-3 pruned it, its outcome is known as a duplicate's) is not one,
    /// nor what rule 4 drops (model_guided may readmit it).
    std::size_t budget = std::numeric_limits<std::size_t>::max();
    /// Rule 4's margin; 0: rule 4 off.
    double margin = 0;
    /// Per position, the best prediction known before compiling (the best case; NaN: none, never
    /// judged by rule 4). Empty: rule 4 off.
    std::vector<double> best_case;
    /// Per position (may be empty): drawn from what the model's search left out, for the regret
    /// sample: rule 4 excludes it rather than holding it back, and the model's start does not
    /// spread onto it (ModelGuided::sample_only), so that it stays a random draw.
    std::vector<char> left_out;
    /// Rule 4 exactly as over the whole plan compiled (strategies without feedback, which
    /// measure everything rule 4 keeps): a compiled configuration is measured only once rule 4
    /// surely keeps it, i.e. its prediction is within margin x every best the configurations not
    /// compiled yet could still set (their best cases bound their predictions from below); it
    /// waits until then, outside the look-ahead. Give the strategy the plan in order of best case
    /// so that the bound settles early. Without it (model_guided), what the stream compiled
    /// before the best fell is measured: a search, which holds back and readmits.
    bool exact = false;
  };

  /// `guide`: the same object as `strategy` when it is model_guided (rule 4 holds back through
  /// it), else nullptr. The strategy must outlive the stream.
  SearchStream(Strategy& strategy, ModelGuided* guide, Settings settings);

  /// A measurement taken before the stream began (the default, measured first in each context):
  /// reported to the strategy and counted against the budget; never proposed again.
  void add_measured(std::size_t pos, std::optional<double> ms);

  /// A compiled configuration's real prediction, outside the stream (the default, compiled
  /// before it; every planned one where the plan is compiled whole first): rule 4's best counts it.
  void offer_best(double prediction);

  /// The next configuration to compile, or nullopt: the look-ahead is full, the budget is spoken
  /// for, the stream stopped, or the strategy has nothing more for now (it may after the
  /// outcomes in flight are reported).
  std::optional<std::size_t> next_to_compile();

  /// Its compile came back. `usable`: it compiled, has a launch in this context and rules 1-3
  /// keep it (one that is not is decided: it counts against the budget and is reported to the
  /// strategy as failed). `prediction`: with its real occupancy (NaN: none). `sets_best`: rule 4's
  /// best counts it (rules 1-2 keep it, or it is a duplicate of one they keep), usable or not.
  /// Returns true when it is to be measured (next_to_measure will give it); false when it is not
  /// usable or rule 4 drops it on its real prediction (held back under model_guided).
  bool compiled(std::size_t pos, bool usable, double prediction, bool sets_best);

  /// A compiled configuration whose outcome is known without measuring it (the same binary and
  /// launch as one measured): reported to the strategy (not a measurement of the budget).
  /// `prediction` as compiled() takes it (rule 4's best counts it).
  void known(std::size_t pos, std::optional<double> ms, double prediction);

  /// The compiled configuration to measure next: the first to become ready; under model_guided
  /// the one it orders first, once nothing it orders before that is still compiling (nullopt
  /// meanwhile).
  std::optional<std::size_t> next_to_measure();

  /// Its outcome (nullopt: it failed), reported to the strategy.
  void measured(std::size_t pos, std::optional<double> ms);

  /// Nothing more is proposed (Ctrl-C, the time budget): done() once nothing is ready.
  void stop();

  /// The search is over: stopped, the budget measured, or the strategy has nothing more and
  /// nothing is in flight.
  bool done() const;
  bool stopped() const { return stopped_; }

  /// Rule 4's best: the lowest real prediction of a compiled configuration it counts (NaN: none).
  double best_prediction() const { return best_; }
  /// Configurations rule 4 held back or skipped (ever), in the order it did: by their best case
  /// before compiling, or by their real prediction.
  const std::vector<std::size_t>& dropped_by_model() const { return dropped_; }
  /// Whether rule 4 held back or skipped this position (ever).
  bool dropped(std::size_t pos) const { return pos < dropped_flag_.size() && dropped_flag_[pos]; }
  /// Positions excluded because they were drawn from what the search left out (rule 4 would
  /// have held them back).
  const std::vector<std::size_t>& left_out_excluded() const { return left_out_excluded_; }
  std::size_t measurements() const { return measured_; }
  std::size_t in_flight() const { return in_flight_; }
  /// model_guided: compiled configurations put back because an open one's best case was ordered
  /// before their real prediction (ModelGuided::confirm); each is measured when its turn comes.
  /// With a budget, at most as many as the budget (then each compiled one is measured as it
  /// comes): the ordering costs at most as many compiles again as the budget measures.
  std::size_t parked() const { return parked_; }
  /// Configurations proposed so far (those measured before the stream included).
  std::size_t proposed() const { return proposed_; }
  /// Whether the strategy proposed (or the stream was given) this position.
  bool seen(std::size_t pos) const;

 private:
  /// Rule 4 with a lower best: holds back (or marks skipped) what can no longer come within it.
  void apply_best();
  bool beyond(std::size_t pos) const;
  void drop(std::size_t pos);

  /// Grows the per-position flags to hold `pos`.
  void cover(std::size_t pos);

  /// The lowest best rule 4 can still reach: its best, or the lowest best case not compiled yet.
  double lowest_best();
  /// exact: moves what rule 4 now surely keeps to the ready queue, drops what it prunes.
  void release();

  Strategy& strategy_;
  ModelGuided* guide_;
  Settings s_;
  // Per position: proposed (or given); measured before the stream; compiling or ready; dropped
  // by rule 4 (a configuration readmitted after that is not judged by rule 4 again).
  std::vector<char> seen_, given_, flying_, dropped_flag_;
  std::vector<std::size_t> dropped_, left_out_excluded_;
  std::vector<std::size_t> by_best_case_;  // positions with a best case, highest first
  std::size_t by_best_case_at_ = 0;        // those before it are beyond margin x best_
  std::deque<std::size_t> ready_;
  std::vector<std::size_t> compiling_;  // asked for, not compiled yet
  // exact: compiled, usable, waiting for rule 4 to be sure (position, real prediction); and the
  // positions with a best case, lowest first, with how many of them are compiled or dropped.
  std::vector<std::pair<std::size_t, double>> deferred_;
  std::vector<std::size_t> by_best_case_up_;
  std::size_t by_best_case_up_at_ = 0;
  std::vector<char> resolved_;  // per position: compiled or dropped
  std::size_t in_flight_ = 0, measured_ = 0, proposed_ = 0, parked_ = 0;
  double best_ = std::numeric_limits<double>::quiet_NaN();
  bool dry_ = false;  // the strategy had nothing the last time it was asked
  bool stopped_ = false;
};

/// What compiling a proposed configuration gives, as SearchStream::compiled takes it.
struct CompileVerdict {
  bool usable = false;
  double prediction = std::numeric_limits<double>::quiet_NaN();
  bool sets_best = false;
};

/// Drives `stream` as `run` does when compiles are what the search waits for (NVRTC takes tenths
/// of a second a variant, a measurement milliseconds): the compiles asked for finish one at a
/// time in the order they were asked for, and each usable one is measured as soon as it is
/// ready, its outcome reported before the strategy is asked again. `compile(pos)` says what
/// compiling it gives (it may refine the strategy's prediction); `measure(pos)` its outcome.
/// Stops when the stream is done or `enough()` says so. Returns the measured positions in order.
std::vector<std::size_t> simulate_stream(
    SearchStream& stream, const std::function<CompileVerdict(std::size_t)>& compile,
    const std::function<std::optional<double>(std::size_t)>& measure,
    const std::function<bool()>& enough = {});

/// One measurement of a timed simulation: the position measured and when its measurement ended
/// (seconds since the stream began).
struct TimedMeasurement {
  std::size_t pos = 0;
  double end_s = 0;
};

/// Drives `stream` as `run` performs it, in simulated time: `workers` compile workers take the
/// configurations in the order the stream asked for them, each compile lasting `compile_s(pos)`;
/// the GPU measures one compiled configuration at a time, in the order they became ready, each
/// lasting `benchmark_s(pos)`, and its outcome is reported when it ends, before the stream is
/// asked for more. `compile` and `measure` as simulate_stream takes them. Starts at `start_s`
/// (what was measured before the stream). Stops when the stream is done or `enough(now)` says so
/// after a measurement (`now`: when it ended). `asked(pos)`, if given, hears of each position as
/// the stream asks for it (a replay that really compiles starts those compiles then).
std::vector<TimedMeasurement> simulate_timed_stream(
    SearchStream& stream, const std::function<CompileVerdict(std::size_t)>& compile,
    const std::function<std::optional<double>(std::size_t)>& measure,
    const std::function<double(std::size_t)>& compile_s,
    const std::function<double(std::size_t)>& benchmark_s, std::size_t workers, double start_s,
    const std::function<bool(double)>& enough = {},
    const std::function<void(std::size_t)>& asked = {});

}  // namespace gputune::tuner
