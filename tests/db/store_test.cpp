#include "db/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <functional>
#include <set>
#include <thread>

#include "db/browse.h"
#include "test_util.h"

namespace gputune::db {
namespace {

struct Fixture {
  test::TempDir dir;
  Store store{(dir / "g.db").string()};
  std::int64_t kernel = 0, device = 0, context = 0, run = 0, v1 = 0, v2 = 0;
  Fixture() {
    kernel = store.upsert_kernel("matmul", "abc123", "source");
    DeviceRecord d;
    d.name = "NVIDIA H100";
    d.cc_major = 9, d.sm_count = 132;
    device = store.upsert_device(d);
    ContextRecord c;
    c.kernel_id = kernel, c.device_id = device, c.label = "4096",
    c.problem_size_json = "[4096,1,1]";
    c.arch = "sm_90", c.toolkit_version = "13.0", c.nvrtc_version = "13.0";
    context = store.upsert_context(c);
    std::int64_t job = store.upsert_job("matmul", "/x/matmul.json", "{}");
    run = store.begin_run(job, "brute_force", 2);
    v1 = store.upsert_variant(kernel, "16,1", R"({"a": 16, "b": 1})");
    v2 = store.upsert_variant(kernel, "32,1", R"({"a": 32, "b": 1})");
  }
  std::int64_t measure(std::int64_t v, const std::string& status, std::optional<double> t) {
    MeasurementRecord m;
    m.run_id = run, m.context_id = context, m.variant_id = v, m.status = Status(status),
    m.time_ms = t;
    if (t) m.samples_ms = {*t, *t + 0.1};
    return store.add_measurement(m);
  }
};

TEST(Store, UpsertsAreIdempotentByContentHash) {
  Fixture f;
  EXPECT_EQ(f.store.upsert_kernel("matmul", "abc123", "source"), f.kernel);
  EXPECT_EQ(f.store.upsert_variant(f.kernel, "16,1", "{}"), f.v1);
  DeviceRecord d;
  d.name = "NVIDIA H100";
  d.cc_major = 9, d.sm_count = 132;
  EXPECT_EQ(f.store.upsert_device(d), f.device);
  EXPECT_EQ(f.store.upsert_job("matmul", "/x/matmul.json", "{}"),
            f.store.upsert_job("m", "other", "{}"));
}

// A run names its fastest first pass as it goes (provisional), so a run stopped early has a
// winner; its re-measured winner then takes that place, compared with the winner the provisional
// one replaced, which comes back when the re-measured time does not beat it.
TEST(Store, AProvisionalWinnerGivesWayToItsRunsReMeasuredOne) {
  Fixture f;
  const std::int64_t earlier = f.measure(f.v1, "correct", 5.0);  // an earlier run's winner
  ASSERT_TRUE(f.store.offer_winner(f.context, earlier));
  const std::int64_t job = f.store.upsert_job("matmul", "/x/matmul.json", "{}");
  const std::int64_t first_run = f.run;
  f.run = f.store.begin_run(job, "random", 2);
  auto winner = [&] {
    auto w = f.store.winners("matmul");
    EXPECT_EQ(w.size(), 1u);
    return w.empty() ? WinnerRow{} : w[0];
  };
  // A first pass at 4.0 replaces it provisionally; a slower one changes nothing, a faster one
  // replaces the provisional one.
  EXPECT_TRUE(f.store.offer_winner(f.context, f.measure(f.v2, "correct", 4.0), true));
  EXPECT_TRUE(winner().provisional);
  EXPECT_FALSE(f.store.offer_winner(f.context, f.measure(f.v1, "correct", 4.5), true));
  const std::int64_t fast = f.measure(f.v2, "correct", 3.5);
  EXPECT_TRUE(f.store.offer_winner(f.context, fast, true));
  EXPECT_EQ(winner().measurement_id, fast);
  // Its re-measurement, 4.2 (slower than the 3.5 first pass, faster than the earlier run's 5.0),
  // is the winner, no longer provisional.
  const std::int64_t fresh = f.measure(f.v2, "correct", 4.2);
  EXPECT_TRUE(f.store.offer_winner(f.context, fresh));
  EXPECT_EQ(winner().measurement_id, fresh);
  EXPECT_FALSE(winner().provisional);
  // Another run's provisional first pass at 4.1 and its re-measurement at 6.0: the 4.2 winner
  // it replaced comes back.
  f.run = f.store.begin_run(job, "random", 2);
  EXPECT_TRUE(f.store.offer_winner(f.context, f.measure(f.v1, "correct", 4.1), true));
  EXPECT_FALSE(f.store.offer_winner(f.context, f.measure(f.v1, "correct", 6.0)));
  EXPECT_EQ(winner().measurement_id, fresh);
  EXPECT_FALSE(winner().provisional);
  EXPECT_EQ(winner().run_id, f.run - 1);
  (void)first_run;
}

// A run that stored nothing can be discarded (bad input found once it had begun); one with
// measurements cannot.
TEST(Store, OnlyARunWithoutMeasurementsIsDiscarded) {
  Fixture f;
  EXPECT_TRUE(f.store.discard_run(f.run));
  EXPECT_FALSE(f.store.run(f.run).has_value());
  const std::int64_t job = f.store.upsert_job("matmul", "/x/matmul.json", "{}");
  f.run = f.store.begin_run(job, "brute_force", 2);
  f.measure(f.v1, "correct", 1.0);
  EXPECT_FALSE(f.store.discard_run(f.run));
  EXPECT_TRUE(f.store.run(f.run).has_value());
}

TEST(Store, WinnerIsTheFastestCorrectMeasurement) {
  Fixture f;
  auto slow = f.measure(f.v1, "correct", 2.0);
  auto failed = f.measure(f.v2, "runtime", std::nullopt);
  EXPECT_TRUE(f.store.offer_winner(f.context, slow));
  EXPECT_FALSE(f.store.offer_winner(f.context, failed));  // a failure never wins
  auto fast = f.measure(f.v2, "correct", 1.0);
  EXPECT_TRUE(f.store.offer_winner(f.context, fast));
  EXPECT_FALSE(f.store.offer_winner(f.context, slow));
  auto w = f.store.winners("matmul");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].config_key, "32,1");
  EXPECT_DOUBLE_EQ(w[0].time_ms, 1.0);
  EXPECT_EQ(w[0].device, "NVIDIA H100");
  EXPECT_EQ(f.store.winners("matmul", "4096").size(), 1u);
  EXPECT_TRUE(f.store.winners("matmul", "1024").empty());
  EXPECT_EQ(f.store.winners("abc").size(), 1u);  // hash prefix
}

