/** \file bench/synthetic_spaces.h
 * Owns: synthetic tuned spaces whose best configuration moves with the problem size, for the
 * leave-one-out harness without a GPU (bench/select_loo.cpp) and its tests (tests/select/).
 * Times come from a closed-form cost, not from any measurement: they test the selection rules,
 * and no figure made from them is a GPU figure. */
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "select/decision_table.h"

namespace gputune::bench {

/// One device table over `sizes` (each padded to 3) for configurations tile = 1, 2, 4, ... 64:
/// time(tile, size) = work * (1 + 0.08 * (log2 tile - ideal)^2) with ideal = log2(size[0]) / 2 - 4
/// (the best tile doubles every 4x of the first size), plus `noise` as a deterministic wobble.
/// When `second_dim_irrelevant` is false the second size moves the ideal too (by a quarter of
/// its log2).
inline select::DeviceTable synthetic_device(const std::vector<std::vector<std::int64_t>>& sizes,
                                            bool second_dim_irrelevant = true, double noise = 0.0) {
  select::DeviceTable d;
  d.name = "Synthetic GPU", d.arch = "sm_90", d.sm_count = 132;
  int i = 0;
  for (auto size : sizes) {
    while (size.size() < 3) size.push_back(1);
    select::TunedInput in;
    double work = 1;
    for (auto s : size) work *= static_cast<double>(s);
    for (size_t k = 0; k < sizes[static_cast<size_t>(i)].size(); ++k)
      in.label += (k ? "x" : "") + std::to_string(size[k]);
    double ideal = std::log2(static_cast<double>(size[0])) / 2 - 4;
    if (!second_dim_irrelevant) ideal += std::log2(static_cast<double>(size[1])) / 4;
    in.best_ms = 0;
    for (int t = 0; t <= 6; ++t) {
      const double wobble = noise * std::sin(1.7 * t + 2.3 * i);
      const double ms = work * 1e-6 * (1 + 0.08 * (t - ideal) * (t - ideal) + wobble);
      const std::string key = std::to_string(1 << t);
      in.times_ms[key] = ms;
      if (in.best_ms == 0 || ms < in.best_ms) in.best_ms = ms, in.winner = key;
    }
    in.size = size;
    d.inputs.push_back(std::move(in));
    ++i;
  }
  return d;
}

/// A kernel table holding `d`, with a one-parameter job (tile) whose grid covers size[0].
inline select::KernelTable synthetic_kernel(select::DeviceTable d) {
  select::KernelTable k;
  k.name = "synthetic", k.hash = "5e1ec7";
  k.parameters = {"tile"};
  for (int t = 0; t <= 6; ++t)
    k.configs[std::to_string(1 << t)] = nlohmann::ordered_json{{"tile", 1 << t}};
  k.job_document = R"J({
    "ConfigurationSpace": {"TuningParameters": [
      {"Name": "tile", "Type": "int", "Values": "[1, 2, 4, 8, 16, 32, 64]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "synthetic",
      "KernelFile": "synthetic.cu", "LocalSize": {"X": "128", "Y": "1", "Z": "1"},
      "GlobalSize": {"X": "(ProblemSize[0] + 128*tile - 1) // (128*tile)", "Y": "1", "Z": "1"},
      "GlobalSizeType": "CUDA", "Arguments": []},
    "GPUTune": {"Contexts": [{"Name": "1M", "ProblemSize": [1048576]}]}})J";
  select::fit(d);
  k.devices.push_back(std::move(d));
  return k;
}

}  // namespace gputune::bench
