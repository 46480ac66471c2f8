#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "db/store.h"
#include "pruner/device_spec.h"
#include "test_util.h"
#include "tuner/compile/compile_and_inspect.h"
#include "tuner/measure/arguments.h"
#include "tuner/model/compile_screen.h"
#include "tuner/model/space_search.h"
#include "tuner/tools/prune_command.h"

namespace gputune::tuner {
namespace {

Job small_job(const test::TempDir& dir, const std::string& kernel, const std::string& params) {
  test::write_file(dir / "k.cu", kernel);
  test::write_file(dir / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": )" +
                                         params + R"(},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "bs"}, "GlobalSize": {"X": "1"}, "GlobalSizeType": "CUDA"}})");
  return load_job(dir / "job.json");
}

// A copy whose stride is a parameter (1 or 32), over block sizes 128 and 256, the same work for
// every block size.
Job strided_copy_job(const test::TempDir& dir) {
  Job job = small_job(dir, R"(extern "C" __global__ void k(float* out, const float* in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i * stride];
})",
                      R"([{"Name": "bs", "Type": "int", "Values": "[128, 256]"},
                          {"Name": "stride", "Type": "int", "Values": "[1, 32]"}])");
  job.global_size.x = "1048576 // bs";
  return job;
}

// Reads from 1 to 128 floats apart over block sizes 128 and 256: 64 configurations with
// `unused` (four values, added to every element).
Job strided_reads_job(const test::TempDir& dir, const std::string& unused_values) {
  Job job = small_job(dir, R"(extern "C" __global__ void k(float* out, const float* in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i * stride] + unused;
})",
                      R"([{"Name": "bs", "Type": "int", "Values": "[128, 256]"},
                          {"Name": "stride", "Type": "int", "Values": "[1, 2, 4, 8, 16, 32, 64, 128]"},
                          {"Name": "unused", "Type": "int", "Values": ")" +
                          unused_values + R"("}])");
  job.global_size.x = "1048576 // bs";
  return job;
}

/// Every configuration of the job's space, in order.
std::vector<Config> all_configs(const Job& job) {
  const Space space = build_space(job);
  std::vector<Config> configs;
  for (size_t i = 0; i < space.size(); ++i) configs.push_back(space.config(i));
  return configs;
}

PruneRunOptions opts(const test::TempDir& dir, const std::string& device) {
  PruneRunOptions o;
  o.device = device;
  o.store = false;
  o.cache_dir = dir / "cache";
  return o;
}

TEST(Prune, ParametersWithoutEffectAreCollapsed) {
  test::TempDir dir;
  Job job = small_job(dir, "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }",
                      R"([{"Name": "bs", "Type": "int", "Values": "[64, 128]"},
                          {"Name": "unused", "Type": "int", "Values": "[0, 1, 2]"}])");
  auto r = prune_job(job, opts(dir, "h100-sxm"));
  EXPECT_EQ(r.counts[2].rule, "duplicate");
  EXPECT_EQ(r.counts[2].removed, 4u);  // per block size, 2 of the 3 identical cubins
  EXPECT_EQ(r.kept, 2u);
  EXPECT_EQ(r.rows[1].decision.duplicate_of, 0);
  EXPECT_EQ(r.rows[3].decision.kept, true);  // bs=128: another launch geometry
}

// A run that loads nothing (prune, --no-gpu) drops each cubin once its resources are read:
// every variant's resources, hash and log are the same as with the cubins kept, fresh from NVRTC
// or from the cache, and no cubin bytes are left (a naive space's would fill the memory).
TEST(Prune, InspectingWithoutKeepingCubinsReadsTheSame) {
  test::TempDir dir;
  Job job = strided_reads_job(dir, "[0, 1, 2, 3]");
  const std::string source = load_kernel_source(job);
  const std::vector<Config> configs = all_configs(job);
  const cuda::CubinCache cache = cache_for(dir / "cache");
  for (bool cached : {false, true}) {
    CompileReport dropped = compile_and_inspect(job, source, configs, "sm_90", cache, 2, false, {},
                                                /*keep_cubins=*/false);
    CompileReport kept = compile_and_inspect(job, source, configs, "sm_90", cache, 2, false);
    ASSERT_EQ(dropped.compiled.size(), configs.size());
    EXPECT_EQ(dropped.ok, configs.size());
    EXPECT_EQ(dropped.cached, cached ? configs.size() : 0u);
    for (size_t i = 0; i < configs.size(); ++i) {
      SCOPED_TRACE(configs[i].key());
      ASSERT_TRUE(dropped.inspected[i].ok) << dropped.inspected[i].reason;
      EXPECT_EQ(dropped.inspected[i].res, kept.inspected[i].res);
      EXPECT_GT(dropped.inspected[i].res.registers, 0);
      EXPECT_EQ(dropped.compiled[i].cubin_hash, kept.compiled[i].cubin_hash);
      EXPECT_EQ(dropped.compiled[i].log, kept.compiled[i].log);
      EXPECT_TRUE(dropped.compiled[i].cubin.empty());
      EXPECT_FALSE(kept.compiled[i].cubin.empty());
    }
  }
}

