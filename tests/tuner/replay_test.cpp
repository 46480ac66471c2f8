#include "tuner/tools/replay.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "db/interchange.h"
#include "db/store.h"
#include "test_util.h"
#include "variants/hash.h"

namespace gputune::tuner {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using nlohmann::json;

/// Replays, for an H100, a strided copy over bs 128, 256 and stride 1..32 (12 configurations)
/// whose recorded times are time(bs, stride); `gputune` is a JSON member for the job, or empty.
/// A kernel that reads its input at a stride (a tuning parameter): slower the wider, as the
/// model predicts.
void write_strided_kernel(const test::TempDir& dir) {
  test::write_file(dir / "k.cu", R"(extern "C" __global__ void k(float* out, const float* in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i * stride];
})");
}

ReplayReport replay_strided(const test::TempDir& dir, const std::string& gputune,
                            const std::function<double(int, int)>& time) {
  write_strided_kernel(dir);
  test::write_file(dir / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": [
      {"Name": "bs", "Type": "int", "Values": "[128, 256]"},
      {"Name": "stride", "Type": "int", "Values": "[1, 2, 4, 8, 16, 32]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "bs"}, "GlobalSize": {"X": "4194304 // bs"}, "GlobalSizeType": "CUDA"})" +
                                         (gputune.empty() ? "" : ", " + gputune) + "}");
  json cache = json::object();
  for (int bs : {128, 256})
    for (int stride : {1, 2, 4, 8, 16, 32})
      cache[std::to_string(bs) + "," + std::to_string(stride)] = {
          {"bs", bs}, {"stride", stride}, {"time", time(bs, stride)}};
  test::write_file(dir / "cache.json", json({{"cache", cache}}).dump());
  ReplayOptions o;
  o.device = "h100-sxm";
  o.cache_dir = dir / "cache";
  o.seeds = 20;
  o.prune_report = true;  // the pruner's whole-space report
  return replay(load_job(dir / "job.json"), (dir / "cache.json").string(), o);
}

TEST(Replay, MeasurementsToReach) {
  std::vector<std::optional<double>> t = {5.0, std::nullopt, 1.04, 3.0, 1.0};
  EXPECT_EQ(measurements_to_reach({0, 1, 2, 3, 4}, t, 1.0, 1.05), 3u);  // the failure counts too
  EXPECT_EQ(measurements_to_reach({4, 0}, t, 1.0, 1.05), 1u);
  EXPECT_EQ(measurements_to_reach({0, 3, 4}, t, 1.0, 1.01), 3u);
}

TEST(Replay, KernelTunerAndT4FilesOfTheSameRunAgree) {
  Job job = load_job(test::shared_dir() / "data/kernel-tuner-cache/dedispersion_milo.T1.json");
  ReplayOptions o;
  o.seeds = 50;
  o.within = {1.0, 1.01, 1.05, 1.10};
  auto kt = replay(
      job, (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000.json.gz").string(), o);
  auto t4 = replay(
      job, (test::shared_dir() / "data/kernel-tuner-cache/dedispersion_A4000_T4.json.gz").string(),
      o);
  EXPECT_EQ(kt.matched, 11130u);
  EXPECT_EQ(t4.matched, 11130u);
  EXPECT_DOUBLE_EQ(kt.optimum_ms, t4.optimum_ms);
  EXPECT_EQ(kt.optimum_key, "8,96,1,1,6,0,1,0");
  ASSERT_EQ(kt.strategies.size(), 3u);
  EXPECT_EQ(kt.strategies[0].strategy, "brute_force");
  EXPECT_EQ(kt.strategies[0].median_to, t4.strategies[0].median_to);
  for (const auto& s : kt.strategies) {
    ASSERT_EQ(s.median_to.size(), 4u) << s.strategy;
    ASSERT_EQ(s.p90_to.size(), 4u) << s.strategy;
    for (size_t t = 0; t < 4; ++t) EXPECT_LE(s.median_to[t], s.p90_to[t]) << s.strategy;
    for (size_t t = 1; t < 4; ++t) EXPECT_LE(s.median_to[t], s.median_to[t - 1]) << s.strategy;
  }
  // Brute force in space order reaches the optimum (recorded times) at its position in the space.
  EXPECT_EQ(kt.strategies[0].median_to[0], 9986);
  EXPECT_FALSE(kt.pruner_scored);  // the kernel source is not shipped
  // Without the kernel source (model_guided would search as portfolio does), the portfolio
  // search learns from the recorded A4000 times: on these real measurements it needs far fewer
  // than random search to get within 1% (75 at the median over 1000 seeds) and to the optimum
  // (5460).
  const StrategyScore &random = kt.strategies[1], &portfolio = kt.strategies[2];
  EXPECT_EQ(portfolio.strategy, "portfolio");
  EXPECT_EQ(portfolio.seeds, 50);
  EXPECT_LT(portfolio.median_to[1] * 2, random.median_to[1]);
  EXPECT_LT(portfolio.median_to[0] * 10, random.median_to[0]);
  EXPECT_FALSE(kt.guided_note.empty());
}

/// A job over bs 64..512 whose kernel compiles (__launch_bounds__(256): 512 fails to launch);
/// `gputune`: its GPUTune member, if any.
Job write_bs_job(const test::TempDir& dir, const std::string& gputune = "") {
  test::write_file(
      dir / "k.cu",
      "extern \"C\" __global__ void __launch_bounds__(256) k(float* p) { p[threadIdx.x] = 1.0f; }");
  test::write_file(dir / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": [{"Name": "bs", "Type": "int", "Values": "[64, 128, 256, 512]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "bs"}, "GlobalSize": {"X": "1"}, "GlobalSizeType": "CUDA"})" +
                                         (gputune.empty() ? "" : ", \"GPUTune\": " + gputune) +
                                         "}");
  return load_job(dir / "job.json");
}

