// Builds a database of N measurements (default 1,000,000) for the web benchmarks: one kernel on
// one device, 8 contexts, 100,000 variants, and runs of 600k, 100k x 4 measurements, with winners.
// Usage: make_big_db FILE [N]
#include <cstdio>
#include <random>
#include <string>

#include "db/store.h"

using namespace gputune;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_big_db FILE [N]\n");
    return 2;
  }
  long total = argc > 2 ? std::stol(argv[2]) : 1000000;
  db::Store store(argv[1]);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0.5, 5.0);
  db::Transaction t(store.db());
  auto kernel = store.upsert_kernel("bench_kernel", "benchhash", "// synthetic");
  db::DeviceRecord d;
  d.name = "Synthetic GPU";
  d.cc_major = 9, d.sm_count = 132;
  auto dev = store.upsert_device(d);
  std::vector<std::int64_t> ctx;
  for (int c = 0; c < 8; ++c) {
    db::ContextRecord r;
    r.kernel_id = kernel, r.device_id = dev, r.label = "ctx-" + std::to_string(c);
    r.problem_size_json = "[" + std::to_string(1024 << c) + ",1,1]", r.arch = "sm_90";
    ctx.push_back(store.upsert_context(r));
  }
  const int variants = 100000;
  std::vector<std::int64_t> var(variants);
  for (int v = 0; v < variants; ++v) {
    int bx = 16 << (v % 6), by = 1 << ((v / 6) % 6), tx = 1 + (v / 36) % 8, ty = 1 + (v / 288) % 8,
        u2 = v / 2304;
    std::string key = std::to_string(bx) + "," + std::to_string(by) + "," + std::to_string(tx) +
                      "," + std::to_string(ty) + "," + std::to_string(u2);
    std::string params =
        "{\"block_size_x\": " + std::to_string(bx) + ", \"block_size_y\": " + std::to_string(by) +
        ", \"tile_size_x\": " + std::to_string(tx) + ", \"tile_size_y\": " + std::to_string(ty) +
        ", \"unroll\": " + std::to_string(u2) + "}";
    var[static_cast<size_t>(v)] = store.upsert_variant(kernel, key, params);
  }
  auto job = store.upsert_job("bench_kernel", "bench.json", "{\"synthetic\": true}");
  std::vector<long> sizes = {total * 6 / 10, total / 10, total / 10, total / 10,
                             total - total * 6 / 10 - 3 * (total / 10)};
  static const char* statuses[] = {"correct", "correct", "correct", "correct",     "correct",
                                   "correct", "compile", "runtime", "correctness", "timeout"};
  long done = 0;
  for (long n : sizes) {
    auto run = store.begin_run(job, "brute_force", n);
    std::vector<std::pair<double, std::int64_t>> best(ctx.size(), {1e300, 0});
    for (long i = 0; i < n; ++i) {
      db::MeasurementRecord m;
      m.run_id = run, m.context_id = ctx[static_cast<size_t>(i % 8)],
      m.variant_id = var[static_cast<size_t>((i / 8) % variants)];
      m.status = db::Status(statuses[rng() % 10]);
      m.registers = 16 + static_cast<int>(rng() % 200),
      m.occupancy = 0.125 * static_cast<double>(1 + rng() % 8);
      m.compile_ms = 100 + u(rng) * 50;
      m.is_default = (i / 8) % variants == 0;
      if (m.status == db::Status::kCorrect) {
        m.time_ms = u(rng);
        m.samples_ms.assign(20, *m.time_ms);
        m.predicted_ms = *m.time_ms * (0.7 + 0.6 * u(rng) / 5);
      } else {
        m.reason = "synthetic failure";
      }
      auto id = store.add_measurement(m);
      auto& b = best[static_cast<size_t>(i % 8)];
      if (m.time_ms && *m.time_ms < b.first) b = {*m.time_ms, id};
    }
    for (size_t c = 0; c < ctx.size(); ++c)
      if (best[c].second) store.offer_winner(ctx[c], best[c].second);
    store.update_run_progress(run, n);
    store.finish_run(run, db::RunStatus::kDone, "synthetic");
    done += n;
    std::fprintf(stderr, "%ld measurements\n", done);
  }
  t.commit();
  return 0;
}
