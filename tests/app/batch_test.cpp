// app/batch: which jobs a suite names, what is refused, and how the suite's exit code and stop
// follow from its jobs (the runs themselves are tests/integration/batch_test.cpp's, with the fake
// driver).
#include "app/batch.h"

#include <gtest/gtest.h>

#include <sstream>

#include "test_util.h"
#include "tuner/run/pipeline.h"
#include "variants/job.h"

namespace gputune::tuner {
namespace {

using namespace gputune::app;  // batch and job files moved from tuner/ to app/

namespace fs = std::filesystem;

/// A folder with the vector_add example's kernel and two jobs of it (a and b) in sub/.
struct SuiteDir {
  test::TempDir dir;
  SuiteDir() {
    fs::create_directories(dir / "sub");
    fs::copy_file(test::examples_dir() / "vector_add.cu", dir / "vector_add.cu");
    std::string job = test::read_file(test::examples_dir() / "vector_add.json");
    const std::string from = "\"KernelFile\": \"vector_add.cu\"";
    job.replace(job.find(from), from.size(), "\"KernelFile\": \"../vector_add.cu\"");
    test::write_file(dir / "sub/b.json", job);
    std::string a = job;
    a.replace(a.find("\"1M\""), 4, "\"2M\"");  // another document
    test::write_file(dir / "sub/a.json", a);
  }
  fs::path operator/(const std::string& s) const { return dir / s; }
};

std::string error_of(const std::vector<std::string>& args) {
  try {
    collect_suite(args);
  } catch (const JobError& e) {
    return e.file + " | " + e.field + " | " + e.what();
  }
  return "no error";
}

TEST(Batch, ASuiteNamesJobsFoldersAndSuitesEachJobOnce) {
  SuiteDir d;
  test::write_file(d / "sub/notes.json", "{\"About\": \"not a job\"}");
  test::write_file(d / "inner.json", R"({"Suite": "inner", "Jobs": ["sub/b.json"]})");
  test::write_file(
      d / "suite.json",
      R"({"Suite": "s", "Description": "d", "Jobs": ["sub", "inner.json", "sub/a.json"]})");
  Suite s = collect_suite({(d / "suite.json").string(), (d / "sub/b.json").string()});
  // A folder whose jobs were all named before still holds jobs (they run once).
  EXPECT_EQ(collect_suite(
                {(d / "sub/a.json").string(), (d / "sub/b.json").string(), (d / "sub").string()})
                .jobs.size(),
            2u);
  ASSERT_EQ(s.jobs.size(), 2u);  // a and b, in the folder's order; b again and a again are not
  EXPECT_EQ(s.jobs[0].file.filename(), "a.json");
  EXPECT_EQ(s.jobs[1].file.filename(), "b.json");
  EXPECT_EQ(s.jobs[0].named_by, (d / "sub").string());
  EXPECT_NE(s.jobs[0].document.find("\"2M\""), std::string::npos);
  ASSERT_EQ(s.skipped.size(), 1u);
  EXPECT_NE(s.skipped[0].find("notes.json: neither a job"), std::string::npos) << s.skipped[0];
}

TEST(Batch, ABadSuiteIsRefusedNamingItsFileAndField) {
  SuiteDir d;
  const std::string suite = (d / "suite.json").string();
  auto with = [&](const std::string& text) {
    test::write_file(suite, text);
    return error_of({suite});
  };
  EXPECT_EQ(error_of({}).substr(0, 22), "command line | SUITE |");
  EXPECT_NE(error_of({(d / "nope.json").string()}).find("no such file or folder"),
            std::string::npos);
  EXPECT_NE(with("{\"Jobs\": [\"sub/a.json\",]}")
                .find(suite + " |  | " + suite + ": is not valid JSON: "),
            std::string::npos)
      << with("{\"Jobs\": [\"sub/a.json\",]}");
  EXPECT_NE(with(R"({"Jobs": "sub/a.json"})").find("| Jobs | "), std::string::npos);
  EXPECT_NE(with(R"({"Jobs": []})").find("must be a non-empty list"), std::string::npos);
  EXPECT_NE(with(R"({"Jobs": ["sub/a.json", 3]})").find("| Jobs[1] | "), std::string::npos);
  const std::string missing = with(R"({"Jobs": ["sub/a.json", "sub/c.json"]})");
  EXPECT_NE(missing.find(suite + " | Jobs[1] | "), std::string::npos) << missing;
  EXPECT_NE(missing.find("relative to the suite file"), std::string::npos) << missing;
  EXPECT_NE(with(R"({"Jobs": ["sub"], "Jbos": 1})").find("| Jbos | "), std::string::npos);
  EXPECT_NE(with(R"({"Suite": 1, "Jobs": ["sub"]})").find("| Suite | "), std::string::npos);
  EXPECT_NE(with(R"({"Jobs": ["suite.json"]})").find("names itself"), std::string::npos);
  EXPECT_NE(with(R"({"Name": "x"})").find("neither a job"), std::string::npos);
  fs::create_directories(d / "empty");
  EXPECT_NE(with(R"({"Jobs": ["empty"]})").find("holds no job files"), std::string::npos);
  // A job that does not load is found before anything runs, named by its own file.
  test::write_file(d / "sub/b.json", "{\"KernelSpecification\": {\"KernelName\": 3}}");
  const std::string bad = with(R"({"Jobs": ["sub"]})");
  EXPECT_EQ(bad.substr(0, (d / "sub/b.json").string().size()), (d / "sub/b.json").string()) << bad;
}

TEST(Batch, TheSuiteGoesOnAfterAFailedJobAndStopsWhenAsked) {
  SuiteDir d;
  Suite s = collect_suite({(d / "sub").string()});
  ASSERT_EQ(s.jobs.size(), 2u);
  std::vector<std::vector<std::string>> calls;
  std::vector<int> codes;
  bool stop = false;
  BatchOptions o;
  o.db_path = (d / "g.db").string();
  o.run_args = {"--no-gpu"};
  o.run = [&](const std::vector<std::string>& words) {
    calls.push_back(words);
    return codes[calls.size() - 1];
  };
  o.should_stop = [&] { return stop; };
  std::ostringstream log;
  auto batch = [&](std::vector<int> c) {
    calls.clear(), codes = std::move(c);
    return run_batch(s.jobs, o, log);
  };
  BatchReport r = batch({kExitBadInput, kExitOk});
  ASSERT_EQ(calls.size(), 2u);  // the failed first job does not stop the second
  EXPECT_EQ(calls[1], (std::vector<std::string>{"run", s.jobs[1].file.string(), "--db", o.db_path,
                                                "--no-gpu"}));
  EXPECT_EQ(r.exit_code, kExitBadInput);
  EXPECT_EQ(r.items[0].run_id, 0);  // it stored no run
  EXPECT_EQ(batch({kExitNoDevice, kExitNoDevice}).exit_code, kExitNoDevice);
  EXPECT_EQ(batch({kExitNoDevice, kExitNoCorrect}).exit_code, kExitNoCorrect);
  EXPECT_EQ(batch({134, kExitOk}).exit_code, kExitInternal);  // a crashed tuning process
  EXPECT_EQ(batch({kExitOk, kExitOk}).exit_code, kExitOk);
  // A stop during the first job: the second never starts.
  o.run = [&](const std::vector<std::string>& words) {
    calls.push_back(words);
    stop = true;
    return kExitInterrupted;
  };
  calls.clear();
  r = run_batch(s.jobs, o, log);
  EXPECT_EQ(calls.size(), 1u);
  EXPECT_TRUE(r.interrupted);
  EXPECT_FALSE(r.items[1].ran);
  EXPECT_EQ(r.exit_code, kExitInterrupted);
  std::ostringstream table;
  print_batch_report(r, table);
  EXPECT_NE(table.str().find("not run (the suite was stopped)"), std::string::npos) << table.str();
}

}  // namespace
}  // namespace gputune::tuner