/// write_bs_job with two contexts, small (ProblemSize [1]) and large ([2]).
Job write_two_context_job(const test::TempDir& dir) {
  return write_bs_job(dir, R"({"Contexts": [{"Name": "small", "ProblemSize": [1]},
                                            {"Name": "large", "ProblemSize": [2]}]})");
}

TEST(Replay, ScoresThePrunerWhenTheSourceIsThere) {
  test::TempDir dir;
  const Job job = write_bs_job(dir);
  test::write_file(dir / "cache.json",
                   json({{"kernel_name", "k"},
                         {"device_name", "d"},
                         {"tune_params_keys", {"bs"}},
                         {"cache",
                          {{"64", {{"bs", 64}, {"time", 2.0}}},
                           {"128", {{"bs", 128}, {"time", 1.0}}},
                           {"256", {{"bs", 256}, {"time", 1.5}}},
                           {"512", {{"bs", 512}, {"time", "RuntimeFailedConfig"}}}}}})
                       .dump());
  ReplayOptions o;
  o.device = "h100-sxm";
  o.prune_report = true;  // the pruner's whole-space report
  o.cache_dir = dir / "cache";
  auto r = replay(job, (dir / "cache.json").string(), o);
  ASSERT_TRUE(r.pruner_scored) << r.pruner_note;
  EXPECT_EQ(r.kept, 3u);
  EXPECT_DOUBLE_EQ(r.fraction_pruned, 0.25);
  EXPECT_DOUBLE_EQ(r.regret, 1.0);
  EXPECT_EQ(r.failures_recorded, 1u);
  EXPECT_EQ(r.failures_predicted, 1u);  // 512 threads > __launch_bounds__(256)
  EXPECT_EQ(r.valid_rejected, 0u);
}

// A gputune database is a record too: by default the newest run of this very job that timed
// something, in the job's first context; the best time of a configuration timed twice; what was
// only compiled or left out by a rule is no measurement. Another run or context is chosen by
// option, and each way of missing says what to give.
TEST(Replay, ReadsARunOfAGputuneDatabase) {
  test::TempDir dir;
  test::write_file(dir / "k.cu",
                   "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }");
  test::write_file(dir / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": [{"Name": "bs", "Type": "int", "Values": "[64, 128, 256, 512]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "bs"}, "GlobalSize": {"X": "1"}, "GlobalSizeType": "CUDA"},
    "GPUTune": {"Contexts": [{"Name": "small", "ProblemSize": [1]}, {"Name": "large", "ProblemSize": [2]}]}})");
  const Job job = load_job(dir / "job.json");
  const std::string file = (dir / "g.db").string();
  std::int64_t first_run = 0, second_run = 0;
  {
    db::Store s(file);
    const std::int64_t kernel = s.upsert_kernel("k", "h", "src");
    db::DeviceRecord d;
    d.name = "GPU", d.cc_major = 9, d.sm_count = 132, d.source = "driver";
    const std::int64_t device = s.upsert_device(d);
    std::map<std::string, std::int64_t> ctx;
    for (const char* label : {"small", "large"}) {
      db::ContextRecord c;
      c.kernel_id = kernel, c.device_id = device, c.label = label;
      c.problem_size_json = label == std::string("small") ? "[1,1,1]" : "[2,1,1]";
      c.arch = "sm_90";
      ctx[label] = s.upsert_context(c);
    }
    const std::int64_t job_id = s.upsert_job("k", (dir / "job.json").string(), job.document);
    std::map<int, std::int64_t> variant;
    for (int bs : {64, 128, 256, 512})
      variant[bs] =
          s.upsert_variant(kernel, std::to_string(bs), "{\"bs\": " + std::to_string(bs) + "}");
    auto add = [&](std::int64_t run, const char* label, int bs, const char* status,
                   std::optional<double> ms) {
      db::MeasurementRecord m;
      m.run_id = run, m.context_id = ctx[label], m.variant_id = variant[bs],
      m.status = db::Status(status);
      m.time_ms = ms;
      s.add_measurement(m);
    };
    first_run = s.begin_run(job_id, "brute_force", 8);
    add(first_run, "small", 64, "correct", 9.0);
    second_run = s.begin_run(job_id, "brute_force", 8);
    add(second_run, "small", 64, "correct", 2.0);
    add(second_run, "small", 128, "correct", 1.5);
    add(second_run, "small", 128, "correct", 1.0);  // timed again: the best counts
    add(second_run, "small", 256, "compiled", std::nullopt);
    add(second_run, "small", 512, "runtime", std::nullopt);
    add(second_run, "large", 64, "correct", 4.0);
    s.begin_run(job_id, "brute_force", 8);  // newest, timed nothing: not the default
  }
  ReplayOptions o;
  o.seeds = 5;
  auto r = replay(job, file, o);
  EXPECT_EQ(r.source,
            "run " + std::to_string(second_run) + " (k, running) of " + file + ", context small");
  EXPECT_EQ(r.recorded, 3u);  // 64, 128 and 512: 256 was only compiled
  EXPECT_EQ(r.matched, 3u);
  EXPECT_EQ(r.failed, 1u);
  EXPECT_DOUBLE_EQ(r.optimum_ms, 1.0);
  EXPECT_EQ(r.optimum_key, "128");
  std::ostringstream printed;
  print_replay_report(r, printed);
  EXPECT_EQ(printed.str().rfind("measurements: run " + std::to_string(second_run), 0), 0u)
      << printed.str();
  o.context = "large";
  r = replay(job, file, o);
  EXPECT_EQ(r.matched, 1u);
  EXPECT_DOUBLE_EQ(r.optimum_ms, 4.0);
  o.context.clear();
  o.run = first_run;
  EXPECT_DOUBLE_EQ(replay(job, file, o).optimum_ms, 9.0);
  auto error_of = [&](const Job& j, const ReplayOptions& opt) {
    try {
      replay(j, file, opt);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  o.run = 99;
  EXPECT_EQ(error_of(job, o), file + ": no run 99 (`gputune runs --db " + file + "` lists them)");
  o.run.reset();
  o.context = "huge";
  EXPECT_NE(error_of(job, o).find("measured nothing in context 'huge' (its contexts: large, "
                                  "small). Fix: give --context LABEL"),
            std::string::npos)
      << error_of(job, o);
  // Another job (its document differs): which run is meant must be said.
  Job other = job;
  other.document += " ";
  o.context.clear();
  EXPECT_NE(error_of(other, o).find("no run of this job"), std::string::npos) << error_of(other, o);
  EXPECT_NE(error_of(other, o).find("Fix: give --run N"), std::string::npos);
  o.run = second_run;
  EXPECT_DOUBLE_EQ(replay(other, file, o).optimum_ms, 1.0);
  // Another application's SQLite file: left as it was, with a fix that names replay's option.
  const std::string foreign = (dir / "other.sqlite").string();
  db::Database(foreign).exec("CREATE TABLE t(a)");
  o.run.reset();
  try {
    replay(job, foreign, o);
    ADD_FAILURE() << "another application's database";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(foreign + ": not a gputune database (application_id "),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("(nothing was read or written). Fix: give a gputune "
                                         "database (a run's --db file), a Kernel Tuner cache or a "
                                         "T4 file"),
              std::string::npos)
        << e.what();
  }
  o.run = second_run;
  test::write_file(dir / "cache.json", R"({"cache": {"64": {"bs": 64, "time": 1.0}}})");
  try {
    replay(job, (dir / "cache.json").string(), o);
    ADD_FAILURE() << "--run with a file that is not a database";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--run " + std::to_string(second_run) +
                                         " names a run of a gputune database"),
              std::string::npos)
        << e.what();
  }
  // Only failures: no optimum to score against.
  o.context = "large";
  {
    db::Store s(file);
    db::MeasurementRow ctx;  // the large context's
    for (const auto& row : s.measurements(second_run))
      if (row.context_label == "large") ctx = row;
    db::MeasurementRecord m;
    m.run_id = first_run, m.context_id = ctx.context_id, m.variant_id = ctx.variant_id;
    m.status = db::Status::kTimeout;
    s.add_measurement(m);
  }
  o.run = first_run;
  EXPECT_EQ(error_of(job, o), file +
                                  ": all 1 of its configurations in the job's space failed: there "
                                  "is no optimum to score against. Fix: replay measurements with "
                                  "at least one correct time");
}

