// The GPU half of the pipeline (driver loading, buffers, reference, verification, event timing,
// fault recovery, re-measurement, winners) run against a fake libcuda.so.1 (tests/fake_cuda), so it
// is tested on machines without a GPU. The real-device tests are in tests/gpu/.
// Over 800 lines on purpose: every GPU-side behaviour of `gputune run` against the same scripted
// driver, each test a few dozen lines that share its set-up helpers.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include "cuda/cache_admin.h"
#include "db/browse.h"
#include "db/store.h"
#include "fake_process.h"
#include "test_util.h"
#include "tuner/common/command_line.h"
#include "tuner/tools/generate.h"

namespace gputune {
namespace {

namespace fs = std::filesystem;

using test::with_fake;

test::CommandResult sh(const std::string& cmd) { return test::run_command(cmd); }

/// The traffic reports (one per analysed variant) in a cache folder, as `gputune cache` counts
/// them: finished ones only. A process that loses the CUDA context ends at once
/// (HangWatch::stop), and a report it was writing then stays as write_atomically's temporary
/// file until a later run trims the cache.
size_t traffic_reports(const fs::path& cache) { return cuda::cache_usage(cache).traffic.entries; }

/// Rows in the measurements table of a database another process is writing (0 before it has one).
size_t measurement_rows(const std::string& db) {
  sqlite3* h = nullptr;
  size_t n = 0;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(h, 1000);
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, "SELECT count(*) FROM measurements", -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
      n = static_cast<size_t>(sqlite3_column_int64(s, 0));
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return n;
}

using test::start_in_group;

TEST(FakeDriver, FullRunVerifiesTimesRecoversAndPicksTheWinner) {
  test::TempDir dir;
  std::string db = (dir / "g.db").string();
  auto r = sh(with_fake() + "run '" + (test::examples_dir() / "vector_add.json").string() +
              "' --db '" + db + "' --cache-dir '" + (dir / "cache").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Fake GPU (gputune test driver)"), std::string::npos) << r.out;
  db::Store store(db);
  auto winners = store.winners("vector_add");
  ASSERT_EQ(winners.size(), 2u);
  for (auto& w : winners) {
    EXPECT_EQ(w.config_key, "128,2") << w.context_label;  // the fake clock's cheapest geometry
    EXPECT_EQ(w.device, "Fake GPU (gputune test driver)");
    ASSERT_TRUE(w.gbps);
    EXPECT_GT(*w.gbps, 0);
  }
  std::map<std::string, int> by_status;
  for (auto& m : store.measurements(0)) {
    auto params = nlohmann::json::parse(m.params_json);
    int bs = params["block_size_x"], tile = params["tile_size_x"];
    by_status[m.status.str()]++;
    if (bs == 1024) {
      EXPECT_EQ(m.status, db::Status::kRuntime) << m.params_json;
      EXPECT_NE(m.reason.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << m.reason;
      EXPECT_NE(m.reason.find("the CUDA context is lost"), std::string::npos) << m.reason;
    } else if (bs == 512 && tile == 8) {
      EXPECT_EQ(m.status, db::Status::kCorrectness) << m.params_json;
      EXPECT_NE(m.reason.find("differs from the reference"), std::string::npos) << m.reason;
    } else {
      EXPECT_EQ(m.status, db::Status::kCorrect) << m.params_json << " " << m.reason;
      EXPECT_EQ(m.samples_ms.size(), 20u);  // Measurement.Repeats default
      ASSERT_TRUE(m.time_ms);
      EXPECT_GT(*m.time_ms, 0.9);
    }
  }
  EXPECT_EQ(by_status["runtime"], 8);       // 4 tile sizes x 2 contexts
  EXPECT_EQ(by_status["correctness"], 2);   // 1 configuration x 2 contexts
  EXPECT_EQ(by_status["correct"], 38 + 6);  // 19 per context, plus 3 re-measurements per context
  EXPECT_EQ(store.timed_pairs(store.runs()[0].id), 38);  // a re-measured variant counts once
  auto best = test::run_gputune("best vector_add --context 16M --db '" + db + "'");
  EXPECT_NE(best.out.find("\"block_size_x\": 128, \"tile_size_x\": 2"), std::string::npos)
      << best.out;
  EXPECT_EQ(best.out.find("generated variant"), std::string::npos) << best.out;  // parametric
  // `show`: each context's fastest, in the job's order (1M, then 16M), -n per context.
  auto show = test::run_gputune("show 1 -n 2 --db '" + db + "'");
  EXPECT_NE(show.out.find("\n  1M  correct  1.00105 ms  14 regs  occ 1  {\"block_size_x\": 128, "
                          "\"tile_size_x\": 2}\n"),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("\n  (20 more in 1M; -n N lists more)\n  16M  correct  "),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("\n  (20 more in 16M; -n N lists more)\n"), std::string::npos)
      << show.out;
  // Its T4 export: one context per file, the run's two named when none is picked.
  auto both = test::run_gputune("export --t4 --db '" + db + "'");
  EXPECT_EQ(both.exit_code, 2) << both.out;
  EXPECT_NE(both.out.find("measured 2 tuning problems, and a T4 file holds one"), std::string::npos)
      << both.out;
  EXPECT_NE(both.out.find("\n  --context 16M: vector_add on Fake GPU (gputune test driver), "
                          "problem size [16777216,1,1], 27 results (run 1)"),
            std::string::npos)
      << both.out;
  const std::string t4 = (dir / "16M.t4.json").string();
  auto one = test::run_gputune("export --t4 --context 16M --db '" + db + "' -o '" + t4 + "'");
  ASSERT_EQ(one.exit_code, 0) << one.out;
  auto doc = nlohmann::json::parse(test::read_file(t4));
  EXPECT_EQ(doc["results"].size(), 27u);  // 24 configurations, 3 re-measured
  EXPECT_EQ(doc["metadata"]["gputune"]["context"], "16M");
  EXPECT_EQ(doc["metadata"]["gputune"]["problem_size"], nlohmann::json({16777216, 1, 1}));
}

// A naive kernel's winner is generated code: `best` prints the command that writes its source,
// and `best --header` says that the #defines it writes do not make that variant.

TEST(FakeDriver, ANaiveKernelsWinnerComesWithTheCommandThatWritesItsSource) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string();
  test::write_naive_add_job(dir.path(), R"(
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
})");
  auto r = sh(with_fake() + "run '" + (dir / "add.json").string() +
              "' --strategy random --budget 3 --db '" + db + "' --cache-dir '" +
              (dir / "cache").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("block shape only"), std::string::npos) << r.out;
  db::Store store(db);
  const auto winners = store.winners("vector_add");
  ASSERT_EQ(winners.size(), 1u);
  const std::string cmd =
      "gputune generate " + tuner::shell_quote((dir / "add.cu").lexically_normal().string()) +
      " --kernel vector_add --job " + tuner::shell_quote((dir / "add.json").string()) +
      " --config " + tuner::shell_quote(winners[0].config_key);
  auto best = test::run_gputune("best vector_add --db '" + db + "'");
  ASSERT_EQ(best.exit_code, 0) << best.out;
  EXPECT_NE(best.out.find("\n  a generated variant of the naive kernel; its source: " + cmd + "\n"),
            std::string::npos)
      << best.out;
  auto header = test::run_gputune("best vector_add --header - --db '" + db + "'");
  ASSERT_EQ(header.exit_code, 0) << header.out;
  EXPECT_NE(header.out.find("was tuned as a naive kernel: its winners are generated variants, "
                            "which these #defines do not make of its source; `" +
                            cmd + "` writes the source of the winner for 1M on Fake GPU"),
            std::string::npos)
      << header.out;
  // The dashboard's kernel page shows the same command (the daemon gives the Browser the tuner's
  // generate_command); without one it shows none.
  auto page = db::Browser(store, tuner::generate_command).kernel(1);
  ASSERT_TRUE(page);
  ASSERT_EQ((*page)["contexts"].size(), 1u);
  EXPECT_EQ((*page)["contexts"][0]["source_command"], cmd) << page->dump();
  EXPECT_TRUE((*page)["contexts"][0]["naive_fallback"].is_null()) << page->dump();
  EXPECT_TRUE((*db::Browser(store).kernel(1))["contexts"][0]["source_command"].is_null());
  // The command works: it writes the winner's variant.
  auto src = sh("( '" + std::string(GPUTUNE_BINARY) + "'" + cmd.substr(7) + " 2>/dev/null )");
  ASSERT_EQ(src.exit_code, 0) << src.out;
  EXPECT_EQ(
      src.out.rfind("// Generated by gputune from the naive kernel 'vector_add' (add.cu).", 0), 0u)
      << src.out;
}

// A naive kernel outside the generator's subset is tuned over its block shape, as written: the
// run says why, and `show` and `best` say its winner is that kernel at a block shape, with no
// generate command (which would stop on the same construct) and no note on the header (whose
// block_size_x is what its launch needs).
TEST(FakeDriver, ANaiveKernelOutsideTheSubsetWinsAsWrittenAtItsBlockShape) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string();
  test::write_naive_add_job(dir.path(), test::kNaiveAddOutsideTheSubset);
  auto r = sh(with_fake() + "run '" + (dir / "add.json").string() + "' --db '" + db +
              "' --cache-dir '" + (dir / "cache").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string why = "add.cu:4: local array 't': not in the naive subset yet";
  EXPECT_NE(r.out.find("gputune: note: " + why), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("so it is tuned over its block shape only, as written (`gputune generate "
                       "add.cu --kernel vector_add` explains)"),
            std::string::npos)
      << r.out;
  db::Store store(db);
  const auto winners = store.winners("vector_add");
  ASSERT_EQ(winners.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(winners[0].params_json).size(), 1u) << winners[0].params_json;
  auto run = store.run(winners[0].run_id);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->naive_fallback.rfind(why, 0), 0u) << run->naive_fallback;
  auto show = test::run_gputune("show " + std::to_string(run->id) + " --db '" + db + "'");
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("\nblock shape only: " + why), std::string::npos) << show.out;
  auto best = test::run_gputune("best vector_add --db '" + db + "'");
  ASSERT_EQ(best.exit_code, 0) << best.out;
  EXPECT_NE(best.out.find("\n  the naive kernel as written, launched at this block shape (tuned "
                          "over block shape only: " +
                          why),
            std::string::npos)
      << best.out;
  EXPECT_EQ(best.out.find("gputune generate"), std::string::npos) << best.out;
  auto header = test::run_gputune("best vector_add --header - --db '" + db + "'");
  ASSERT_EQ(header.exit_code, 0) << header.out;
  EXPECT_NE(header.out.find("#define block_size_x"), std::string::npos) << header.out;
  EXPECT_EQ(header.out.find("was tuned as a naive kernel"), std::string::npos) << header.out;
  // The dashboard: the run and the kernel page say why, and offer no generate command.
  auto page = db::Browser(store, tuner::generate_command).kernel(1);
  ASSERT_TRUE(page);
  ASSERT_EQ((*page)["contexts"].size(), 1u);
  EXPECT_TRUE((*page)["contexts"][0]["source_command"].is_null()) << page->dump();
  EXPECT_EQ((*page)["contexts"][0]["naive_fallback"].get<std::string>().rfind(why, 0), 0u)
      << page->dump();
  EXPECT_EQ((*db::Browser(store).run(run->id))["naive_fallback"].get<std::string>().rfind(why, 0),
            0u);
  EXPECT_EQ(db::Browser(store).runs(10, 0)[0]["naive_fallback"].get<std::string>().rfind(why, 0),
            0u);
}