TEST(Prune, ResourcesFollowTheDevice) {
  test::TempDir dir;
  // 1024 threads of a kernel using many registers: fine on no device with 64K registers per block
  // unless registers x threads exceed it.
  Job job = small_job(dir, R"(extern "C" __global__ void k(float* p) {
      float a[24];
      for (int i = 0; i < 24; i++) a[i] = p[i * blockDim.x + threadIdx.x];
      float s = 0;
      for (int i = 0; i < 24; i++) for (int j = 0; j < 24; j++) s += a[i] * a[(i * 7 + j) % 24];
      p[threadIdx.x] = s; })",
                      R"([{"Name": "bs", "Type": "int", "Values": "[256, 1024]"}])");
  auto r = prune_job(job, opts(dir, "rtx-2080-ti"));
  ASSERT_EQ(r.rows.size(), 2u);
  int regs = r.rows[1].registers;
  ASSERT_GT(regs, 0);
  bool fits = ((regs * 32 + 255) / 256 * 256) * 32 <= 65536;
  EXPECT_EQ(r.rows[1].decision.kept, fits) << regs << " registers";
  if (!fits) {
    EXPECT_EQ(r.rows[1].decision.rule, "resources");
    EXPECT_NE(r.rows[1].decision.reason.find("registers"), std::string::npos);
  }
  EXPECT_TRUE(r.rows[0].decision.kept);
}

TEST(Prune, SpillsAboveTheLimitArePruned) {
  test::TempDir dir;
  test::write_file(dir / "k.cu", R"(extern "C" __global__ void k(float* p, int n) {
      float a[64];
      for (int i = 0; i < 64; i++) a[i] = p[i * n + threadIdx.x];
      float s = 0;
      for (int i = 0; i < 64; i++) for (int j = 0; j < 64; j++) s += a[i] * a[j] + a[(i + j) & 63];
      p[threadIdx.x] = s; })");
  test::write_file(dir / "job.json", R"({
    "ConfigurationSpace": {"TuningParameters": [{"Name": "bs", "Type": "int", "Values": "[128]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "CompilerOptions": ["--maxrregcount=16"],
      "LocalSize": {"X": "bs"}, "GlobalSize": {"X": "1"}, "GlobalSizeType": "CUDA"}})");
  Job job = load_job(dir / "job.json");
  auto r = prune_job(job, opts(dir, "h100-sxm"));
  ASSERT_GT(r.rows[0].spill_bytes, 0) << "16 registers for 64 live floats must spill";
  EXPECT_EQ(r.rows[0].decision.rule, "spills");
  auto o = opts(dir, "h100-sxm");
  o.max_spill_bytes = -1;
  EXPECT_TRUE(prune_job(job, o).rows[0].decision.kept);
}