// The winner rule is the schema's (views correct_measurements and run_bests, schema 14): of a
// run's correct measurements in a context the fastest, ties to the one stored first; a failure
// never counts, however fast its time, and another run keeps a best of its own.
TEST(Store, ARunsBestIsItsFastestCorrectMeasurementTiesToTheFirstStored) {
  Fixture f;
  EXPECT_FALSE(f.store.fastest_correct(f.run, f.context)) << "nothing measured yet";
  f.measure(f.v1, "correct", 2.0);
  f.measure(f.v1, "correctness", 0.5);  // timed, wrong output: never a best
  EXPECT_EQ(f.store.fastest_correct(f.run, f.context)->config_key, "16,1");
  f.measure(f.v2, "correct", 1.0);
  f.measure(f.v1, "correct", 1.0);  // the same time, stored later
  auto best = f.store.fastest_correct(f.run, f.context);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config_key, "32,1");
  EXPECT_DOUBLE_EQ(best->time_ms, 1.0);
  EXPECT_EQ(f.store.timed_pairs(f.run), 2) << "two (context, variant) pairs measured correct";
  // Another run of the job, slower: each run's best is its own; the dashboard reads the same.
  const std::int64_t second =
      f.store.begin_run(f.store.upsert_job("matmul", "/x/matmul.json", "{}"), "brute_force", 1);
  MeasurementRecord m;
  m.run_id = second, m.context_id = f.context, m.variant_id = f.v1, m.status = Status::kCorrect,
  m.time_ms = 3.0;
  f.store.add_measurement(m);
  EXPECT_DOUBLE_EQ(f.store.fastest_correct(second, f.context)->time_ms, 3.0);
  Browser b(f.store);
  EXPECT_DOUBLE_EQ((*b.run(f.run))["contexts"][0]["best_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ((*b.run(second))["contexts"][0]["best_ms"].get<double>(), 3.0);
  const auto history = (*b.context_history(f.context))["runs"];
  ASSERT_EQ(history.size(), 2u);
  EXPECT_DOUBLE_EQ(history[0]["best_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(history[1]["best_ms"].get<double>(), 3.0);
  const auto runs = b.runs(10, 0);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_DOUBLE_EQ(runs[0]["best_ms"].get<double>(), 3.0);  // newest first
  EXPECT_DOUBLE_EQ(runs[1]["best_ms"].get<double>(), 1.0);
}

// What `run --skip-unchanged` stands on: a finished run of the same job document and strategy
// that measured in the same context, where the context's identity covers the kernel's source,
// the device, the driver and the toolkit. Looking reads only.
TEST(Store, AnUnchangedRunIsAFinishedRunOfTheSameJobKernelAndContexts) {
  Fixture f;
  ContextRecord now;
  now.device_id = f.device, now.label = "4096", now.problem_size_json = "[4096,1,1]";
  now.arch = "sm_90", now.toolkit_version = "13.0", now.nvrtc_version = "13.0";
  EXPECT_FALSE(f.store.unchanged_run("{}", "brute_force", "abc123", {now}));  // still running
  f.measure(f.v1, "correct", 2.0);
  f.store.finish_run(f.run, db::RunStatus::kDone, "");
  auto r = f.store.unchanged_run("{}", "brute_force", "abc123", {now});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, f.run);
  EXPECT_FALSE(f.store.unchanged_run("{}", "random", "abc123", {now}));  // another search
  EXPECT_FALSE(f.store.unchanged_run("{\"x\": 1}", "brute_force", "abc123", {now}));  // job
  EXPECT_FALSE(f.store.unchanged_run("{}", "brute_force", "edited", {now}));  // kernel source
  for (auto change : std::vector<std::function<void(ContextRecord&)>>{
           [](ContextRecord& c) { c.driver_version = 13010; },
           [](ContextRecord& c) { c.toolkit_version = "13.1"; },
           [](ContextRecord& c) { c.problem_size_json = "[8192,1,1]"; }}) {
    ContextRecord c = now;
    change(c);
    EXPECT_FALSE(f.store.unchanged_run("{}", "brute_force", "abc123", {c}));
    // A context it did not measure in, next to one it did: not the same either.
    EXPECT_FALSE(f.store.unchanged_run("{}", "brute_force", "abc123", {now, c}));
  }
  Statement n(f.store.db(), "SELECT count(*) FROM contexts");
  n.step();
  EXPECT_EQ(n.int64(0), 1);  // nothing was inserted by looking
}

// What a model-guided search starts from: verified times with a prediction of the kernel (by
// name, any version of its source) on the device, newest first, without the (run, context) it
// is about to measure, re-measurements, failures and times without a prediction.
TEST(Store, PredictedTimesAreTheKernelsVerifiedTimesWithAPredictionOnTheDevice) {
  Fixture f;
  auto add = [&](std::int64_t run, std::int64_t ctx, std::int64_t v, const std::string& status,
                 std::optional<double> t, std::optional<double> predicted,
                 const std::string& reason = "") {
    MeasurementRecord m;
    m.run_id = run, m.context_id = ctx, m.variant_id = v, m.status = Status(status), m.time_ms = t;
    m.predicted_ms = predicted, m.reason = reason;
    return f.store.add_measurement(m);
  };
  // An edited source of the same kernel, in another context, and another device.
  auto edited = f.store.upsert_kernel("matmul", "def456", "edited source");
  auto other_kernel = f.store.upsert_kernel("transpose", "aaa111", "source");
  DeviceRecord d;
  d.name = "NVIDIA A100", d.cc_major = 8, d.sm_count = 108;
  auto a100 = f.store.upsert_device(d);
  auto context_of = [&](std::int64_t kernel, std::int64_t device, const std::string& label) {
    ContextRecord c;
    c.kernel_id = kernel, c.device_id = device, c.label = label, c.problem_size_json = "[1]";
    c.arch = "sm_90", c.toolkit_version = "13.0", c.nvrtc_version = "13.0";
    return f.store.upsert_context(c);
  };
  auto edited_ctx = context_of(edited, f.device, "1024");
  auto other_ctx = context_of(other_kernel, f.device, "4096");
  auto a100_ctx = context_of(f.kernel, a100, "4096");
  auto ve = f.store.upsert_variant(edited, "64,2", R"({"a": 64, "b": 2})");
  auto later =
      f.store.begin_run(f.store.upsert_job("matmul", "/x/m.json", "{}"), "model_guided", 0);

  add(f.run, f.context, f.v1, "correct", 2.0, 1.0);
  add(f.run, f.context, f.v2, "correct", 3.0, std::nullopt);  // no prediction
  add(f.run, f.context, f.v2, "runtime", std::nullopt, 1.0);  // failed
  add(f.run, f.context, f.v1, "correct", 2.1, 1.0, "re-measurement of a top-3 variant");
  add(later, edited_ctx, ve, "correct", 0.5, 0.25);
  add(later, other_ctx, f.v1, "correct", 1.0, 1.0);  // another kernel
  add(later, a100_ctx, f.v1, "correct", 1.0, 1.0);   // another device
  add(later, f.context, f.v2, "correct", 9.0, 1.0);  // the (run, context) being measured

  auto rows = f.store.predicted_times(f.device, "matmul", later, f.context, 100);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].params_json, R"({"a": 64, "b": 2})") << "newest first";
  EXPECT_EQ(rows[0].run_id, later);
  EXPECT_EQ(rows[0].context_id, edited_ctx);
  EXPECT_DOUBLE_EQ(rows[0].time_ms, 0.5);
  EXPECT_DOUBLE_EQ(rows[0].predicted_ms, 0.25);
  EXPECT_EQ(rows[1].context_id, f.context);
  EXPECT_DOUBLE_EQ(rows[1].time_ms, 2.0);
  EXPECT_EQ(f.store.predicted_times(f.device, "matmul", later, f.context, 1).size(), 1u);
  EXPECT_EQ(f.store.predicted_times(f.device, "matmul", later, edited_ctx, 100).size(), 2u)
      << "the other (run, context) counts now";
  EXPECT_EQ(f.store.predicted_times(a100, "matmul", later, f.context, 100).size(), 1u);
  EXPECT_TRUE(f.store.predicted_times(f.device, "conv", later, f.context, 100).empty());
  // verified_times: the same rows, and the verified time without a prediction too (0 there).
  auto all = f.store.verified_times(f.device, "matmul", later, f.context, 100);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_DOUBLE_EQ(all[0].time_ms, 0.5);
  EXPECT_DOUBLE_EQ(all[1].time_ms, 3.0);
  EXPECT_DOUBLE_EQ(all[1].predicted_ms, 0.0) << "no prediction";
  EXPECT_DOUBLE_EQ(all[2].time_ms, 2.0);
  EXPECT_DOUBLE_EQ(all[2].predicted_ms, 1.0);
  EXPECT_EQ(f.store.verified_times(f.device, "matmul", later, f.context, 2).size(), 2u);
  EXPECT_EQ(f.store.verified_times(a100, "matmul", later, f.context, 100).size(), 1u);
  for (const auto& row : all) EXPECT_FALSE(row.imported);
  // An imported Kernel Tuner cache of the kernel on a device of the same name (in other case):
  // its times teach verified_times (there is no prediction to learn from for predicted_times).
  DeviceRecord imported_device;
  imported_device.name = "nvidia a100", imported_device.source = "import";
  auto import_ctx = context_of(f.kernel, f.store.upsert_device(imported_device), "25000");
  auto import_run = f.store.begin_run(f.store.upsert_job("matmul", "/x/c.json", "{}"), "import", 1);
  add(import_run, import_ctx, f.v1, "correct", 7.0, std::nullopt);
  auto with_import = f.store.verified_times(a100, "matmul", later, f.context, 100);
  ASSERT_EQ(with_import.size(), 2u);
  EXPECT_DOUBLE_EQ(with_import[0].time_ms, 7.0);
  EXPECT_TRUE(with_import[0].imported);
  EXPECT_FALSE(with_import[1].imported);
  EXPECT_EQ(f.store.predicted_times(a100, "matmul", later, f.context, 100).size(), 1u);
  // Another GPU's import teaches nothing here.
  EXPECT_EQ(f.store.verified_times(f.device, "matmul", later, f.context, 100).size(), 3u);
}

