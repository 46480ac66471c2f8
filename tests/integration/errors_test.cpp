// Bad input gets a clear error naming the file, the field and the fix, a non-zero exit code, and
// never damages what is already stored.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "db/store.h"
#include "test_util.h"

namespace gputune {
namespace {

using nlohmann::json;
using test::run_gputune;

class BadInput : public ::testing::Test {
 protected:
  test::TempDir dir;
  std::string db = (dir / "g.db").string();
  size_t measurements_before = 0;

  void SetUp() override {
    // A database with real content that no bad input may damage.
    auto r =
        run_gputune("run '" + (test::examples_dir() / "vector_add.json").string() +
                    "' --no-gpu --db '" + db + "' --cache-dir '" + (dir / "cache").string() + "'");
    ASSERT_EQ(r.exit_code, 3) << r.out;
    measurements_before = db::Store(db).measurements(0).size();
    test::write_file(dir / "k.cu",
                     "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = V; }");
  }

  json good() {
    return json::parse(R"({
      "ConfigurationSpace": {"TuningParameters": [{"Name": "V", "Type": "int", "Values": "[1, 2]"}]},
      "KernelSpecification": {"Language": "CUDA", "KernelName": "k", "KernelFile": "k.cu",
        "LocalSize": {"X": "32"}, "GlobalSize": {"X": "1"}, "GlobalSizeType": "CUDA"}})");
  }

  test::CommandResult run_job(const std::string& text, const std::string& extra = {}) {
    test::write_file(dir / "job.json", text);
    return run_gputune("run '" + (dir / "job.json").string() + "' --no-gpu --db '" + db +
                       "' --cache-dir '" + (dir / "cache").string() + "'" + extra);
  }

  void expect_error(const test::CommandResult& r, std::initializer_list<const char*> needles) {
    EXPECT_EQ(r.exit_code, 2) << r.out;
    for (auto* n : needles)
      EXPECT_NE(r.out.find(n), std::string::npos) << "missing '" << n << "' in:\n" << r.out;
    EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;
  }

