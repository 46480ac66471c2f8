// Hand-made decision tables of the examples (configs/examples), for the select/ tests: a kernel's
// job and source as `gputune export --decisions` writes them, tuned on one device at some sizes
// with made-up times (the tests check choosing, compiling and launching, not the figures).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "select/decision_table.h"
#include "test_util.h"

namespace gputune::test {

struct TunedSize {
  std::int64_t size;
  std::string winner;                   ///< configuration key
  std::map<std::string, double> times;  ///< every candidate's time here
};

/// The example `name` (configs/examples/<name>.json and its .cu) tuned on `device` at `sizes`;
/// `configs`: key -> {"parameter": value, ...} for each candidate, in parameter order.
inline select::DecisionTable example_table(
    const std::string& name, const std::string& device, const std::string& arch,
    const std::vector<std::string>& parameters,
    const std::map<std::string, nlohmann::ordered_json>& configs,
    const std::vector<TunedSize>& sizes) {
  select::KernelTable k;
  k.name = name;
  k.hash = "test";
  k.job_document = read_file(examples_dir() / (name + ".json"));
  k.source = read_file(examples_dir() / (name + ".cu"));
  k.parameters = parameters;
  k.configs = configs;
  select::DeviceTable d;
  d.name = device, d.arch = arch, d.sm_count = 132;
  for (const TunedSize& s : sizes) {
    select::TunedInput in;
    in.label = std::to_string(s.size);
    in.size = {s.size, 1, 1};
    in.winner = s.winner;
    in.times_ms = s.times;
    in.best_ms = s.times.at(s.winner);
    d.inputs.push_back(std::move(in));
  }
  select::fit(d);
  k.devices.push_back(std::move(d));
  select::DecisionTable t;
  t.origin = name + " (test table)";
  t.kernels.push_back(std::move(k));
  return t;
}

/// matmul tuned at 1000 and 4096 (the example's contexts): a plain 16x16 variant wins at 1000,
/// a tiled shared-memory one at 4096; 2048 was never tuned.
inline select::DecisionTable matmul_table(const std::string& device = "NVIDIA H100 80GB HBM3",
                                          const std::string& arch = "sm_90") {
  const std::vector<std::string> p = {"block_size_x", "block_size_y", "tile_size_x", "tile_size_y",
                                      "tile_k",       "use_shared",   "unroll_k"};
  auto config = [&](std::vector<int> v) {
    nlohmann::ordered_json j;
    for (size_t i = 0; i < p.size(); ++i) j[p[i]] = v[i];
    return j;
  };
  const std::string plain = "16,16,1,1,16,0,1", tiled = "32,8,2,2,16,1,4";
  return example_table(
      "matmul", device, arch, p,
      {{plain, config({16, 16, 1, 1, 16, 0, 1})}, {tiled, config({32, 8, 2, 2, 16, 1, 4})}},
      {{1000, plain, {{plain, 0.10}, {tiled, 0.12}}}, {4096, tiled, {{plain, 9.0}, {tiled, 4.0}}}});
}

/// vector_add (the kernel tests/fake_cuda runs) tuned at 1M and 16M.
inline select::DecisionTable vector_add_table(const std::string& device, const std::string& arch) {
  auto config = [](int b, int t) {
    nlohmann::ordered_json j;
    j["block_size_x"] = b, j["tile_size_x"] = t;
    return j;
  };
  return example_table("vector_add", device, arch, {"block_size_x", "tile_size_x"},
                       {{"128,2", config(128, 2)}, {"256,4", config(256, 4)}},
                       {{1 << 20, "128,2", {{"128,2", 0.01}, {"256,4", 0.02}}},
                        {1 << 24, "256,4", {{"128,2", 0.2}, {"256,4", 0.1}}}});
}

}  // namespace gputune::test