// predicted_times finds a kernel's rows from its contexts while it has few (up to 20,000
// verified) and by walking all rows newest first beyond: either way, the newest `limit` that pass
// its filters, as a plain walk over what was stored finds them.
TEST(Store, PredictedTimesAreTheNewestPassingRowsWithFewOrManyMeasurements) {
  Fixture f;
  auto other_kernel = f.store.upsert_kernel("transpose", "aaa111", "source");
  ContextRecord c;
  c.kernel_id = f.kernel, c.device_id = f.device, c.label = "2048", c.problem_size_json = "[2]";
  auto second_ctx = f.store.upsert_context(c);
  c.kernel_id = other_kernel, c.label = "4096";
  auto other_ctx = f.store.upsert_context(c);
  auto later =
      f.store.begin_run(f.store.upsert_job("matmul", "/x/m.json", "{}"), "model_guided", 0);
  struct Row {
    std::int64_t run, ctx, v;
    double time;
    bool passes;
  };
  std::vector<Row> stored;  // matmul's, in insertion order
  std::int64_t correct = 0, next = 0;
  auto add_rows = [&](std::int64_t n) {
    Transaction t(f.store.db());
    for (std::int64_t k = 0; k < n; ++k, ++next) {
      MeasurementRecord m;
      m.variant_id = next % 3 ? f.v1 : f.v2;
      m.run_id = next % 5 == 0 ? later : f.run;
      m.context_id = next % 2 ? f.context : second_ctx;
      m.status = next % 11 == 0 ? Status::kRuntime : Status::kCorrect;
      if (m.status == Status::kCorrect) m.time_ms = 1.0 + static_cast<double>(next);
      if (next % 7) m.predicted_ms = 1.0;
      if (next % 13 == 0) m.reason = "re-measurement of a top-3 variant";
      f.store.add_measurement(m);
      correct += m.status == Status::kCorrect;
      const bool skipped = m.run_id == later && m.context_id == f.context;
      stored.push_back(
          {m.run_id, m.context_id, m.variant_id, m.time_ms.value_or(0),
           m.status == Status::kCorrect && m.predicted_ms && m.reason.empty() && !skipped});
      if (next % 4 == 0) {  // another kernel's rows in between
        MeasurementRecord o = m;
        o.context_id = other_ctx, o.status = Status::kCorrect, o.time_ms = 0.5,
        o.predicted_ms = 1.0;
        o.reason.clear();
        f.store.add_measurement(o);
      }
    }
    t.commit();
  };
  auto expect_newest = [&](int limit) {
    std::vector<Row> want;
    for (auto it = stored.rbegin(); it != stored.rend() && std::ssize(want) < limit; ++it)
      if (it->passes) want.push_back(*it);
    const auto got = f.store.predicted_times(f.device, "matmul", later, f.context, limit);
    ASSERT_EQ(got.size(), want.size()) << "limit " << limit << ", " << correct << " verified";
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_DOUBLE_EQ(got[i].time_ms, want[i].time) << i;
      ASSERT_EQ(got[i].context_id, want[i].ctx) << i;
      ASSERT_EQ(got[i].run_id, want[i].run) << i;
      ASSERT_EQ(got[i].params_json,
                want[i].v == f.v1 ? R"({"a": 16, "b": 1})" : R"({"a": 32, "b": 1})")
          << i;
    }
  };
  add_rows(21000);  // 19,090 verified: found from the contexts
  ASSERT_LT(correct, 20000);
  expect_newest(5000);
  expect_newest(100000);  // all of them
  add_rows(2000);         // 20,909 verified: found newest first
  ASSERT_GT(correct, 20000);
  expect_newest(5000);
  expect_newest(100000);
}

