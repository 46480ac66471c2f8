#include "variants/job.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <typeinfo>

#include "json_fuzz.h"
#include "test_util.h"
#include "variants/space.h"

namespace gputune {
namespace {

using nlohmann::json;

json minimal() {
  return json::parse(R"({
    "ConfigurationSpace": {"TuningParameters": [{"Name": "block_size_x", "Type": "int", "Values": "[32, 64]"}]},
    "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
      "LocalSize": {"X": "block_size_x"}, "GlobalSize": {"X": "ProblemSize[0] // block_size_x"}, "GlobalSizeType": "CUDA"}
  })");
}

std::string error_of(const json& doc) {
  try {
    parse_job(doc, "job.json");
  } catch (const JobError& e) {
    return e.what();
  }
  return "";
}

TEST(Job, ReadsTheRealDedispersionFile) {
  Job j = load_job(test::shared_dir() / "data/kernel-tuner-cache/dedispersion_milo.T1.json");
  EXPECT_EQ(j.name, "dedispersion_milo");
  EXPECT_EQ(j.kernel_name, "dedispersion_kernel");
  ASSERT_EQ(j.parameters.size(), 8u);
  EXPECT_EQ(j.parameters[1].name, "block_size_y");
  EXPECT_EQ(j.parameters[1].values.size(), 29u);
  EXPECT_EQ(j.parameters[1].default_value->as_int(), 32);
  ASSERT_EQ(j.conditions.size(), 3u);
  EXPECT_EQ(j.conditions[0].expression, "32 <= block_size_x * block_size_y <= 1024");
  EXPECT_TRUE(j.use_grid_div);
  EXPECT_EQ(j.grid_div[0], (std::vector<std::string>{"block_size_x", "tile_size_x"}));
  ASSERT_EQ(j.contexts.size(), 1u);
  EXPECT_EQ(j.contexts[0].problem_size[0].as_int(), 25000);
  ASSERT_EQ(j.arguments.size(), 3u);
  EXPECT_TRUE(j.arguments[1].output);
  EXPECT_EQ(j.arguments[1].size_expr, "ProblemSize[0]*ProblemSize[1]");
  EXPECT_EQ(j.compiler_options, std::vector<std::string>{"-std=c++11"});
  // The reader says what it tolerated: the non-schema keys real files carry.
  bool noted = false;
  for (auto& n : j.notes) noted = noted || n.find("GridDivX") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(Job, ReadsTheGputuneExtension) {
  json d = minimal();
  d["GPUTune"] = json::parse(R"({
    "Contexts": [[1024], {"Name": "big", "ProblemSize": [4096, 2], "Values": {"alpha": 2.5}}],
    "Device": {"Arch": "sm_80"}, "Search": {"Strategy": "random", "Seed": 7, "ModelAnalyses": 5000},
    "Budget": {"Configurations": 10, "Seconds": 30},
    "Verification": {"AbsoluteTolerance": 0.01, "RelativeTolerance": 0.001},
    "Measurement": {"WarmUp": 1, "Repeats": 5, "FlushL2": true, "ReMeasureTop": 2, "TimeoutSeconds": 3},
    "Work": {"Flops": "2*ProblemSize[0]"}, "Database": "x.db", "CompileThreads": 3})");
  Job j = parse_job(d, "job.json");
  ASSERT_EQ(j.contexts.size(), 2u);
  EXPECT_EQ(j.contexts[0].name, "1024");
  EXPECT_EQ(j.contexts[1].name, "big");
  EXPECT_EQ(j.contexts[1].problem_size[1].as_int(), 2);
  EXPECT_EQ(j.contexts[1].values[0].first, "alpha");
  EXPECT_EQ(j.target_arch, "sm_80");
  EXPECT_EQ(j.strategy, "random");
  EXPECT_EQ(j.seed, 7u);
  EXPECT_EQ(j.model_analyses, 5000u);
  EXPECT_EQ(parse_job(minimal(), "job.json").model_analyses, 20000u);
  EXPECT_EQ(*j.budget.max_configurations, 10u);
  EXPECT_DOUBLE_EQ(*j.budget.max_seconds, 30);
  EXPECT_DOUBLE_EQ(j.abs_tolerance, 0.01);
  EXPECT_EQ(j.measure.repeats, 5);
  EXPECT_TRUE(j.measure.flush_l2);
  EXPECT_EQ(j.flops_expr, "2*ProblemSize[0]");
  EXPECT_EQ(j.compile_threads, 3);
}