TEST(Prune, JsonLinesAndStorage) {
  test::TempDir dir;
  Job job = small_job(dir, "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = 2.0f; }",
                      R"([{"Name": "bs", "Type": "int", "Values": "[32, 2048]"}])");
  auto o = opts(dir, "a100-sxm-80gb");
  o.store = true;
  o.db_path = (dir / "g.db").string();
  auto r = prune_job(job, o);
  EXPECT_GT(r.run_id, 0);
  std::ostringstream out;
  print_prune_report(r, out, true);
  std::istringstream in(out.str());
  std::string line;
  std::getline(in, line);
  auto first = nlohmann::json::parse(line);
  EXPECT_EQ(first["parameters"]["bs"], 32);
  EXPECT_EQ(first["kept"], true);
  EXPECT_TRUE(first["rule"].is_null());
  EXPECT_TRUE(first.contains("predicted_ms"));
  EXPECT_GT(first["registers"].get<int>(), 0);
  EXPECT_GT(first["occupancy"].get<double>(), 0);
  std::getline(in, line);
  auto second = nlohmann::json::parse(line);
  EXPECT_EQ(second["kept"], false);
  EXPECT_EQ(second["rule"], "resources");  // 2048 threads per block
  std::ostringstream text;
  print_prune_report(r, text, false);
  EXPECT_NE(text.str().find("rule resources  removed 1"), std::string::npos) << text.str();
  // `show` counts what each rule removed, and says that nothing was timed.
  auto show = test::run_gputune("show " + std::to_string(r.run_id) + " --db '" + o.db_path + "'");
  EXPECT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("strategy prune, 2/2 done, 0 timed"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("  pruned by rule resources: 1\n"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("  compiled: 1\n"), std::string::npos) << show.out;
  // What it kept, with the model's prediction, since nothing has a measured time.
  EXPECT_NE(show.out.find("nothing was timed; the compiled variants, fastest predicted first:\n"
                          "  default  compiled  predicted "),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("{\"bs\": 32}  (kept by the pruner)"), std::string::npos) << show.out;
  auto failed = test::run_gputune("show " + std::to_string(r.run_id) + " --failures --db '" +
                                  o.db_path + "'");
  EXPECT_NE(failed.out.find("  default  constraints  "), std::string::npos) << failed.out;
  EXPECT_NE(failed.out.find("{\"bs\": 2048}  (pruned by rule resources: "), std::string::npos)
      << failed.out;
  EXPECT_EQ(failed.out.find("kept by the pruner"), std::string::npos) << failed.out;
}

TEST(Prune, ModelRanksAndRule4RemovesWhatIsPredictedFarSlower) {
  // Stride 32 touches 8x the sectors of stride 1 (the model must rank stride 1 first and drop
  // stride 32 with a margin of 2).
  test::TempDir dir;
  Job job = strided_copy_job(dir);
  auto o = opts(dir, "h100-sxm");
  auto r = prune_job(job, o);
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.predicted, 4u) << r.first_analysis_error;
  ASSERT_EQ(r.counts.back().rule, "model");
  EXPECT_EQ(r.counts.back().removed, 2u);
  for (auto& row : r.rows) {
    ASSERT_TRUE(row.predicted_ms);
    bool strided = row.config.key().find(",32") != std::string::npos;
    EXPECT_EQ(row.decision.kept, !strided) << row.config.key();
    if (strided) {
      EXPECT_EQ(row.decision.rule, "model");
      EXPECT_NE(row.decision.reason.find("best prediction"), std::string::npos);
      EXPECT_EQ(row.bound, "dram");  // a 32-byte sector from DRAM for every 4-byte element
    }
  }
  std::ostringstream js;
  print_prune_report(r, js, true);
  std::istringstream lines(js.str());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(j["predicted_ms"].is_number()) << line;
    ++n;
  }
  EXPECT_EQ(n, 4);
  std::ostringstream text;
  print_prune_report(r, text, false);
  EXPECT_NE(text.str().find("rule model"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("kept 2 of 4"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("best predicted"), std::string::npos) << text.str();

  // A wide margin keeps everything; without the model nothing is predicted.
  o.model_margin = 1000;
  EXPECT_EQ(prune_job(job, o).kept, 4u);
  o.model = false;
  auto bare = prune_job(job, o);
  EXPECT_FALSE(bare.rows[0].predicted_ms);
  EXPECT_EQ(bare.counts.back().rule, "duplicate");
}

// The traffic analysis is most of a prune's time: its reports are cached with the cubins. A
// second prune reads them all and predicts the same; a launch geometry it has not seen, a torn
// entry or `--cache-dir -` analyse again.
TEST(Prune, TrafficAnalysesAreCachedAndPredictTheSame) {
  test::TempDir dir;
  Job job = strided_copy_job(dir);
  auto o = opts(dir, "h100-sxm");
  auto predictions = [](const PruneReport& r) {
    std::vector<double> p;
    for (const auto& row : r.rows) p.push_back(row.predicted_ms.value_or(-1));
    return p;
  };
  const auto first = prune_job(job, o);
  ASSERT_EQ(first.predicted, 4u) << first.first_analysis_error;
  EXPECT_EQ(first.analyses_cached, 0u);
  const auto second = prune_job(job, o);
  EXPECT_EQ(second.analyses_cached, 4u);
  EXPECT_EQ(predictions(second), predictions(first));
  std::ostringstream text;
  print_prune_report(second, text, false);
  EXPECT_NE(text.str().find("4 variants predicted (4 analyses from the cache)"), std::string::npos)
      << text.str();

  size_t entries = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir / "cache" / "traffic"))
    if (e.is_regular_file()) {
      test::write_file(e.path(), "{\"parsed\": tr");  // torn
      ++entries;
    }
  EXPECT_EQ(entries, 4u);
  const auto torn = prune_job(job, o);
  EXPECT_EQ(torn.analyses_cached, 0u);
  EXPECT_EQ(predictions(torn), predictions(first));
  EXPECT_EQ(prune_job(job, o).analyses_cached, 4u);  // rewritten

  Job wider = job;
  wider.global_size.x = "2097152 // bs";
  const auto other = prune_job(wider, o);
  EXPECT_EQ(other.analyses_cached, 0u);
  EXPECT_NE(predictions(other), predictions(first));

  o.cache_dir = "-";
  EXPECT_EQ(prune_job(job, o).analyses_cached, 0u);
  EXPECT_EQ(prune_job(job, o).analyses_cached, 0u);
}