TEST(Store, MeasurementsKeepEverySample) {
  Fixture f;
  f.measure(f.v1, "correct", 2.0);
  f.measure(f.v2, "compile", std::nullopt);
  auto ms = f.store.measurements(f.run);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].status, Status::kCorrect);  // correct first
  EXPECT_EQ(ms[0].samples_ms, (std::vector<double>{2.0, 2.1}));
  EXPECT_EQ(ms[1].status, Status::kCompile);
  EXPECT_EQ(ms[0].params_json, R"({"a": 16, "b": 1})");
}

// A run, a context, both or neither select the measurements (each filter on its own index);
// a run's devices are those of the contexts it measured.
TEST(Store, MeasurementsAreSelectedByRunContextBothOrNeither) {
  Fixture f;
  ContextRecord other;
  other.kernel_id = f.kernel, other.device_id = f.device, other.label = "8192",
  other.problem_size_json = "[8192,1,1]", other.arch = "sm_90";
  const std::int64_t ctx2 = f.store.upsert_context(other);
  DeviceRecord a100;
  a100.name = "NVIDIA A100", a100.cc_major = 8, a100.sm_count = 108;
  other.device_id = f.store.upsert_device(a100), other.label = "a100";
  const std::int64_t ctx3 = f.store.upsert_context(other);
  const std::int64_t run2 =
      f.store.begin_run(f.store.upsert_job("m", "/m.json", "{}"), "random", 1);
  auto add = [&](std::int64_t run, std::int64_t ctx, double t) {
    MeasurementRecord m;
    m.run_id = run, m.context_id = ctx, m.variant_id = f.v1, m.status = Status::kCorrect,
    m.time_ms = t;
    return f.store.add_measurement(m);
  };
  const std::int64_t a = add(f.run, f.context, 1), b = add(f.run, ctx2, 2), c = add(run2, ctx2, 3),
                     d = add(run2, ctx3, 4);
  auto ids = [&](std::int64_t run, std::int64_t ctx) {
    std::set<std::int64_t> out;
    for (const MeasurementRow& m : f.store.measurements(run, ctx)) out.insert(m.id);
    return out;
  };
  EXPECT_EQ(ids(f.run, 0), (std::set<std::int64_t>{a, b}));
  EXPECT_EQ(ids(0, ctx2), (std::set<std::int64_t>{b, c}));
  EXPECT_EQ(ids(run2, ctx2), (std::set<std::int64_t>{c}));
  EXPECT_EQ(ids(f.run, ctx3), (std::set<std::int64_t>{}));
  EXPECT_EQ(ids(0, 0), (std::set<std::int64_t>{a, b, c, d}));
  auto names = [&](std::int64_t run) {
    std::vector<std::string> out;
    for (const DeviceRecord& dev : f.store.devices(run)) out.push_back(dev.name);
    return out;
  };
  EXPECT_EQ(names(f.run), (std::vector<std::string>{"NVIDIA H100"}));
  EXPECT_EQ(names(run2), (std::vector<std::string>{"NVIDIA H100", "NVIDIA A100"}));
  EXPECT_EQ(names(0), (std::vector<std::string>{"NVIDIA H100", "NVIDIA A100"}));
}

