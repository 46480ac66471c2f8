// `gputune batch --slurm --submit` on a real single-node SLURM (tests/slurm/local_slurm.sh:
// munged, slurmctld and slurmd on this machine) with the fake driver (tests/fake_cuda) as every
// task's GPU: the suite runs as a job array, one shard per task, the merge job after it; and the
// array's overhead when every job is unchanged (--skip-unchanged). Skips, with the reason, where
// the cluster cannot start (not root, SLURM or munge not installed).
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <thread>

#include "test_util.h"
#include "tuner/common/command_line.h"

namespace gputune {
namespace {

namespace fs = std::filesystem;
using tuner::shell_quote;

/// The cluster, one for the whole test program.
class Slurm : public ::testing::Test {
 protected:
  static inline test::TempDir* dir_ = nullptr;
  static inline std::string conf_, skip_;

  static std::string script() {
    return shell_quote((test::source_dir() / "tests/slurm/local_slurm.sh").string());
  }

  static void SetUpTestSuite() {
    dir_ = new test::TempDir;
    auto r = test::run_command("bash " + script() + " start " +
                               shell_quote((*dir_ / "cluster").string()));
    if (r.exit_code != 0) {
      skip_ = "no local SLURM (tests/slurm/local_slurm.sh start, exit " +
              std::to_string(r.exit_code) + "): " + r.out;
      return;
    }
    conf_ = (*dir_ / "cluster/slurm.conf").string();
  }

  static void TearDownTestSuite() {
    if (!dir_) return;
    test::run_command("bash " + script() + " stop " + shell_quote((*dir_ / "cluster").string()));
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }

  /// A SLURM client command against the cluster.
  static test::CommandResult client(const std::string& command) {
    return test::run_command("SLURM_CONF=" + shell_quote(conf_) + " " + command);
  }

  /// `gputune batch ARGS` with the fake driver in its environment (and so in every task's:
  /// sbatch exports it).
  static test::CommandResult batch(const std::string& args) {
    return client("LD_LIBRARY_PATH=" + shell_quote(FAKE_CUDA_DIR) + " " +
                  shell_quote(GPUTUNE_BINARY) + " batch " + args);
  }

  /// Waits until squeue lists none of `jobs` (comma-separated ids); false after `seconds`.
  static bool wait_gone(const std::string& jobs, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      auto q = client("squeue -h -o %i -j " + jobs);
      if (q.exit_code == 0 && q.out.find_first_not_of(" \n") == std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
};

/// Three jobs of the vector_add example (each its own BenchmarkName and problem size) and a
/// suite naming them, in `dir`.
std::string write_suite(const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(test::examples_dir() / "vector_add.cu", dir / "vector_add.cu");
  const std::string job = test::read_file(test::examples_dir() / "vector_add.json");
  std::string jobs;
  for (int i = 0; i < 3; ++i) {
    auto j = nlohmann::json::parse(job);
    j["General"]["BenchmarkName"] = "vector_add_" + std::to_string(i);
    j["GPUTune"]["Contexts"] = {{{"Name", "small"}, {"ProblemSize", {4096 * (i + 1)}}}};
    const std::string name = "job" + std::to_string(i) + ".json";
    test::write_file(dir / name, j.dump(2));
    jobs += std::string(i ? ", " : "") + "\"" + name + "\"";
  }
  test::write_file(dir / "suite.json", "{\"Suite\": \"slurm\", \"Jobs\": [" + jobs + "]}");
  return (dir / "suite.json").string();
}

/// The job id after `label` in --submit's output ("array job 12").
std::string job_id(const std::string& out, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(label + " job ([0-9]+)"))) return "";
  return m[1];
}

/// Every measurement of a database, one line each, by what identifies it wherever it is stored:
/// its run's uid, its context's and variant's hashes, its status, time and creation time.
std::vector<std::string> measurements(const fs::path& db) {
  std::vector<std::string> rows;
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(h);
    ADD_FAILURE() << "cannot open " << db;
    return rows;
  }
  sqlite3_stmt* s = nullptr;
  const char* sql =
      "SELECT r.uid || '|' || c.hash || '|' || v.hash || '|' || m.status || '|' || m.reason || "
      "'|' || coalesce(m.time_ms, '') || '|' || m.created_at FROM measurements m "
      "JOIN runs r ON r.id = m.run_id JOIN contexts c ON c.id = m.context_id "
      "JOIN variants v ON v.id = m.variant_id";
  if (sqlite3_prepare_v2(h, sql, -1, &s, nullptr) == SQLITE_OK)
    while (sqlite3_step(s) == SQLITE_ROW)
      rows.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
  else
    ADD_FAILURE() << db << ": " << sqlite3_errmsg(h);
  sqlite3_finalize(s);
  sqlite3_close(h);
  std::sort(rows.begin(), rows.end());
  return rows;
}

/// One `batch --slurm --submit` of a suite of three jobs, waited for.
struct ArrayRun {
  fs::path dir, db;
  std::string out, array, merge;
  std::vector<std::string> every;  ///< every shard's measurements, sorted
};

/// "Name=value" of scontrol's one-line records (-o), one per line.
std::vector<std::string> fields(const std::string& records, const std::string& name) {
  std::vector<std::string> v;
  const std::regex re("(?:^| )" + name + "=(\\S*)");
  for (auto it = std::sregex_iterator(records.begin(), records.end(), re);
       it != std::sregex_iterator(); ++it)
    v.push_back((*it)[1]);
  return v;
}

class SlurmArray : public Slurm {
 protected:
  /// Submits the suite in `name` and waits for the array and the merge job; every task completed
  /// (exit 0: the fake driver is a GPU) into its own shard, the merge after the last of them.
  ArrayRun run(const std::string& name) {
    ArrayRun a;
    a.dir = *dir_ / name;
    const std::string suite = write_suite(a.dir);
    a.db = a.dir / "nightly.db";
    auto r = batch(shell_quote(suite) + " --db " + shell_quote(a.db.string()) +
                   " --slurm --submit --partition gputune --budget 3 -q --cache-dir " +
                   shell_quote((a.dir / "cache").string()));
    a.out = r.out;
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("#SBATCH --array=0-2\n"), std::string::npos) << r.out;
    a.array = job_id(r.out, "array"), a.merge = job_id(r.out, "merge");
    if (a.array.empty() || a.merge.empty()) {
      ADD_FAILURE() << r.out;
      return a;
    }
    EXPECT_TRUE(wait_gone(a.array + "," + a.merge, 300))
        << client("squeue").out << client("scontrol show job " + a.array).out;
    const std::string tasks = client("scontrol -o show job " + a.array).out;
    const std::string merge = client("scontrol -o show job " + a.merge).out;
    EXPECT_EQ(fields(tasks, "JobState"), std::vector<std::string>(3, "COMPLETED")) << tasks;
    EXPECT_EQ(fields(merge, "Dependency").size(), 1u) << merge;
    // The merge started after every task ended (ISO times, to the second).
    const auto ends = fields(tasks, "EndTime"), starts = fields(merge, "StartTime");
    EXPECT_EQ(starts.size(), 1u) << merge;
    for (const std::string& end : ends) EXPECT_GE(starts.at(0), end) << tasks << merge;
    for (int i = 0; i < 3; ++i) {
      const fs::path shard = a.dir / "nightly.db.shards" / ("task-" + std::to_string(i) + ".db");
      EXPECT_TRUE(fs::exists(shard)) << shard << "\n" << tasks;
      if (!fs::exists(shard)) continue;
      auto rows = measurements(shard);
      EXPECT_GE(rows.size(), 4u) << shard;  // the default, the budget's 3 (and re-measurements)
      a.every.insert(a.every.end(), rows.begin(), rows.end());
    }
    std::sort(a.every.begin(), a.every.end());
    EXPECT_EQ(std::adjacent_find(a.every.begin(), a.every.end()), a.every.end())
        << "a measurement in two shards";
    return a;
  }
};