TEST(Job, ReadsT1SearchAndBudget) {
  json d = minimal();
  d["Search"] = {{"Name", "Random"}, {"Attributes", {{{"Name", "Seed"}, {"Value", 5}}}}};
  d["Budget"] = {{{"Type", "ConfigurationCount"}, {"BudgetValue", 3}},
                 {{"Type", "TuningDuration"}, {"BudgetValue", 9}}};
  Job j = parse_job(d, "job.json");
  EXPECT_EQ(j.strategy, "random");
  EXPECT_EQ(j.seed, 5u);
  EXPECT_EQ(*j.budget.max_configurations, 3u);
  EXPECT_DOUBLE_EQ(*j.budget.max_seconds, 9);
}

// A naive job's generated space can be hundreds of thousands of variants: unless the job names
// a search, the model guides it (and the pruner is on); a parametric job stays brute force.
TEST(Job, ANaiveJobIsModelGuidedUnlessItNamesASearch) {
  json d = minimal();
  EXPECT_EQ(parse_job(d, "job.json").strategy, "brute_force");
  d.erase("ConfigurationSpace");
  d["GPUTune"] = {{"Naive", true}};
  Job naive = parse_job(d, "job.json");
  EXPECT_EQ(naive.strategy, "model_guided");
  EXPECT_TRUE(naive.pruner.enabled);
  d["GPUTune"]["Search"] = {{"Strategy", "brute_force"}};
  EXPECT_EQ(parse_job(d, "job.json").strategy, "brute_force");
  EXPECT_FALSE(parse_job(d, "job.json").pruner.enabled);
  d["GPUTune"]["Search"] = {{"Seed", 3}};
  EXPECT_EQ(parse_job(d, "job.json").strategy, "model_guided");
  d["GPUTune"].erase("Search");
  d["Search"] = {{"Name", "Random"}};
  EXPECT_EQ(parse_job(d, "job.json").strategy, "random");
  d.erase("Search");
  d["GPUTune"]["Pruner"] = {{"Enabled", false}};
  EXPECT_FALSE(parse_job(d, "job.json").pruner.enabled) << "an explicit Pruner.Enabled holds";
}

TEST(JobErrors, ModelAnalysesMustBeACountOfAtLeastTwo) {
  json d = minimal();
  for (const json& bad : {json(1), json(-5), json("many")}) {
    d["GPUTune"] = {{"Search", {{"ModelAnalyses", bad}}}};
    const std::string e = error_of(d);
    EXPECT_NE(e.find("GPUTune.Search.ModelAnalyses"), std::string::npos) << e;
    EXPECT_NE(e.find("expected a number in [2.0, "), std::string::npos) << e;
  }
}

std::string notes_of(const json& doc) {
  std::string all;
  for (const std::string& n : parse_job(doc, "job.json").notes) all += n + "\n";
  return all;
}

TEST(JobErrors, UnknownFieldIsANoteSuggestingTheClosest) {
  json d = minimal();
  d["ConfigurationSpace"]["TuningParameters"][0]["Defualt"] = 64;
  d["BenchmarkConfig"] = {{"iterations", 10}};
  const std::string n = notes_of(d);
  EXPECT_NE(n.find("ConfigurationSpace.TuningParameters[0].Defualt is not a field gputune reads "
                   "(did you mean 'Default'?): ignored"),
            std::string::npos)
      << n;
  EXPECT_NE(n.find("BenchmarkConfig is not a field gputune reads: ignored"), std::string::npos)
      << n;
  // gputune's own keys stay strict.
  d = minimal();
  d["GPUTune"] = {{"Serach", {{"Strategy", "random"}}}};
  EXPECT_NE(error_of(d).find("GPUTune.Serach"), std::string::npos);
  // Not a T1 job at all.
  EXPECT_NE(error_of(json{{"results", json::array()}, {"schema_version", "1.0.0"}})
                .find("not a T1 job: it is a T4 results file"),
            std::string::npos);
}