TEST(Store, RejectsBadRows) {
  Fixture f;
  MeasurementRecord m;
  m.run_id = f.run, m.context_id = f.context, m.variant_id = f.v1,
  m.status = Status(std::string("great"));
  EXPECT_THROW(f.store.add_measurement(m), DbError);
  m.status = Status::kCorrect;  // correct without a time violates the schema's CHECK
  EXPECT_THROW(f.store.add_measurement(m), DbError);
  m.status = Status::kRuntime, m.variant_id = 999;  // foreign key
  EXPECT_THROW(f.store.add_measurement(m), DbError);
}

TEST(Store, RunsAreRecorded) {
  Fixture f;
  EXPECT_FALSE(f.store.run(f.run)->seconds_spent);  // nothing measured yet
  f.store.update_run_progress(f.run, 1, 3.5);
  f.store.update_run_progress(f.run, 2);  // progress alone keeps the seconds
  f.store.finish_run(f.run, db::RunStatus::kDone, "ok");
  auto r = f.store.run(f.run);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, db::RunStatus::kDone);
  EXPECT_EQ(r->done, 2);
  ASSERT_TRUE(r->seconds_spent);
  EXPECT_DOUBLE_EQ(*r->seconds_spent, 3.5);
  EXPECT_EQ(r->uid.size(), 32u);
  EXPECT_FALSE(r->finished_at.empty());
  EXPECT_FALSE(f.store.run(12345));
  EXPECT_EQ(f.store.runs().size(), 1u);
  // The dashboard's API carries them, in the list and for one run.
  db::Browser browse(f.store);
  EXPECT_DOUBLE_EQ(browse.runs(20, 0)[0]["seconds_spent"].get<double>(), 3.5);
  EXPECT_TRUE(browse.runs(20, 0)[0]["budget"].is_null());
  f.store.set_run_seconds_spent(f.run, 4.25);
  EXPECT_DOUBLE_EQ((*browse.run(f.run))["seconds_spent"].get<double>(), 4.25);
}

// A model_guided run's plan, what `run --resume` goes on with: stored, replaced, read back, and
// a damaged one is an error that names the run instead of a plan made up.
TEST(Store, ARunsPlanIsStoredAndReadBack) {
  Fixture f;
  EXPECT_FALSE(f.store.run_plan(f.run)) << "no plan was stored";
  RunPlan p;
  p.searched = true;
  p.chosen = {"16,4,8", "8,8,8"}, p.left_out = {"32,1,1"};
  p.summary = "the space holds 576,460 configurations";
  f.store.save_run_plan(f.run, p);
  auto back = f.store.run_plan(f.run);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->searched);
  EXPECT_EQ(back->chosen, p.chosen);
  EXPECT_EQ(back->left_out, p.left_out);
  EXPECT_EQ(back->summary, p.summary);
  f.store.save_run_plan(f.run, RunPlan{});  // a later save replaces it
  back = f.store.run_plan(f.run);
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->searched);
  EXPECT_TRUE(back->chosen.empty());
  f.store.db().exec("UPDATE run_plans SET plan_json='{\"searched\": 1}'");
  try {
    f.store.run_plan(f.run);
    ADD_FAILURE() << "a damaged plan was read";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("the plan stored with run " + std::to_string(f.run) +
                                         " is not readable"),
              std::string::npos)
        << e.what();
  }
}

TEST(Store, ReopeningKeepsDataAndSchema) {
  test::TempDir dir;
  auto path = (dir / "g.db").string();
  {
    Store s(path);
    s.upsert_kernel("k", "h", "src");
  }
  Store s(path);
  EXPECT_EQ(s.upsert_kernel("k", "h", "src"), 1);
  Statement v(s.db(), "PRAGMA user_version");
  v.step();
  EXPECT_EQ(v.int64(0), Store::kSchemaVersion);
  Statement j(s.db(), "PRAGMA journal_mode");
  j.step();
  EXPECT_EQ(j.text(0), "wal");
}