TEST(Prune, TheScreenKeepsWhatRule4KeepsWithoutCompilingTheRest) {
  // Strided reads from 1 to 128 floats apart: the wide strides are DRAM-bound many times over.
  // Rule 4 judges them from their source before compiling; the kept set must not change.
  test::TempDir dir;
  Job job = strided_reads_job(dir, "[0, 0, 0, 0]");
  auto o = opts(dir, "h100-sxm");
  auto all = prune_job(job, o);
  o.screen = true;
  o.screen_batch = 8;
  o.cache_dir = dir / "cache2";  // compile from scratch: the screen must not see old cubins
  auto screened = prune_job(job, o);
  ASSERT_EQ(all.rows.size(), 64u);
  ASSERT_EQ(screened.rows.size(), 64u);
  EXPECT_EQ(all.screened, 0u);
  EXPECT_GT(screened.screened, 20u);
  EXPECT_EQ(screened.kept, all.kept);
  size_t not_compiled = 0;
  for (size_t i = 0; i < all.rows.size(); ++i) {
    const auto& a = all.rows[i];
    const auto& s = screened.rows[i];
    EXPECT_EQ(s.decision.kept, a.decision.kept) << a.config.key();
    if (s.compiled) continue;
    ++not_compiled;
    // Not compiled: rule 4 said so, with the best case, and it would have said so after compiling
    // (or an earlier rule would have removed the variant).
    EXPECT_EQ(s.decision.rule, "model") << a.config.key();
    EXPECT_NE(s.decision.reason.find("at any occupancy"), std::string::npos) << s.decision.reason;
    EXPECT_FALSE(a.decision.kept) << a.config.key();
  }
  EXPECT_EQ(not_compiled, screened.screened);
  ASSERT_EQ(screened.counts.back().rule, "model");
  std::ostringstream text;
  print_prune_report(screened, text, false);
  EXPECT_NE(text.str().find(std::to_string(screened.screened) + " not compiled"), std::string::npos)
      << text.str();
}

// Ctrl-C while the screen analyses the sources (minutes for a large naive space; before, a stop
// waited for every analysis) ends the analysis at once: nothing more is analysed or compiled,
// and nothing counts as screened.
TEST(Prune, AStopWhileTheScreenAnalysesEndsItAndCompilesNothing) {
  test::TempDir dir;
  Job job = strided_reads_job(dir, "[0, 1, 2, 3]");
  const std::string source = load_kernel_source(job);
  const std::vector<Config> configs = all_configs(job);
  ASSERT_EQ(configs.size(), 64u);
  const pruner::DeviceSpec spec = pruner::find_device("h100-sxm");
  auto analyses = [](const std::filesystem::path& cache) {
    size_t n = 0;
    if (std::filesystem::exists(cache / "traffic"))
      for (const auto& e : std::filesystem::recursive_directory_iterator(cache / "traffic"))
        n += e.is_regular_file();
    return n;
  };
  auto screen = [&](const std::filesystem::path& cache, std::function<bool()> stop) {
    ScreenOptions so;
    so.threads = 2;
    so.batch = 8;
    so.should_stop = std::move(stop);
    return compile_screened(job, source, configs, {&job.contexts.front()}, spec.limits,
                            rates_for_spec(spec), pruner::Calibration{}, spec.limits.arch(),
                            cache_for(cache), so);
  };
  std::atomic<int> asked{0};
  const ScreenResult stopped = screen(dir / "c1", [&] { return ++asked > 5; });
  EXPECT_TRUE(stopped.interrupted);
  EXPECT_EQ(stopped.count, 0u);
  EXPECT_EQ(stopped.compile.ok + stopped.compile.failed + stopped.compile.cached, 0u);
  EXPECT_EQ(stopped.rounds, 0u);
  EXPECT_LE(analyses(dir / "c1"), 5u) << "analyses started after the stop";
  // The same screen without a stop analyses all 64 and compiles what could win.
  const ScreenResult whole = screen(dir / "c2", {});
  EXPECT_FALSE(whole.interrupted);
  EXPECT_EQ(analyses(dir / "c2"), 64u);
  EXPECT_GT(whole.compile.ok, 0u);
  EXPECT_GT(whole.count, 0u);
  // A stop once the first cubin is in the cache: the round in flight stops, no other starts,
  // and what was not compiled is not called screened.
  auto cubins = [&](const std::filesystem::path& cache) {
    size_t n = 0;
    if (std::filesystem::exists(cache))
      for (const auto& e : std::filesystem::recursive_directory_iterator(cache))
        n += e.is_regular_file() && e.path().string().find("/traffic/") == std::string::npos;
    return n;
  };
  const ScreenResult between = screen(dir / "c4", [&] { return cubins(dir / "c4") > 0; });
  EXPECT_TRUE(between.interrupted);
  EXPECT_EQ(between.rounds, 1u);
  EXPECT_EQ(between.count, 0u);
  EXPECT_GE(between.compile.ok, 1u);
  EXPECT_LT(between.compile.ok, whole.compile.ok);
}