// A gputune T4 export names its kernel, context and device (metadata.gputune): replay scores the
// pruner at that context, not the job's first, keeps the best of a configuration exported twice,
// and refuses a --context that names another problem size.
TEST(Replay, ScoresAGputuneT4ExportAtTheContextItNames) {
  test::TempDir dir;
  const Job job = write_two_context_job(dir);
  std::string small_t4, large_t4;
  {
    db::Store s((dir / "g.db").string());
    const std::int64_t kernel = s.upsert_kernel("k", "h", "src");
    db::DeviceRecord d;
    d.name = "GPU", d.cc_major = 9, d.sm_count = 132;
    const std::int64_t device = s.upsert_device(d);
    std::map<std::string, std::int64_t> ctx;
    for (const char* label : {"small", "large", "other"}) {
      db::ContextRecord c;
      c.kernel_id = kernel, c.device_id = device, c.label = label, c.arch = "sm_90";
      c.problem_size_json = label == std::string("small")   ? "[1,1,1]"
                            : label == std::string("large") ? "[2,1,1]"
                                                            : "[3,1,1]";
      ctx[label] = s.upsert_context(c);
    }
    std::map<int, std::int64_t> variant;
    for (int bs : {64, 128, 256, 512})
      variant[bs] =
          s.upsert_variant(kernel, std::to_string(bs), "{\"bs\": " + std::to_string(bs) + "}");
    const std::int64_t run = s.begin_run(s.upsert_job("k", "job.json", job.document), "bf", 8);
    auto add = [&](const char* label, int bs, const char* status, std::optional<double> ms) {
      db::MeasurementRecord m;
      m.run_id = run, m.context_id = ctx[label], m.variant_id = variant[bs],
      m.status = db::Status(status);
      m.time_ms = ms;
      s.add_measurement(m);
    };
    add("small", 64, "correct", 2.0);
    add("small", 128, "correct", 1.0);
    add("small", 128, "correct", 1.5);  // timed again, slower: the export lists it after 1.0
    add("small", 512, "runtime", std::nullopt);
    add("large", 64, "correct", 4.0);
    add("large", 256, "correct", 3.0);
    add("other", 64, "correct", 6.0);
    for (const char* label : {"small", "large", "other"})
      test::write_file(dir / (std::string(label) + ".t4.json"), db::export_t4(s, run, label));
  }
  ReplayOptions o;
  o.seeds = 3;
  o.device = "h100-sxm";
  o.prune_report = true;  // the pruner's whole-space report
  o.cache_dir = dir / "cache";
  auto r = replay(job, (dir / "large.t4.json").string(), o);
  EXPECT_EQ(r.source, "T4 export of k, context large on GPU, problem size [2, 1, 1]");
  ASSERT_TRUE(r.pruner_scored) << r.pruner_note;
  EXPECT_EQ(r.predicted_context, "large");  // not the job's first context, small
  EXPECT_DOUBLE_EQ(r.optimum_ms, 3.0);
  std::ostringstream printed;
  print_replay_report(r, printed);
  EXPECT_NE(printed.str().find("pruner: for NVIDIA H100 SXM5 80GB, context large: kept 3"),
            std::string::npos)
      << printed.str();
  // The best of a configuration recorded twice, whatever its place in the file.
  r = replay(job, (dir / "small.t4.json").string(), o);
  EXPECT_EQ(r.recorded, 4u);
  EXPECT_EQ(r.matched, 3u);
  EXPECT_DOUBLE_EQ(r.optimum_ms, 1.0);
  EXPECT_EQ(r.predicted_context, "small");
  // A context the job does not have: said, and the pruner predicts at the job's first.
  r = replay(job, (dir / "other.t4.json").string(), o);
  EXPECT_EQ(r.source,
            "T4 export of k, context other on GPU, problem size [3, 1, 1] (none of the job's "
            "contexts has that name or size: the pruner predicts at small)");
  EXPECT_EQ(r.predicted_context, "small");
  // --context naming another size than the file's is refused; naming the same one is fine.
  o.context = "small";
  try {
    replay(job, (dir / "large.t4.json").string(), o);
    ADD_FAILURE() << "--context small with measurements of context large";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "large.t4.json: its measurements are of context 'large' (problem size [2, 1, "
                  "1]), and --context small would score predictions for "
                  "another problem size against them. Fix: drop --context, or replay an export "
                  "of that context (`gputune export --t4 --context small`)"),
              std::string::npos)
        << e.what();
  }
  o.context = "large";
  EXPECT_DOUBLE_EQ(replay(job, (dir / "large.t4.json").string(), o).optimum_ms, 3.0);
  // A context renamed since: found by its problem size.
  o.context.clear();
  json renamed = json::parse(test::read_file(dir / "large.t4.json"));
  renamed["metadata"]["gputune"]["context"] = "2";
  test::write_file(dir / "renamed.t4.json", renamed.dump());
  r = replay(job, (dir / "renamed.t4.json").string(), o);
  EXPECT_EQ(r.source,
            "T4 export of k, context 2 on GPU, problem size [2, 1, 1], the job's context large");
  EXPECT_EQ(r.predicted_context, "large");
}