// The dashboard's kernel list reads each kernel's variant count from the kernel's row, kept by
// triggers: counting them per request took 5 ms of a core over 100,000 variants
// (bench/results/load-*.md). The count must stay right through whatever writes variants.
TEST(Store, AKernelsVariantCountIsKeptByTriggers) {
  test::TempDir dir;
  const auto path = (dir / "g.db").string();
  {
    // A version-11 database, as the release before the count wrote it, with two variants.
    Database d(path);
    for (int i = 0; i < 11; ++i) d.exec(schema_migrations()[static_cast<size_t>(i)]);
    d.exec("PRAGMA application_id=" + std::to_string(Store::kApplicationId) +
           "; PRAGMA user_version=11;"
           "INSERT INTO kernels(hash,name,source) VALUES('h1','a',''),('h2','b','');"
           "INSERT INTO variants(hash,kernel_id,config_key,params) "
           "VALUES('v1',1,'1','{}'),('v2',1,'2','{}');");
  }
  Store s(path);
  auto counts = [&] {
    std::vector<std::int64_t> out;
    for (const auto& k : Browser(s).kernels()) out.push_back(k["variants"].get<std::int64_t>());
    return out;
  };
  EXPECT_EQ(counts(), (std::vector<std::int64_t>{2, 0})) << "the migration counts what is there";
  const std::int64_t b = s.upsert_kernel("b", "h2", "");
  s.upsert_variant(b, "1", "{}");
  s.upsert_variant(b, "2", "{}");
  s.upsert_variant(b, "2", "{}");  // already there: not counted twice
  EXPECT_EQ(counts(), (std::vector<std::int64_t>{2, 2}));
  s.db().exec("DELETE FROM variants WHERE hash='v2'");
  EXPECT_EQ(counts(), (std::vector<std::int64_t>{1, 2}));
  s.db().exec("UPDATE variants SET kernel_id=2 WHERE hash='v1'");
  EXPECT_EQ(counts(), (std::vector<std::int64_t>{0, 3}));
  // The list does not read the variants table at all: SQLite's authorizer sees every table a
  // statement reads as it is prepared.
  std::set<std::string> read;
  auto record = [](void* out, int action, const char* table, const char*, const char*,
                   const char*) {
    if (action == SQLITE_READ && table) static_cast<std::set<std::string>*>(out)->insert(table);
    return SQLITE_OK;
  };
  sqlite3_set_authorizer(s.db().get(), record, &read);
  EXPECT_EQ(counts().size(), 2u);
  sqlite3_set_authorizer(s.db().get(), nullptr, nullptr);
  EXPECT_TRUE(read.count("kernels"));
  EXPECT_FALSE(read.count("variants"));
}

// A page of one context's measurements by time reads its ids from an index alone: before,
// it read a table row for each measurement of the run, in time order, until it had a page of
// that context's (1.5 ms per page over 600,000 in 8 contexts: bench/results/load-*.md).
TEST(Store, APageOfOneContextsMeasurementsByTimeReadsAboutAPageOfRows) {
  Fixture f;
  std::vector<std::int64_t> contexts = {f.context};
  for (int i = 1; i < 8; ++i) {
    ContextRecord c;
    c.kernel_id = f.kernel, c.device_id = f.device, c.label = "n" + std::to_string(i),
    c.problem_size_json = "[" + std::to_string(i) + ",1,1]";
    c.arch = "sm_90", c.toolkit_version = "13.0", c.nvrtc_version = "13.0";
    contexts.push_back(f.store.upsert_context(c));
  }
  // 8,000 measurements, the contexts taking turns and the times in no order of ids.
  f.store.db().exec("BEGIN");
  for (int i = 0; i < 8000; ++i) {
    MeasurementRecord m;
    m.run_id = f.run, m.context_id = contexts[static_cast<size_t>(i % 8)];
    m.variant_id = i % 2 ? f.v1 : f.v2, m.status = Status::kCorrect;
    m.time_ms = 1.0 + (i * 7919 % 8000) / 1000.0;
    m.log = std::string(200, 'x');  // rows as wide as a compile log makes them
    f.store.add_measurement(m);
  }
  f.store.db().exec("COMMIT");
  MeasurementQuery q;
  q.run_id = f.run, q.context_id = contexts[3], q.limit = 50;
  auto pages_read = [&] {
    int hit = 0, miss = 0, high = 0;
    sqlite3_db_status(f.store.db().get(), SQLITE_DBSTATUS_CACHE_HIT, &hit, &high, 0);
    sqlite3_db_status(f.store.db().get(), SQLITE_DBSTATUS_CACHE_MISS, &miss, &high, 0);
    return hit + miss;
  };
  const int before = pages_read();
  const auto page = Browser(f.store).measurements(q);
  const int read = pages_read() - before;
  ASSERT_EQ(page["items"].size(), 50u);
  EXPECT_EQ(page["total"].get<int>(), 1000);
  double last = 0;
  for (const auto& m : page["items"]) {
    EXPECT_EQ(m["context_id"].get<std::int64_t>(), contexts[3]);
    EXPECT_GE(m["time_ms"].get<double>(), last);
    last = m["time_ms"].get<double>();
  }
  // 50 rows, each a walk from the table's root, plus the index's pages: not the 400 rows of the
  // run the page's 50 are among.
  EXPECT_LT(read, 400) << "pages read for one page of 50";
}