// What the naive front end read in another spelling, or could not read, is said once by `run`,
// kept with the run, and shown again by `show` and the dashboard's run page (issue #63).
TEST(FakeDriver, WhatTheFrontEndDidNotUnderstandIsSaidOnceAndKeptWithTheRun) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string();
  const fs::path job =
      fs::path(GPUTUNE_SOURCE_DIR) / "tests" / "data" / "naive" / "counter_after.json";
  auto r = sh(with_fake() + "run '" + job.string() + "' --budget 3 --db '" + db +
              "' --cache-dir '" + (dir / "cache").string() + "'");
  // The fake driver computes vector_add's results only: no variant of this kernel verifies (exit
  // 4), and the run is stored all the same.
  ASSERT_EQ(r.exit_code, 4) << r.out;
  const std::string what =
      "counter_after.cu line 5: 'k' is declared before its loop(s) and not read as their "
      "counter: it is used outside its loops (line 8)";
  size_t said = 0;
  for (size_t at = r.out.find("gputune: note: " + what); at != std::string::npos;
       at = r.out.find("gputune: note: " + what, at + 1))
    ++said;
  EXPECT_EQ(said, 1u) << r.out;
  db::Store store(db);
  const nlohmann::json runs = db::Browser(store).runs(10, 0);
  ASSERT_EQ(runs.size(), 1u);
  const std::int64_t id = runs[0]["id"].get<std::int64_t>();
  const auto run = store.run(id);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->notes.rfind(what, 0), 0u) << run->notes;
  EXPECT_NE((*db::Browser(store).run(id))["notes"].get<std::string>().find(what),
            std::string::npos);
  auto show = test::run_gputune("show " + std::to_string(id) + " --db '" + db + "'");
  ASSERT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("\nnote: " + what), std::string::npos) << show.out;
}

TEST(FakeDriver, DevicesAndNoDevice) {
  auto d = sh(with_fake() + "devices");
  EXPECT_EQ(d.exit_code, 0) << d.out;
  EXPECT_NE(d.out.find("0: Fake GPU (gputune test driver)  sm_90  132 SMs"), std::string::npos)
      << d.out;
  auto none = sh(with_fake("FAKE_CUDA_NO_DEVICE=1") + "devices");
  EXPECT_EQ(none.exit_code, 3) << none.out;
  EXPECT_NE(none.out.find("cuInit failed: CUDA_ERROR_NO_DEVICE"), std::string::npos) << none.out;
}

// The driver is dlopen'ed: the binary must not name libcuda among the libraries the loader
// resolves before main(), or it cannot even print its usage on a machine without a driver.
TEST(NoDriver, TheBinaryDoesNotLinkTheDriver) {
  auto r = test::run_command(std::string("readelf -d '") + GPUTUNE_BINARY + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("libnvrtc.so"), std::string::npos) << r.out;  // the listing is real
  EXPECT_EQ(r.out.find("libcuda"), std::string::npos) << r.out;
}

TEST(FakeDriver, TimeBudgetStopsMeasuring) {
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["GPUTune"]["Budget"] = {{"Seconds", 0.001}};
  test::write_file(dir / "job.json", job.dump());
  auto r = sh(with_fake() + "run '" + (dir / "job.json").string() + "' --db '" +
              (dir / "g.db").string() + "'");
  db::Store store((dir / "g.db").string());
  int skipped = 0;
  for (auto& m : store.measurements(0))
    skipped += m.reason.find("time budget") != std::string::npos;
  EXPECT_GT(skipped, 0) << r.out;
}

// The model's mechanics, without the fake driver's faulting 1024-thread launches: each fault
// ends the tuning process and the run goes on in a new one (FullRunVerifies... and Faults.*
// test that), and the resumed process plans, samples its regret and reports its counts anew.
constexpr const char* kNoFaults = "FAKE_CUDA_FAULT_BLOCK=0";

TEST(FakeDriver, ModelGuidedPredictsStoresCalibratesAndSamplesRegret) {
  // The fake driver's times do not follow the model (they follow its own clock), so this checks
  // the mechanics: every stored variant has a prediction, the calibration is saved per device,
  // the Spearman correlation and the regret sample are reported, the default runs first.
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["GPUTune"]["Contexts"] = {{{"Name", "1M"}, {"ProblemSize", {1048576}}}};
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}};
  job["GPUTune"]["Pruner"] = {{"ModelMargin", 1.0}, {"RegretSample", 2}};  // keep the best only
  test::write_file(dir / "job.json", job.dump());
  std::string db = (dir / "g.db").string();
  auto r = sh(with_fake(kNoFaults) + "run '" + (dir / "job.json").string() + "' --db '" + db + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("gputune: model: 24 of 24 variants predicted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rates from the driver's clock"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gputune: pruner: resources 0 spills 0 duplicate 0 model"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Spearman rank correlation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("calibration fitted on"), std::string::npos) << r.out;
  db::Store store(db);
  auto ms = store.measurements(0);
  ASSERT_FALSE(ms.empty());
  auto first = std::min_element(ms.begin(), ms.end(),
                                [](const auto& a, const auto& b) { return a.id < b.id; });
  EXPECT_TRUE(first->is_default) << "the default configuration is measured first";
  int pruned = 0, sampled = 0;
  for (auto& m : ms) {
    EXPECT_TRUE(m.predicted_ms.has_value()) << m.params_json;
    pruned += m.status == db::Status::kConstraints && m.reason.find("pruned by rule model") == 0;
    sampled += m.reason.find("regret sample") != std::string::npos;
  }
  EXPECT_GT(pruned, 0) << r.out;
  EXPECT_EQ(sampled, 2) << r.out;  // RegretSample of the variants rule 4 removed
  // What rule 4 removed was held back from the search, and each held variant is accounted for:
  // readmitted by a refit and measured, timed in the regret sample, or stored as pruned.
  std::smatch held;
  ASSERT_TRUE(std::regex_search(
      r.out, held,
      std::regex("model_guided: refits on this run's measurements readmitted ([0-9]+) of the "
                 "([0-9]+) variants the model rule held back \\(([0-9]+) of them measured by "
                 "the search\\)")))
      << r.out;
  int readmitted_measured = 0;
  // The note follows the outcome's own reason (a readmitted variant that faulted says why first).
  for (auto& m : ms)
    readmitted_measured += m.reason.find("readmitted: pruned by rule model") != std::string::npos;
  EXPECT_EQ(readmitted_measured, std::stoi(held[3])) << r.out;
  EXPECT_EQ(std::stoi(held[2]), pruned + sampled + readmitted_measured) << r.out;
  EXPECT_NE(r.out.find("gputune: regret sample: 2 pruned or skipped variants timed"),
            std::string::npos)
      << r.out;
  db::Statement c(store.db(), "SELECT count(*), max(samples) FROM model_calibrations");
  ASSERT_TRUE(c.step());
  EXPECT_EQ(c.int64(0), 1);
  EXPECT_GE(c.int64(1), 4);
  // A second run starts from the stored calibration.
  auto again =
      sh(with_fake(kNoFaults) + "run '" + (dir / "job.json").string() + "' --db '" + db + "'");
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("calibration fitted on"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("; calibration fitted on"), std::string::npos) << again.out;
}

TEST(FakeDriver, ModelGuidedSaysWhatItLearnedPerParameterValue) {
  // Every variant kept (margin 100): model_guided measures at least 6 before its stop rule may
  // trust the model, learns each parameter value's measured/predicted ratio from them and orders
  // the rest with it. The fake driver's times are its CPU time, so only the report is checked.
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["GPUTune"]["Contexts"] = {{{"Name", "64K"}, {"ProblemSize", {65536}}}};
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}};
  job["GPUTune"]["Pruner"] = {{"ModelMargin", 100.0}, {"RegretSample", 0}};
  test::write_file(dir / "job.json", job.dump());
  auto r = sh(with_fake() + "run '" + (dir / "job.json").string() + "' --db '" +
              (dir / "g.db").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string line = "gputune: model_guided: what the model misses per parameter value";
  auto at = r.out.find(line);
  ASSERT_NE(at, std::string::npos) << r.out;
  std::smatch m;
  std::string rest = r.out.substr(at, r.out.find('\n', at) - at);
  ASSERT_TRUE(std::regex_search(rest, m, std::regex("learned from ([0-9]+) measurements"))) << rest;
  EXPECT_GE(std::stoi(m[1]), 6) << rest;
  EXPECT_LE(std::stoi(m[1]), 24) << rest;
  // Either no value is 5% off, or the values named are this job's.
  EXPECT_TRUE(rest.find("no value off by 5%") != std::string::npos ||
              std::regex_search(rest, std::regex("(block_size_x|tile_size_x)=[0-9]+ [0-9.]+x")))
      << rest;
}

