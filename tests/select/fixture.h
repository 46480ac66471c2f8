// A decision table for select/'s tests, built in memory: vector_add's job with 2-D problem sizes,
// four configurations whose winners change with the size, tuned on three devices (an H100 with
// five contexts and a fitted tree, an H200 of the same architecture with one, an RTX A4000 with
// two).
#pragma once

#include <string>
#include <vector>

#include "select/decision_table.h"
#include "test_util.h"

namespace gputune::select::test {

inline TunedInput input(const std::string& label, std::int64_t x, std::int64_t y,
                        std::map<std::string, double> times) {
  TunedInput in;
  in.label = label, in.size = {x, y, 1}, in.times_ms = std::move(times);
  for (const auto& [key, ms] : in.times_ms)
    if (in.winner.empty() || ms < in.best_ms) in.winner = key, in.best_ms = ms;
  return in;
}

inline DecisionTable three_devices() {
  KernelTable k;
  k.name = "vector_add", k.hash = "abc123";
  k.job_document = gputune::test::read_file(gputune::test::examples_dir() / "vector_add.json");
  k.parameters = {"block_size_x", "tile_size_x"};
  for (auto [b, t] : std::vector<std::pair<int, int>>{{64, 1}, {128, 2}, {256, 4}, {512, 8}})
    k.configs[std::to_string(b) + "," + std::to_string(t)] = {{"block_size_x", b},
                                                              {"tile_size_x", t}};
  DeviceTable h100;
  h100.name = "NVIDIA H100 80GB HBM3", h100.arch = "sm_90", h100.sm_count = 132;
  h100.inputs = {
      input("512x2048", 512, 2048, {{"64,1", 0.10}, {"128,2", 0.12}, {"256,4", 0.20}}),
      input("1Kx1K", 1024, 1024, {{"64,1", 0.11}, {"128,2", 0.10}, {"256,4", 0.19}}),
      input("2Kx1K", 2048, 1024, {{"128,2", 0.18}, {"256,4", 0.17}, {"512,8", 0.30}}),
      input("4Kx4K", 4096, 4096, {{"128,2", 1.3}, {"256,4", 1.1}, {"512,8", 1.0}}),
      input("8Kx8K", 8192, 8192, {{"256,4", 4.4}, {"512,8", 4.0}, {"64,1", 9.0}}),
  };
  fit(h100);
  if (h100.tree) h100.method = How::kLearned;  // both rules are exercised, whatever fit() chose
  DeviceTable h200;
  h200.name = "NVIDIA H200", h200.arch = "sm_90", h200.sm_count = 132;
  h200.inputs = {input("4Kx4K", 4096, 4096, {{"256,4", 0.9}, {"512,8", 1.0}})};
  fit(h200);
  DeviceTable a4000;
  a4000.name = "NVIDIA RTX A4000", a4000.arch = "sm_86", a4000.sm_count = 48;
  a4000.inputs = {input("1Kx1K", 1024, 1024, {{"64,1", 0.5}, {"128,2", 0.6}}),
                  input("4Kx4K", 4096, 4096, {{"128,2", 5.0}, {"256,4", 4.5}, {"64,1", 6.0}})};
  fit(a4000);
  k.devices = {h100, h200, a4000};
  DecisionTable t;
  t.origin = "three_devices (in memory)";
  t.kernels.push_back(std::move(k));
  return t;
}

}  // namespace gputune::select::test
