// Database insert rate: measurements (with 32 samples each) per second, in batches of one
// transaction, as `gputune run` and `gputune import` write them. And the cost of what a run reads
// before it measures: Store::predicted_times (model_guided's start from earlier searches) for a
// kernel with many, few and no earlier measurements in a database of GPUTUNE_BENCH_ROWS rows
// (default 1,000,000).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>

#include "db/store.h"

namespace {

void BM_InsertMeasurements(benchmark::State& state) {
  auto path = std::filesystem::temp_directory_path() /
              ("gputune-db-bench-" + std::to_string(std::random_device{}()) + ".db");
  {
    gputune::db::Store store(path.string());
    auto kernel = store.upsert_kernel("k", "hash", "src");
    gputune::db::DeviceRecord d;
    d.name = "bench";
    auto dev = store.upsert_device(d);
    gputune::db::ContextRecord c;
    c.kernel_id = kernel, c.device_id = dev, c.label = "x", c.problem_size_json = "[1]";
    auto ctx = store.upsert_context(c);
    auto run = store.begin_run(store.upsert_job("k", "k.json", "{}"), "bench", 0);
    const auto batch = state.range(0);
    std::int64_t next = 0;
    for (auto _ : state) {
      gputune::db::Transaction t(store.db());
      for (std::int64_t i = 0; i < batch; ++i, ++next) {
        auto v = store.upsert_variant(kernel, std::to_string(next),
                                      "{\"a\": " + std::to_string(next) + "}");
        gputune::db::MeasurementRecord m;
        m.run_id = run, m.context_id = ctx, m.variant_id = v,
        m.status = gputune::db::Status::kCorrect, m.time_ms = 1.0 + i;
        m.samples_ms.assign(32, 1.0);
        m.registers = 32, m.occupancy = 0.5;
        store.add_measurement(m);
      }
      t.commit();
    }
    state.SetItemsProcessed(state.iterations() * batch);
  }
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + "-wal");
  std::filesystem::remove(path.string() + "-shm");
}
BENCHMARK(BM_InsertMeasurements)->Arg(1)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

/// A database of `rows` measurements, built once: "old" has 25,000, the oldest (every other one
/// with a prediction); kernel "heavy" in 4 contexts holds all but 45,300 (the same); "medium" has
/// 20,000 with predictions, "light" 300, the newest; "none" has a context and no measurement.
struct PastDatabase {
  std::filesystem::path path;
  std::unique_ptr<gputune::db::Store> store;
  std::int64_t device = 0;

  explicit PastDatabase(std::int64_t rows) {
    path = std::filesystem::temp_directory_path() /
           ("gputune-past-bench-" + std::to_string(std::random_device{}()) + ".db");
    store = std::make_unique<gputune::db::Store>(path.string());
    gputune::db::DeviceRecord d;
    d.name = "bench";
    device = store->upsert_device(d);
    auto run = store->begin_run(store->upsert_job("k", "k.json", "{}"), "bench", 0);
    auto kernel_with = [&](const std::string& name, int contexts) {
      auto kernel = store->upsert_kernel(name, name + "-hash", "src");
      std::vector<std::int64_t> ids;
      for (int c = 0; c < contexts; ++c) {
        gputune::db::ContextRecord r;
        r.kernel_id = kernel, r.device_id = device, r.label = name + std::to_string(c);
        r.problem_size_json = "[" + std::to_string(c) + "]";
        ids.push_back(store->upsert_context(r));
      }
      std::vector<std::int64_t> variants;
      for (int v = 0; v < 1000; ++v)
        variants.push_back(store->upsert_variant(kernel, name + std::to_string(v),
                                                 "{\"a\": " + std::to_string(v) + "}"));
      return std::pair{ids, variants};
    };
    auto add = [&](const std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>& k,
                   std::int64_t n, bool every_prediction) {
      for (std::int64_t i = 0; i < n; i += 10000) {
        gputune::db::Transaction t(store->db());
        for (std::int64_t j = i; j < std::min(n, i + 10000); ++j) {
          gputune::db::MeasurementRecord m;
          m.run_id = run, m.context_id = k.first[static_cast<size_t>(j) % k.first.size()];
          m.variant_id = k.second[static_cast<size_t>(j) % k.second.size()];
          m.status = gputune::db::Status::kCorrect, m.time_ms = 1.0 + static_cast<double>(j % 97);
          if (every_prediction || j % 2 == 0) m.predicted_ms = 1.0;
          store->add_measurement(m);
        }
        t.commit();
      }
    };
    const auto old = kernel_with("old", 2), heavy = kernel_with("heavy", 4);
    const auto medium = kernel_with("medium", 2), light = kernel_with("light", 1);
    kernel_with("none", 1);
    add(old, 25000, false);
    add(heavy, std::max<std::int64_t>(0, rows - 45300), false);
    add(medium, 20000, true);
    add(light, 300, true);
  }
  ~PastDatabase() {
    store.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  }
};

PastDatabase& past_database() {
  const char* rows = std::getenv("GPUTUNE_BENCH_ROWS");
  static PastDatabase db(rows ? std::atoll(rows) : 1000000);
  return db;
}

void BM_PredictedTimes(benchmark::State& state, const std::string& kernel) {
  PastDatabase& db = past_database();
  std::size_t found = 0;
  for (auto _ : state) {
    found = db.store->predicted_times(db.device, kernel, 0, 0, 5000).size();
    benchmark::DoNotOptimize(found);
  }
  state.counters["rows"] = static_cast<double>(found);
}
BENCHMARK_CAPTURE(BM_PredictedTimes, heavy, std::string("heavy"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictedTimes, old, std::string("old"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictedTimes, medium, std::string("medium"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictedTimes, light, std::string("light"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PredictedTimes, none, std::string("none"))->Unit(benchmark::kMillisecond);

/// The same rows with or without a prediction (and those of imported caches of a device of the
/// same name): what a search over variants the model cannot read starts from.
void BM_VerifiedTimes(benchmark::State& state, const std::string& kernel) {
  PastDatabase& db = past_database();
  std::size_t found = 0;
  for (auto _ : state) {
    found = db.store->verified_times(db.device, kernel, 0, 0, 5000).size();
    benchmark::DoNotOptimize(found);
  }
  state.counters["rows"] = static_cast<double>(found);
}
BENCHMARK_CAPTURE(BM_VerifiedTimes, heavy, std::string("heavy"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VerifiedTimes, old, std::string("old"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VerifiedTimes, medium, std::string("medium"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VerifiedTimes, light, std::string("light"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_VerifiedTimes, none, std::string("none"))->Unit(benchmark::kMillisecond);

}  // namespace