TEST(JobErrors, ADefaultOutsideItsValuesIsANoteAndTheFirstValueIsUsed) {
  json d = minimal();
  d["ConfigurationSpace"]["TuningParameters"][0]["Default"] = 48;
  const Job job = parse_job(d, "job.json");
  ASSERT_EQ(job.parameters.size(), 1u);
  EXPECT_FALSE(job.parameters[0].default_value.has_value());
  std::string n;
  for (const std::string& x : job.notes) n += x + "\n";
  EXPECT_NE(n.find("(block_size_x).Default: 48 is not among the Values; the first value, 32, is "
                   "the default configuration's"),
            std::string::npos)
      << n;
}

TEST(JobErrors, MissingFieldSaysWhatToAdd) {
  json d = minimal();
  d["KernelSpecification"].erase("KernelName");
  std::string e = error_of(d);
  EXPECT_NE(e.find("KernelSpecification.KernelName"), std::string::npos) << e;
  EXPECT_NE(e.find("missing required field"), std::string::npos) << e;
  EXPECT_NE(e.find("Fix:"), std::string::npos) << e;
}

TEST(JobErrors, BadExpressionsNameTheField) {
  json d = minimal();
  d["ConfigurationSpace"]["TuningParameters"][0]["Values"] = "[32, 64";
  EXPECT_NE(error_of(d).find("TuningParameters[0] (block_size_x).Values"), std::string::npos);
  d = minimal();
  d["KernelSpecification"]["LocalSize"]["X"] = "block_size_x +";
  EXPECT_NE(error_of(d).find("KernelSpecification.LocalSize.X"), std::string::npos);
  d = minimal();
  d["ConfigurationSpace"]["Conditions"] = {
      {{"Expression", "block_size_y > 2"}, {"Parameters", json::array()}}};
  std::string e = error_of(d);
  EXPECT_NE(e.find("'block_size_y'"), std::string::npos) << e;
  EXPECT_NE(e.find("not a tuning parameter"), std::string::npos) << e;
}

TEST(JobErrors, TypeAndValueChecks) {
  json d = minimal();
  d["ConfigurationSpace"]["TuningParameters"][0]["Values"] = "[32, 'a']";
  EXPECT_NE(error_of(d).find("does not match Type 'int'"), std::string::npos);
  d = minimal();
  d["ConfigurationSpace"]["TuningParameters"].push_back(
      d["ConfigurationSpace"]["TuningParameters"][0]);
  EXPECT_NE(error_of(d).find("defined twice"), std::string::npos);
  d = minimal();
  d["ConfigurationSpace"]["TuningParameters"][0]["Values"] = "[]";
  EXPECT_NE(error_of(d).find("empty"), std::string::npos);
  d = minimal();
  d["KernelSpecification"]["Language"] = "OpenCL";
  EXPECT_NE(error_of(d).find("'OpenCL' is not a language gputune compiles"), std::string::npos);
  d = minimal();
  d["GPUTune"] = {{"Device", {{"Arch", "hopper"}}}};
  EXPECT_NE(error_of(d).find("GPUTune.Device.Arch"), std::string::npos);
}

TEST(JobErrors, MalformedJsonGivesLineAndColumn) {
  test::TempDir dir;
  test::write_file(dir / "bad.json", "{\n  \"ConfigurationSpace\": {,\n}");
  try {
    load_job(dir / "bad.json");
    FAIL();
  } catch (const JobError& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("bad.json"), std::string::npos) << w;
    EXPECT_NE(w.find("line 2"), std::string::npos) << w;
  }
  EXPECT_THROW(load_job(dir / "missing.json"), JobError);
  // A number beyond a double is nlohmann's out_of_range, not a parse_error (interchange_fuzz
  // found it in measurement files; job, device and suite files shared the gap).
  test::write_file(dir / "huge.json", R"({"General": {"BenchmarkName": 1e400}})");
  try {
    load_job(dir / "huge.json");
    FAIL();
  } catch (const JobError& e) {
    EXPECT_NE(std::string(e.what()).find("huge.json: malformed JSON"), std::string::npos)
        << e.what();
  }
}

TEST(JobErrors, MissingKernelFileIsReportedOnlyWhenNeeded) {
  Job j = parse_job(minimal(), "/nonexistent/job.json");
  try {
    load_kernel_source(j);
    FAIL();
  } catch (const JobError& e) {
    EXPECT_EQ(e.field, "KernelSpecification.KernelFile");
    EXPECT_NE(std::string(e.what()).find("k.cu"), std::string::npos);
  }
}

