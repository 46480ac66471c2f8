/** \file tuner/model/predict.h
 * Owns: running the pruner's performance model over the compiled variants of one context: the
 * libTooling traffic analysis (in parallel, its reports cached on disk: TrafficCache), features,
 * and predictions with the device's rates and calibration; finding those rates (a device file by
 * --device or by the driver's device name, else the driver's attributes).
 * Consumes: Job, source, Configs, occupancies. Produces: ModelRun, whose predictions rule 4
 * (pruner::apply_model_rule, pruner/rules.h) judges: what it decides is not decided here.
 * Runs after: the plan (run/model_work.h) and, for real predictions, the compile (compile/);
 * before: rule 4 in the compile screen (model/compile_screen.h) and the search stream.
 * Must not: launch anything, write SQL, or decide what is pruned. */
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pruner/model.h"
#include "pruner/rules.h"
#include "pruner/traffic.h"
#include "variants/job.h"
#include "variants/space.h"

namespace gputune::tuner {

struct DeviceInfo;  // tuner/measure/device_info.h
struct HostArgument;

struct Rates {
  std::optional<pruner::DeviceRates> rates;
  std::string source;  ///< which file or the driver; or why there are none
};

/// Rates of a described device (configs/devices) or of the GPU present (its device file when its
/// name matches one, else its attributes).
Rates rates_for_spec(const pruner::DeviceSpec& spec);
Rates rates_for_driver(const DeviceInfo& info);

struct ModelRun {
  std::vector<pruner::TrafficReport> traffic;  ///< per config (empty report when not analysed)
  std::vector<pruner::ModelFeatures> features;
  std::vector<pruner::Prediction> predictions;
  std::size_t predicted = 0, not_analysed = 0;
  std::size_t analyses_cached = 0;  ///< traffic reports read from the analysis cache
  std::string first_error;          ///< the first analysis failure, to show the user
  bool interrupted = false;  ///< `should_stop` said so: what was not analysed yet never will be
};

/// The traffic analysis is most of the model's time (a clang parse per variant), so its reports
/// are cached on disk under `<cache dir>/traffic/`, keyed by everything the analysis reads (the
/// variant's source, options, kernel name, launch geometry, argument sizes and scalar values) and
/// by the build ID of the running program, so that no report outlives the code that made it.
struct TrafficCache {
  std::filesystem::path dir;  ///< empty: no cache

  /// The entry's name; empty when the program has no build ID (then nothing is cached).
  static std::string key(const pruner::TrafficInput& in);
  std::optional<pruner::TrafficReport> get(const std::string& key) const;
  void put(const std::string& key, const pruner::TrafficReport& r) const;
};

/// What the traffic analysis takes from one context's arguments: scalar values, vector sizes in
/// bytes, the launch order of the names, and the contents (hashed) of the vectors
/// model_reads_contents names. Built once per context by each stage (search, screen, rule 4): an
/// index array of up to 64 MiB is copied and hashed once, not once per analysis batch of a model
/// search.
struct ModelArguments {
  std::map<std::string, double> scalars;
  std::map<std::string, std::int64_t> array_bytes;
  std::vector<std::string> order;
  std::map<std::string, pruner::ArrayData> contents;
};
/// From a context's arguments as make_arguments made them (sized only, or filled).
ModelArguments model_arguments(const std::vector<HostArgument>& args);

/// Analyses configs[i] where usable[i] (compiled, valid geometry). occupancy[i] is the variant's;
/// `args` are the context's arguments (model_arguments).
/// When `should_stop` says so (Ctrl-C), no further analysis starts and the result is marked
/// `interrupted` (an analysis of a large space takes minutes).
ModelRun run_model(const Job& job, const std::string& source, const std::vector<Config>& configs,
                   const ContextSpec& ctx, const ModelArguments& args,
                   const std::vector<bool>& usable, const std::vector<pruner::Occupancy>& occupancy,
                   const Rates& rates, const pruner::Calibration& calibration, int threads,
                   bool progress, const TrafficCache& cache = {},
                   const std::function<bool()>& should_stop = {});

/// Recomputes predictions with another calibration (after a fit).
void repredict(ModelRun& m, const Rates& rates, const pruner::Calibration& calibration);

}  // namespace gputune::tuner
