/** \file tuner/tools/prune_command.h
 * Owns: `gputune prune`: compile every configuration for a device's architecture (present or
 * described by configs/devices), apply the pruning rules (pruner/rules.h), and report and store
 * which variants each rule removed. Needs no GPU.
 * Must not: launch anything or write SQL. */
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pruner/model.h"
#include "pruner/rules.h"
#include "variants/job.h"
#include "variants/space.h"

namespace gputune::tuner {

struct PruneRunOptions {
  std::string device;   ///< configs/devices name; empty: the GPU present, else the job's arch
  std::string db_path;  ///< empty: job's GPUTune.Database, else the default
  std::filesystem::path cache_dir;  ///< as RunOptions
  int threads = 0;
  std::optional<int> max_spill_bytes;  ///< < 0 disables the spill rule; unset: the job's
  std::optional<double> model_margin;  ///< rule 4; unset: the job's GPUTune.Pruner.ModelMargin
  bool model = true;                   ///< run the traffic model and rule 4
  bool screen =
      false;  ///< rule 4 before compiling: what it would drop is not compiled (compile_screen.h)
  std::size_t screen_batch = 0;  ///< ScreenOptions::batch (0: 4 per compile worker, at least 32)
  std::string context;           ///< context label (default: the job's first)
  /// With the model, a larger space is searched by it rather than compiled whole
  /// (tuner/model/space_search.h); unset: the job's GPUTune.Search.ModelAnalyses.
  std::optional<std::uint64_t> model_analyses;
  bool progress = false;
  bool store = true;
};

struct PruneRow {
  Config config;
  bool compiled = false;
  pruner::Decision decision;
  int registers = 0, spill_bytes = 0;
  std::optional<double> predicted_ms;
  std::string bound;  ///< what limits it in the model: dram, l2, shared, flops
  /// Blocks per SM its launch allows before registers and static shared memory (its thread
  /// count and dynamic shared memory alone): where the model's best case looks, as `run`
  /// orders a configuration before compiling it. 0: no launch, or none fits.
  int best_case_blocks = 0;
};

struct PruneReport {
  std::string device, arch, context;
  std::size_t space_size = 0, compile_failed = 0, kept = 0;
  std::size_t screened = 0;  ///< not compiled: rule 4 judged them from their source (--screen)
  /// The model's search of a space larger than model_analyses: rows hold only what it chose.
  std::string model_search;
  /// With a search: the space and the positions the rows hold (ascending), so that the report
  /// can name what the search left out (`--json`: one object per configuration, rule "search").
  std::shared_ptr<const Space> space;
  std::vector<std::size_t> searched;
  std::vector<pruner::RuleCount> counts;
  // The model (rule 4).
  std::string rates_source;  ///< where the device's rates came from, or why there are none
  std::size_t predicted = 0, not_analysed = 0;
  std::size_t analyses_cached = 0;  ///< traffic analyses read from the cache
  std::string first_analysis_error;
  int calibration_samples = 0;  ///< 0: default constants
  /// --device: the device record whose runs fitted the calibration (empty: none, or no --device)
  std::string calibration_device;
  double margin = 0;
  std::vector<pruner::ModelFeatures> features;  ///< per row, for replay's model_guided scoring
  std::optional<pruner::DeviceRates> rates;
  pruner::Calibration calibration;
  std::vector<PruneRow> rows;
  std::int64_t run_id = 0;
  std::string db_path;
};

PruneReport prune_job(const Job& job, const PruneRunOptions& options);

/// The summary (counts per rule) and the kept variants; with `json`, one JSON object per
/// configuration: parameters, kept, rule, reason, predicted_ms, registers, occupancy, spill_bytes.
void print_prune_report(const PruneReport& r, std::ostream& out, bool json);

}  // namespace gputune::tuner
