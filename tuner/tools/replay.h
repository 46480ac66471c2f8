/** \file tuner/tools/replay.h
 * Owns: `gputune replay`: scoring search strategies (and, when the kernel source is there, the
 * pruning rules) against measurements taken elsewhere (a Kernel Tuner cache file, a T4 file, or
 * a run in a gputune database, read through db::Store),
 * without a GPU: how many measurements each strategy needs to get within 5% and 10% of the
 * optimum (median over many seeds), the fraction pruned, the regret pruning causes, and how many
 * recorded launch failures the rules predicted.
 * Runs after: the measurements were recorded (db/interchange.h reads them); the search it scores
 * runs as `run` streams it (search/search_stream.h, simulated compiles).
 * Its files: replay.cpp (the command, the scoring), replay_recording.cpp (reading what was
 * recorded), replay_search.cpp, replay_model.cpp (the search with the model), replay_report.cpp.
 * Must not: launch anything or write SQL. */
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tuner/search/portfolio.h"
#include "variants/job.h"
#include "variants/space.h"

namespace gputune::tuner {

/// One recorded outcome, keyed like the space (Kernel Tuner's comma-joined values).
struct Recorded {
  std::optional<double> time_ms;  ///< nullopt: the configuration failed
  std::string failure;            ///< e.g. RuntimeFailedConfig, compile, runtime
  /// What compiling and benchmarking it took, where the file says (a replay's simulated time).
  std::optional<double> compile_ms, benchmark_ms;
};

/// The tuning problem a measurement file names; empty fields: not named. A gputune T4 export
/// names its kernel, context and device (metadata.gputune); a Kernel Tuner cache its kernel,
/// device and problem size (padded to three with 1s).
struct FileProblem {
  std::string kernel, context, device;
  std::vector<std::int64_t> problem_size;
};

/// Reads a Kernel Tuner cache file (.json/.json.gz) or a T4 file; keys follow `space`'s parameter
/// order, and a configuration recorded more than once keeps its best time. Throws
/// std::runtime_error naming the file for malformed input. `entries` (when given) receives how
/// many entries the file holds, matching or not; `problem` (when given) what the file names.
std::map<std::string, Recorded> read_measurements(const std::string& file, const Space& space,
                                                  std::size_t* entries = nullptr,
                                                  FileProblem* problem = nullptr);

struct ReplayOptions;

/// From a gputune database: the measurements of one run (ReplayOptions::run; default: the newest
/// run of this job's document that timed something) in one context (ReplayOptions::context;
/// default: the job's first), keyed like `space`; the best time where a configuration was timed
/// more than once. Compiled-only variants and those a rule left out are not measurements. Throws
/// std::runtime_error naming the file and the fix when there is no such run or context.
/// `source` (when given) receives which run and context were read.
std::map<std::string, Recorded> read_database_measurements(const std::string& file, const Job& job,
                                                           const Space& space,
                                                           const ReplayOptions& o,
                                                           std::size_t* entries = nullptr,
                                                           std::string* source = nullptr);

struct StrategyScore {
  std::string strategy;
  int seeds = 0;
  /// Measurements needed to get within each of ReplayOptions::within of the optimum: median and
  /// 90th percentile over seeds (NaN: the strategy stopped before getting there).
  std::vector<double> median_to, p90_to;
  /// ReplayOptions::score: the methodology's performance score (tuner/search/methodology.h) over
  /// measurements and over simulated time (NaN: not scored; score_note says why).
  double score_measurements = std::numeric_limits<double>::quiet_NaN();
  double score_time = std::numeric_limits<double>::quiet_NaN();
  std::string score_note;
  bool with_model = false;  ///< searched with the model's predictions
};

struct ReplayReport {
  std::string source;  ///< for a database: which run and context were read
  std::size_t space_size = 0, matched = 0, recorded = 0, failed = 0;
  double optimum_ms = 0;
  std::string optimum_key;
  std::vector<double> within;  ///< the tolerances scored (factors of the optimum)
  /// The job's default configuration, when the record holds it: every strategy measures it first
  /// (as `run` does), so it counts as the first measurement of each.
  std::string default_key;
  std::optional<double> default_ms;  ///< nullopt: it failed (or was not recorded)
  std::vector<StrategyScore> strategies;
  /// ReplayOptions::score: the range the scores average over, in words (or why there is none).
  std::string score_range;
  /// The stream's shape the searches were simulated with: compile workers.
  std::size_t compile_workers = 0;
  /// ReplayOptions::trajectories: the lines written there.
  std::size_t trajectories_written = 0;
  std::string guided_note;  ///< how model_guided was scored without the model (empty: with it)
  /// The look-ahead model_guided was scored with: configurations asked for before the outcomes
  /// of those before them were known (ReplayOptions::look_ahead).
  std::size_t look_ahead = 0;
  // Pruner (only with the kernel source and a device).
  bool pruner_scored = false;
  std::string predicted_device, predicted_context;  ///< what the pruner predicted for
  std::string pruner_note;
  std::size_t kept = 0;
  double fraction_pruned = 0, regret = 0;  ///< regret: best kept / best overall
  std::size_t failures_recorded = 0, failures_predicted = 0, valid_rejected = 0;
  // The model (with the kernel source and a device).
  std::size_t predicted_and_measured = 0;
  double spearman = 0;  ///< predicted vs recorded time, over the configurations with both
  /// model_guided with the model was scored as `run` streams it (compiling what it asked for),
  /// not over a whole-space pruner report (ReplayOptions::prune_report).
  bool model_streamed = false;
  std::size_t model_predicted = 0;       ///< configurations with a best case from their source
  std::size_t guided_stopped_after = 0;  ///< model_guided: measurements before its stop rule
  std::size_t guided_compiled =
      0;                         ///< model_guided: configurations it compiled (the default's too)
  double guided_best_ratio = 0;  ///< its best / the optimum when it stopped
  std::map<std::string, std::size_t> removed_by_rule;
  /// Rule 4 at other margins over the same predictions: what each keeps and the regret it costs
  /// (issue #3's target: at least 90% pruned with one kept within 10% of the optimum).
  struct MarginPoint {
    double margin = 0;
    std::size_t kept = 0;
    double fraction_pruned = 0, regret = 0;  ///< regret: infinity when nothing measured is kept
  };
  std::vector<MarginPoint> margin_sweep;  ///< ascending margins, the job's among them
  /// Rule 4 where it keeps the most while still pruning kTargetPruned of the space, at the
  /// tightest margin that keeps that set (a margin that keeps more prunes less, one that keeps
  /// less cannot do better): the target is met exactly when its regret is within kTargetRegret.
  /// Empty when no margin prunes that much; then `tightest_pruned` says how much the tightest
  /// margin (1) prunes.
  std::optional<MarginPoint> at_target_pruned;
  double tightest_pruned = 0;
  double job_margin = 0;
};

/// The margins replay tries besides the job's.
inline constexpr double kSweptMargins[] = {1.0, 1.05, 1.1, 1.2, 1.5, 2.0, 3.0, 5.0};
/// Issue #3's pruning target.
inline constexpr double kTargetPruned = 0.9, kTargetRegret = 1.1;

struct ReplayOptions {
  int seeds = 100;
  /// Tolerances scored: measurements each strategy needs to get within factor x the optimum.
  std::vector<double> within = {1.05, 1.10};
  std::string device;  ///< for the pruner; empty: not scored
  std::filesystem::path cache_dir;
  int threads = 0;
  /// Measurements from a gputune database: which run (default: the newest of this job that timed
  /// something) and context label (default: the job's first; the pruner is scored at it too).
  std::optional<std::int64_t> run;
  std::string context;
  /// model_guided's look-ahead, as `run` streams it (tuner/search/search_stream.h): compiles asked
  /// for ahead of the measurements. 0: what `run` uses on this machine (two per compile worker).
  std::size_t look_ahead = 0;
  /// The compile workers of the simulated stream (0: what `run` uses on this machine).
  std::size_t compile_workers = 0;
  /// With the model: the pruner's report over the whole space (every configuration compiled,
  /// the rules, the margin sweep) instead of scoring model_guided as `run` streams it.
  bool prune_report = false;
  /// With the model: model_guided's seeds (its portfolio's random choices; what a seed compiled
  /// is compiled for the next).
  int model_seeds = 1;
  /// The strategies to score (empty: all); names of replay's table.
  std::vector<std::string> strategies;
  /// The methodology's performance score of each strategy (seeds run until the score's range is
  /// covered, not only until the tightest tolerance).
  bool score = false;
  /// The portfolio search's settings (its defaults; bench/search_bench.cpp varies them).
  PortfolioSettings portfolio;
  /// Writes every seed's trajectory there (JSON lines: the space, then one line per seed; the
  /// format bench/score_trajectories.py reads). Empty: none.
  std::string trajectories;
};

ReplayReport replay(const Job& job, const std::string& measurements_file,
                    const ReplayOptions& options);
void print_replay_report(const ReplayReport& r, std::ostream& out);

struct Recording;  // replay_search.h
/// Reads the measurements (a measurement file, or a run of a gputune database, never changed) and
/// lays them over the space; what they hold, their optimum and the default's time go to `rep`.
/// Throws when there is nothing to score against (replay_recording.cpp).
Recording read_recording(const Job& job, const Space& space, const std::string& file,
                         const ReplayOptions& o, ReplayReport& rep);

/// Measurements a visiting order needs until it has seen a time within `factor` of the optimum
/// (configurations missing from the record are skipped, failures count as measurements).
std::size_t measurements_to_reach(const std::vector<size_t>& order,
                                  const std::vector<std::optional<double>>& time, double optimum,
                                  double factor);

}  // namespace gputune::tuner
