// app/slurm: the text of the job array and merge scripts `batch --slurm` writes (without SLURM),
// and --submit against stand-in sbatch programs: missing, refusing, and one that records its
// arguments. The real SLURM run is tests/integration/slurm_test.cpp's.
#include "app/slurm.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

#include "test_util.h"
#include "tuner/common/command_line.h"
#include "variants/job.h"

namespace gputune::app {
namespace {

namespace fs = std::filesystem;

SlurmSuite suite_of(const fs::path& dir, int jobs) {
  SlurmSuite s;
  s.suite_args = {(dir / "suite.json").string()};
  for (int i = 0; i < jobs; ++i) s.job_files.push_back(dir / ("job" + std::to_string(i) + ".json"));
  s.db = (dir / "nightly.db").string();
  s.batch_args = {"--budget", "4", "--skip-unchanged"};
  s.report_args = {"--regression", "3"};
  s.gputune = "/opt/gputune/bin/gputune";
  return s;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Slurm, OneArrayTaskPerJobEachIntoItsOwnShard) {
  const SlurmPlan p = plan_slurm(suite_of("/data/suite", 3), {});
  EXPECT_EQ(p.task_jobs.size(), 3u);
  EXPECT_EQ(p.array_file, "/data/suite/nightly.db.sbatch");
  EXPECT_EQ(p.merge_file, "/data/suite/nightly.db.merge.sbatch");
  EXPECT_EQ(p.shards, "/data/suite/nightly.db.shards");
  const std::string& a = p.array_script;
  EXPECT_EQ(a.rfind("#!/bin/bash\n", 0), 0u) << a;
  EXPECT_TRUE(contains(a, "\n#SBATCH --array=0-2\n")) << a;
  EXPECT_TRUE(contains(a, "\n#SBATCH --gres=\"gpu:1\"\n")) << a;
  EXPECT_FALSE(contains(a, "--partition")) << a;
  EXPECT_TRUE(contains(a, "\n#SBATCH --output=\"/data/suite/nightly.db.logs/task-%a-%A.out\"\n"))
      << a;
  EXPECT_TRUE(contains(a, "\ngputune=/opt/gputune/bin/gputune\n")) << a;
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_TRUE(contains(a, "\n  " + n + ") exec \"$gputune\" batch /data/suite/job" + n +
                                ".json --db /data/suite/nightly.db.shards/task-" + n +
                                ".db --budget 4 --skip-unchanged ;;\n"))
        << a;
  }
  // The #SBATCH lines come before the first command (sbatch stops reading them there).
  EXPECT_LT(a.find("#SBATCH --output"), a.find("\nset -u"));
}

TEST(Slurm, TheMergeJobMergesEveryShardThenWritesTheReport) {
  const std::string m = plan_slurm(suite_of("/data/suite", 3), {}).merge_script;
  EXPECT_EQ(m.rfind("#!/bin/bash\n", 0), 0u) << m;
  EXPECT_FALSE(contains(m, "--gres")) << "the merge needs no GPU\n" << m;
  EXPECT_FALSE(contains(m, "--array")) << m;
  EXPECT_TRUE(contains(m, "\n#SBATCH --output=\"/data/suite/nightly.db.logs/merge-%j.out\"\n"))
      << m;
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(
        contains(m, " \\\n    /data/suite/nightly.db.shards/task-" + std::to_string(i) + ".db"))
        << m;
  EXPECT_TRUE(contains(m, "\n\"$gputune\" db merge /data/suite/nightly.db \"${shards[@]}\"")) << m;
  EXPECT_TRUE(contains(m,
                       "\nexec \"$gputune\" batch /data/suite/suite.json --db "
                       "/data/suite/nightly.db --report-only --report-md "
                       "/data/suite/nightly.db.report.md --report-json "
                       "/data/suite/nightly.db.report.json --regression 3\n"))
      << m;
  EXPECT_LT(m.find("db merge"), m.find("--report-only"));
}

TEST(Slurm, TasksDealJobsInTurnAndNodesPerTypeLimitsTheArray) {
  SlurmOptions o;
  o.tasks = 2, o.nodes_per_type = 1, o.partition = "a100", o.gres = "gpu:a100:1";
  const SlurmPlan p = plan_slurm(suite_of("/d", 5), o);
  ASSERT_EQ(p.task_jobs.size(), 2u);
  EXPECT_EQ(p.task_jobs[0],
            (std::vector<fs::path>{"/d/job0.json", "/d/job2.json", "/d/job4.json"}));
  EXPECT_EQ(p.task_jobs[1], (std::vector<fs::path>{"/d/job1.json", "/d/job3.json"}));
  EXPECT_TRUE(contains(p.array_script, "\n#SBATCH --array=0-1%1\n")) << p.array_script;
  EXPECT_TRUE(contains(p.array_script, "\n#SBATCH --partition=\"a100\"\n")) << p.array_script;
  EXPECT_TRUE(contains(p.merge_script, "\n#SBATCH --partition=\"a100\"\n")) << p.merge_script;
  EXPECT_TRUE(contains(p.array_script, "\n#SBATCH --gres=\"gpu:a100:1\"\n")) << p.array_script;
  EXPECT_TRUE(contains(p.array_script,
                       "batch /d/job0.json /d/job2.json /d/job4.json --db "
                       "/d/nightly.db.shards/task-0.db"))
      << p.array_script;
  // More tasks than jobs: one per job.
  o.tasks = 9;
  EXPECT_EQ(plan_slurm(suite_of("/d", 3), o).task_jobs.size(), 3u);
  o.gres = "none";
  EXPECT_FALSE(contains(plan_slurm(suite_of("/d", 3), o).array_script, "--gres"));
}

TEST(Slurm, APathWithASpaceAndQuotesIsQuotedForTheShellAndForSbatch) {
  const fs::path dir = "/data/it's \"the\" 100% suite";
  SlurmSuite s = suite_of(dir, 1);
  s.gputune = "/opt/my tools/gputune";
  const SlurmPlan p = plan_slurm(s, {});
  const std::string& a = p.array_script;
  EXPECT_TRUE(contains(a, "\ngputune='/opt/my tools/gputune'\n")) << a;
  EXPECT_TRUE(contains(a,
                       "batch '/data/it'\\''s \"the\" 100% suite/job0.json' --db "
                       "'/data/it'\\''s \"the\" 100% suite/nightly.db.shards/task-0.db'"))
      << a;
  // sbatch reads #SBATCH values in double quotes with \" and \\ escaped; %% is a % in a file name.
  EXPECT_TRUE(contains(a,
                       "\n#SBATCH --output=\"/data/it's \\\"the\\\" 100%% "
                       "suite/nightly.db.logs/task-%a-%A.out\"\n"))
      << a;
  EXPECT_TRUE(contains(p.merge_script, "db merge '/data/it'\\''s \"the\" 100% suite/nightly.db'"))
      << p.merge_script;
  EXPECT_TRUE(contains(p.submit_command,
                       "sbatch --parsable '/data/it'\\''s \"the\" 100% suite/nightly.db.sbatch'"))
      << p.submit_command;
  // A line break cannot be written into a script: refused, naming the option.
  s.db = "/data/two\nlines.db";
  try {
    plan_slurm(s, {});
    ADD_FAILURE() << "no error";
  } catch (const JobError& e) {
    EXPECT_EQ(e.field, "--db");
  }
}

/// The scripts as bash runs them: the task's case picks its line; the merge skips a missing shard.
TEST(Slurm, TheScriptsRunUnderBashWithTheirArrayIndex) {
  test::TempDir dir;
  const fs::path d = dir / "a b's";
  fs::create_directories(d);
  const fs::path fake = d / "fake gputune";
  test::write_file(fake, "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]' \"$a\"; done; echo\n");
  fs::permissions(fake, fs::perms::owner_all);
  SlurmSuite s = suite_of(d, 3);
  s.gputune = fake.string();
  const SlurmPlan p = plan_slurm(s, {});
  write_slurm_files(p);
  EXPECT_TRUE(fs::is_directory(p.shards));
  EXPECT_TRUE(fs::is_directory(p.logs));
  EXPECT_TRUE((fs::status(p.array_file).permissions() & fs::perms::owner_exec) != fs::perms::none);
  auto r = test::run_command("cd / && SLURM_ARRAY_TASK_ID=1 bash " +
                             tuner::shell_quote(p.array_file.string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "[batch][" + (d / "job1.json").string() + "][--db][" +
                       (p.shards / "task-1.db").string() + "][--budget][4][--skip-unchanged]\n");
  r = test::run_command("SLURM_ARRAY_TASK_ID=7 bash " + tuner::shell_quote(p.array_file.string()) +
                        " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "array task '7' is not one of this script's 0-2")) << r.out;
  // The merge: shard 1 missing is named, the others merged, then the report.
  test::write_file(p.shards / "task-0.db", "");
  test::write_file(p.shards / "task-2.db", "");
  r = test::run_command("bash " + tuner::shell_quote(p.merge_file.string()) + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, (p.shards / "task-1.db").string() + " is missing")) << r.out;
  EXPECT_TRUE(contains(r.out, "[db][merge][" + p.db.string() + "][" +
                                  (p.shards / "task-0.db").string() + "][" +
                                  (p.shards / "task-2.db").string() + "]\n"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "[--report-only]")) << r.out;
}

/// Sets PATH for the test's duration.
struct PathIs {
  std::string old = std::getenv("PATH") ? std::getenv("PATH") : "";
  explicit PathIs(const std::string& path) { setenv("PATH", path.c_str(), 1); }
  ~PathIs() { setenv("PATH", old.c_str(), 1); }
};

SlurmPlan written_plan(const test::TempDir& dir) {
  SlurmPlan p = plan_slurm(suite_of(dir / "", 3), {});
  write_slurm_files(p);
  return p;
}

TEST(Slurm, SubmitWithoutSbatchSaysWhereToGetIt) {
  test::TempDir dir;
  const SlurmPlan p = written_plan(dir);
  PathIs path((dir / "empty").string());
  try {
    submit_slurm(p);
    ADD_FAILURE() << "no error";
  } catch (const SlurmError& e) {
    EXPECT_EQ(e.exit_code, 1);
    EXPECT_TRUE(contains(e.what(), "`sbatch` was not found on $PATH")) << e.what();
    EXPECT_TRUE(contains(e.what(), "slurm-client")) << e.what();
  }
}

TEST(Slurm, SubmitRunsTheArrayThenTheMergeAfterIt) {
  test::TempDir dir;
  const SlurmPlan p = written_plan(dir);
  fs::create_directories(dir / "bin");
  const fs::path log = dir / "sbatch.log";
  // A stand-in sbatch: records its words, prints ids as --parsable does (with a cluster name).
  test::write_file(dir / "bin/sbatch", "#!/bin/sh\necho \"$*\" >> '" + log.string() +
                                           "'\nn=$(wc -l < '" + log.string() +
                                           "')\necho \"$((41 + n));cluster\"\n");
  fs::permissions(dir / "bin/sbatch", fs::perms::owner_all);
  PathIs path((dir / "bin").string() + ":/usr/bin:/bin");
  const SlurmSubmission s = submit_slurm(p);
  EXPECT_EQ(s.array_job, "42");
  EXPECT_EQ(s.merge_job, "43");
  EXPECT_EQ(test::read_file(log), "--parsable " + p.array_file.string() +
                                      "\n--parsable --dependency=afterany:42 " +
                                      p.merge_file.string() + "\n");
}

TEST(Slurm, ARefusedSubmitShowsSbatchsReasonAndTheFix) {
  test::TempDir dir;
  const SlurmPlan p = written_plan(dir);
  fs::create_directories(dir / "bin");
  test::write_file(dir / "bin/sbatch",
                   "#!/bin/sh\necho 'sbatch: error: invalid partition specified: gpux' >&2\n"
                   "exit 1\n");
  fs::permissions(dir / "bin/sbatch", fs::perms::owner_all);
  PathIs path((dir / "bin").string() + ":/usr/bin:/bin");
  try {
    submit_slurm(p);
    ADD_FAILURE() << "no error";
  } catch (const SlurmError& e) {
    EXPECT_EQ(e.exit_code, 2);
    EXPECT_TRUE(contains(e.what(), "refused the job array (exit 1)")) << e.what();
    EXPECT_TRUE(contains(e.what(), "invalid partition specified: gpux")) << e.what();
    EXPECT_TRUE(contains(e.what(), "sinfo -s")) << e.what();
  }
}

}  // namespace
}  // namespace gputune::app