// A daemon, a CLI run and a reader can open the same new file at the same moment: each one
// must find the schema whole, and none may run a migration another has already applied.
TEST(Store, ProcessesOpeningANewFileTogetherEachFindTheWholeSchema) {
  for (int round = 0; round < 20; ++round) {
    test::TempDir dir;
    const auto path = (dir / "g.db").string();
    std::vector<std::string> errors(4);
    std::vector<std::thread> openers;
    for (size_t i = 0; i < errors.size(); ++i)
      openers.emplace_back([&, i] {
        try {
          Store s(path);
          s.upsert_kernel("k" + std::to_string(i), "h" + std::to_string(i), "src");
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    for (auto& t : openers) t.join();
    for (const auto& e : errors) ASSERT_EQ(e, "") << "round " << round;
    Store s(path);
    Statement v(s.db(), "PRAGMA user_version");
    v.step();
    EXPECT_EQ(v.int64(0), Store::kSchemaVersion);
    Statement k(s.db(), "SELECT count(*) FROM kernels");
    k.step();
    EXPECT_EQ(k.int64(0), 4);
  }
}

TEST(Store, MigratesAnOlderSchemaKeepingItsData) {
  test::TempDir dir;
  auto path = (dir / "old.db").string();
  {
    // A version-1 database, as the first release wrote it, with a measurement in it.
    Database d(path);
    d.exec(schema_migrations()[0]);
    d.exec("PRAGMA application_id=" + std::to_string(Store::kApplicationId) +
           "; PRAGMA user_version=1;");
    d.exec(
        "INSERT INTO devices(uid,name,cc_major,cc_minor,sm_count,total_mem,source) "
        "VALUES('u','GPU',9,0,132,0,'driver');"
        "INSERT INTO kernels(hash,name,source) VALUES('h','k','');"
        "INSERT INTO jobs(hash,name,file,document) VALUES('j','k','k.json','{}');"
        "INSERT INTO runs(uid,job_id,strategy,status) VALUES('r',1,'brute_force','done');"
        "INSERT INTO "
        "contexts(hash,kernel_id,device_id,label,problem_size,input_values,arch,driver_version,"
        "toolkit_version,nvrtc_version) "
        "VALUES('c',1,1,'4096','[4096]','{}','sm_90',0,'13.0','13.0');"
        "INSERT INTO variants(hash,kernel_id,config_key,params) VALUES('v',1,'1','{\"a\": 1}');"
        "INSERT INTO measurements(run_id,context_id,variant_id,status,time_ms) "
        "VALUES(1,1,1,'correct',2.5);");
  }
  Store s(path);
  Statement v(s.db(), "PRAGMA user_version");
  v.step();
  EXPECT_EQ(v.int64(0), Store::kSchemaVersion);
  auto ms = s.measurements(1);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_DOUBLE_EQ(*ms[0].time_ms, 2.5);
  // A run stored before naive runs recorded their fallback: it fell back to nothing.
  ASSERT_TRUE(s.run(1));
  EXPECT_EQ(s.run(1)->naive_fallback, "");
  EXPECT_EQ(s.run(1)->notes, "") << "a run stored before schema 13 had no notes kept";
  // The counts added by a later migration include the old row, and new rows keep them current.
  Statement c(s.db(), "SELECT n FROM measurement_counts WHERE run_id=1 AND status='correct'");
  ASSERT_TRUE(c.step());
  EXPECT_EQ(c.int64(0), 1);
  MeasurementRecord m;
  m.run_id = 1, m.context_id = 1, m.variant_id = 1, m.status = Status::kCorrect, m.time_ms = 2.0;
  s.add_measurement(m);
  Statement c2(s.db(), "SELECT n FROM measurement_counts WHERE run_id=1 AND status='correct'");
  c2.step();
  EXPECT_EQ(c2.int64(0), 2);
  // The winner rule's views (schema 14) read the old row and the new one.
  ASSERT_TRUE(s.fastest_correct(1, 1));
  EXPECT_DOUBLE_EQ(s.fastest_correct(1, 1)->time_ms, 2.0);
}

// Why a naive kernel was tuned over its block shape only is kept with its run: `best` and `show`
// read it there, long after the job (or its kernel) changed.
TEST(Store, ARunKeepsWhyANaiveKernelFellBackToBlockShape) {
  test::TempDir dir;
  Store s((dir / "g.db").string());
  const std::int64_t job = s.upsert_job("k", "/p/k.json", "{}");
  const std::int64_t plain = s.begin_run(job, "brute_force", 4);
  const std::int64_t fell_back = s.begin_run(job, "brute_force", 4, std::nullopt,
                                             "k.cu:3: local array 's': not in the subset");
  EXPECT_EQ(s.run(plain)->naive_fallback, "");
  EXPECT_EQ(s.run(fell_back)->naive_fallback, "k.cu:3: local array 's': not in the subset");
  const auto runs = s.runs(10);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].naive_fallback, "k.cu:3: local array 's': not in the subset");
  // The job's notes are kept with its run too.
  const std::int64_t noted = s.begin_run(job, "brute_force", 4, std::nullopt, "",
                                         "k.cu line 5: 'k' is declared before its loop(s)\n");
  EXPECT_EQ(s.run(noted)->notes, "k.cu line 5: 'k' is declared before its loop(s)\n");
  EXPECT_EQ(s.run(plain)->notes, "");
}

TEST(Store, QueuedFilesTravelWithTheJobUntilItFinishes) {
  test::TempDir dir;
  Store s((dir / "q.db").string());
  QueueItem q;
  q.name = "k", q.job_file = "/p/job.json", q.document = "{}", q.kernel_file = "k.cu";
  q.kernel_source = "x", q.client_cwd = "/p";
  const std::string binary("\x00\x01\xff\x00raw", 7);  // any byte values, NULs included
  const std::int64_t a = s.enqueue(q, {{"/p/inc/h.h", "#define H 1\n"}, {"/p/a.bin", binary}});
  const std::int64_t b = s.enqueue(q, {{"/p/a.bin", "other"}});
  auto files = s.queue_files(a);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, "/p/a.bin");
  EXPECT_EQ(files[0].bytes, binary);
  EXPECT_EQ(files[1].path, "/p/inc/h.h");
  EXPECT_EQ(s.queue_item(a)->client_cwd, "/p");
  // Queued as a whole or not at all: a path twice fails the insert and leaves no job behind.
  EXPECT_THROW(s.enqueue(q, {{"/p/x", "1"}, {"/p/x", "2"}}), DbError);
  EXPECT_EQ(s.queue(100, true).size(), 2u);
  // A finished job's copies go; another job's stay. A job cancelled while queued: the same.
  s.finish_queue(a, db::QueueStatus::kDone, "");
  EXPECT_TRUE(s.queue_files(a).empty());
  ASSERT_EQ(s.queue_files(b).size(), 1u);
  EXPECT_TRUE(s.request_cancel(b));
  EXPECT_TRUE(s.queue_files(b).empty());
}