TEST(Prune, TheScreenTightensItsBarAsItCompilesAndSkipsWhatTheBestSoFarRulesOut) {
  // 48 KB of static shared memory (hold = 12000) costs occupancy, which the best case before
  // compiling cannot see: the first variant compiled (the default, 12000,1,32) predicts 2.2 x
  // what the light ones (hold = 256) do. Judged against it, stride 8 would be compiled; the
  // screen compiles one variant per round (batch 1) and judges the rest against the best so far,
  // which falls to the light variants' time: stride 8 is never compiled.
  test::TempDir dir;
  Job job = small_job(dir, R"(extern "C" __global__ void k(float* out, const float* in) {
  __shared__ float hold[smem];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  hold[threadIdx.x] = in[i * stride];
  __syncthreads();
  out[i] = hold[blockDim.x - 1 - threadIdx.x];
})",
                      R"([{"Name": "smem", "Type": "int", "Values": "[12000, 256]"},
                          {"Name": "stride", "Type": "int", "Values": "[1, 2, 3, 4, 5, 6, 8]"},
                          {"Name": "bs", "Type": "int", "Values": "[32, 64, 128, 256]"}])");
  job.global_size.x = "1048576 // bs";
  auto o = opts(dir, "h100-sxm");
  const auto all = prune_job(job, o);
  ASSERT_EQ(all.rows.size(), 56u);
  std::map<std::string, double> predicted;
  for (const auto& r : all.rows) predicted[r.config.key()] = r.predicted_ms.value_or(-1);
  ASSERT_EQ(all.rows[0].config.key(), "12000,1,32");
  // The default alone would let stride 8 through: 2 x its prediction is more than stride 8's.
  EXPECT_GT(2 * predicted["12000,1,32"], predicted["256,8,32"]);
  EXPECT_GT(2 * predicted["256,1,32"], predicted["256,6,32"]);  // stride 6 is within the margin
  o.screen = true;
  o.screen_batch = 1;
  o.cache_dir = dir / "cache2";
  const auto screened = prune_job(job, o);
  EXPECT_EQ(screened.kept, all.kept);
  EXPECT_EQ(screened.screened, 8u);
  for (size_t i = 0; i < screened.rows.size(); ++i) {
    const auto& r = screened.rows[i];
    EXPECT_EQ(r.compiled, r.config.key().find(",8,") == std::string::npos) << r.config.key();
    EXPECT_EQ(r.decision.kept, all.rows[i].decision.kept) << r.config.key();
  }
}

TEST(Prune, UnparsableKernelFallsBackToTheResourceRulesAndSaysSo) {
  test::TempDir dir;
  // NVRTC knows __brev; the analysis prelude does not declare it.
  Job job = small_job(dir, R"(extern "C" __global__ void k(float* p) {
  p[threadIdx.x] = (float)__brev(threadIdx.x);
})",
                      R"([{"Name": "bs", "Type": "int", "Values": "[64, 128]"}])");
  auto r = prune_job(job, opts(dir, "h100-sxm"));
  ASSERT_EQ(r.compile_failed, 0u);
  EXPECT_EQ(r.not_analysed, 2u);
  EXPECT_EQ(r.kept, 2u);
  EXPECT_NE(r.first_analysis_error.find("clang could not parse"), std::string::npos);
}