// A Kernel Tuner cache names its problem size: replay scores the pruner at the job's context of
// that size, says when the job has none, and refuses a --context of another size.
TEST(Replay, ScoresAKernelTunerCacheAtTheContextOfItsProblemSize) {
  test::TempDir dir;
  const Job job = write_two_context_job(dir);
  auto cache = [&](const json& problem_size) {
    json doc = {
        {"kernel_name", "k"},
        {"device_name", "A4000"},
        {"tune_params_keys", {"bs"}},
        {"cache", {{"64", {{"bs", 64}, {"time", 2.0}}}, {"128", {{"bs", 128}, {"time", 1.0}}}}}};
    if (!problem_size.is_null()) doc["problem_size"] = problem_size;
    test::write_file(dir / "cache.json", doc.dump());
    return (dir / "cache.json").string();
  };
  ReplayOptions o;
  o.seeds = 3;
  o.device = "h100-sxm";
  o.prune_report = true;  // the pruner's whole-space report
  o.cache_dir = dir / "cache";
  auto r = replay(job, cache(json({2.0, 1})), o);  // [2, 1, 1]: the large context
  EXPECT_EQ(r.source,
            "Kernel Tuner cache of k on A4000, problem size [2, 1, 1], the job's context large");
  ASSERT_TRUE(r.pruner_scored) << r.pruner_note;
  EXPECT_EQ(r.predicted_context, "large");
  r = replay(job, cache(json(1)), o);  // a scalar: [1, 1, 1], small
  EXPECT_EQ(r.predicted_context, "small");
  r = replay(job, cache(json({7, 7})), o);
  EXPECT_EQ(r.source,
            "Kernel Tuner cache of k on A4000, problem size [7, 7, 1] (none of the job's contexts "
            "has that size: the pruner predicts at small)");
  EXPECT_EQ(r.predicted_context, "small");
  r = replay(job, cache(json()), o);  // no problem size: nothing to match
  EXPECT_EQ(r.source, "");
  o.context = "small";
  try {
    replay(job, cache(json({2})), o);
    ADD_FAILURE() << "--context small with measurements of problem size [2, 1, 1]";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("its measurements are of problem size [2, 1, 1], the "
                                         "job's context 'large', and "
                                         "--context small would score predictions"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(replay(job, cache(json({7})), o).predicted_context, "small");
}

TEST(Replay, EveryStrategyMeasuresTheDefaultFirstAsRunDoes) {
  // The default (256) is the optimum: `run` measures it first whatever the strategy, so each
  // replayed search gets there in one measurement. In space order it is the third.
  test::TempDir dir;
  test::write_file(dir / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": [{"Name": "bs", "Type": "int", "Values": "[64, 128, 256, 512]", "Default": 256}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "absent.cu",
      "LocalSize": {"X": "bs"}, "GlobalSize": {"X": "1"}, "GlobalSizeType": "CUDA"}})");
  auto cache = [&](double default_ms) {
    test::write_file(dir / "cache.json", json({{"kernel_name", "k"},
                                               {"device_name", "d"},
                                               {"tune_params_keys", {"bs"}},
                                               {"cache",
                                                {{"64", {{"bs", 64}, {"time", 2.0}}},
                                                 {"128", {{"bs", 128}, {"time", 1.9}}},
                                                 {"256", {{"bs", 256}, {"time", default_ms}}},
                                                 {"512", {{"bs", 512}, {"time", 1.5}}}}}})
                                             .dump());
    ReplayOptions o;
    o.seeds = 20;
    o.within = {1.0};
    return replay(load_job(dir / "job.json"), (dir / "cache.json").string(), o);
  };
  auto r = cache(1.0);
  EXPECT_EQ(r.default_key, "256");
  ASSERT_TRUE(r.default_ms.has_value());
  ASSERT_EQ(r.strategies.size(), 3u);  // brute force, random, portfolio (model_guided's search)
  for (const auto& s : r.strategies) {
    EXPECT_EQ(s.median_to[0], 1) << s.strategy;
    EXPECT_EQ(s.p90_to[0], 1) << s.strategy;
  }
  std::ostringstream text;
  print_replay_report(r, text);
  EXPECT_NE(text.str().find("default 256: 1 ms (1x the optimum); every strategy measures it first"),
            std::string::npos)
      << text.str();
  // A slow default counts as a measurement too: brute force then goes on in space order and
  // finds the optimum (512) fourth; the others need at least 2.
  r = cache(3.0);
  EXPECT_EQ(r.strategies[0].median_to[0], 4);
  for (const auto& s : r.strategies) EXPECT_GE(s.median_to[0], 2) << s.strategy;
}

