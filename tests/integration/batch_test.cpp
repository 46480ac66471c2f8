// `gputune batch` end to end with the fake driver (tests/fake_cuda): each job of a suite runs as
// its own `gputune run`, the report compares every context with the previous finished run of the
// same job, a failed or crashed job does not stop the suite, and Ctrl-C stops it.
#include "app/batch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "db/store.h"
#include "test_util.h"

namespace gputune {
namespace {

namespace fs = std::filesystem;

/// vector_add.json as a.json (two contexts) and b.json (16M only) in `dir`, and suite.json
/// naming both.
std::string write_suite(const test::TempDir& dir) {
  fs::copy_file(test::examples_dir() / "vector_add.cu", dir / "vector_add.cu");
  // Small sizes (the labels stay): the fake driver adds the vectors on the CPU at every launch.
  std::string job = test::read_file(test::examples_dir() / "vector_add.json");
  for (auto [from, to] : {std::pair{"[1048576]", "[4096]"}, {"[16777216]", "[65536]"}})
    job.replace(job.find(from), std::string(from).size(), to);
  test::write_file(dir / "a.json", job);
  std::string b = job;
  const std::string one_m = "{\"Name\": \"1M\", \"ProblemSize\": [4096]}, ";
  b.erase(b.find(one_m), one_m.size());
  test::write_file(dir / "b.json", b);
  test::write_file(dir / "suite.json", R"({"Suite": "t", "Jobs": ["a.json", "b.json"]})");
  return (dir / "suite.json").string();
}

test::CommandResult batch(const std::string& env, const std::string& args) {
  return test::run_command(std::string("env LD_LIBRARY_PATH='") + FAKE_CUDA_DIR + "' " + env +
                           " '" + GPUTUNE_BINARY + "' batch " + args);
}

/// The report's row of a context: "<label> <best> <previous> (<run>) <change>".
std::string row(const std::string& out, const std::string& label) {
  std::smatch m;
  const std::regex re("\\n[^\\n]*\\s" + label + "\\s+[^\\n]*");
  std::string rows;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it)
    rows += it->str();
  return rows;
}

TEST(Batch, EachJobRunsAndAContextThatGotSlowerIsARegression) {
  test::TempDir dir;
  const std::string suite = write_suite(dir), db = (dir / "g.db").string();
  const std::string args =
      "'" + suite + "' --db '" + db + "' --cache-dir '" + (dir / "cache").string() + "' -q";
  auto first = batch("", args);
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_NE(first.out.find("job 2 of 2: "), std::string::npos) << first.out;
  EXPECT_EQ(db::Store(db).runs().size(), 2u);
  EXPECT_NE(row(first.out, "16M").find("first run"), std::string::npos) << first.out;

  // Every launch 1.5 x slower: each context's best is 50% over the previous run of its own job.
  auto slower = batch("FAKE_CUDA_TIME_SCALE=1.5", args);
  EXPECT_EQ(slower.exit_code, 7) << slower.out;
  const std::string rows = row(slower.out, "1M") + row(slower.out, "16M");
  EXPECT_NE(rows.find("1.5000            1.0000 (1)    +50.0%  REGRESSION"), std::string::npos)
      << slower.out;  // a's 1M
  EXPECT_NE(rows.find("1.5001            1.0001 (1)    +50.0%  REGRESSION"), std::string::npos)
      << slower.out;  // a's 16M
  EXPECT_NE(rows.find("1.5001            1.0001 (2)    +50.0%  REGRESSION"), std::string::npos)
      << slower.out;  // b's 16M, against b's run
  EXPECT_NE(slower.out.find("batch: 3 contexts regressed"), std::string::npos) << slower.out;

  // 2% slower again than that: under the 5% threshold, and over a 1% one.
  auto again = batch("FAKE_CUDA_TIME_SCALE=1.53", args);
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(row(again.out, "16M").find("(4)     +2.0%"), std::string::npos) << again.out;
  EXPECT_EQ(again.out.find("REGRESSION"), std::string::npos) << again.out;
  auto strict = batch("FAKE_CUDA_TIME_SCALE=1.56", args + " --regression 1");
  EXPECT_EQ(strict.exit_code, 7) << strict.out;

  // Without a GPU nothing is timed, so nothing is compared.
  auto none = batch("", args + " --no-gpu");
  EXPECT_EQ(none.exit_code, 3) << none.out;
  EXPECT_NE(row(none.out, "16M").find("not timed"), std::string::npos) << none.out;
  EXPECT_EQ(none.out.find("REGRESSION"), std::string::npos) << none.out;
}

// --skip-unchanged: a job whose last finished run measured every context with the same kernel
// source, device, driver and toolkit is not re-tuned; a changed kernel, a changed context or
// another strategy is; without a GPU there is no earlier time to stand for this one's.
TEST(Batch, SkipUnchangedRetunesOnlyWhatChanged) {
  test::TempDir dir;
  const std::string suite = write_suite(dir), db = (dir / "g.db").string();
  const std::string args = "'" + suite + "' --db '" + db + "' --cache-dir '" +
                           (dir / "cache").string() + "' -q --skip-unchanged";
  auto first = batch("", args);  // nothing to skip on yet
  ASSERT_EQ(first.exit_code, 0) << first.out;
  db::Store store(db);
  ASSERT_EQ(store.runs().size(), 2u);

  auto same = batch("", args);
  EXPECT_EQ(same.exit_code, 0) << same.out;
  EXPECT_EQ(store.runs().size(), 2u) << same.out;  // nothing new stored
  EXPECT_NE(same.out.find("/a.json  0     1      unchanged since this run: not re-tuned"),
            std::string::npos)
      << same.out;
  EXPECT_NE(same.out.find("/b.json  0     2      unchanged since this run"), std::string::npos)
      << same.out;

  // The kernel both jobs share changes (the job files do not): both are tuned again, and
  // compared with their first runs.
  test::write_file(dir / "vector_add.cu", test::read_file(dir / "vector_add.cu") + "// v2\n");
  auto changed = batch("", args);
  EXPECT_EQ(changed.exit_code, 0) << changed.out;
  ASSERT_EQ(store.runs().size(), 4u) << changed.out;
  EXPECT_EQ(changed.out.find("unchanged"), std::string::npos) << changed.out;
  EXPECT_NE(row(changed.out, "16M").find("(2)"), std::string::npos) << changed.out;
  // Nothing changed since: runs 3 and 4 stand.
  auto again = batch("", args);
  EXPECT_EQ(store.runs().size(), 4u) << again.out;
  EXPECT_NE(again.out.find("/a.json  0     3      unchanged"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("/b.json  0     4      unchanged"), std::string::npos) << again.out;
  // A changed context is another job document: b alone is tuned again.
  std::string b = test::read_file(dir / "b.json");
  b.replace(b.find("[65536]"), 7, "[65537]");
  test::write_file(dir / "b.json", b);
  auto resized = batch("", args);
  EXPECT_EQ(store.runs().size(), 5u) << resized.out;
  EXPECT_NE(resized.out.find("/a.json  0     3      unchanged"), std::string::npos) << resized.out;

  // Another strategy is another search: tuned again.
  auto random = batch("", args + " --strategy random");
  EXPECT_EQ(store.runs().size(), 7u) << random.out;
  // The job's own strategy again: the runs named are the brute-force ones skipped on, not the
  // newer random ones.
  auto own = batch("", args);
  EXPECT_EQ(store.runs().size(), 7u) << own.out;
  EXPECT_NE(own.out.find("/a.json  0     3      unchanged"), std::string::npos) << own.out;
  EXPECT_NE(own.out.find("/b.json  0     5      unchanged"), std::string::npos) << own.out;

  // Without a GPU nothing was timed before or now: compiled as usual, and said why.
  auto none = test::run_command(
      std::string("'") + GPUTUNE_BINARY + "' run '" + (dir / "a.json").string() + "' --db '" + db +
      "' --no-gpu --skip-unchanged -q --cache-dir '" + (dir / "cache").string() + "'");
  EXPECT_EQ(none.exit_code, 3) << none.out;
  EXPECT_NE(none.out.find("--skip-unchanged: no device (--no-gpu was given)"), std::string::npos)
      << none.out;
  // And it cannot be combined with --resume.
  auto resume =
      test::run_command(std::string("'") + GPUTUNE_BINARY + "' run '" + (dir / "a.json").string() +
                        "' --db '" + db + "' --resume 1 --skip-unchanged");
  EXPECT_EQ(resume.exit_code, 2) << resume.out;
  EXPECT_NE(resume.out.find("--skip-unchanged"), std::string::npos) << resume.out;
}

TEST(Batch, AJobThatFailsOrCrashesDoesNotStopTheSuite) {
  test::TempDir dir;
  const std::string suite = write_suite(dir), db = (dir / "g.db").string();
  const std::string args =
      "'" + suite + "' --db '" + db + "' --cache-dir '" + (dir / "cache").string() + "' -q";
  // The 256-thread launch aborts the tuning process of each job.
  auto crashed = batch("FAKE_CUDA_CRASH_BLOCK=256", args);
  EXPECT_EQ(crashed.exit_code, 1) << crashed.out;
  EXPECT_NE(crashed.out.find("job 2 of 2"), std::string::npos) << crashed.out;
  db::Store store(db);
  ASSERT_EQ(store.runs().size(), 2u);
  for (const auto& r : store.runs()) {  // ended, not left "running"
    EXPECT_EQ(r.status, db::RunStatus::kFailed) << r.id;
    EXPECT_NE(r.message.find("killed by signal 6"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("--resume " + std::to_string(r.id)), std::string::npos);
  }
  // A kernel that compiles for no configuration: a's run fails (exit 2), b is still tuned.
  test::write_file(dir / "broken.cu",
                   "extern \"C\" __global__ void vector_add(float* c, const float* a, const "
                   "float* b, int n) { c[0] = not_declared; }\n");
  std::string a = test::read_file(dir / "a.json");
  a.replace(a.find("vector_add.cu"), 13, "broken.cu");
  test::write_file(dir / "a.json", a);
  auto failed = batch("", args);
  EXPECT_EQ(failed.exit_code, 2) << failed.out;
  EXPECT_NE(failed.out.find("job 2 of 2"), std::string::npos) << failed.out;
  ASSERT_EQ(store.runs().size(), 4u);
  EXPECT_EQ(store.run(3)->status, db::RunStatus::kFailed);
  EXPECT_EQ(store.run(4)->status, db::RunStatus::kDone);
  EXPECT_NE(failed.out.find("/a.json  2     3      failed: no configuration compiled\n"),
            std::string::npos)
      << failed.out;
}

TEST(Batch, CtrlCStopsTheJobInHandAndTheSuite) {
  test::TempDir dir;
  const std::string suite = write_suite(dir), db = (dir / "g.db").string();
  const std::string log = (dir / "out.txt").string();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    setenv("LD_LIBRARY_PATH", FAKE_CUDA_DIR, 1);
    setenv("FAKE_CUDA_SLOW_MS", "20", 1);  // each variant takes about half a second
    if (!std::freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), STDERR_FILENO) < 0)
      _exit(126);
    const std::string cache = (dir / "cache").string();
    execl(GPUTUNE_BINARY, GPUTUNE_BINARY, "batch", suite.c_str(), "--db", db.c_str(), "--cache-dir",
          cache.c_str(), "-q", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Once the first job has measured something, Ctrl-C reaches the whole process group.
  for (int i = 0; i < 1200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (fs::exists(db)) try {
        if (!db::Store(db).measurements(1).empty()) break;
      } catch (const std::exception&) {  // the schema is still being created
      }
  }
  ASSERT_EQ(kill(-pid, SIGINT), 0);
  const std::optional<int> status = test::wait_for_child(pid, 60);
  if (!status) kill(-pid, SIGKILL);
  ASSERT_TRUE(status) << test::read_file(log);
  const std::string out = test::read_file(log);
  ASSERT_TRUE(WIFEXITED(*status)) << out;
  EXPECT_EQ(WEXITSTATUS(*status), 5) << out;
  EXPECT_EQ(out.find("job 2 of 2"), std::string::npos) << out;
  EXPECT_NE(out.find("not run (the suite was stopped)"), std::string::npos) << out;
  db::Store store(db);
  ASSERT_EQ(store.runs().size(), 1u);
  EXPECT_EQ(store.runs()[0].status, db::RunStatus::kInterrupted);
}

/// `gputune WORDS` on the fake driver, every launch `scale` times slower except in a
/// confirmation's run (a temporary job `.gputune-confirm-*.json`), whose launches take `confirm`
/// times: what `run_batch` runs as its jobs, so that a test decides what a re-measurement sees.
std::function<int(const std::vector<std::string>&)> fake_runs(double scale, double confirm) {
  return [=](const std::vector<std::string>& words) {
    const bool confirming =
        words.size() > 1 && words[1].find(".gputune-confirm-") != std::string::npos;
    std::string cmd = std::string("env LD_LIBRARY_PATH='") + FAKE_CUDA_DIR +
                      "' FAKE_CUDA_TIME_SCALE=" + std::to_string(confirming ? confirm : scale) +
                      " '" + GPUTUNE_BINARY + "'";
    for (const std::string& w : words) cmd += " '" + w + "'";
    return test::run_command(cmd + " >/dev/null").exit_code;
  };
}

// A run slower than the previous one is re-measured before it is reported: the winner and the
// previous winner side by side in one process. Slower only in the run (noise): no regression.
// Slower again when re-measured: a confirmed regression, with both times in the report files.
TEST(Batch, ARegressionIsReMeasuredBeforeItIsReported) {
  test::TempDir dir;
  const std::string suite = write_suite(dir);
  std::string db = (dir / "g.db").string();
  const std::string cache = (dir / "cache").string();
  ASSERT_EQ(batch("", "'" + suite + "' --db '" + db + "' --cache-dir '" + cache + "' -q").exit_code,
            0);
  fs::copy_file(db, dir / "g2.db");  // the first batch, for the second case below
  app::Suite s = app::collect_suite({suite});
  app::BatchOptions o;
  o.db_path = db;
  o.run_args = {"--cache-dir", cache, "--quiet"};
  std::ostringstream log;

  o.run = fake_runs(1.5, 1.0);  // 50% slower in the run, as fast as before when re-measured
  app::BatchReport noise = app::run_batch(s.jobs, o, log);
  EXPECT_EQ(noise.regressions, 0u) << log.str();
  EXPECT_EQ(noise.exit_code, 0);
  std::size_t remeasured = 0;
  for (const auto& item : noise.items)
    for (const auto& c : item.contexts) {
      ASSERT_TRUE(c.confirmation) << c.label;
      EXPECT_TRUE(c.confirmation->ran) << c.confirmation->note;
      EXPECT_FALSE(c.confirmation->confirmed);
      EXPECT_NE(c.confirmation->note.find("noise"), std::string::npos) << c.confirmation->note;
      ++remeasured;
    }
  EXPECT_EQ(remeasured, 3u);  // a's 1M and 16M, b's 16M
  EXPECT_NE(app::batch_report_markdown(noise).find("noise (re-measured)"), std::string::npos);

  // The same again from the first batch's database (the noisy runs are in this one now, and
  // are what a next batch compares with): slower when re-measured too.
  o.db_path = db = (dir / "g2.db").string();
  o.run = fake_runs(1.5, 1.5);
  app::BatchReport real = app::run_batch(s.jobs, o, log);
  EXPECT_EQ(real.regressions, 3u) << log.str();
  EXPECT_EQ(real.exit_code, 7);
  const std::string md = app::batch_report_markdown(real);
  EXPECT_NE(md.find("| a.json |"), std::string::npos) << md;
  EXPECT_NE(md.find("REGRESSION (confirmed)"), std::string::npos) << md;
  EXPECT_NE(md.find("the winner re-measured 1.5"), std::string::npos) << md;
  const auto j = nlohmann::json::parse(app::batch_report_json(real));
  EXPECT_EQ(j["regressions"], 3);
  const auto& first = j["jobs"][0]["contexts"][0];
  EXPECT_EQ(first["verdict"], "REGRESSION (confirmed)");
  EXPECT_TRUE(first["confirmation"]["confirmed"].get<bool>());
  EXPECT_NEAR(first["confirmation"]["winner_ms"].get<double>(), 1.5, 0.01);
  // Nothing of the confirmations stays beside the jobs, and the suite's database holds only the
  // suite's runs: 2 batches of 2 jobs.
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".gputune-confirm"), std::string::npos);
  EXPECT_EQ(db::Store(db).runs().size(), 4u);

  // --report-only: the newest runs as they are, without tuning, into Markdown and JSON files.
  const std::string md_file = (dir / "r.md").string(), json_file = (dir / "r.json").string();
  auto only = batch("FAKE_CUDA_TIME_SCALE=1.5", "'" + suite + "' --db '" + db +
                                                    "' --report-only --report-md '" + md_file +
                                                    "' --report-json '" + json_file + "'");
  EXPECT_EQ(only.exit_code, 7) << only.out;
  EXPECT_EQ(db::Store(db).runs().size(), 4u);  // nothing tuned
  EXPECT_NE(test::read_file(md_file).find("REGRESSION (confirmed)"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(test::read_file(json_file))["jobs"].size(), 2u);
  auto unconfirmed = batch("", "'" + suite + "' --db '" + db + "' --report-only --no-confirm");
  EXPECT_EQ(unconfirmed.exit_code, 7) << unconfirmed.out;
}

}  // namespace
}  // namespace gputune