// A gather `in[idx[i]]` over 1M int indices (4 MiB, past the 1 MiB of other read-only data):
// the model reads the indices the job fills, so 32 lanes that all read in[0] cost one sector a
// warp, not one sector a lane. Indices the kernel may write (ReadWrite) are not read.
TEST(Prune, TheIndicesOfAGatherAreReadPastOneMiBSoTheySetItsAddresses) {
  test::TempDir dir;
  test::write_file(dir / "k.cu", R"(extern "C" __global__ void k(float* out, const float* in,
                                         const int* idx) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[idx[i]];
})");
  auto job_with = [&](const std::string& idx_access) {
    test::write_file(dir / "job.json",
                     R"({
    "ConfigurationSpace": {"TuningParameters": [{"Name": "bs", "Type": "int", "Values": "[256]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "bs"}, "GlobalSize": {"X": "1048576 // bs"}, "GlobalSizeType": "CUDA",
      "Arguments": [
        {"Name": "out", "Type": "float", "MemoryType": "Vector", "AccessType": "WriteOnly", "Size": 1048576, "FillType": "Constant", "FillValue": 0, "Output": 1},
        {"Name": "in", "Type": "float", "MemoryType": "Vector", "AccessType": "ReadOnly", "Size": 1048576, "FillType": "Random", "FillValue": 1},
        {"Name": "idx", "Type": "int32", "MemoryType": "Vector", "AccessType": ")" +
                         idx_access +
                         R"(", "Size": 1048576, "FillType": "Constant", "FillValue": 0}]}})");
    return load_job(dir / "job.json");
  };
  auto sectors = [&](const Job& job) {
    auto r = prune_job(job, opts(dir, "h100-sxm"));
    EXPECT_EQ(r.predicted, 1u) << r.first_analysis_error;
    return r.features.empty() ? -1.0 : r.features[0].sectors;
  };
  const double warps = 1048576.0 / 32;
  // out and idx: 4 sectors a warp each; in: 1 (every lane reads in[0]) ...
  EXPECT_DOUBLE_EQ(sectors(job_with("ReadOnly")), warps * (4 + 4 + 1));
  // ... or, with indices the kernel may change, a sector a lane.
  EXPECT_DOUBLE_EQ(sectors(job_with("ReadWrite")), warps * (4 + 4 + 32));
}

// Two strided reads, each 1 to 8 floats apart, over three block sizes (192 configurations): the
// best case falls with both strides, so the model's optimum is stride 1 and stride2 1. The
// default (both 8) is as far from it as the space allows.
Job two_strides_job(const test::TempDir& dir) {
  Job job =
      small_job(dir, R"(extern "C" __global__ void k(float* out, const float* in, const float* in2,
                                     const float* in3) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i * stride] + in2[i * stride2] + in3[i * stride3];
})",
                R"([{"Name": "bs", "Type": "int", "Values": "[32, 64, 128, 256, 512]"},
                          {"Name": "stride", "Type": "int", "Values": "[1, 2, 4, 8]", "Default": 8},
                          {"Name": "stride2", "Type": "int", "Values": "[8, 4, 2, 1]", "Default": 8},
                          {"Name": "stride3", "Type": "int", "Values": "[2, 4, 1, 8, 3]", "Default": 8}])");
  job.global_size.x = "1048576 // bs";
  return job;
}

/// Every configuration's best case (what the search avoids computing) and the optimum's keys.
struct WholeSpace {
  std::vector<Config> all;
  std::vector<double> truth;
  double optimum = 0;
  std::set<std::string> optima;
};
WholeSpace analyse_whole(const Job& job, const std::string& source, const Space& space,
                         const pruner::DeviceSpec& spec, const Rates& rates,
                         const cuda::CubinCache& cache) {
  WholeSpace w;
  for (size_t i = 0; i < space.size(); ++i) w.all.push_back(space.config(i));
  const ContextSpec& ctx = job.contexts.front();
  w.truth = best_cases(job, source, w.all, ctx,
                       model_arguments(make_arguments(job, ctx, ArgumentContents::SizesOnly)),
                       spec.limits, rates, {}, cache, ScreenOptions{});
  w.optimum = *std::min_element(w.truth.begin(), w.truth.end());
  for (size_t i = 0; i < w.truth.size(); ++i)
    if (w.truth[i] <= w.optimum * (1 + 1e-9)) w.optima.insert(w.all[i].key());
  return w;
}