// Every job file we ship, each mutated many times: the reader and the space builder either accept
// the result or raise JobError naming the file; nothing else escapes, nothing crashes or hangs.
TEST(JobFuzz, MutatedJobFilesLoadOrRaiseJobError) {
  std::vector<std::filesystem::path> files = {test::shared_dir() /
                                              "data/kernel-tuner-cache/dedispersion_milo.T1.json"};
  for (const char* dir : {"configs/examples", "configs/naive"})
    for (auto& e : std::filesystem::directory_iterator(test::source_dir() / dir))
      if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::mt19937 rng(20261123);
  int accepted = 0, refused = 0;
  for (const auto& file : files) {
    std::ifstream in(file);
    const json original = json::parse(in);
    for (int i = 0; i < 60; ++i) {
      json doc = original;
      int changes = 1 + static_cast<int>(rng() % 3);
      for (int c = 0; c < changes; ++c) test::mutate_json(doc, rng);
      try {
        Job job = parse_job(doc, file);
        std::uint64_t points = 1;
        for (auto& p : job.parameters)
          points = std::min<std::uint64_t>(points * std::max<size_t>(p.values.size(), 1), 1u << 30);
        if (points <= 2'000'000) build_space(job);
        ++accepted;
      } catch (const JobError& e) {
        EXPECT_NE(std::string(e.what()).find(file.filename().string()), std::string::npos)
            << e.what();
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << file.filename() << " mutated to\n"
                      << doc.dump().substr(0, 2000) << "\nthrew " << typeid(e).name() << ": "
                      << e.what();
      }
    }
  }
  EXPECT_GT(accepted, 50);
  EXPECT_GT(refused, 50);
}

// A KernelName the kernel file cannot define is refused before anything compiles, listing the
// file's __global__ functions, the closest first (NVRTC's own message for it is a name-mangling
// error on "__nv_name_map", and the CPU check's a host compiler error per configuration).
TEST(Job, AKernelNameTheSourceCannotDefineIsRefusedWithTheKernelsItHas) {
  Job job;
  job.file = "job.json";
  job.kernel_file = "dir/k.cu";
  const std::string source = R"(
__global__ void __launch_bounds__(256) scale(float* a, float s) { a[threadIdx.x] *= s; }
template <int N> __global__ void add(float* a) { a[threadIdx.x] += N; }
namespace ops { template <class T, int V> __global__ void copy(T* a, const T* b) { a[0] = b[0]; } }
)";
  auto problem = [&](const std::string& name, const std::string& src) -> std::string {
    job.kernel_name = name;
    try {
      check_kernel_name(job, src);
      return "";
    } catch (const JobError& e) {
      EXPECT_EQ(e.field, "KernelSpecification.KernelName");
      return e.problem + " | " + e.fix;
    }
  };
  EXPECT_EQ(problem("scale", source), "");
  EXPECT_EQ(problem("add<4>", source), "");
  EXPECT_EQ(problem("ops::copy<double, 2>", source), "");
  EXPECT_EQ(problem("ad", source),
            "'ad' does not occur in k.cu, whose __global__ functions are: add, scale, copy | use "
            "\"KernelName\": \"add\" if that is the one");
  EXPECT_EQ(problem("scal<2>", source),
            "'scal' does not occur in k.cu, whose __global__ functions are: scale, add, copy | use "
            "\"KernelName\": \"scale\" if that is the one");
  EXPECT_EQ(problem("k", "__device__ float twice(float x) { return 2 * x; }"),
            "'k' does not occur in k.cu, which defines no __global__ function | name the kernel to "
            "tune, or point KernelFile at its file");
  // It may be defined in a header of the kernel's own: not refused.
  EXPECT_EQ(problem("ad", "#include \"kernels.cuh\"\n" + source), "");
  // Or in one in angle brackets from an include folder of the job's; without one, an angle
  // bracket header is the toolkit's or the system's.
  const std::string angle = "#include <mylib/kernels.cuh>\n" + source;
  EXPECT_NE(problem("ad", angle), "");
  for (const std::vector<std::string>& opts : std::vector<std::vector<std::string>>{
           {"-Iinclude"}, {"-I", "include"}, {"--include-path=include"}}) {
    job.compiler_options = opts;
    EXPECT_EQ(problem("ad", angle), "") << opts[0];
  }
}

}  // namespace
}  // namespace gputune