TEST(Replay, ScoresTheModelRankingAndModelGuided) {
  // Recorded times that grow with the stride, as on a GPU: the model must rank them the same way
  // (Spearman close to 1) and model_guided must find the optimum first.
  test::TempDir dir;
  auto r =
      replay_strided(dir, R"("GPUTune": {"Pruner": {"ModelMargin": 100}})", [](int bs, int stride) {
        return 0.01 * (1 + std::min(stride, 8)) + (bs == 256 ? 0.0001 : 0);
      });
  ASSERT_TRUE(r.pruner_scored) << r.pruner_note;
  EXPECT_EQ(r.predicted_and_measured, 12u);
  EXPECT_GT(r.spearman, 0.8);
  ASSERT_EQ(r.strategies.size(), 4u);  // brute force, random, portfolio, model_guided
  EXPECT_EQ(r.strategies[3].strategy, "model_guided");
  EXPECT_LE(r.strategies[3].median_to[0], 2);  // the best prediction is the optimum (or its twin)
  EXPECT_GT(r.guided_stopped_after, 0u);
  EXPECT_DOUBLE_EQ(r.guided_best_ratio, 1.0);
  std::ostringstream text;
  print_replay_report(r, text);
  EXPECT_NE(text.str().find("model: Spearman"), std::string::npos) << text.str();

  // Rule 4 at other margins: each keeps a superset of the one before; the job's margin (100) is
  // the last and agrees with the pruner's own line; the tightest keeps the optimum.
  ASSERT_EQ(r.margin_sweep.size(), std::size(kSweptMargins) + 1) << text.str();
  EXPECT_DOUBLE_EQ(r.margin_sweep.back().margin, 100);
  EXPECT_EQ(r.margin_sweep.back().kept, r.kept);
  EXPECT_DOUBLE_EQ(r.margin_sweep.back().regret, r.regret);
  for (size_t k = 1; k < r.margin_sweep.size(); ++k) {
    EXPECT_GE(r.margin_sweep[k].kept, r.margin_sweep[k - 1].kept) << k;
    EXPECT_LE(r.margin_sweep[k].regret, r.margin_sweep[k - 1].regret) << k;
  }
  const auto& tightest = r.margin_sweep.front();
  EXPECT_DOUBLE_EQ(tightest.margin, 1.0);
  EXPECT_LE(tightest.kept, 2u) << text.str();  // stride 1 (both block sizes predict alike)
  EXPECT_DOUBLE_EQ(tightest.regret, 1.0);
  EXPECT_NEAR(tightest.fraction_pruned, 1.0 - tightest.kept / 12.0, 1e-12);
  EXPECT_GT(r.margin_sweep[5].kept, tightest.kept) << "margin 2 keeps stride 2 too";
  // The two stride-1 variants predict alike: no margin keeps fewer than 2 of 12.
  EXPECT_FALSE(r.at_target_pruned);
  EXPECT_NEAR(r.tightest_pruned, 10.0 / 12, 1e-12);
  EXPECT_NE(text.str().find("pruning target (>= 90.0% pruned, one kept within 10.0% of the "
                            "optimum): not met: no margin prunes 90.0% or more (the tightest "
                            "prunes 83.3%); the smallest swept margin that keeps one within "
                            "10.0%: 1.00 (83.3% pruned, regret 1.000)"),
            std::string::npos)
      << text.str();
}