TEST(ModelSearch, FindsTheModelsOptimumOfASpaceItDoesNotAnalyseWhole) {
  test::TempDir dir;
  const Job job = two_strides_job(dir);
  const std::string source = load_kernel_source(job);
  const Space space = build_space(job);
  ASSERT_EQ(space.size(), 400u);
  const pruner::DeviceSpec spec = pruner::find_device("h100-sxm");
  const Rates rates = rates_for_spec(spec);
  const cuda::CubinCache cache(dir / "cache");
  const long def = space.find(default_key(job));
  ASSERT_GE(def, 0);
  // The truth: every configuration's best case. Its optimum (block sizes 64 to 512 at strides
  // 1, 1, 1; blocks of 32 keep only 32 warps per SM, too few loads in flight: the latency term)
  // is not among the 20 configurations spread over the space.
  const auto [all, truth, optimum, optima] = analyse_whole(job, source, space, spec, rates, cache);
  ASSERT_EQ(optima, (std::set<std::string>{"64,1,1,1", "128,1,1,1", "256,1,1,1", "512,1,1,1"}));
  double spread_best = INFINITY;
  for (size_t i : spread(space, 20, def)) {
    ASSERT_EQ(optima.count(all[i].key()), 0u) << "the spread alone finds it: no test";
    spread_best = std::min(spread_best, truth[i]);
  }
  EXPECT_GT(spread_best, 1.1 * optimum);

  // 40 analyses: 20 spread, 20 near the best, which walk from the spread's best to the optimum.
  ModelSearchOptions mo;
  mo.limit = 40;
  const ModelSearch found = search_by_model(job, source, space, {&job.contexts.front()},
                                            spec.limits, rates, {}, cache, mo);
  EXPECT_TRUE(found.model);
  EXPECT_EQ(found.spread, 20u);
  EXPECT_EQ(found.near, 20u);
  EXPECT_GE(found.rounds, 2u);
  ASSERT_EQ(found.chosen.size(), 40u);
  EXPECT_TRUE(std::is_sorted(found.chosen.begin(), found.chosen.end()));
  EXPECT_EQ(std::set<size_t>(found.chosen.begin(), found.chosen.end()).size(), 40u);
  EXPECT_TRUE(
      std::binary_search(found.chosen.begin(), found.chosen.end(), static_cast<size_t>(def)));
  EXPECT_EQ(optima.count(found.best_key), 1u) << found.best_key;
  EXPECT_NEAR(found.best_ms, optimum, 1e-12);
  EXPECT_TRUE(std::any_of(
      found.chosen.begin(), found.chosen.end(),
      // by name: clang 14 cannot capture structured bindings
      [&optima = optima, &all = all](size_t i) { return optima.count(all[i].key()) > 0; }));
  const std::string line = found.summary(space.size(), mo.limit);
  EXPECT_NE(line.find("the space holds 400 configurations, more than the 40 the model analyses"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("20 spread over it, 20 near the best it judged"), std::string::npos) << line;
  EXPECT_NE(line.find("the other 360 are left out"), std::string::npos) << line;
  // Deterministic (the second search reads the analyses from the cache).
  EXPECT_EQ(search_by_model(job, source, space, {&job.contexts.front()}, spec.limits, rates, {},
                            cache, mo)
                .chosen,
            found.chosen);

  // Without the device's rates there is nothing to search by: the spread alone, all 40 of it.
  const ModelSearch blind = search_by_model(job, source, space, {&job.contexts.front()},
                                            spec.limits, Rates{}, {}, cache, mo);
  EXPECT_FALSE(blind.model);
  std::vector<size_t> spread40 = spread(space, 40, def);
  std::sort(spread40.begin(), spread40.end());
  EXPECT_EQ(blind.chosen, spread40);
  EXPECT_NE(blind.summary(space.size(), mo.limit).find("there are no device rates"),
            std::string::npos)
      << blind.summary(space.size(), mo.limit);
}

// Two arrays read with one stride, tied by a condition (`s1 == s2`): no single parameter
// move changes that stride, so a search of single moves keeps the tied stride of the spread's
// points. Moving both at once (a forbidden move repaired by one step of a second parameter)
// walks the tie to the optimum.
TEST(ModelSearch, WalksAlongAConditionByMovingTwoParametersAtOnce) {
  test::TempDir dir;
  Job job =
      small_job(dir, R"(extern "C" __global__ void k(float* out, const float* a, const float* b,
                                     const float* c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = a[i * s1] + b[i * s2] + c[i * s3];
})",
                R"J([{"Name": "bs", "Type": "int", "Values": "[64, 128]"},
          {"Name": "s1", "Type": "int", "Values": "range(1, 13)", "Default": 12},
          {"Name": "s2", "Type": "int", "Values": "range(1, 13)", "Default": 12},
          {"Name": "s3", "Type": "int", "Values": "[8, 4, 2, 1]", "Default": 8}])J");
  job.global_size.x = "1048576 // bs";
  job.conditions.push_back({"s1 == s2", {"s1", "s2"}});
  const std::string source = load_kernel_source(job);
  const Space space = build_space(job);
  ASSERT_EQ(space.size(), 96u);
  const pruner::DeviceSpec spec = pruner::find_device("h100-sxm");
  const Rates rates = rates_for_spec(spec);
  const cuda::CubinCache cache(dir / "cache");
  const long def = space.find(default_key(job));
  ASSERT_GE(def, 0);
  const auto [all, truth, optimum, optima] = analyse_whole(job, source, space, spec, rates, cache);
  for (const std::string& k : optima) ASSERT_EQ(k.find(",1,1,1"), k.find(',')) << k;
  // The premise: no point of the spread has the tied stride at 1, so single moves never get it
  // there.
  ModelSearchOptions mo;
  mo.limit = 16;
  for (size_t i : spread(space, mo.limit / 2, def))
    ASSERT_NE(space.value_index(i, 1), 0u) << all[i].key() << ": no test";
  const ModelSearch found = search_by_model(job, source, space, {&job.contexts.front()},
                                            spec.limits, rates, {}, cache, mo);
  ASSERT_TRUE(found.model);
  EXPECT_EQ(found.chosen.size(), 16u);
  EXPECT_GT(found.coupled, 0u);
  EXPECT_LE(found.coupled, found.near);
  EXPECT_EQ(optima.count(found.best_key), 1u)
      << found.best_key << " at " << found.best_ms << " ms; the optimum is " << optimum << " ms";
  const std::string line = found.summary(space.size(), mo.limit);
  EXPECT_NE(line.find(" near the best it judged (" + std::to_string(found.coupled) +
                      " of them two parameters away), in "),
            std::string::npos)
      << line;
  // Single moves only: the tied stride stays where the spread put it.
  mo.coupled_moves = false;
  const ModelSearch single = search_by_model(job, source, space, {&job.contexts.front()},
                                             spec.limits, rates, {}, cache, mo);
  EXPECT_EQ(single.coupled, 0u);
  EXPECT_EQ(optima.count(single.best_key), 0u) << single.best_key;
  EXPECT_GT(single.best_ms, 1.1 * optimum);
}