TEST(FakeDriver, ModelGuidedOrdersVariantsTheAnalysisCannotReadByTheirMeasuredTimes) {
  // A kernel clang cannot parse (NVRTC can): no variant has a prediction, so rule 4 cuts nothing
  // and model_guided measures every variant, ordered by what the times measured so far say about
  // each parameter value (a seeded random start), not in space order. The second context starts
  // from what the first one's times taught.
  test::TempDir dir;
  std::string source = test::read_file(test::examples_dir() / "vector_add.cu");
  source = "#ifdef __clang__\n#error \"this kernel is built by NVRTC only\"\n#endif\n" + source;
  test::write_file(dir / "vector_add.cu", source);
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (dir / "vector_add.cu").string();
  job["GPUTune"]["Contexts"] = {{{"Name", "64K"}, {"ProblemSize", {65536}}},
                                {{"Name", "128K"}, {"ProblemSize", {131072}}}};
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}};
  test::write_file(dir / "job.json", job.dump());
  const std::string db = (dir / "g.db").string();
  auto r = sh(with_fake() + "run '" + (dir / "job.json").string() + "' --db '" + db +
              "' --cache-dir '" + (dir / "cache").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("gputune: model: 0 of 24 variants predicted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("24 variants not analysed (judged by the resource rules only): clang "
                       "could not parse the kernel"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("model_guided stopped after"), std::string::npos) << r.out;
  db::Store store(db);
  std::map<std::int64_t, std::set<std::string>> measured;  // per context
  std::map<std::int64_t, size_t> correct;
  for (auto& m : store.measurements(0))
    if (m.reason.rfind("re-measurement", 0) != 0) {
      measured[m.context_id].insert(m.params_json);
      correct[m.context_id] += m.status == db::Status::kCorrect;
    }
  ASSERT_EQ(measured.size(), 2u);
  for (auto& [ctx, set] : measured) {
    EXPECT_EQ(set.size(), 24u) << "never cut: every variant measured";
    EXPECT_NE(r.out.find("gputune: model_guided: " + std::to_string(correct[ctx]) +
                         " variants without a prediction were measured; the portfolio search "
                         "proposed "),
              std::string::npos)
        << r.out;
  }
  // The first context's verified times (re-measurements aside) order the second one.
  EXPECT_NE(r.out.find("gputune: model_guided: variants without a prediction start from what " +
                       std::to_string(correct.begin()->second) +
                       " earlier measured times of kernel 'vector_add' on this device taught"),
            std::string::npos)
      << r.out;
  // A Kernel Tuner cache of the kernel on this GPU (by name), imported: its times teach the
  // next run's searches too.
  test::write_file(
      dir / "kt.json",
      nlohmann::json({{"kernel_name", "vector_add"},
                      {"device_name", "Fake GPU (gputune test driver)"},
                      {"tune_params_keys", {"block_size_x", "tile_size_x"}},
                      {"problem_size", {1000000}},
                      {"cache",
                       {{"64,1", {{"block_size_x", 64}, {"tile_size_x", 1}, {"time", 0.9}}},
                        {"128,2", {{"block_size_x", 128}, {"tile_size_x", 2}, {"time", 0.4}}},
                        {"256,4", {{"block_size_x", 256}, {"tile_size_x", 4}, {"time", 0.6}}}}}})
          .dump());
  auto imported =
      test::run_gputune("import '" + (dir / "kt.json").string() + "' --db '" + db + "'");
  ASSERT_EQ(imported.exit_code, 0) << imported.out;
  r = sh(with_fake() + "run '" + (dir / "job.json").string() + "' --db '" + db + "' --cache-dir '" +
         (dir / "cache").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(" earlier measured times of kernel 'vector_add' on this device (3 of them "
                       "from imported Kernel Tuner caches) taught"),
            std::string::npos)
      << r.out;
}

TEST(FakeDriver, PortfolioSearchesWithoutTheModelWithinTheBudget) {
  // `--strategy portfolio`: model_guided's search without the model (no analysis, no pruner):
  // the default first, then what the portfolio proposes, as many as the budget. Without the
  // fake driver's faulting 1024-thread launches (each would end the process, and the resumed
  // one would count only its own proposals): its search covers every block size early.
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["ConfigurationSpace"]["TuningParameters"][0]["Values"] = "[32*2**i for i in range(5)]";
  test::write_file(dir / "job.json", job.dump());
  const std::string db = (dir / "p.db").string();
  auto r = sh(with_fake() + "run '" + (dir / "job.json").string() +
              "' --strategy portfolio --budget 12 --db '" + db + "' --cache-dir '" +
              (dir / "cache").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("; strategy portfolio\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("lost the CUDA context"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("gputune: model:"), std::string::npos) << "no model runs: " << r.out;
  EXPECT_EQ(r.out.find("gputune: pruner:"), std::string::npos) << "no pruner: " << r.out;
  db::Store store(db);
  std::map<std::int64_t, std::set<std::string>> measured;  // per context
  for (auto& m : store.measurements(0))
    if (m.reason.rfind("re-measurement", 0) != 0) measured[m.context_id].insert(m.params_json);
  ASSERT_EQ(measured.size(), 2u);  // the example's two contexts
  for (auto& [ctx, set] : measured) EXPECT_EQ(set.size(), 12u) << "the budget, default included";
  EXPECT_NE(r.out.find("gputune: portfolio: 12 variants without a prediction were measured; the "
                       "portfolio search proposed 11 of the variants measured by this process"),
            std::string::npos)
      << r.out;
}

// A space larger than GPUTune.Search.ModelAnalyses is not compiled whole: the model searches it
// from the source alone, and the run compiles and measures only what the search looked at.
TEST(FakeDriver, ModelGuidedSearchesASpaceLargerThanItsAnalysesByTheModel) {
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}, {"ModelAnalyses", 10}};
  job["GPUTune"]["Pruner"] = {{"ModelMargin", 1.0}, {"RegretSample", 2}};
  test::write_file(dir / "job.json", job.dump());
  const std::string db = (dir / "g.db").string();
  const fs::path cache = dir / "cache";
  auto r = sh(with_fake(kNoFaults) + "run '" + (dir / "job.json").string() + "' --db '" + db +
              "' --cache-dir '" + cache.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("gputune: the space holds 24 configurations, more than the 10 the model "
                       "analyses (GPUTune.Search.ModelAnalyses): it searched it and 10 are "
                       "compiled (5 spread over it, 5 near the best it judged"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("near the best it judged, in 1 round); best case"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("the other 14 are left out"), std::string::npos) << r.out;
  // The regret sample sees what the search left out: RegretSample (2) of it join the plan, and
  // with margin 1 rule 4 prunes all but the best, so each context times those two.
  EXPECT_NE(r.out.find("gputune: regret sample: 2 configurations the search left out, drawn at "
                       "random, join the plan"),
            std::string::npos)
      << r.out;
  const std::regex sampled(
      "regret sample: [0-9]+ pruned or skipped variants timed \\(2 of them "
      "left out by the model's search\\)");
  EXPECT_EQ(std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), sampled),
                          std::sregex_iterator()),
            2)
      << r.out;
  // One report per analysed variant and context (the job has two).
  EXPECT_EQ(traffic_reports(cache), 2 * (10u + 2u))
      << "only what the search looked at, and the two drawn, is analysed";
  db::Store store(db);
  std::set<std::string> measured;
  for (auto& m : store.measurements(0)) measured.insert(m.params_json);
  EXPECT_GE(measured.size(), 3u);
  EXPECT_LE(measured.size(), 12u) << "only what the search chose, and the two drawn, is measured";
  // A bad limit on the command line is refused before anything runs.
  auto bad = sh(with_fake() + "run '" + (dir / "job.json").string() + "' --db '" + db +
                "' --model-analyses 1");
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("'--model-analyses': 1 analyses. Fix: give 0 (analyse the whole space) "
                         "or at least 2"),
            std::string::npos)
      << bad.out;
  // --model-analyses 0 (or a job limit the space fits in): the whole space, as before.
  auto whole = sh(with_fake() + "run '" + (dir / "job.json").string() + "' --db '" + db +
                  "' --cache-dir '" + cache.string() + "' --model-analyses 0");
  ASSERT_EQ(whole.exit_code, 0) << whole.out;
  EXPECT_EQ(whole.out.find("the model analyses"), std::string::npos) << whole.out;
  EXPECT_EQ(whole.out.find("join the plan"), std::string::npos) << whole.out;
  EXPECT_EQ(traffic_reports(cache), 2 * 24u);
}

// A resumed run goes on with the plan its model search stored, not with a new search: here the
// resume asks for --model-analyses 0 (the whole space), which a new run would plan. A run that
// planned the whole space goes on with it when the resume gives a limit it exceeds.
TEST(FakeDriver, ResumeGoesOnWithThePlanTheModelSearchStored) {
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}, {"ModelAnalyses", 10}};
  job["GPUTune"]["Pruner"] = {{"ModelMargin", 100.0}, {"RegretSample", 2}};
  test::write_file(dir / "job.json", job.dump());
  const std::string db = (dir / "g.db").string();
  const fs::path cache = dir / "cache";
  const std::string run = "run '" + (dir / "job.json").string() + "' --db '" + db +
                          "' --cache-dir '" + cache.string() + "'";
  // The GPU's memory runs out in the second context: the run fails, resumable.
  auto first = sh(with_fake("FAKE_CUDA_ALLOCS=3") + run);
  ASSERT_EQ(first.exit_code, 1) << first.out;
  ASSERT_NE(first.out.find("it searched it and 10 are compiled"), std::string::npos) << first.out;
  std::optional<db::RunPlan> plan;
  size_t measured_before = 0;
  {
    db::Store store(db);
    ASSERT_EQ(store.run(1)->status, db::RunStatus::kFailed);
    measured_before = store.measured_pairs(1).size();
    plan = store.run_plan(1);
  }
  ASSERT_GT(measured_before, 0u);
  ASSERT_LT(measured_before, 24u);
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->searched);
  EXPECT_EQ(plan->chosen.size(), 10u);
  EXPECT_EQ(plan->left_out.size(), 2u);
  EXPECT_NE(plan->summary.find("the other 14 are left out"), std::string::npos) << plan->summary;
  std::set<std::string> planned(plan->chosen.begin(), plan->chosen.end());
  planned.insert(plan->left_out.begin(), plan->left_out.end());
  EXPECT_EQ(planned.size(), 12u);

  auto resumed = sh(with_fake() + run + " --model-analyses 0 --resume 1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("gputune: run 1 goes on with the plan its model search made (10 "
                             "configurations searched, 2 drawn from the 14 it left out); the "
                             "space is not searched again"),
            std::string::npos)
      << resumed.out;
  EXPECT_EQ(traffic_reports(cache), 2 * 12u) << "nothing outside the stored plan is analysed";
  {
    db::Store store(db);
    const auto r = store.run(1);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, db::RunStatus::kDone);
    EXPECT_EQ(r->total, 2 * 12) << "the plan's 12 configurations in two contexts";
    EXPECT_GT(store.measured_pairs(1).size(), measured_before);
    for (auto& m : store.measurements(1))
      EXPECT_TRUE(planned.count(m.config_key)) << m.config_key << " was not in the stored plan";
    EXPECT_EQ((*db::Browser(store).run(1))["model_search"], plan->summary);
  }
  auto show = sh(with_fake() + "show 1 --db '" + db + "'");
  EXPECT_NE(show.out.find("\nplan: " + plan->summary + "\n"), std::string::npos) << show.out;

  // A run that planned the whole space (no search) goes on with it under a smaller limit.
  auto whole = sh(with_fake("FAKE_CUDA_ALLOCS=3") + run + " --model-analyses 0");
  ASSERT_EQ(whole.exit_code, 1) << whole.out;
  {
    db::Store store(db);
    const auto p = store.run_plan(2);
    ASSERT_TRUE(p);
    EXPECT_FALSE(p->searched);
    EXPECT_TRUE(p->chosen.empty());
  }
  auto on = sh(with_fake() + run + " --resume 2");
  ASSERT_EQ(on.exit_code, 0) << on.out;
  EXPECT_NE(on.out.find("gputune: run 2 planned all 24 configurations without a model search, "
                        "and goes on so"),
            std::string::npos)
      << on.out;
  EXPECT_EQ(on.out.find("more than the 10 the model analyses"), std::string::npos) << on.out;
  EXPECT_EQ(db::Store(db).run(2)->total, 2 * 24);
  db::Store store(db);
  EXPECT_TRUE((*db::Browser(store).run(2))["model_search"].is_null());
  EXPECT_EQ(sh(with_fake() + "show 2 --db '" + db + "'").out.find("plan:"), std::string::npos);
}