// The recording timed each configuration as built where it was measured; this machine's compiler
// may make two of them one binary (a parameter the code never reads here; the benchmark hub's
// convolution: read_only 0 and 1 are one cubin here, 1.0x and 1.5x the optimum on the A4000).
// model_guided as `run` streams it measures such a duplicate as recorded: reported as failed,
// the optimum (the second of its binary to compile) was never measured.
TEST(Replay, ADuplicateHereIsMeasuredAsRecordedThere) {
  test::TempDir dir;
  write_strided_kernel(dir);
  test::write_file(dir / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": [
      {"Name": "unread", "Type": "int", "Values": "[0, 1, 2, 3]"},
      {"Name": "stride", "Type": "int", "Values": "[1, 2, 4, 8]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "256"}, "GlobalSize": {"X": "16384"}, "GlobalSizeType": "CUDA"}})");
  // Slower with the stride, as the model predicts; of the four binaries of stride 1, the last
  // of its values recorded twice as fast as the others.
  json cache = json::object();
  for (int u : {0, 1, 2, 3})
    for (int stride : {1, 2, 4, 8})
      cache[std::to_string(u) + "," + std::to_string(stride)] = {
          {"unread", u},
          {"stride", stride},
          {"time", 0.01 * stride * (stride == 1 && u == 3 ? 0.5 : 1.0)}};
  test::write_file(dir / "cache.json", json({{"cache", cache}}).dump());
  ReplayOptions o;
  o.device = "h100-sxm";
  o.cache_dir = dir / "cache";
  o.seeds = 5;
  o.within = {1.0};
  o.strategies = {"model_guided"};
  const ReplayReport r = replay(load_job(dir / "job.json"), (dir / "cache.json").string(), o);
  ASSERT_TRUE(r.model_streamed) << r.pruner_note;
  EXPECT_DOUBLE_EQ(r.guided_best_ratio, 1.0);
  ASSERT_FALSE(r.strategies.empty());
  EXPECT_EQ(r.strategies.back().strategy, "model_guided");
  EXPECT_EQ(r.removed_by_rule.count("duplicate"), 0u) << "measured, not removed";

  // The whole-space pruner report (--prune-report) reports the duplicates as rule 3 prunes them,
  // and its model_guided measures them as recorded too: the optimum is the second of its binary.
  o.prune_report = true;
  o.seeds = 1;
  const ReplayReport whole = replay(load_job(dir / "job.json"), (dir / "cache.json").string(), o);
  ASSERT_TRUE(whole.pruner_scored) << whole.pruner_note;
  EXPECT_FALSE(whole.model_streamed);
  EXPECT_GT(whole.removed_by_rule.count("duplicate"), 0u) << "the pruner's own report";
  EXPECT_DOUBLE_EQ(whole.guided_best_ratio, 1.0);
  ASSERT_FALSE(whole.strategies.empty());
  EXPECT_EQ(whole.strategies.back().strategy, "model_guided");
  EXPECT_FALSE(std::isnan(whole.strategies.back().median_to[0]));
}

// The sweep tells what the target costs when the model's best is not the optimum: the tightest
// margins keep only what is slow. The target line judges the margin that keeps the most while
// still pruning 90% (found exactly, not on the swept grid) and names the smallest swept margin that
// keeps one within 10%.
TEST(Replay, TheMarginSweepFindsTheSmallestMarginThatKeepsOneWithinTenPercent) {
  test::TempDir dir;
  // Recorded times the other way round: the widest stride is the fastest.
  auto r = replay_strided(dir, "", [](int, int stride) { return 1.0 / stride; });
  ASSERT_TRUE(r.pruner_scored) << r.pruner_note;
  std::ostringstream text;
  print_replay_report(r, text);
  ASSERT_FALSE(r.margin_sweep.empty()) << text.str();
  EXPECT_GT(r.margin_sweep.front().regret, 1.1) << text.str();  // keeps stride 1 only
  EXPECT_GT(r.margin_sweep.back().kept, r.kept) << "margin 5 keeps more than the job's 2";
  const ReplayReport::MarginPoint* smallest = nullptr;
  for (const auto& p : r.margin_sweep)
    if (!smallest && p.regret <= 1.1) smallest = &p;
  std::ostringstream want;
  if (smallest) {
    want << "the smallest swept margin that keeps one within 10.0%: " << std::fixed
         << std::setprecision(2) << smallest->margin << " (";
    EXPECT_GT(smallest->margin, 1.0);
  } else {
    want << "the smallest swept margin that keeps one within 10.0%: none";
  }
  EXPECT_NE(text.str().find(want.str()), std::string::npos) << want.str() << "\n" << text.str();
  // The two stride-1 variants (both block sizes) predict alike: no margin prunes 90%.
  EXPECT_FALSE(r.at_target_pruned);
  EXPECT_NE(text.str().find("% of the optimum): not met: no margin prunes 90.0% or more (the "
                            "tightest prunes 83.3%)"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("(the job's margin)"), std::string::npos) << text.str();
}

// The target is judged where rule 4 keeps the most it can while still pruning 90%, found
// exactly between the swept margins: 20 variants whose predictions grow with `reps` (each
// repetition a load and an add), the optimum the second fastest predicted. Keeping 2 of 20 prunes
// 90%; keeping 3, 85%.
TEST(Replay, TheTargetIsJudgedWhereRuleFourKeepsTheMostThatStillPrunesNinetyPercent) {
  test::TempDir dir;
  test::write_file(dir / "k.cu", R"(extern "C" __global__ void k(float* out, const float* in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0;
  for (int r = 0; r < reps; ++r) acc += in[i + r * 32];
  out[i] = acc;
})");
  test::write_file(dir / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": [
      {"Name": "reps", "Type": "int", "Values": "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "256"}, "GlobalSize": {"X": "16384"}, "GlobalSizeType": "CUDA"}})");
  json cache = json::object();
  for (int reps = 1; reps <= 20; ++reps)
    cache[std::to_string(reps)] = {{"reps", reps}, {"time", 1 + 0.1 * std::abs(reps - 2)}};
  test::write_file(dir / "cache.json", json({{"cache", cache}}).dump());
  ReplayOptions o;
  o.device = "h100-sxm";
  o.prune_report = true;  // the pruner's whole-space report
  o.cache_dir = dir / "cache";
  o.seeds = 5;
  const ReplayReport r = replay(load_job(dir / "job.json"), (dir / "cache.json").string(), o);
  ASSERT_TRUE(r.pruner_scored) << r.pruner_note;
  std::ostringstream text;
  print_replay_report(r, text);
  ASSERT_TRUE(r.at_target_pruned) << text.str();
  const auto& a = *r.at_target_pruned;
  EXPECT_EQ(a.kept, 2u) << text.str();
  EXPECT_DOUBLE_EQ(a.fraction_pruned, 0.9);
  EXPECT_DOUBLE_EQ(a.regret, 1.0);  // reps 2, the optimum, is kept
  EXPECT_GT(a.margin, 1.0);
  EXPECT_NEAR(r.tightest_pruned, 0.95, 1e-12);  // reps 1 alone
  // A swept margin that keeps more prunes less than 90%; one that keeps as many is no tighter.
  for (const auto& p : r.margin_sweep) {
    if (p.kept > a.kept) {
      EXPECT_LE(p.fraction_pruned, 0.85 + 1e-12) << p.margin;
    }
    if (p.kept == a.kept) {
      EXPECT_GE(p.margin, a.margin) << p.margin;
    }
  }
  std::ostringstream want;
  want << "% of the optimum): met at margin " << std::fixed << std::setprecision(4) << a.margin
       << ", which keeps the most that still prunes 90.0% or more (90.0% pruned, 2 kept, regret "
          "1.000)";
  EXPECT_NE(text.str().find(want.str()), std::string::npos) << want.str() << "\n" << text.str();
}

TEST(Replay, TheTableHasAColumnPairPerToleranceAndSaysWhereASearchStopped) {
  ReplayReport r;
  r.within = {1.0, 1.05};
  const double stopped = std::numeric_limits<double>::quiet_NaN();
  r.strategies.push_back({"random", 10, {40, 3}, {90, 7}, kNaN, kNaN, "", false});
  r.strategies.push_back({"model_guided", 1, {stopped, 2}, {stopped, 2}, kNaN, kNaN, "", true});
  std::ostringstream text;
  print_replay_report(r, text);
  const std::string t = text.str();
  EXPECT_NE(t.find("to optimum (median)  to optimum (p90)  to 5% (median)  to 5% (p90)\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("random        10      40                   90                3"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("model_guided  1       stopped              stopped           2"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("nan"), std::string::npos) << t;
}

TEST(Replay, MeasurementsOfAnotherSpaceAreRefused) {
  test::TempDir dir;
  Job job = load_job(test::examples_dir() / "vector_add.json");
  test::write_file(dir / "other.json",
                   json({{"cache", {{"1", {{"x", 1}, {"time", 1.0}}}}}}).dump());
  try {
    replay(job, (dir / "other.json").string(), {});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("none of its 1 configurations is in the job's space of 24"),
        std::string::npos)
        << e.what();
  }
  test::write_file(dir / "neither.json", "{\"hello\": 1}");
  EXPECT_THROW(replay(job, (dir / "neither.json").string(), {}), std::runtime_error);
}

}  // namespace
}  // namespace gputune::tuner

namespace gputune::tuner {
namespace {

/// What gputune measured on an H100 (tests/data/h100-2026-11-26, copied from
/// ../shared/data/h100-2026-11-26): the matmul example at 4096 (609 configurations) and the
/// transpose example (171 in each of two contexts).
struct H100Case {
  std::string name;
  Job job;
  std::string file, context;
};

std::vector<H100Case> h100_cases(const std::filesystem::path& dir) {
  const std::filesystem::path data = test::source_dir() / "tests/data/h100-2026-11-26";
  auto matmul = json::parse(test::read_file(data / "matmul_4096_r7.json"));
  matmul["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "matmul.cu").string();
  test::write_file(dir / "matmul.json", matmul.dump());
  return {{"matmul 4096", load_job(dir / "matmul.json"),
           (data / "matmul_4096_r7.4096.t4.json").string(), ""},
          {"transpose 4096x4096", load_job(test::examples_dir() / "transpose.json"),
           (data / "transpose.4096x4096.t4.json").string(), "4096x4096"},
          {"transpose 1000x3000", load_job(test::examples_dir() / "transpose.json"),
           (data / "transpose.1000x3000.t4.json").string(), "1000x3000"}};
}

// The model on the H100's measurements, with floors at what it achieves (issue #45). Before the
// latency term (commit 5c74e3d) the figures were: Spearman 0.806 / 0.602 / 0.509; model_guided
// to 5% after 4 / 10 / 2 measurements; the pruning target (90% pruned, one kept within 10%) met
// on matmul and transpose 1000x3000, not on transpose 4096x4096 (regret 1.447 at 90% pruned).
// The latency term (one round of loads in flight per warp, Little's law) is what the transposes
// with one element per thread lacked; its latency was fitted on transpose 4096x4096 alone, and
// the other two contexts are held out (bench/results/model-latency-h100-2026-11-27.md).
// Transpose 4096x4096 reached 5% after 2 measurements (at look-ahead 1 and 32) until the model's
// start spread over the variants it predicts alike (ModelGuided::kModelTie); one seed takes 3
// since (the portfolio alone: a median of 3; at look-ahead 4, 2 as before), and the benchmark
// hub's dedispersion, whose thousands of tied predictions started in one corner, 1 where it took
// 8 (bench/results/model-start-ties-vm-2026-12-02.md).
TEST(Replay, TheModelRanksTheH100MeasurementsAtLeastAsWellAsItDid) {
  test::TempDir dir;
  struct Floor {
    double spearman;
    double guided_to_5;    // model_guided's measurements to within 5% (look-ahead 1)
    double streamed_to_5;  // the same as `run` streams it on a 16-core host (look-ahead 32)
    double regret_at_90;   // the best kept / the optimum with 90% pruned
  };
  const std::map<std::string, Floor> floors = {{"matmul 4096", {0.80, 4, 4, 1.0}},
                                               {"transpose 4096x4096", {0.75, 3, 3, 1.0}},
                                               {"transpose 1000x3000", {0.62, 2, 5, 1.0}}};
  for (const H100Case& c : h100_cases(dir.path())) {
    const Floor& f = floors.at(c.name);
    // The pruner's report: every configuration compiled, the model's ranking and rule 4.
    {
      SCOPED_TRACE(c.name + ", the pruner's report");
      ReplayOptions o;
      o.device = "NVIDIA H100 80GB HBM3";
      o.cache_dir = dir / "cache";  // shared: the searches below compile nothing again
      o.seeds = 1;
      o.within = {1.05};
      o.context = c.context;
      o.look_ahead = 1;
      o.prune_report = true;
      o.strategies = {"random"};
      const ReplayReport r = replay(c.job, c.file, o);
      ASSERT_TRUE(r.pruner_scored) << r.pruner_note;
      EXPECT_GE(r.spearman, f.spearman);
      ASSERT_TRUE(r.at_target_pruned.has_value()) << "no margin prunes 90%";
      EXPECT_LE(r.at_target_pruned->regret, f.regret_at_90 + 1e-9);
      EXPECT_LE(r.at_target_pruned->regret, kTargetRegret) << "the pruning target is met";
    }
    // model_guided as `run` streams it: look-ahead 1 waits for each outcome; the look-ahead of a
    // 16-core host asks for 32 compiles before their outcomes are known (on transpose 1000x3000
    // that costs 3 measurements: 5 where waiting needs 2, of 54 for random search). Either way
    // it compiles only what could come first.
    for (const std::size_t look_ahead : {1, 32}) {
      SCOPED_TRACE(c.name + ", look-ahead " + std::to_string(look_ahead));
      ReplayOptions o;
      o.device = "NVIDIA H100 80GB HBM3";
      o.cache_dir = dir / "cache";
      o.seeds = 1;
      o.within = {1.05};
      o.context = c.context;
      o.look_ahead = look_ahead;
      o.compile_workers = std::max<std::size_t>(1, look_ahead / 2);  // two per worker, as `run`
      o.strategies = {"random"};
      const ReplayReport r = replay(c.job, c.file, o);
      ASSERT_TRUE(r.model_streamed) << r.pruner_note;
      const auto guided = std::find_if(r.strategies.begin(), r.strategies.end(),
                                       [](const auto& s) { return s.strategy == "model_guided"; });
      ASSERT_NE(guided, r.strategies.end());
      EXPECT_LT(r.guided_compiled, r.space_size) << "it compiles only what could come first";
      EXPECT_LE(guided->median_to[0], look_ahead == 1 ? f.guided_to_5 : f.streamed_to_5);
    }
  }
}

// `replay --measurements DB` reads a database without writing it: one of an older schema (the
// H100 matmul run's, schema 10) is migrated in a copy, and the file, its folder and its schema
// are as they were.
TEST(Replay, ReadsADatabaseWithoutChangingIt) {
  test::TempDir dir;
  const std::filesystem::path data = test::source_dir() / "tests/data/h100-2026-11-26";
  std::filesystem::copy_file(data / "matmul_4096_r7.db", dir / "old.db");
  auto matmul = json::parse(test::read_file(data / "matmul_4096_r7.json"));
  matmul["KernelSpecification"]["KernelFile"] = (test::examples_dir() / "matmul.cu").string();
  test::write_file(dir / "matmul.json", matmul.dump());
  auto version = [&] {
    sqlite3* db = nullptr;
    sqlite3_open_v2((dir / "old.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr);
    sqlite3_step(st);
    const int v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
  };
  auto files = [&] {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      out.insert(e.path().filename().string());
    return out;
  };
  const int before = version();
  ASSERT_LT(before, db::Store::kSchemaVersion) << "an older schema, as archived";
  const std::string bytes = test::read_file(dir / "old.db");
  const auto listing = files();
  ReplayOptions o;
  o.seeds = 3;
  o.run = 1;
  o.context = "4096";
  const ReplayReport r = replay(load_job(dir / "matmul.json"), (dir / "old.db").string(), o);
  EXPECT_GT(r.matched, 500u);
  EXPECT_EQ(version(), before) << "not migrated";
  EXPECT_EQ(sha256_hex(test::read_file(dir / "old.db")), sha256_hex(bytes)) << "not written";
  EXPECT_EQ(files(), listing) << "nothing left beside it";
}

}  // namespace
}  // namespace gputune::tuner
