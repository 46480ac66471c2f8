// Database insert rate: measurements (with 32 samples each) per second, in batches of one
// transaction, as `gputune run` and `gputune import` write them.
#include <benchmark/benchmark.h>

#include <filesystem>
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
        m.run_id = run, m.context_id = ctx, m.variant_id = v, m.status = "correct",
        m.time_ms = 1.0 + i;
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

}  // namespace