  void TearDown() override {
    EXPECT_EQ(db::Store(db).measurements(0).size() >= measurements_before, true);
  }
};

TEST_F(BadInput, MalformedJson) {
  expect_error(run_job("{ \"ConfigurationSpace\": [ }"),
               {"job.json", "malformed JSON", "line 1", "Fix:"});
}

// What a user's file carries that gputune does not read is a note, not a refusal (the
// community's files carry their own tools' keys); a likely typo is named with its field.
TEST_F(BadInput, AnUnknownFieldIsANoteNotARefusal) {
  json j = good();
  j["BenchmarkConfig"] = {{"iterations", 10}};
  j["KernelSpecification"]["Misc"] = {{"jitify", true}};
  j["KernelSpecification"]["GlobalSise"] = j["KernelSpecification"]["GlobalSize"];
  j["KernelSpecification"].erase("GlobalSize");
  auto r = run_job(j.dump());
  EXPECT_EQ(r.exit_code, 2) << r.out;  // GlobalSize is required: the typo is named beside it
  EXPECT_NE(r.out.find("KernelSpecification.GlobalSize"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("missing required field"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(the file has 'GlobalSise': a misspelling?)"), std::string::npos) << r.out;
  j["KernelSpecification"]["GlobalSize"] = j["KernelSpecification"]["GlobalSise"];
  r = run_job(j.dump());
  EXPECT_EQ(r.exit_code, 3) << r.out;  // compiled, nothing measured without a GPU
  EXPECT_NE(r.out.find("BenchmarkConfig is not a field gputune reads: ignored"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("KernelSpecification.Misc is not a field gputune reads: ignored"),
            std::string::npos)
      << r.out;
}

TEST_F(BadInput, AFileThatIsNoJobSaysWhatItIs) {
  expect_error(run_job(R"({"tune_params_keys": ["a"], "cache": {}})"),
               {"job.json", "not a T1 job: it is a Kernel Tuner cache file", "--measurements"});
}

TEST_F(BadInput, MissingField) {
  json j = good();
  j["KernelSpecification"].erase("LocalSize");
  expect_error(run_job(j.dump()),
               {"KernelSpecification.LocalSize", "missing required field", "Fix:"});
}

TEST_F(BadInput, BadExpression) {
  json j = good();
  j["ConfigurationSpace"]["TuningParameters"][0]["Values"] = "[1, 2,, 3]";
  expect_error(run_job(j.dump()), {"TuningParameters[0] (V).Values", "column", "Fix:"});
}

TEST_F(BadInput, MissingKernelFile) {
  json j = good();
  j["KernelSpecification"]["KernelFile"] = "nope.cu";
  expect_error(run_job(j.dump()), {"KernelSpecification.KernelFile", "nope.cu", "Fix:"});
}

TEST_F(BadInput, EmptySpaceSaysWhichConditionRemovedWhat) {
  json j = good();
  j["ConfigurationSpace"]["Conditions"] = {{{"Expression", "V > 1"}, {"Parameters", {"V"}}},
                                           {{"Expression", "V > 5"}, {"Parameters", {"V"}}}};
  expect_error(run_job(j.dump()),
               {"ConfigurationSpace.Conditions", "\"V > 1\" removed 1", "\"V > 5\" removed 1"});
}

TEST_F(BadInput, KernelThatCompilesForNoConfiguration) {
  test::write_file(dir / "k.cu",
                   "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = W; }");
  auto r = run_job(good().dump());
  expect_error(r, {"does not compile for any of the 2 configurations",
                   "identifier \"W\" is undefined", "Fix:"});
  // The failures were stored with their logs.
  db::Store store(db);
  auto runs = store.runs(1);
  ASSERT_EQ(runs.size(), 1u);
  auto ms = store.measurements(runs[0].id);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].status, db::Status::kCompile);
  EXPECT_NE(ms[0].log.find("\"W\""), std::string::npos);
}

TEST_F(BadInput, ParameterNameThatClashesWithCudaHeaders) {
  test::write_file(dir / "k.cu",
                   "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = pad; }");
  json j = good();
  j["ConfigurationSpace"]["TuningParameters"][0]["Name"] = "pad";
  expect_error(run_job(j.dump()),
               {"parameter 'pad' becomes the macro -Dpad", "rename the parameter"});
}

TEST_F(BadInput, DatabaseThatIsNotOurs) {
  test::write_file(dir / "notes.txt",
                   "my precious notes, certainly not a database, but long enough to look like one");
  auto r = run_gputune("run '" + (test::examples_dir() / "vector_add.json").string() +
                       "' --no-gpu --db '" + (dir / "notes.txt").string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("not a database"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_file(dir / "notes.txt").substr(0, 11), "my precious");
}

TEST_F(BadInput, BadOptionsAndArchitectures) {
  expect_error(run_gputune("run --frobnicate x"), {"gputune run"});
  expect_error(run_job(good().dump(), " --arch sm_11"),
               {"GPUTune.Device.Arch", "unknown compute capability"});
  auto missing = run_gputune("run /nonexistent/job.json");
  expect_error(missing, {"/nonexistent/job.json", "cannot open"});
  expect_error(run_gputune("import '" + (dir / "k.cu").string() + "' --db '" + db + "'"),
               {"k.cu", "malformed JSON"});
}

// A job whose arguments the compiled kernel does not take stops before anything is stored: on a
// GPU the launch would read garbage.
TEST_F(BadInput, ArgumentsTheKernelDoesNotTake) {
  json j = good();
  j["KernelSpecification"]["Arguments"] = json::parse(R"([
    {"Name": "p", "Type": "float", "MemoryType": "Vector", "Size": "32", "FillType": "Constant",
     "FillValue": 0, "Output": 1},
    {"Name": "n", "Type": "int32", "MemoryType": "Scalar", "FillType": "Constant", "FillValue": 32}])");
  const size_t runs_before = db::Store(db).runs(100).size();
  expect_error(run_job(j.dump()), {"job.json", "field 'KernelSpecification.Arguments'",
                                   "the job lists 2 arguments, kernel 'k' takes 1", "Fix:"});
  EXPECT_EQ(db::Store(db).runs(100).size(), runs_before);
  j["KernelSpecification"]["Arguments"].erase(1);
  EXPECT_EQ(run_job(j.dump()).exit_code, 3);  // the kernel takes what the job gives: compiled
}

TEST_F(BadInput, StoredDataSurvivesEveryBadInput) {
  run_job("{ bad json");
  run_job(good().dump(), " --arch sm_11");
  EXPECT_EQ(db::Store(db).measurements(0).size(), measurements_before);
}

}  // namespace
}  // namespace gputune