TEST(ModelSearch, PruneRulesOnWhatTheSearchChoseAndSaysWhatItLeftOut) {
  test::TempDir dir;
  Job job = two_strides_job(dir);
  auto o = opts(dir, "h100-sxm");
  o.model_analyses = 40;
  o.store = true, o.db_path = (dir / "g.db").string();
  const PruneReport r = prune_job(job, o);
  EXPECT_EQ(r.space_size, 400u);
  ASSERT_EQ(r.rows.size(), 40u);
  EXPECT_NE(r.model_search.find("40 are compiled"), std::string::npos) << r.model_search;
  // The model's optimum was among them, compiled, and kept.
  bool optimum_kept = false;
  for (const auto& row : r.rows)
    optimum_kept = optimum_kept || (row.config.key() == "32,1,1,1" && row.decision.kept);
  EXPECT_TRUE(optimum_kept);
  std::ostringstream text;
  print_prune_report(r, text, false);
  EXPECT_NE(text.str().find("  model search: the space holds 400 configurations"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("  rule search     removed 360 (left out by the model search above"),
            std::string::npos)
      << text.str();
  // --json: one object per configuration of the space, what the search left out with rule
  // "search", so that an outside tool scores the pruning of the whole space.
  std::ostringstream json_lines;
  print_prune_report(r, json_lines, true);
  std::istringstream lines(json_lines.str());
  std::set<std::string> keys;
  size_t n = 0, by_search = 0, kept = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const auto j = nlohmann::json::parse(line);
    std::string key;
    for (const char* p : {"bs", "stride", "stride2", "stride3"})
      key += (key.empty() ? "" : ",") + std::to_string(j["parameters"][p].get<int>());
    keys.insert(key);
    kept += j["kept"].get<bool>();
    if (j["rule"] == "search") {
      ++by_search;
      EXPECT_FALSE(j["kept"].get<bool>());
      EXPECT_TRUE(j["predicted_ms"].is_null());
    }
  }
  EXPECT_EQ(n, 400u);
  EXPECT_EQ(keys.size(), 400u) << "every configuration once";
  // The stored prune run names the search as its plan.
  ASSERT_GT(r.run_id, 0);
  db::Store store(r.db_path);
  const auto plan = store.run_plan(r.run_id);
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->searched);
  EXPECT_EQ(plan->chosen.size(), 40u);
  EXPECT_EQ(plan->summary, r.model_search);
  EXPECT_NE(store.run(r.run_id)->message.find(" of 40 the model's search chose of the space's 400"),
            std::string::npos)
      << store.run(r.run_id)->message;
  EXPECT_EQ(by_search, 360u);
  EXPECT_EQ(kept, r.kept);
  // The job's own limit, when the options leave it: a space within it is ruled on whole.
  job.model_analyses = 400;
  o.model_analyses.reset();
  const PruneReport whole = prune_job(job, o);
  EXPECT_EQ(whole.rows.size(), 400u);
  EXPECT_TRUE(whole.model_search.empty());
  std::ostringstream whole_text;
  print_prune_report(whole, whole_text, false);
  EXPECT_EQ(whole_text.str().find("rule search"), std::string::npos) << whole_text.str();
}

}  // namespace
}  // namespace gputune::tuner