// A model-guided search starts from what the kernel's earlier searches on the device measured:
// the second context of a run from the first, every context of a later run from the whole
// first run and the contexts before it. The counts it names are the stored verified times with
// a prediction (re-measurements aside).
TEST(FakeDriver, ModelGuidedStartsFromWhatEarlierContextsAndRunsMeasured) {
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["GPUTune"]["Contexts"] = {{{"Name", "64K"}, {"ProblemSize", {65536}}},
                                {{"Name", "128K"}, {"ProblemSize", {131072}}}};
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}};
  job["GPUTune"]["Pruner"] = {{"ModelMargin", 100.0}, {"RegretSample", 0}};
  test::write_file(dir / "job.json", job.dump());
  const std::string db = (dir / "g.db").string();
  auto run = [&] {
    auto r =
        sh(with_fake(kNoFaults) + "run '" + (dir / "job.json").string() + "' --db '" + db + "'");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    std::vector<int> counts;
    std::regex line(
        "model_guided: starts from what ([0-9]+) earlier measurements of kernel "
        "'vector_add' on this device taught \\(([0-9]+) parameter values");
    for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line);
         it != std::sregex_iterator(); ++it) {
      counts.push_back(std::stoi((*it)[1]));
      EXPECT_GT(std::stoi((*it)[2]), 0) << it->str();
    }
    return std::make_pair(counts, r.out);
  };
  // Verified times with a prediction per run, in context order.
  auto learnable = [&](std::int64_t run_id) {
    db::Store store(db);
    std::map<std::string, int> n;
    for (auto& m : store.measurements(run_id))
      n[m.context_label] += m.status == db::Status::kCorrect && m.predicted_ms &&
                            m.reason.rfind("re-measurement", 0) != 0;
    return std::vector<int>{n["64K"], n["128K"]};
  };
  auto [first, out1] = run();
  auto run1 = learnable(db::Store(db).runs()[0].id);
  ASSERT_GT(run1[0], 0) << out1;
  EXPECT_EQ(first, (std::vector<int>{run1[0]})) << out1;
  auto [second, out2] = run();
  auto runs = db::Store(db).runs();
  ASSERT_EQ(runs.size(), 2u);
  auto run2 = learnable(runs[0].id);  // newest first
  EXPECT_EQ(second, (std::vector<int>{run1[0] + run1[1], run1[0] + run1[1] + run2[0]})) << out2;
}

TEST(FakeDriver, TheScreenMeasuresWhatCompilingEverythingMeasures) {
  // vector_add over 96 configurations (a parameter with no effect quadruples the 24), two
  // contexts, margin 1 (rule 4 keeps only the best prediction). With the screen, what rule 4
  // drops from the source alone is not compiled; what is measured must not change.
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["ConfigurationSpace"]["TuningParameters"].push_back(
      {{"Name", "spare"}, {"Type", "int"}, {"Values", "[0, 1, 2, 3]"}, {"Default", 0}});
  job["GPUTune"]["Pruner"] = {{"Enabled", true}, {"ModelMargin", 1.0}, {"RegretSample", 3}};
  test::write_file(dir / "job.json", job.dump());
  auto measured = [&](const std::string& db, const std::string& flags) {
    auto r = sh(with_fake(kNoFaults) + "run '" + (dir / "job.json").string() + "' --db '" + db +
                "' -j 2 --cache-dir '" + (dir / ("cache" + flags)).string() + "' " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    db::Store store(db);
    std::set<std::string> timed;
    std::map<std::string, int> statuses;
    for (auto& m : store.measurements(0)) {
      ++statuses[m.status.str()];
      if (m.status == db::Status::kCorrect && m.reason.find("re-measurement") != 0)
        timed.insert(std::to_string(m.context_id) + " " + m.params_json);
    }
    return std::make_tuple(r.out, timed, statuses);
  };
  auto [out, timed, statuses] = measured((dir / "s.db").string(), "");
  auto [all_out, all_timed, all_statuses] = measured((dir / "a.db").string(), "--no-screen");
  EXPECT_NE(out.find("gputune: screen: "), std::string::npos) << out;
  EXPECT_EQ(all_out.find("gputune: screen: "), std::string::npos) << all_out;
  const size_t at = out.find("gputune: screen: ") + 17;
  const int screened = std::atoi(out.c_str() + at);
  EXPECT_GT(screened, 10) << out;
  EXPECT_NE(out.find(" of 96 configurations not compiled"), std::string::npos) << out;
  EXPECT_EQ(timed, all_timed);
  // The same variants pruned and stored; the fake driver's injected faults (runtime or
  // correctness) may land on different launches.
  EXPECT_EQ(statuses["constraints"], all_statuses["constraints"]);
  auto total = [](const std::map<std::string, int>& m) {
    int n = 0;
    for (auto& [k, v] : m) n += v;
    return n;
  };
  EXPECT_EQ(total(statuses), total(all_statuses));
  EXPECT_GE(timed.size(), 2u);
  // What the screen judged is stored as pruned by rule 4, with its best case.
  db::Store store((dir / "s.db").string());
  int judged = 0;
  for (auto& m : store.measurements(0))
    judged += m.reason.find("pruned by rule model: not compiled: at best") == 0;
  EXPECT_GE(judged, screened) << out;  // once per context at least
}

TEST(FakeDriver, AVariantCompiledLateWhoseParametersDoNotMatchFailsAlone) {
  // `spare == 3` makes `n` a long long (and the variant slower, so the screen does not compile
  // it); the regret sample compiles those variants late. Each must fail alone, with the
  // argument named, and the run go on: its records exist by then.
  test::TempDir dir;
  std::string src = test::read_file(test::examples_dir() / "vector_add.cu");
  auto swap = [&](const std::string& from, const std::string& to) {
    const size_t at = src.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    src.replace(at, from.size(), to);
  };
  swap("const float* __restrict__ b, int n) {",
       "const float* __restrict__ b,\n#if spare == 3\nlong long n)\n#else\nint n)\n#endif\n{");
  swap("c[j] = a[j] + b[j];",
       "c[j] = a[j] + b[j] + (spare == 3 ? a[(j * 33) % n] + b[(j * 65) % n] : 0.0f);");
  test::write_file(dir / "k.cu", src);
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = "k.cu";
  job["ConfigurationSpace"]["TuningParameters"].push_back(
      {{"Name", "spare"}, {"Type", "int"}, {"Values", "[0, 1, 2, 3]"}, {"Default", 0}});
  job["GPUTune"]["Contexts"] = {{{"Name", "1M"}, {"ProblemSize", {1048576}}}};
  job["GPUTune"]["Pruner"] = {{"Enabled", true}, {"ModelMargin", 1.0}, {"RegretSample", 1000}};
  test::write_file(dir / "job.json", job.dump());
  const std::string db = (dir / "g.db").string();
  auto r = sh(with_fake() + "run '" + (dir / "job.json").string() + "' --db '" + db + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("(24 more could not run)"), std::string::npos) << r.out;
  db::Store store(db);
  int mismatched = 0, correct = 0;
  for (auto& m : store.measurements(0)) {
    const bool spare3 = m.params_json.find("\"spare\":3") != std::string::npos ||
                        m.params_json.find("\"spare\": 3") != std::string::npos;
    if (m.status == db::Status::kCompile &&
        m.reason.find("'KernelSpecification.Arguments[3] (n)'") != std::string::npos) {
      EXPECT_TRUE(spare3) << m.params_json;
      ++mismatched;
    }
    correct += m.status == db::Status::kCorrect;
  }
  EXPECT_EQ(mismatched, 24);
  EXPECT_GT(correct, 10);
}

TEST(FakeDriver, DefaultConfigurationIsAlwaysTheReference) {
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["GPUTune"]["Contexts"] = {{1000}};
  job["GPUTune"]["Search"] = {{"Strategy", "random"}, {"Seed", 3}};
  job["GPUTune"]["Budget"] = {{"Configurations", 3}};
  test::write_file(dir / "job.json", job.dump());
  auto r = sh(with_fake() + "run '" + (dir / "job.json").string() + "' --db '" +
              (dir / "g.db").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  db::Store store((dir / "g.db").string());
  auto ms = store.measurements(0);
  bool has_default = false;
  for (auto& m : ms) has_default = has_default || m.config_key == "256,1";
  EXPECT_TRUE(has_default) << r.out;
  size_t first_pass = 0;
  for (auto& m : ms) first_pass += m.reason.find("re-measurement") == std::string::npos;
  EXPECT_LE(first_pass, 4u);  // the 3 the budget allows, plus the default when random missed it
  EXPECT_GE(first_pass, 3u);
  EXPECT_NE(r.out.find("x    {"), std::string::npos) << "a speedup over the default is shown\n"
                                                     << r.out;
}

TEST(FakeDriver, AFailingDefaultHandsTheReferenceToTheNextCorrectVariant) {
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["GPUTune"]["Contexts"] = {{4096}};
  job["ConfigurationSpace"]["TuningParameters"][0]["Default"] = 1024;  // faults in the fake driver
  test::write_file(dir / "job.json", job.dump());
  const std::string launches = (dir / "launches").string();
  auto r = sh(with_fake("FAKE_CUDA_LAUNCH_LOG='" + launches + "'") + "run '" +
              (dir / "job.json").string() + "' --db '" + (dir / "g.db").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // Which correct variant becomes the reference depends on the order compiles finish in (the
  // pipeline streams them), so the note is read, not assumed: it names a configuration that was
  // measured correct and stored as the reference, and it is not the failing default.
  const std::string note = "reference outputs come from ";
  const auto at = r.out.find(note);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string ref = r.out.substr(at + note.size(), r.out.find('\n', at) - at - note.size());
  EXPECT_NE(ref, "1024,1") << r.out;
  db::Store store((dir / "g.db").string());
  int wrong = 0, references = 0;
  for (auto& m : store.measurements(0)) {
    wrong += m.status == db::Status::kCorrectness;
    if (m.reason.rfind("reference", 0) == 0) {
      ++references;
      EXPECT_EQ(m.config_key, ref) << r.out;
      EXPECT_EQ(m.status, db::Status::kCorrect);
    }
  }
  EXPECT_EQ(references, 1) << r.out;
  EXPECT_EQ(wrong, 1);  // 512,8 is still caught
  // Each of the four 1024-thread configurations loses the context, so five processes ran. Each
  // one after the process that chose the reference captures its outputs again before it runs
  // anything new: its first launch is the reference's (here the block and elements per thread
  // of the configuration), not the next configuration of the search, which would otherwise
  // become the reference unchecked (512,8 did, now and then).
  const auto comma = ref.find(',');
  ASSERT_NE(comma, std::string::npos) << ref;
  const std::string ref_launch = ref.substr(0, comma) + " " + ref.substr(comma + 1);
  std::vector<std::pair<std::string, std::string>> first;  // (pid, its first launch)
  std::istringstream log(test::read_file(launches));
  for (std::string pid, block, tile; log >> pid >> block >> tile;)
    if (first.empty() || first.back().first != pid) first.emplace_back(pid, block + " " + tile);
  ASSERT_EQ(first.size(), 5u) << test::read_file(launches);
  EXPECT_EQ(first[0].second, "1024 1");    // the default
  EXPECT_EQ(first[1].second, ref_launch);  // the first correct one, chosen as the reference
  for (std::size_t p = 2; p < first.size(); ++p)
    EXPECT_EQ(first[p].second, ref_launch) << "process " << p + 1 << " of 5\n" << r.out;
}

/// The correct rows stored in `db` (none while it does not exist yet).
std::vector<db::MeasurementRow> correct_rows(const std::string& db) {
  try {
    db::Store store(db);
    std::vector<db::MeasurementRow> rows;
    for (auto& m : store.measurements(0))
      if (m.status == db::Status::kCorrect) rows.push_back(m);
    return rows;
  } catch (const std::exception&) {  // not created yet
    return {};
  }
}

/// vector_add in one context of 4096 (dir/job.json), run into dir/g.db on the fake driver with
/// its fault off and stopped by Ctrl-C once 4 configurations are stored correct (the default,
/// 256,1, the reference, among them): run 1, interrupted, for a test to resume.
void interrupted_vector_add(const test::TempDir& dir) {
  const std::string db = (dir / "g.db").string(), log = (dir / "out.txt").string();
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["GPUTune"]["Contexts"] = {{4096}};
  test::write_file(dir / "job.json", job.dump());
  const pid_t pid = start_in_group(log, {"run", (dir / "job.json").string(), "--db", db},
                                   {{"FAKE_CUDA_SLOW_MS", "20"}, {"FAKE_CUDA_FAULT_BLOCK", "0"}});
  ASSERT_GE(pid, 0);
  for (int i = 0; i < 600 && correct_rows(db).size() < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(-pid, SIGINT);
  const auto status = test::wait_for_child(pid, 30);
  kill(-pid, SIGKILL);
  ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 5) << test::read_file(log);
}

// A run stopped by Ctrl-C and resumed where its reference configuration (the default) no longer
// launches: the resumed process takes the reference outputs from the fastest configuration
// measured correct before, says so, and verifies everything new against them, so the wrong
// variant (512,8) is still caught, whenever it comes.
TEST(FakeDriver, AResumeWhoseReferenceNoLongerRunsTakesItFromTheFastestCorrectOne) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string(), path = (dir / "job.json").string();
  const std::string launches = (dir / "launches").string();
  interrupted_vector_add(dir);
  if (HasFatalFailure()) return;
  auto correct = [&] { return correct_rows(db); };
  // What the resume should take the reference from: the fastest correct one not on 256 threads.
  std::string fastest;
  double fastest_ms = 1e300;
  bool default_is_reference = false;
  for (auto& m : correct()) {
    default_is_reference |= m.config_key == "256,1" && m.reason.rfind("reference", 0) == 0;
    if (m.config_key.rfind("256,", 0) != 0 && m.time_ms && *m.time_ms < fastest_ms)
      fastest = m.config_key, fastest_ms = *m.time_ms;
  }
  ASSERT_TRUE(default_is_reference);
  ASSERT_FALSE(fastest.empty());
  const std::string resumed_log = (dir / "resumed.txt").string();
  const pid_t again = start_in_group(resumed_log, {"run", path, "--db", db, "--resume", "1"},
                                     {{"FAKE_CUDA_FAULT_BLOCK", "0"},
                                      {"FAKE_CUDA_LAUNCH_FAIL_BLOCK", "256"},
                                      {"FAKE_CUDA_LAUNCH_LOG", launches}});
  const auto resumed = test::wait_for_child(again, 120);
  kill(-again, SIGKILL);
  const std::string out = test::read_file(resumed_log);
  ASSERT_TRUE(resumed && WIFEXITED(*resumed)) << out;
  EXPECT_EQ(WEXITSTATUS(*resumed), 0) << out;
  EXPECT_NE(out.find("the reference configuration 256,1 did not run again; reference outputs come "
                     "from " +
                     fastest + ", measured correct before"),
            std::string::npos)
      << out;
  // Its first launches: the stored reference (fails), then the fastest correct one.
  std::istringstream lines(test::read_file(launches));
  std::vector<std::string> first;
  for (std::string p, block, tile; first.size() < 2 && lines >> p >> block >> tile;)
    first.push_back(block + "," + tile);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0], "256,1");
  EXPECT_EQ(first[1], fastest);
  db::Store store(db);
  int references = 0, wrong = 0;
  for (auto& m : store.measurements(0)) {
    references += m.reason.rfind("reference", 0) == 0;
    if (m.status == db::Status::kCorrectness) {
      ++wrong;
      EXPECT_EQ(m.config_key, "512,8");
    }
  }
  EXPECT_EQ(references, 1);
  EXPECT_EQ(wrong, 1) << out;
}