TEST_F(SlurmArray, ASuiteRunsAsAnArrayOfThreeTasksEachIntoItsShardThenTheMergeJob) {
  const ArrayRun a = run("array");
  EXPECT_EQ(a.every.size() >= 12, true) << a.every.size();
}

TEST_F(SlurmArray, TheMergedDatabaseHoldsEveryMeasurementOfEveryTaskOnce) {
  if (test::run_gputune("db merge --help").exit_code != 0)
    GTEST_SKIP() << "this build has no `gputune db merge` (its own branch until merged)";
  const ArrayRun a = run("merged");
  EXPECT_EQ(measurements(a.db), a.every) << "the merged database holds every shard's "
                                            "measurements, each once";
  EXPECT_TRUE(fs::exists(a.dir / "nightly.db.report.md"));
  EXPECT_TRUE(fs::exists(a.dir / "nightly.db.report.json"));
}

TEST_F(Slurm, AnUnchangedSuiteCostsTheArraySecondsNotMinutes) {
  const fs::path dir = *dir_ / "unchanged";
  const std::string suite = write_suite(dir);
  const fs::path db = dir / "nightly.db";
  const std::string args = shell_quote(suite) + " --db " + shell_quote(db.string()) +
                           " --slurm --submit --budget 3 -q --skip-unchanged --cache-dir " +
                           shell_quote((dir / "cache").string());
  auto first = batch(args);
  ASSERT_EQ(first.exit_code, 0) << first.out;
  ASSERT_TRUE(wait_gone(job_id(first.out, "array") + "," + job_id(first.out, "merge"), 300));

  const auto start = std::chrono::steady_clock::now();
  auto again = batch(args);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  const std::string array = job_id(again.out, "array");
  ASSERT_TRUE(wait_gone(array, 120)) << client("squeue").out;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Each task found its jobs unchanged in its shard: nothing was tuned again.
  for (int i = 0; i < 3; ++i) {
    std::string log;
    for (const auto& e : fs::directory_iterator(dir / "nightly.db.logs"))
      if (e.path().filename().string() == "task-" + std::to_string(i) + "-" + array + ".out")
        log = test::read_file(e.path());
    EXPECT_NE(log.find("unchanged"), std::string::npos) << "task " << i << ":\n" << log;
  }
  std::cout << "slurm: an unchanged suite of 3 jobs as an array of 3 tasks: submit to last task "
               "done "
            << s << " s\n";
  EXPECT_LT(s, 60) << "seconds, not minutes";
  wait_gone(job_id(again.out, "merge"), 60);
}

}  // namespace
}  // namespace gputune
