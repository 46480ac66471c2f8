// Search-space construction time. The issue's figure: a 10^6-point Cartesian space with several
// conditions is built in about a second.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "variants/space.h"

namespace {

gputune::Job million_job(bool late) {
  nlohmann::json d = nlohmann::json::parse(R"JSON({
    "ConfigurationSpace": {
      "TuningParameters": [
        {"Name": "block_size_x", "Type": "int", "Values": "[2**i for i in range(10)]"},
        {"Name": "block_size_y", "Type": "int", "Values": "[2**i for i in range(10)]"},
        {"Name": "tile_size_x", "Type": "int", "Values": "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"},
        {"Name": "tile_size_y", "Type": "int", "Values": "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"},
        {"Name": "unroll", "Type": "int", "Values": "[0, 1, 2, 4, 8, 16, 32, 64, 128, 256]"},
        {"Name": "use_shared", "Type": "int", "Values": "list(range(10))"}
      ],
      "Conditions": [
        {"Expression": "32 <= block_size_x * block_size_y <= 1024", "Parameters": ["block_size_x", "block_size_y"]},
        {"Expression": "tile_size_x * tile_size_y <= 64", "Parameters": ["tile_size_x", "tile_size_y"]},
        {"Expression": "unroll == 0 or unroll <= tile_size_x * 32", "Parameters": ["unroll", "tile_size_x"]},
        {"Expression": "use_shared % 3 != 1 or block_size_x >= 16", "Parameters": ["use_shared", "block_size_x"]}
      ]
    },
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "block_size_x"}, "GlobalSize": {"X": "1"}}})JSON");
  if (late)  // a condition over the first and the last parameter: checked at every one of the 10^6
             // leaves
    d["ConfigurationSpace"]["Conditions"].push_back(
        {{"Expression", "(block_size_x * (use_shared + 1)) % 7 != 3 and tile_size_y + unroll >= 1"},
         {"Parameters", {"block_size_x", "use_shared", "tile_size_y", "unroll"}}});
  return gputune::parse_job(d, "million.json");
}

void BM_MillionPointSpace(benchmark::State& state) {
  gputune::Job job = million_job(state.range(0) != 0);
  size_t n = 0;
  std::uint64_t cart = 0;
  for (auto _ : state) {
    gputune::Space s = gputune::build_space(job);
    n = s.size();
    cart = s.cartesian_size;
    benchmark::DoNotOptimize(n);
  }
  state.counters["cartesian"] = static_cast<double>(cart);
  state.counters["valid"] = static_cast<double>(n);
  state.counters["points_per_s"] =
      benchmark::Counter(static_cast<double>(cart), benchmark::Counter::kIsIterationInvariantRate);
}
// Arg 0: four conditions on parameter pairs (pruned early); arg 1: plus one over the last
// parameter.
BENCHMARK(BM_MillionPointSpace)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void BM_DedispersionSpace(benchmark::State& state) {
  gputune::Job job = gputune::load_job(std::string(GPUTUNE_SHARED_DIR) +
                                       "/data/kernel-tuner-cache/dedispersion_milo.T1.json");
  for (auto _ : state) benchmark::DoNotOptimize(gputune::build_space(job).size());
}
BENCHMARK(BM_DedispersionSpace)->Unit(benchmark::kMillisecond);

}  // namespace