// A resume whose reference configuration loses the CUDA context when it runs again for its
// outputs: nothing was measured, so nothing is stored for it; the run stops as failed with an
// error that says so (not "goes on without it", as for a variant measured anew), and a later
// resume, on a driver that works, finishes the run with one reference row.
TEST(FakeDriver, AReferenceThatLosesTheContextWhenResumedStopsTheRunAndALaterResumeFinishes) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string(), path = (dir / "job.json").string();
  interrupted_vector_add(dir);
  if (HasFatalFailure()) return;
  const std::size_t stored = db::Store(db).measurements(0).size();
  auto r = sh(with_fake("FAKE_CUDA_FAULT_BLOCK=256") + "run '" + path + "' --db '" + db +
              "' --resume 1");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("configuration 256,1, measured correct before the interruption, lost the "
                       "CUDA context when run again for the reference outputs"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("goes on without it"), std::string::npos) << r.out;
  {
    db::Store store(db);
    EXPECT_EQ(store.measurements(0).size(), stored) << "nothing stored for it";
    EXPECT_EQ(store.run(1)->status, db::RunStatus::kFailed);
  }
  r = sh(with_fake("FAKE_CUDA_FAULT_BLOCK=0") + "run '" + path + "' --db '" + db + "' --resume 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  db::Store store(db);
  int references = 0;
  for (auto& m : store.measurements(0)) references += m.reason.rfind("reference", 0) == 0;
  EXPECT_EQ(references, 1);
  EXPECT_EQ(store.run(1)->status, db::RunStatus::kDone);
}

// Ctrl-C (here SIGINT sent to the process) stops `gputune run` before the next measurement:
// the run is stored as interrupted with what it measured, and the exit code is 5.
TEST(FakeDriver, AnInterruptStopsTheRunAndKeepsWhatWasMeasured) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string(), log = (dir / "out.txt").string();
  const std::string job = (test::examples_dir() / "vector_add.json").string();
  const std::string cache = (dir / "cache").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("LD_LIBRARY_PATH", FAKE_CUDA_DIR, 1);
    setenv("FAKE_CUDA_SLOW_MS", "20", 1);  // 20 ms per launch: each variant takes ~0.5 s
    signal(SIGINT, SIG_DFL);
    if (!std::freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), STDERR_FILENO) < 0)
      _exit(126);
    execl(GPUTUNE_BINARY, GPUTUNE_BINARY, "run", job.c_str(), "--db", db.c_str(), "--cache-dir",
          cache.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until some measurements are stored, then interrupt.
  size_t measured = 0;
  for (int i = 0; i < 600 && measured < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!std::filesystem::exists(db)) continue;
    try {
      db::Store store(db);
      measured = store.measurements(0).size();
    } catch (const std::exception&) {  // not created yet
    }
  }
  ASSERT_GE(measured, 3u) << test::read_file(log);
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string out = test::read_file(log);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 5) << out;
  EXPECT_NE(out.find("stopping before the next measurement"), std::string::npos) << out;
  db::Store store(db);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, db::RunStatus::kInterrupted) << runs[0].message;
  const size_t kept = store.measurements(0).size();  // no re-measurements before the end
  EXPECT_GE(kept, measured);
  EXPECT_LT(kept, 48u);  // 24 configurations x 2 contexts when it runs to the end
  EXPECT_NE(out.find("run " + std::to_string(runs[0].id) + " can be resumed"), std::string::npos)
      << out;

  // Resumed, it measures only the rest, and finishes the same run.
  auto again = sh(with_fake() + "run '" + job + "' --db '" + db + "' --cache-dir '" + cache +
                  "' --resume " + std::to_string(runs[0].id));
  EXPECT_EQ(again.exit_code, 0) << again.out;
  db::Store after(db);
  ASSERT_EQ(after.runs().size(), 1u);
  EXPECT_EQ(after.runs()[0].status, db::RunStatus::kDone);
  // Every (context, configuration) once, besides the winners' re-measurements.
  std::set<std::pair<std::string, std::string>> pairs;
  size_t first_measurements = 0;
  for (const auto& m : after.measurements(0)) {
    if (m.reason.rfind("re-measurement", 0) == 0) continue;
    ++first_measurements;
    pairs.insert({m.context_label, m.config_key});
  }
  EXPECT_EQ(first_measurements, 48u);
  EXPECT_EQ(pairs.size(), 48u);
  // A run of another job is not continued.
  nlohmann::json renamed = nlohmann::json::parse(test::read_file(job));
  renamed["General"]["BenchmarkName"] = "vector_add_2";
  test::write_file(dir / "other.json", renamed.dump());
  test::write_file(dir / "vector_add.cu", test::read_file(test::examples_dir() / "vector_add.cu"));
  auto other = sh(with_fake() + "run '" + (dir / "other.json").string() + "' --db '" + db +
                  "' --cache-dir '" + cache + "' --resume " + std::to_string(runs[0].id));
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.out.find("it ran job 'vector_add', not 'vector_add_2'"), std::string::npos)
      << other.out;
}