// prune --device finds the calibration that runs on that GPU fitted: by any of the device
// file's names (case-insensitively), the same compute capability and SM count, newest first.
TEST(Store, ACalibrationIsFoundByTheNamesOfItsDevice) {
  test::TempDir dir;
  Store store{(dir / "g.db").string()};
  DeviceRecord h200;
  h200.name = "NVIDIA H200", h200.cc_major = 9, h200.cc_minor = 0, h200.sm_count = 132;
  h200.total_mem = 150754820096, h200.source = "driver";
  DeviceRecord other = h200;
  other.name = "NVIDIA H100 80GB HBM3";
  DeviceRecord cut = h200;  // the same name, fewer SMs (another part)
  cut.sm_count = 114;
  const std::int64_t a = store.upsert_device(h200), b = store.upsert_device(other),
                     c = store.upsert_device(cut);
  store.save_calibration(a, std::nullopt, 10, 0.1, R"({"dram":1.5})");
  store.save_calibration(b, std::nullopt, 11, 0.1, R"({"dram":2.5})");
  store.save_calibration(c, std::nullopt, 12, 0.1, R"({"dram":3.5})");
  const std::vector<std::string> names{"H200", "nvidia h200", "h200"};
  auto found = store.latest_calibration_named(names, 9, 0, 132);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->params_json, R"({"dram":1.5})");
  EXPECT_EQ(found->device_name, "NVIDIA H200");
  EXPECT_EQ(found->device_id, a);
  store.save_calibration(a, std::nullopt, 20, 0.05, R"({"dram":1.7})");
  EXPECT_EQ(store.latest_calibration_named(names, 9, 0, 132)->params_json, R"({"dram":1.7})");
  EXPECT_FALSE(store.latest_calibration_named(names, 8, 0, 132));
  EXPECT_FALSE(store.latest_calibration_named({"H100 PCIe"}, 9, 0, 132));
  EXPECT_FALSE(store.latest_calibration_named({}, 9, 0, 132));
}

TEST(Store, RefusesANewerSchema) {
  test::TempDir dir;
  auto path = (dir / "new.db").string();
  { Store s(path); }
  {
    Database d(path);
    d.exec("PRAGMA user_version=99");
  }
  try {
    Store s(path);
    FAIL();
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("newer than this gputune"), std::string::npos) << e.what();
  }
}

TEST(Store, RefusesFilesThatAreNotOursWithoutTouchingThem) {
  test::TempDir dir;
  test::write_file(dir / "text.db",
                   "this is not a database, just some text that is long enough to matter......");
  EXPECT_THROW(Store((dir / "text.db").string()), DbError);
  EXPECT_EQ(test::read_file(dir / "text.db").substr(0, 12), "this is not ");
  {
    Database other((dir / "other.db").string());
    other.exec(
        "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers(name) "
        "VALUES('x')");
  }
  try {
    Store s((dir / "other.db").string());
    FAIL();
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("not a gputune database"), std::string::npos) << e.what();
  }
  Database other((dir / "other.db").string());
  Statement q(other, "SELECT count(*) FROM customers");
  q.step();
  EXPECT_EQ(q.int64(0), 1);
  Statement t(other, "SELECT count(*) FROM sqlite_master");
  t.step();
  EXPECT_EQ(t.int64(0), 1);  // no gputune tables were added
}

TEST(Transaction, RollsBackUnlessCommitted) {
  test::TempDir dir;
  Store s((dir / "g.db").string());
  {
    Transaction t(s.db());
    s.upsert_kernel("k", "h1", "src");
  }
  {
    Transaction t(s.db());
    s.upsert_kernel("k", "h2", "src");
    t.commit();
    EXPECT_THROW(t.commit(), DbError);
  }
  Statement q(s.db(), "SELECT group_concat(hash) FROM kernels");
  q.step();
  EXPECT_EQ(q.text(0), "h2");
}

}  // namespace
}  // namespace gputune::db
