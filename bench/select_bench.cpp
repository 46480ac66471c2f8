// gputune::select's costs to an application (issue #48): a warm lookup (an input asked before),
// a cold one (a new input: the rule and the launch geometry computed), and opening a decision
// file or a database. Synthetic tables (bench/synthetic_spaces.h) of a realistic shape: each
// kernel tuned at 8 sizes on 2 devices.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>

#include "bench/synthetic_spaces.h"
#include "select/select.h"

namespace {

using namespace gputune;

select::DecisionTable table(int kernels) {
  select::DecisionTable t;
  t.origin = "bench";
  for (int k = 0; k < kernels; ++k) {
    std::vector<std::vector<std::int64_t>> sizes;
    for (int i = 0; i < 8; ++i) sizes.push_back({std::int64_t{1} << (10 + 2 * i), 1 << (i % 3)});
    select::KernelTable kt = bench::synthetic_kernel(bench::synthetic_device(sizes, false, 0.05));
    select::DeviceTable other = kt.devices.front();
    other.name = "Synthetic GPU 2";
    kt.devices.push_back(other);
    kt.name = "kernel" + std::to_string(k);
    t.kernels.push_back(std::move(kt));
  }
  return t;
}

std::filesystem::path write_file(int kernels) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("gputune-select-bench-" + std::to_string(kernels) + ".json");
  std::ofstream(path) << select::to_json(table(kernels)).dump();
  return path;
}

void BM_WarmLookup(benchmark::State& state) {
  const auto t = select::Table::from(table(10)).value_or_throw();
  const select::Device gpu{"Synthetic GPU", "sm_90"};
  const select::Input input({3000000, 2});
  (void)t.choose("kernel3", gpu, input);
  for (auto _ : state) {
    auto c = t.choose("kernel3", gpu, input);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_WarmLookup);

void BM_ColdLookup(benchmark::State& state) {
  const auto t = select::Table::from(table(10)).value_or_throw();
  const select::Device gpu{"Synthetic GPU", "sm_90"};
  std::int64_t n = 1000;
  for (auto _ : state) {
    auto c = t.choose("kernel3", gpu, select::Input({n++, 2}));  // a new input every time
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_ColdLookup);

void BM_OpenDecisionFile(benchmark::State& state) {
  const auto path = write_file(static_cast<int>(state.range(0)));
  state.counters["bytes"] = static_cast<double>(std::filesystem::file_size(path));
  for (auto _ : state) {
    auto t = select::Table::open(path.string());
    if (!t) state.SkipWithError(t.error().message.c_str());
    benchmark::DoNotOptimize(t);
  }
  std::filesystem::remove(path);
}
BENCHMARK(BM_OpenDecisionFile)->Arg(1)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond);

/// A gputune database read directly: the H100 transpose measurements (2 contexts, 171
/// configurations each), copied so the original stays untouched.
void BM_OpenDatabase(benchmark::State& state) {
  const std::filesystem::path shared =
      std::filesystem::path(GPUTUNE_SHARED_DIR) / "data/h100-2026-11-26/transpose.db";
  if (!std::filesystem::exists(shared)) {
    state.SkipWithError("no ../shared/data/h100-2026-11-26/transpose.db");
    return;
  }
  const auto copy = std::filesystem::temp_directory_path() / "gputune-select-bench.db";
  std::filesystem::copy_file(shared, copy, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(copy, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  for (auto _ : state) {
    auto t = select::Table::open(copy.string());
    if (!t) state.SkipWithError(t.error().message.c_str());
    benchmark::DoNotOptimize(t);
  }
  std::filesystem::remove(copy);
}
BENCHMARK(BM_OpenDatabase)->Unit(benchmark::kMillisecond);

}  // namespace