// Ctrl-C while the model's search or the screen analyses a large naive space (576,460 variants
// of mm: the whole analysis takes hours on two cores) stops `run` within seconds: before, the
// stop waited for every analysis. The default configuration was compiled and measured at once
// beside the analysis; the run is stored as interrupted with it, nothing else compiled.
TEST(FakeDriver, CtrlCWhileTheScreenAnalysesALargeSpaceStopsAtOnce) {
  // mm's 576,460 variants: by default the model's search analyses them (its limit, 20,000, is
  // far below the space); with --model-analyses 0 the screen analyses the whole space. Either
  // way a Ctrl-C stops the analysis at once, and the run keeps what it measured.
  for (const bool search : {true, false}) {
    SCOPED_TRACE(search ? "the model's search" : "the screen, --model-analyses 0");
    test::TempDir dir;
    const fs::path cache = dir / "cache";
    const std::string db = (dir / "g.db").string(), log = (dir / "out.txt").string();
    const std::string job = (test::source_dir() / "configs" / "naive" / "mm.json").string();
    auto analyses = [&] { return traffic_reports(cache); };
    std::vector<std::string> args{"run",          job,  "--db", db,           "--cache-dir",
                                  cache.string(), "-j", "2",    "--strategy", "model_guided"};
    if (!search) args.insert(args.end(), {"--model-analyses", "0"});
    const pid_t pid = start_in_group(log, args);
    ASSERT_GE(pid, 0);
    // up to 6 minutes: the checking build (ASan, UBSan) took over 2 to enumerate the space
    for (int i = 0; i < 7200 && analyses() < 4; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const size_t before = analyses();
    kill(-pid, SIGINT);  // as a terminal sends it: to the whole group
    const auto status = test::wait_for_child(pid, 30);
    kill(-pid, SIGKILL);  // whatever is left of the group (nothing, when the test passes)
    const std::string out = test::read_file(log);
    ASSERT_GE(before, 4u) << "the analysis never started: " << out;
    ASSERT_TRUE(status) << "not stopped within 30 s: " << out;
    ASSERT_TRUE(WIFEXITED(*status)) << out;
    EXPECT_EQ(WEXITSTATUS(*status), 5) << out;
    EXPECT_NE(out.find(std::string("space 1258988 configurations, planned ") +
                       (search ? "0" : "1258988") + ", compiled 1 (0 from cache), " +
                       "compile failures 0"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("interrupted after 1 measurements; run 1 can be resumed"), std::string::npos)
        << out;
    EXPECT_EQ(out.find("gputune: screen:"), std::string::npos) << out;
    EXPECT_EQ(out.find("it searched it"), std::string::npos) << out;
    EXPECT_LT(analyses(), before + 50) << "the analysis went on after the stop";
    db::Store store(db);
    ASSERT_EQ(store.runs().size(), 1u);
    EXPECT_EQ(store.runs()[0].status, db::RunStatus::kInterrupted);
    const auto rows = store.measurements(0);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_TRUE(rows[0].is_default) << "the default configuration, measured at once";
  }
}

// Ctrl-C while the model analyses the variants (a clang parse per variant, minutes for a large
// space) stops the analysis at once: the run is stored as interrupted with the default
// configuration measured (at once, beside the analysis) and no decision of the partial model (no
// pruned rows), and a resume analyses the rest (reading what was analysed from the cache) and
// finishes the run.
TEST(FakeDriver, CtrlCWhileTheModelAnalysesStoresNothingItDecidedAndResumeFinishes) {
  test::TempDir dir;
  const fs::path cache = dir / "cache";
  const std::string db = (dir / "g.db").string(), log = (dir / "out.txt").string();
  // 10,000 helper functions make each analysis (and compile) take ~0.1 s, so the stop lands
  // while the model is at work whatever the machine's load.
  auto job = test::vector_add_job_in(dir, 10000);
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}};
  job["GPUTune"]["Pruner"] = {{"ModelMargin", 1.0}};  // a finished model prunes
  test::write_file(dir / "job.json", job.dump());
  const std::string job_path = (dir / "job.json").string();
  auto analyses = [&] { return traffic_reports(cache); };
  const pid_t pid = start_in_group(
      log, {"run", job_path, "--db", db, "--cache-dir", cache.string(), "-j", "1", "--no-screen"});
  ASSERT_GE(pid, 0);
  // The stop lands once the default is measured (beside the analysis; on a loaded machine its
  // compile of 10,000 helpers can take longer than two analyses) and the model is at work.
  for (int i = 0; i < 6000 && (analyses() < 2 || measurement_rows(db) < 1); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const size_t before = analyses();
  kill(-pid, SIGINT);
  const auto status = test::wait_for_child(pid, 30);
  kill(-pid, SIGKILL);
  const std::string out = test::read_file(log);
  ASSERT_GE(before, 2u) << "the model never started analysing: " << out;
  ASSERT_TRUE(status) << "not stopped within 30 s: " << out;
  ASSERT_TRUE(WIFEXITED(*status)) << out;
  EXPECT_EQ(WEXITSTATUS(*status), 5) << out;
  EXPECT_NE(out.find("gputune: model: stopped (Ctrl-C) after analysing part of the space"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("gputune: pruner:"), std::string::npos) << "the partial model pruned: " << out;
  EXPECT_NE(out.find("interrupted after 1 measurements; run 1 can be resumed"), std::string::npos)
      << out;
  const size_t stopped_at = analyses();
  EXPECT_LT(stopped_at, 24u) << "the analysis went on after the stop: " << out;
  EXPECT_LE(stopped_at, before + 1) << out;  // the one in hand, with one worker
  {
    db::Store store(db);
    const auto runs = store.runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, db::RunStatus::kInterrupted) << runs[0].message;
    const auto rows = store.measurements(0);
    ASSERT_EQ(rows.size(), 1u) << "rows stored from a partial model";
    EXPECT_TRUE(rows[0].is_default);
  }
  // The resume reads the analyses made before the stop and finishes with the whole model.
  auto resumed = sh(with_fake() + "run '" + job_path + "' --db '" + db + "' --cache-dir '" +
                    cache.string() + "' -j 1 --no-screen --resume 1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("; " + std::to_string(stopped_at) + " analyses from the cache)"),
            std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("gputune: pruner:"), std::string::npos) << resumed.out;
  db::Store store(db);
  EXPECT_EQ(store.runs()[0].status, db::RunStatus::kDone);
  std::set<std::string> variants;  // each measured or pruned, none left out
  for (const auto& m : store.measurements(0)) variants.insert(m.params_json);
  EXPECT_EQ(variants.size(), 24u);
}

// A CUDA device that does not exist, in the job (GPUTune.Device.Index) or on the command line
// (--gpu), is bad input naming the field and the devices there are; --gpu picks the device.
TEST(FakeDriver, ADeviceThatDoesNotExistIsBadInputListingTheDevicesThereAre) {
  test::TempDir dir;
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["GPUTune"]["Device"]["Index"] = 3;
  test::write_file(dir / "job.json", job.dump());
  const std::string file = (dir / "job.json").string(), db = (dir / "g.db").string();
  auto in_job = sh(with_fake() + "run '" + file + "' --db '" + db + "'");
  EXPECT_EQ(in_job.exit_code, 2) << in_job.out;
  EXPECT_NE(in_job.out.find("field 'GPUTune.Device.Index': there is no CUDA device 3: this "
                            "machine has 1 CUDA device: 0 Fake GPU (gputune test driver)"),
            std::string::npos)
      << in_job.out;
  EXPECT_NE(in_job.out.find("Fix: use 0, the only device"), std::string::npos) << in_job.out;
  auto option = sh(with_fake() + "prune '" + file + "' --gpu 1 --no-store --no-model");
  EXPECT_EQ(option.exit_code, 2) << option.out;
  EXPECT_NE(option.out.find("command line: field '--gpu': there is no CUDA device 1"),
            std::string::npos)
      << option.out;
  // --gpu 0 replaces the job's index 3.
  auto ok = sh(with_fake() + "prune '" + file + "' --gpu 0 --no-store --no-model");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("Fake GPU (gputune test driver)"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("model: off (--no-model)"), std::string::npos) << ok.out;
  if (std::filesystem::exists(db)) {  // nothing was stored for the refused run
    db::Store store(db);
    EXPECT_TRUE(store.runs().empty());
  }
}

// Arguments a context needs on the GPU beyond what the device can give (its memory, less the L2
// flush buffer and the CUDA context) are bad input found before anything is compiled or stored.
TEST(FakeDriver, ArgumentsTheGpuCannotHoldAreRefusedBeforeCompiling) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string();
  auto r = sh(with_fake("FAKE_CUDA_TOTAL_MEM=734003200") + "run '" +
              (test::examples_dir() / "vector_add.json").string() + "' --db '" + db +
              "' --cache-dir '" + (dir / "cache").string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("field 'KernelSpecification.Arguments': the arguments need 201326592 bytes "
                       "in context 16M (the largest, Arguments[0] (c), 67108864), more than the "
                       "92274688 bytes that device 0 (Fake GPU (gputune test driver), 734003200 "
                       "bytes) can give them"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "cache")) << "compiled before refusing";
  if (std::filesystem::exists(db)) {
    EXPECT_TRUE(db::Store(db).runs().empty());
  }
}

// An error in the middle of a run (here the GPU's memory taken by someone else) ends the run as
// failed with the reason, not as running for ever; what it measured stays, and --resume
// measures the rest.
TEST(FakeDriver, AnErrorMidRunEndsTheRunAsFailedAndResumeFinishesIt) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string();
  const std::string job = (test::examples_dir() / "vector_add.json").string();
  const std::string cache = " --cache-dir '" + (dir / "cache").string() + "'";
  // Each process allocates the first context's three buffers; the second's fail.
  auto r = sh(with_fake("FAKE_CUDA_ALLOCS=3") + "run '" + job + "' --db '" + db + "'" + cache);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << r.out;
  size_t measured = 0;
  {
    db::Store store(db);
    const auto runs = store.runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].status, db::RunStatus::kFailed);
    EXPECT_EQ(runs[0].message.rfind("stopped by an error: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY", 0),
              0u)
        << runs[0].message;
    measured = store.measured_pairs(runs[0].id).size();
    EXPECT_GT(measured, 0u);
    EXPECT_LT(measured, 48u);
    EXPECT_EQ(runs[0].done, static_cast<std::int64_t>(measured));
  }
  EXPECT_NE(r.out.find("--resume 1` measures the rest"), std::string::npos) << r.out;
  auto again = sh(with_fake() + "run '" + job + "' --db '" + db + "' --resume 1" + cache);
  EXPECT_EQ(again.exit_code, 0) << again.out;
  db::Store store(db);
  const auto run = store.run(1);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, db::RunStatus::kDone);
  EXPECT_EQ(run->done, 48);
  EXPECT_EQ(store.measured_pairs(1).size(), 48u);
}

