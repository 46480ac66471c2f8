/** \file tuner/model_stage.h
 * Owns: running the pruner's performance model over the compiled variants of one context: the
 * libTooling traffic analysis (in parallel), features, and predictions with the device's rates
 * and calibration; finding those rates (a device file by --device or by the driver's device name,
 * else the driver's attributes); rule 4 (the model margin) over a set of decisions.
 * Consumes: Job, source, Configs, occupancies. Produces: ModelRun.
 * Must not: launch anything or write SQL. */
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pruner/model.h"
#include "pruner/rules.h"
#include "variants/job.h"
#include "variants/space.h"

namespace gputune::tuner {

struct DeviceInfo;
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
  std::string first_error;  ///< the first analysis failure, to show the user
};

/// Analyses configs[i] where usable[i] (compiled, valid geometry). occupancy[i] is the variant's;
/// `args` are the context's arguments (sizes and scalar values), as make_arguments made them.
ModelRun run_model(const Job& job, const std::string& source, const std::vector<Config>& configs,
                   const ContextSpec& ctx, const std::vector<HostArgument>& args,
                   const std::vector<bool>& usable, const std::vector<pruner::Occupancy>& occupancy,
                   const Rates& rates, const pruner::Calibration& calibration, int threads,
                   bool progress);

/// Recomputes predictions with another calibration (after a fit).
void repredict(ModelRun& m, const Rates& rates, const pruner::Calibration& calibration);

/// Rule 4: among kept decisions with a prediction, drop those predicted slower than
/// margin x the best prediction of the variants rules 1-2 keep (duplicates included: the same
/// binary as a kept one). Returns how many it removed.
std::size_t apply_model_rule(std::vector<pruner::Decision>& decisions, const ModelRun& m,
                             double margin);

}  // namespace gputune::tuner