// A kernel that never returns: after --kernel-timeout the variant is stored as timeout, the run
// as interrupted with the command that goes on, and the process ends (exit 5) instead of hanging;
// resumed, the run skips that variant and finishes.
// --max-restarts 0: the first hang ends the command; the user resumes with the command it printed,
// which keeps every option (here --strategy and a folder whose name needs quoting).
TEST(FakeDriver, AHungKernelStopsTheRunAndResumeSkipsIt) {
  test::TempDir top;
  const std::filesystem::path dir = top / "Bob's jobs";
  std::filesystem::create_directories(dir);
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["ConfigurationSpace"]["TuningParameters"] = {
      {{"Name", "block_size_x"}, {"Type", "int"}, {"Values", "[128, 512]"}, {"Default", 128}},
      {{"Name", "tile_size_x"}, {"Type", "int"}, {"Values", "[1]"}, {"Default", 1}}};
  job["GPUTune"]["Contexts"] = {{{"Name", "1M"}, {"ProblemSize", {1048576}}}};
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}};
  test::write_file(dir / "job.json", job.dump());
  const std::string file = (dir / "job.json").string(), db = (dir / "g.db").string();
  const std::string run = "run " + tuner::shell_quote(file) + " --db " + tuner::shell_quote(db) +
                          " --strategy brute_force --kernel-timeout 1 --max-restarts 0 "
                          "--cache-dir " +
                          tuner::shell_quote((dir / "cache").string());
  const auto started = std::chrono::steady_clock::now();
  auto hung = sh(with_fake("FAKE_CUDA_HANG_BLOCK=512") + run);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60));
  EXPECT_EQ(hung.exit_code, 5) << hung.out;
  const std::string said =
      "gputune: stopped: configuration 512,1 in 1M hung (no return within 1 s); `";
  const size_t at = hung.out.find(said);
  ASSERT_NE(at, std::string::npos) << hung.out;
  const size_t from = at + said.size(), to = hung.out.find('`', from);
  ASSERT_NE(to, std::string::npos) << hung.out;
  const std::string resume = hung.out.substr(from, to - from);
  EXPECT_EQ(resume, "gputune " + run + " --resume 1");
  EXPECT_NE(hung.out.find("` goes on without it"), std::string::npos) << hung.out;
  {
    db::Store store(db);
    const auto r = store.run(1);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, db::RunStatus::kInterrupted);
    EXPECT_EQ(r->strategy, "brute_force");
    bool stored = false;
    for (const auto& m : store.measurements(1))
      stored |= m.config_key == "512,1" && m.status == db::Status::kTimeout &&
                m.reason.rfind("hung: its measurement did not return within 1 s", 0) == 0;
    EXPECT_TRUE(stored);
  }
  // The printed command, as a user pastes it into a shell.
  auto resumed = sh(with_fake("FAKE_CUDA_HANG_BLOCK=512") + resume.substr(resume.find(' ') + 1));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  db::Store store(db);
  EXPECT_EQ(store.run(1)->status, db::RunStatus::kDone);
  const auto winners = store.winners("vector_add");
  ASSERT_EQ(winners.size(), 1u);
  EXPECT_EQ(winners[0].config_key, "128,1");
}

// The vector_add job over block_size_x 128..1024 and tile_size_x 1, 2 in one context of 1M.
std::string hang_job(const test::TempDir& dir, const nlohmann::json& budget = {}) {
  auto job = nlohmann::json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "vector_add.cu").string();
  job["ConfigurationSpace"]["TuningParameters"] = {
      {{"Name", "block_size_x"},
       {"Type", "int"},
       {"Values", "[128, 256, 512, 1024]"},
       {"Default", 128}},
      {{"Name", "tile_size_x"}, {"Type", "int"}, {"Values", "[1, 2]"}, {"Default", 1}}};
  job["GPUTune"]["Contexts"] = {{{"Name", "1M"}, {"ProblemSize", {1048576}}}};
  if (!budget.is_null()) {
    job["GPUTune"]["Budget"] = budget;
    // brute_force, as a budget alone would make the search model_guided's (the stream measures
    // what is compiled first, so the hang comes in either variant of block 512).
    job["GPUTune"]["Search"] = {{"Strategy", "brute_force"}};
  }
  test::write_file(dir / "job.json", job.dump());
  return (dir / "job.json").string();
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// By default one command measures the whole space: after each hang the supervising process starts
// the tuning again with --resume, and the resumed process skips what hung. --max-restarts caps it.
TEST(FakeDriver, HungKernelsRestartTheRunUntilTheSpaceIsMeasured) {
  test::TempDir dir;
  const std::string file = hang_job(dir), db = (dir / "g.db").string();
  const std::string run = "run '" + file + "' --db '" + db + "' --kernel-timeout 1 --cache-dir '" +
                          (dir / "cache").string() + "'";
  auto r = sh(with_fake("FAKE_CUDA_HANG_BLOCK=512") + run);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "gputune: restarting to measure the rest"), 2u) << r.out;
  EXPECT_NE(r.out.find("(2 of at most 10): gputune run " + file), std::string::npos) << r.out;
  // listed in the order they hung, which follows the order compiles finish in
  EXPECT_TRUE(r.out.find("gputune: 2 variants hung and are stored as timeout: configuration 512,1 "
                         "in 1M; configuration 512,2 in 1M\n") != std::string::npos ||
              r.out.find("gputune: 2 variants hung and are stored as timeout: configuration 512,2 "
                         "in 1M; configuration 512,1 in 1M\n") != std::string::npos)
      << r.out;
  {
    db::Store store(db);
    ASSERT_EQ(store.runs().size(), 1u);  // one run, resumed: not one run per process
    EXPECT_EQ(store.run(1)->status, db::RunStatus::kDone);
    std::map<std::string, std::string> status;
    for (const auto& m : store.measurements(1))
      if (m.reason.rfind("re-measurement", 0) != 0) {
        EXPECT_EQ(status.count(m.config_key), 0u) << m.config_key << " measured twice";
        status[m.config_key] = m.status.str();
      }
    EXPECT_EQ(status.size(), 8u);
    EXPECT_EQ(status["512,1"], "timeout");
    EXPECT_EQ(status["512,2"], "timeout");
    EXPECT_EQ(status["128,1"], "correct");
    EXPECT_EQ(status["256,2"], "correct");
    ASSERT_EQ(store.winners("vector_add").size(), 1u);
  }
  const std::string db2 = (dir / "g2.db").string();
  auto capped =
      sh(with_fake("FAKE_CUDA_HANG_BLOCK=512") + "run '" + file + "' --db '" + db2 +
         "' --kernel-timeout 1 --max-restarts 1 --cache-dir '" + (dir / "cache").string() + "'");
  EXPECT_EQ(capped.exit_code, 5) << capped.out;
  EXPECT_EQ(count_of(capped.out, "gputune: restarting"), 1u) << capped.out;
  EXPECT_NE(capped.out.find("not restarting: 1 restart after hung kernels already "
                            "(--max-restarts 1)"),
            std::string::npos)
      << capped.out;
  EXPECT_NE(capped.out.find("gputune: 2 variants hung and are stored as timeout"),
            std::string::npos)
      << capped.out;
  EXPECT_EQ(db::Store(db2).run(1)->status, db::RunStatus::kInterrupted);
}

// After a hang that took longer than the job's time budget: one variant of block 512 hung (which
// one depends on the order compiles finish in: the stream measures what is ready first), what was
// measured before it is correct, and everything else, the other variant of block 512 included
// (it would hang too), is stored as not run for the budget, without being measured.
void expect_one_hang_then_the_budget_spent(
    const std::map<std::string, db::MeasurementRecord>& by_key) {
  std::size_t hung = 0, correct = 0, not_run = 0;
  for (const auto& [key, m] : by_key) {
    const bool budget = m.status == db::Status::kTimeout &&
                        m.reason.find("the job's time budget was spent") != std::string::npos;
    if (m.reason.rfind("hung:", 0) == 0) {
      ++hung;
      EXPECT_EQ(key.rfind("512,", 0), 0u) << key << " hung";
      EXPECT_EQ(m.status, db::Status::kTimeout) << key;
      continue;
    }
    if (key.rfind("512,", 0) == 0) {
      EXPECT_TRUE(budget) << key << " (block 512 hangs if measured): " << m.status << ", "
                          << m.reason;
    }
    correct += m.status == db::Status::kCorrect;
    not_run += budget;
  }
  EXPECT_EQ(hung, 1u);
  EXPECT_GE(not_run, 1u);  // the other 512 at least
  EXPECT_EQ(hung + correct + not_run, by_key.size());
}

// The job's time budget covers the whole run, restarts included: the restarted process is left
// what the first one did not spend (here nothing, as the hang alone took longer than the budget).
// The budget, 3 s, leaves the four configurations before the hang time to be measured in the
// checking build too (ASan and UBSan make each launch of the fake driver slower).
TEST(FakeDriver, ARestartAfterAHangKeepsTheTimeBudget) {
  test::TempDir dir;
  const std::string file = hang_job(dir, {{"Seconds", 3}}), db = (dir / "g.db").string();
  auto r = sh(with_fake("FAKE_CUDA_HANG_BLOCK=512") + "run '" + file + "' --db '" + db +
              "' --kernel-timeout 4 --cache-dir '" + (dir / "cache").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "gputune: restarting"), 1u) << r.out;
  db::Store store(db);
  std::map<std::string, db::MeasurementRecord> by_key;
  for (const auto& m : store.measurements(1))
    if (m.reason.rfind("re-measurement", 0) != 0) by_key[m.config_key] = m;
  ASSERT_EQ(by_key.size(), 8u);
  expect_one_hang_then_the_budget_spent(by_key);
}

// A resume typed by hand goes on with what is left of the time budget too: the run stores the
// seconds it spent measuring (here the hang, 4 s, is more than the 3 s budget).
TEST(FakeDriver, AResumeByHandGoesOnWithWhatIsLeftOfTheTimeBudget) {
  test::TempDir dir;
  const std::string file = hang_job(dir, {{"Seconds", 3}}), db = (dir / "g.db").string();
  const std::string run = "run '" + file + "' --db '" + db + "' --kernel-timeout 4 --cache-dir '" +
                          (dir / "cache").string() + "'";
  auto hung = sh(with_fake("FAKE_CUDA_HANG_BLOCK=512") + run + " --max-restarts 0");
  ASSERT_EQ(hung.exit_code, 5) << hung.out;
  const std::optional<double> stopped = db::Store(db).run(1)->seconds_spent;
  ASSERT_TRUE(stopped.has_value());
  EXPECT_GE(*stopped, 4.0);
  auto resumed = sh(with_fake("") + run + " --resume 1");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("gputune: note: run 1 has spent "), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("it goes on with the 0 s left of its 3 s time budget"),
            std::string::npos)
      << resumed.out;
  db::Store store(db);
  std::map<std::string, db::MeasurementRecord> by_key;
  for (const auto& m : store.measurements(1))
    if (m.reason.rfind("re-measurement", 0) != 0) by_key[m.config_key] = m;
  ASSERT_EQ(by_key.size(), 8u);
  expect_one_hang_then_the_budget_spent(by_key);
  ASSERT_TRUE(store.run(1)->seconds_spent.has_value());
  EXPECT_GE(*store.run(1)->seconds_spent, *stopped);  // the resume added its own
  auto show = sh(with_fake("") + "show 1 --db '" + db + "'");
  EXPECT_NE(show.out.find(" s measuring"), std::string::npos) << show.out;
}

// model_guided's budget of configurations covers the whole run too: the restarted process counts
// what the run measured before (the one that hung included) and measures nothing more.
TEST(FakeDriver, ARestartAfterAHangKeepsTheConfigurationBudget) {
  test::TempDir dir;
  const std::string file = hang_job(dir, {{"Configurations", 3}}), db = (dir / "g.db").string();
  auto job = nlohmann::json::parse(test::read_file(file));
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}};
  job["GPUTune"]["Pruner"] = {{"RegretSample", 0}};
  test::write_file(file, job.dump());
  auto r = sh(with_fake("FAKE_CUDA_HANG_BLOCK=256") + "run '" + file + "' --db '" + db +
              "' --kernel-timeout 1 --cache-dir '" + (dir / "cache").string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "gputune: restarting"), 1u) << r.out;
  std::vector<std::string> measured;
  for (const auto& m : db::Store(db).measurements(1))
    if (m.reason.rfind("re-measurement", 0) != 0)
      measured.push_back(m.config_key + " " + m.status.str());
  EXPECT_EQ(measured.size(), 3u) << ::testing::PrintToString(measured);
}

// The calibration a run fits on a GPU (its device record named by the driver) is what `prune
// --device` uses for that GPU's device file, which lists the driver's name as an alias.
TEST(FakeDriver, PruneForADescribedDeviceUsesTheCalibrationItsRunsFitted) {
  test::TempDir dir;
  const std::string file = hang_job(dir), db = (dir / "g.db").string();
  auto job = nlohmann::json::parse(test::read_file(file));
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}};
  test::write_file(file, job.dump());
  // The H200's file, with the fake driver's name (cc 9.0 and 132 SMs, as an H200) as an alias.
  auto h200 = nlohmann::json::parse(
      test::read_file(test::source_dir() / "configs" / "devices" / "h200.json"));
  h200["aliases"].push_back("Fake GPU (gputune test driver)");
  std::filesystem::create_directories(dir / "devices");
  test::write_file(dir / "devices" / "h200.json", h200.dump());
  const std::string prune = "env GPUTUNE_DEVICES_DIR='" + (dir / "devices").string() + "' '" +
                            GPUTUNE_BINARY + "' prune '" + file + "' --device h200 --db '" + db +
                            "' --cache-dir '" + (dir / "cache").string() + "'";
  auto before = sh(prune);
  EXPECT_EQ(before.exit_code, 0) << before.out;
  EXPECT_NE(before.out.find("calibration default constants"), std::string::npos) << before.out;
  auto run = sh(with_fake(kNoFaults) + "run '" + file + "' --db '" + db + "' --cache-dir '" +
                (dir / "cache").string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  std::smatch fitted;
  ASSERT_TRUE(std::regex_search(run.out, fitted,
                                std::regex("model: calibration fitted on (\\d+) measurements")))
      << run.out;
  auto after = sh(prune);
  EXPECT_EQ(after.exit_code, 0) << after.out;
  EXPECT_NE(after.out.find("calibration fitted on " + fitted[1].str() +
                           " measurements on Fake GPU (gputune test driver) (moved to these "
                           "rates)"),
            std::string::npos)
      << after.out;
}

// Starts `gputune ARGS` with the fake driver hanging 512-thread launches, in a process group of
// its own, output to `log`.
pid_t start_hanging_run(const std::vector<std::string>& args, const std::string& log,
                        const std::string& mark = "") {
  return start_in_group(log, args,
                        {{"FAKE_CUDA_HANG_BLOCK", "512"}, {"FAKE_CUDA_HANG_MARK", mark}});
}

// Waits up to `seconds` for `pid`; false if it is still running.
bool wait_for(pid_t pid, int& status, double seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// The supervisor passes stop signals on: a SIGTERM sent to it alone stops the tuning process
// cleanly (no restart after the hang it is waiting on; the run is stored as interrupted), a second
// one ends it at once. A signal sent to the whole process group reaches the tuning process twice
// (directly and through the supervisor), which still counts as one; one sent to the tuning process
// alone also means no restart. (The first compile in the tuning process is NVRTC's: it swaps the
// signal handlers, which must not matter.)
TEST(FakeDriver, StopSignalsReachTheTuningProcessOnceThroughTheSupervisor) {
  test::TempDir dir;
  const std::string file = hang_job(dir);
  const std::string cache = (dir / "cache").string(), log = (dir / "out.txt").string();
  auto hung_in = [&](const std::string& db) {
    const std::string mark = db + ".hung";
    const pid_t pid = start_hanging_run(
        {"run", file, "--db", db, "--kernel-timeout", "3", "--cache-dir", cache}, log, mark);
    // The fake driver marks the 512-thread variant's launch, which will not return, as it begins
    // (compiles and measurements overlap: how many were stored by then varies).
    for (int i = 0; i < 1200 && !std::filesystem::exists(mark); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        ADD_FAILURE() << "the run ended before its hang: " << test::read_file(log);
        return pid_t{-1};
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return pid;
  };
  {  // the whole group, once
    const std::string db = (dir / "group.db").string();
    const pid_t pid = hung_in(db);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(-pid, SIGTERM), 0);
    int status = 0;
    ASSERT_TRUE(wait_for(pid, status, 30)) << test::read_file(log);
    const std::string out = test::read_file(log);
    ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << ": " << out;
    EXPECT_EQ(WEXITSTATUS(status), 5) << out;
    EXPECT_EQ(out.find("restarting"), std::string::npos) << out;
    EXPECT_NE(out.find("stopping before the next measurement"), std::string::npos) << out;
    EXPECT_EQ(db::Store(db).run(1)->status, db::RunStatus::kInterrupted);
  }
  {  // the tuning process alone: it was asked to stop, so the hang it then reports is no reason
     // to restart
    const std::string db = (dir / "child.db").string();
    const pid_t pid = hung_in(db);
    ASSERT_GT(pid, 0);
    const std::string children = test::read_file("/proc/" + std::to_string(pid) + "/task/" +
                                                 std::to_string(pid) + "/children");
    ASSERT_FALSE(children.empty()) << test::read_file(log);
    ASSERT_EQ(kill(static_cast<pid_t>(std::stol(children)), SIGTERM), 0);
    int status = 0;
    ASSERT_TRUE(wait_for(pid, status, 30)) << test::read_file(log);
    const std::string out = test::read_file(log);
    ASSERT_TRUE(WIFEXITED(status)) << out;
    EXPECT_EQ(WEXITSTATUS(status), 5) << out;
    EXPECT_NE(out.find("hung (no return within 3 s)"), std::string::npos) << out;
    EXPECT_EQ(out.find("restarting"), std::string::npos) << out;
  }
  {  // the supervisor alone, twice
    const std::string db = (dir / "twice.db").string();
    const pid_t pid = hung_in(db);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int status = 0;
    EXPECT_FALSE(wait_for(pid, status, 1)) << test::read_file(log);  // waits on the hung launch
    const std::string first = test::read_file(log);
    EXPECT_NE(first.find("stopping before the next measurement"), std::string::npos) << first;
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    ASSERT_TRUE(wait_for(pid, status, 1.5)) << test::read_file(log);  // before the 3 s limit
    ASSERT_TRUE(WIFSIGNALED(status)) << test::read_file(log);
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
  }
}

}  // namespace
}  // namespace gputune

namespace gputune {
namespace {

using test::integrity;

// Issue #47's finding: `gputune run` killed with SIGKILL again and again during its measurements
// and resumed each time measured some configurations twice. Its child (the process that
// measures) is told to stop when the parent dies, and stores the variant in flight before it
// exits; a resume started meanwhile had read what was stored without it. Now a resume waits for
// that process (db/run_lock.h), a winner's re-measurements are not made twice, and a resumed
// configuration is compiled before it is re-measured.
TEST(FakeDriver, KilledAgainAndAgainAndResumedEveryPairIsMeasuredExactlyOnce) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string(), log = (dir / "out.txt").string();
  const std::string job = (test::examples_dir() / "vector_add.json").string();
  const std::string cache = (dir / "cache").string();
  const std::vector<std::pair<std::string, std::string>> slow = {{"FAKE_CUDA_SLOW_MS", "8"}};
  std::vector<std::string> args = {"run", job, "--db", db, "--cache-dir", cache};
  std::mt19937 rng(47);
  std::uniform_int_distribution<int> wait_ms(300, 1400);
  std::size_t stored_before = 0;
  int kills = 0;
  for (int i = 0; i < 14; ++i) {
    const pid_t pid = start_in_group(log, args, slow);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(i == 0 ? 2500 : wait_ms(rng)));
    kills += kill(pid, SIGKILL) == 0;
    int status = 0;
    waitpid(pid, &status, 0);
    if (i == 0) args.insert(args.end(), {"--resume", "1"});
    // What was stored stays stored, whenever the kill came.
    const std::size_t stored = measurement_rows(db);
    EXPECT_GE(stored, stored_before) << "after kill " << i;
    stored_before = stored;
  }
  EXPECT_GE(kills, 12);
  auto last = sh(with_fake() + "run '" + job + "' --db '" + db + "' --cache-dir '" + cache +
                 "' --resume 1");
  ASSERT_EQ(last.exit_code, 0) << last.out;
  EXPECT_EQ(integrity(db), "ok");
  db::Store store(db);
  ASSERT_EQ(store.runs().size(), 1u);
  EXPECT_EQ(store.runs()[0].status, db::RunStatus::kDone);
  std::map<std::pair<std::string, std::string>, int> first, again;
  for (const auto& m : store.measurements(0))
    ++(m.reason.rfind("re-measurement", 0) == 0 ? again : first)[{m.context_label, m.config_key}];
  EXPECT_EQ(first.size(), 48u);  // 24 configurations x 2 contexts
  for (const auto& [pair, n] : first)
    EXPECT_EQ(n, 1) << pair.first << " " << pair.second << " measured " << n << " times";
  EXPECT_EQ(again.size(), 6u);  // the top 3 of each context
  for (const auto& [pair, n] : again)
    EXPECT_EQ(n, 1) << pair.first << " " << pair.second << " re-measured " << n << " times";
  for (const auto& m : store.measurements(0)) {
    if (m.reason.rfind("re-measurement", 0) == 0) {
      EXPECT_EQ(m.status, db::Status::kCorrect) << m.reason;  // compiled before re-measuring
    }
  }
}

}  // namespace
}  // namespace gputune
