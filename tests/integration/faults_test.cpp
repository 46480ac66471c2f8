// Issue #47's kills and faults (ctest label `faults`), on the fake driver: `gputune run`, `batch`
// and `serve` (and its worker) killed with SIGKILL at random moments of compiling and measuring,
// each kill followed by `PRAGMA integrity_check` and a count of the stored measurements against
// the count just before it, then resumed until every (context, configuration) of every run is
// measured exactly once; a full disk (a small tmpfs) and a read-only database; a damaged cubin
// cache; a driver allocation failure mid-run; NVRTC failing as when it runs out of memory. The
// kills of `gputune db merge` are tests/db/merge_test.cpp's. Each test prints `[faults] ...`
// lines (and appends them to $GPUTUNE_FAULTS_LOG) that bench/run_reliability.sh tabulates.
// About 3 minutes on the 2-core VM, most of it the kill loops.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "daemon_util.h"
#include "db/store.h"
#include "fake_process.h"
#include "test_util.h"
#include "variants/hash.h"

namespace gputune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::with_fake;

/// A result line for the reliability report: printed, and appended to $GPUTUNE_FAULTS_LOG.
void tally(const std::string& line) {
  std::cout << "[faults] " << line << std::endl;
  if (const char* path = std::getenv("GPUTUNE_FAULTS_LOG"))
    std::ofstream(path, std::ios::app) << line << "\n";
}

/// The output's line that holds `what` (for the report), "" if none.
std::string line_with(const std::string& out, const std::string& what) {
  const auto at = out.find(what);
  if (at == std::string::npos) return "";
  const auto begin = out.rfind('\n', at), end = out.find('\n', at);
  return out.substr(begin == std::string::npos ? 0 : begin + 1,
                    end == std::string::npos ? std::string::npos : end - begin - 1);
}

/// One number from a database another process may be writing (-1 when it cannot be read).
std::int64_t query_count(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  std::int64_t n = -1;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(h, 5000);
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
      n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return n;
}

/// Stored measurements (0 before the database has the table).
std::int64_t stored(const std::string& db) {
  return std::max<std::int64_t>(0, query_count(db, "SELECT count(*) FROM measurements"));
}

using test::integrity;

/// Starts `gputune ARGS` on the fake driver in a process group of its own, output appended to
/// `log`, with `env` added.
pid_t start_in_group(const std::string& log, const std::vector<std::string>& args,
                     const std::vector<std::pair<std::string, std::string>>& env = {}) {
  return test::start_in_group(log, args, env, /*append=*/true);
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close = line.rfind(')');
  return close == std::string::npos || line.compare(close + 2, 1, "Z") == 0;
}

/// Waits up to `seconds` for process group `pgid` to have no live member.
bool group_ended(pid_t pgid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    bool alive = false;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(e.path() / "stat");
      std::string line;
      if (!std::getline(stat, line)) continue;
      const auto close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 2));
      std::string state;
      long ppid = 0, pgrp = 0;
      rest >> state >> ppid >> pgrp;
      if (pgrp == pgid && state != "Z") alive = true;
    }
    if (!alive) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// The children of `pid`, over all its threads.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::istringstream in(test::read_file(t.path() / "children"));
    for (pid_t c; in >> c;) out.push_back(c);
  }
  return out;
}

/// Per run: how often each (context, variant) was measured in the first pass and re-measured.
struct Measured {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, int> first, again;
  std::map<std::int64_t, std::size_t> pairs_of_run;  ///< distinct first-pass pairs
};

Measured measured(const std::string& db) {
  Measured m;
  db::Store store(db);
  for (const auto& r : store.runs(10000))
    for (const auto& row : store.measurements(r.id)) {
      const bool again = row.reason.rfind("re-measurement", 0) == 0;
      int& n = (again ? m.again : m.first)[{r.id, row.context_id, row.variant_id}];
      if (!again && n == 0) ++m.pairs_of_run[r.id];
      ++n;
    }
  return m;
}

/// Every pair of every run measured once in the first pass and re-measured at most once.
void expect_each_pair_once(const Measured& m) {
  for (const auto& [k, n] : m.first)
    EXPECT_EQ(n, 1) << "run " << std::get<0>(k) << " context " << std::get<1>(k) << " variant "
                    << std::get<2>(k) << " measured " << n << " times";
  for (const auto& [k, n] : m.again)
    EXPECT_EQ(n, 1) << "run " << std::get<0>(k) << " context " << std::get<1>(k) << " variant "
                    << std::get<2>(k) << " re-measured " << n << " times";
}

/// The .cubin files of a cache folder.
std::size_t cubins(const fs::path& cache) {
  std::size_t n = 0;
  std::error_code ec;
  if (fs::exists(cache, ec))
    for (const auto& e : fs::recursive_directory_iterator(cache, ec))
      n += e.path().extension() == ".cubin";
  return n;
}

/// vector_add in `dir` (job.json), its 24 configurations in `contexts`, 5 repeats; `helpers`
/// device functions in a header make each compile take longer (test_util.h).
std::string vector_add_job(const test::TempDir& dir, const json& contexts, int helpers = 0,
                           const std::string& name = "job.json") {
  json job = test::vector_add_job_in(dir, helpers);
  job["GPUTune"]["Contexts"] = contexts;
  job["GPUTune"]["Measurement"] = {{"Repeats", 5}, {"WarmUp", 1}};
  test::write_file(dir / name, job.dump(1));
  return (dir / name).string();
}

// For tests whose subject is not the fake driver's faulting 1024-thread launches: each ends the
// tuning process (the run goes on in a new one), so the counts one process reports (compiled,
// from the cache) would cover only the last.
constexpr const char* kNoFaults = "FAKE_CUDA_FAULT_BLOCK=0";

const json kOneContext = {{{"Name", "64K"}, {"ProblemSize", {65536}}}};
const json kTwoContexts = {{{"Name", "64K"}, {"ProblemSize", {65536}}},
                           {{"Name", "128K"}, {"ProblemSize", {131072}}}};

// ---------------------------------------------------------------------------------------------
// Kills

// `gputune run` killed 20 times: 8 times with a cold cubin cache (a new empty --cache-dir: the
// kill lands while it compiles), 12 times with a warm one while it measures (each launch 30 ms).
// Every other kill takes the whole process group (the tuning process dies mid-write too), the
// others the command's process alone (its tuning process is told to stop, and stores the
// measurement in hand). After each: integrity ok, nothing stored before the kill is gone. Then
// `run --resume` completes the run with each pair measured once. About 40 s.
TEST(Faults, RunKilledWhileCompilingAndMeasuringLosesNothingAndResumesEachPairOnce) {
  test::TempDir dir;
  const std::string job = vector_add_job(dir, kTwoContexts, 10000);
  const std::string db = (dir / "g.db").string(), log = (dir / "out.txt").string();
  // The measuring kills' cache, filled beforehand by a run into another database: those kills
  // land while the run measures (a resumed run compiles only what it still measures).
  ASSERT_EQ(
      test::run_command(with_fake() + "run '" + job + "' --db '" + (dir / "warm.db").string() +
                        "' --cache-dir '" + (dir / "cache").string() + "'")
          .exit_code,
      0);
  std::mt19937 rng(4701);
  std::map<std::string, int> kills;  // by phase
  std::int64_t after_last = 0;
  for (int i = 0; i < 20; ++i) {
    const bool cold = i < 8;
    const fs::path cache = dir / (cold ? "cache-" + std::to_string(i) : std::string("cache"));
    std::vector<std::string> args = {"run", job, "--db", db, "--cache-dir", cache.string()};
    if (i > 0) args.insert(args.end(), {"--resume", "1"});
    const pid_t pid = start_in_group(log, args, {{"FAKE_CUDA_SLOW_MS", "30"}});
    ASSERT_GT(pid, 0);
    if (i == 0) {  // once its run exists (resumable), at once: it is compiling
      for (int t = 0; t < 400 && query_count(db, "SELECT count(*) FROM runs") < 1; ++t)
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::uniform_int_distribution<int>(cold ? 300 : 400, cold ? 1200 : 1800)(rng)));
    }
    const std::int64_t before = stored(db);     // what it had reported stored
    const bool compiling = cubins(cache) < 24;  // cold: not all compiled yet
    const bool group = i % 2 == 1;
    const bool alive = !ended(pid);
    ASSERT_EQ(kill(group ? -pid : pid, SIGKILL), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(group_ended(pid, 30))
        << "its tuning process did not stop: " << test::read_file(log);
    if (alive) ++kills[std::string(compiling ? "compile" : "measure") + (group ? " (group)" : "")];
    EXPECT_EQ(integrity(db), "ok") << "after kill " << i;
    const std::int64_t after = stored(db);
    EXPECT_GE(after, before) << "kill " << i << " lost measurements it had stored";
    EXPECT_GE(after, after_last) << "kill " << i;
    after_last = after;
  }
  int total = 0;
  for (const auto& [phase, n] : kills) {
    tally("kill run " + phase + " " + std::to_string(n));
    total += n;
  }
  // A kill that comes after its process ended counts for nothing (the last resumes may find
  // little left to measure); under CI's load one or two of the 20 do.
  EXPECT_GE(total, 15);
  EXPECT_GE(kills["compile"] + kills["compile (group)"], 4);
  EXPECT_GE(kills["measure"] + kills["measure (group)"], 4);
  auto last = test::run_command(with_fake() + "run '" + job + "' --db '" + db + "' --cache-dir '" +
                                (dir / "cache").string() + "' --resume 1");
  ASSERT_EQ(last.exit_code, 0) << last.out;
  EXPECT_EQ(integrity(db), "ok");
  db::Store store(db);
  ASSERT_EQ(store.runs().size(), 1u);
  EXPECT_EQ(store.runs()[0].status, db::RunStatus::kDone);
  const Measured m = measured(db);
  EXPECT_EQ(m.pairs_of_run.at(1), 48u);
  EXPECT_EQ(m.again.size(), 6u);  // the top 3 of each context
  expect_each_pair_once(m);
  tally("lost run 0");
}

/// a.json (two contexts) and b.json (one) in `dir`, and suite.json naming both.
std::string write_suite(const test::TempDir& dir) {
  vector_add_job(dir, kTwoContexts, 0, "a.json");
  json b = json::parse(test::read_file(dir / "a.json"));
  b["General"]["BenchmarkName"] = "vector_add_b";
  b["GPUTune"]["Contexts"] = kOneContext;
  test::write_file(dir / "b.json", b.dump(1));
  test::write_file(dir / "suite.json", R"({"Suite": "faults", "Jobs": ["a.json", "b.json"]})");
  return (dir / "suite.json").string();
}

// `gputune batch` of two jobs killed 16 times at random moments (each launch 10 ms: the suite
// takes about 6 s); every other
// kill takes its `run` process with it. After each: integrity ok, nothing stored is gone. Then
// the suite runs once to the end, every run left unfinished is resumed (`run --resume`), and every
// run has each of its pairs measured once. About 60 s.
TEST(Faults, BatchKilledMidSuiteLosesNothingAndEveryRunCompletesOnce) {
  test::TempDir dir;
  const std::string suite = write_suite(dir);
  const std::string db = (dir / "g.db").string(), log = (dir / "out.txt").string(),
                    cache = (dir / "cache").string();
  const std::vector<std::string> args = {"batch",       suite, "--db",         db,
                                         "--cache-dir", cache, "--no-confirm", "-q"};
  std::mt19937 rng(4702);
  std::map<std::string, int> kills;
  std::int64_t after_last = 0;
  for (int i = 0; i < 16; ++i) {
    const pid_t pid = start_in_group(log, args, {{"FAKE_CUDA_SLOW_MS", "10"}});
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(500, 4500)(rng)));
    const std::int64_t before = stored(db);
    const bool group = i % 2 == 1, alive = !ended(pid);
    ASSERT_EQ(kill(group ? -pid : pid, SIGKILL), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(group_ended(pid, 30)) << "its run did not stop: " << test::read_file(log);
    if (alive) ++kills[group ? "(group)" : "(batch process)"];
    EXPECT_EQ(integrity(db), "ok") << "after kill " << i;
    const std::int64_t after = stored(db);
    EXPECT_GE(after, before) << "kill " << i;
    EXPECT_GE(after, after_last) << "kill " << i;
    after_last = after;
  }
  int total = 0;
  for (const auto& [how, n] : kills) {
    tally("kill batch " + how + " " + std::to_string(n));
    total += n;
  }
  EXPECT_GE(total, 12);  // of 16: a kill after its process ended counts for nothing
  auto whole = test::run_command(with_fake() + "batch '" + suite + "' --db '" + db +
                                 "' --cache-dir '" + cache + "' --no-confirm -q");
  EXPECT_EQ(whole.exit_code, 0) << whole.out;
  std::size_t resumed = 0;
  for (const auto& r : db::Store(db).runs(10000)) {
    if (r.status == db::RunStatus::kDone) continue;
    auto on = test::run_command(with_fake() + "run '" + r.job_file + "' --db '" + db +
                                "' --cache-dir '" + cache + "' --resume " + std::to_string(r.id));
    EXPECT_EQ(on.exit_code, 0) << "run " << r.id << ": " << on.out;
    ++resumed;
  }
  EXPECT_EQ(integrity(db), "ok");
  const Measured m = measured(db);
  db::Store store(db);
  for (const auto& r : store.runs(10000)) {
    EXPECT_EQ(r.status, db::RunStatus::kDone) << "run " << r.id << ": " << r.message;
    const std::size_t contexts = r.job_name == "vector_add_b" ? 1 : 2;
    EXPECT_EQ(m.pairs_of_run.count(r.id) ? m.pairs_of_run.at(r.id) : 0, 24 * contexts)
        << "run " << r.id;
  }
  expect_each_pair_once(m);
  tally("batch runs resumed " + std::to_string(resumed));
  tally("lost batch 0");
}

// `gputune serve` with a job, 8 rounds of: its worker killed (the server blames the variant in
// flight, unless stored already, and starts another), then the server itself killed (its worker
// is told to stop: it stores the measurement in hand, requeues the job and exits), then a new
// server. After each kill: integrity ok, nothing stored is gone. A last server completes the job:
// one run, each pair once. About 50 s.
TEST(Faults, ServerAndWorkerKilledLoseNothingAndTheJobCompletesOnce) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string(), cache = (dir / "cache").string();
  const std::string job = vector_add_job(dir, kTwoContexts);
  const std::string env = std::string("LD_LIBRARY_PATH=") + FAKE_CUDA_DIR;
  std::mt19937 rng(4703);
  std::int64_t id = -1, after_last = 0;
  int worker_kills = 0, server_kills = 0;
  auto check = [&](const std::string& what) {
    EXPECT_EQ(integrity(db), "ok") << what;
    const std::int64_t after = stored(db);
    EXPECT_GE(after, after_last) << what;
    after_last = after;
  };
  for (int round = 0; round < 8; ++round) {
    test::Daemon d(db, {"--cache-dir", cache}, {env, "FAKE_CUDA_SLOW_MS=40"});
    ASSERT_FALSE(d.url().empty()) << d.output();
    if (id < 0) {
      auto r =
          test::run_gputune("submit '" + job + "' --server " + d.url() + " --token " + d.token());
      ASSERT_EQ(r.exit_code, 0) << r.out;
      id = json::parse(r.out.substr(r.out.find('{')))["id"].get<std::int64_t>();
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(600, 2000)(rng)));
    if (auto workers = children_of(d.pid()); !workers.empty()) {
      const std::int64_t before = stored(db);
      ASSERT_EQ(kill(workers[0], SIGKILL), 0);
      ++worker_kills;
      // The server reaps it, blames its variant and starts another.
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(700, 1500)(rng)));
      EXPECT_GE(stored(db), before);
      check("after killing the worker in round " + std::to_string(round));
    }
    const std::vector<pid_t> workers = children_of(d.pid());
    const std::int64_t before = stored(db);
    d.kill_now();
    ++server_kills;
    for (pid_t w : workers)
      for (int t = 0; t < 600 && !ended(w); ++t)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (pid_t w : workers) ASSERT_TRUE(ended(w)) << "worker " << w << " outlived its server";
    EXPECT_GE(stored(db), before);
    check("after killing the server in round " + std::to_string(round));
  }
  tally("kill serve worker " + std::to_string(worker_kills));
  tally("kill serve server " + std::to_string(server_kills));
  EXPECT_GE(worker_kills, 6);
  {
    test::Daemon d(db, {"--cache-dir", cache}, {env});
    const json item = d.wait_for_job(id, 120);
    ASSERT_EQ(item["status"], "done") << item.dump();
  }
  EXPECT_EQ(integrity(db), "ok");
  db::Store store(db);
  ASSERT_EQ(store.runs().size(), 1u);
  const Measured m = measured(db);
  EXPECT_EQ(m.pairs_of_run.at(store.runs()[0].id), 48u);
  expect_each_pair_once(m);
  tally("lost serve 0");
}

// ---------------------------------------------------------------------------------------------
// A full disk, a read-only database

/// A tmpfs of `size` mounted on `dir` while it lives (root only: `skip` says why not).
class Tmpfs {
 public:
  Tmpfs(const fs::path& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    if (geteuid() != 0) {
      skip_ = "mounting a tmpfs needs root";
      return;
    }
    auto r = test::run_command("mount -t tmpfs -o size=" + size + " gputune-faults '" +
                               dir.string() + "'");
    if (r.exit_code != 0) skip_ = "cannot mount a tmpfs here: " + r.out;
    mounted_ = r.exit_code == 0;
  }
  ~Tmpfs() {
    if (mounted_) test::run_command("umount -l '" + dir_.string() + "'");
  }
  const std::string& skip() const { return skip_; }

 private:
  fs::path dir_;
  std::string skip_;
  bool mounted_ = false;
};

/// Fills the file system of `dir` with `dir/filler` until `leave` bytes are free.
void fill_leaving(const fs::path& dir, std::uint64_t leave) {
  struct statvfs v {};
  ASSERT_EQ(statvfs(dir.c_str(), &v), 0);
  const std::uint64_t free = static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
  std::ofstream out(dir / "filler", std::ios::binary | std::ios::app);
  const std::string block(4096, 'x');
  for (std::uint64_t n = 0; n + leave < free; n += block.size()) out << block;
}

// The database on a tmpfs that fills up during the run: the run stops with exit 2 and an error
// naming the database and "disk full" and the command that resumes it; the database stays
// intact. Once space is freed, `run --resume` completes it, each pair once. (How much room lets a
// run begin and not end depends on SQLite's pages: the first of a few sizes that does; the
// write-ahead log holds about 370 KiB of pages before the first measurement at schema 13, and
// each measurement adds about 50.) About 15 s.
TEST(Faults, AFullDiskStopsTheRunClearlyAndItResumesOnceThereIsSpace) {
  test::TempDir dir;
  const fs::path small = dir / "small";
  Tmpfs tmpfs(small, "4m");
  if (!tmpfs.skip().empty()) GTEST_SKIP() << tmpfs.skip();
  const std::string job = vector_add_job(dir, kTwoContexts);
  const std::string db = (small / "g.db").string(), cache = (dir / "cache").string();
  const std::string run = "run '" + job + "' --db '" + db + "' --cache-dir '" + cache + "'";
  // Warm the cache elsewhere: only the database is short of space.
  ASSERT_EQ(test::run_command(with_fake() + "run '" + job + "' --db '" +
                              (dir / "warm.db").string() + "' --cache-dir '" + cache + "'")
                .exit_code,
            0);
  test::CommandResult full;
  std::int64_t before = 0;
  std::uint64_t room = 0;
  for (std::uint64_t kib : {48, 96, 160, 256, 400, 640, 1024}) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(small)) files.push_back(e.path());
    for (const auto& f : files) fs::remove(f);
    fill_leaving(small, kib * 1024);
    full = test::run_command(with_fake() + run);
    before = stored(db);
    room = kib;
    if (full.exit_code != 0 && before > 0) break;
  }
  tally("fault disk-full room-kib " + std::to_string(room));
  EXPECT_EQ(full.exit_code, 2) << full.out;
  EXPECT_NE(full.out.find(db + ": disk full: "), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("Fix: free space there"), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("--resume 1` measures the rest"), std::string::npos) << full.out;
  EXPECT_EQ(integrity(db), "ok");
  EXPECT_GT(before, 0) << full.out;
  EXPECT_LT(before, 48) << full.out;
  tally("fault disk-full stored-before-resume " + std::to_string(before));
  tally("message " + line_with(full.out, "disk full"));
  tally("message " + line_with(full.out, "measures the rest"));
  fs::remove(small / "filler");
  auto on = test::run_command(with_fake() + run + " --resume 1");
  ASSERT_EQ(on.exit_code, 0) << on.out;
  EXPECT_EQ(integrity(db), "ok");
  EXPECT_EQ(db::Store(db).run(1)->status, db::RunStatus::kDone);
  const Measured m = measured(db);
  EXPECT_EQ(m.pairs_of_run.at(1), 48u);
  expect_each_pair_once(m);
  tally("fault disk-full survived 1");
}

/// `gputune ARGS` as user nobody where this is root (root writes read-only files), else as is.
test::CommandResult as_nobody(const std::string& args) {
  const std::string bin = std::string("'") + GPUTUNE_BINARY + "' ";
  if (geteuid() != 0) return test::run_command(bin + args);
  return test::run_command(
      "setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent " + bin + args);
}

// A database file of mode 0444, and one in a folder of mode 0555: `run` stops with exit 2 and an
// error naming the file, "read-only" or the folder, and the fix, before it compiles anything; the
// file is unchanged (its SHA-256). As root the commands run as user nobody. About 5 s.
TEST(Faults, AReadOnlyDatabaseIsRefusedBeforeAnythingRunsAndLeftUnchanged) {
  if (geteuid() == 0 && test::run_command("setpriv --version").exit_code != 0)
    GTEST_SKIP() << "root, and no setpriv to run gputune as another user";
  test::TempDir dir;
  fs::permissions(dir.path(), fs::perms::all);  // nobody may read the job and write here
  const std::string job = vector_add_job(dir, kOneContext);
  const std::string made = (dir / "made.db").string();
  ASSERT_EQ(test::run_command(with_fake() + "run '" + job + "' --db '" + made + "'").exit_code, 0);
  for (const auto& suffix : {"-wal", "-shm"}) ASSERT_FALSE(fs::exists(made + suffix));
  auto owned_by_nobody = [](const fs::path& p) {
    if (geteuid() == 0) {
      ASSERT_EQ(chown(p.c_str(), 65534, 65534), 0);
    }
  };
  {  // the file read-only
    const fs::path db = dir / "ro-file.db";
    fs::copy_file(made, db);
    owned_by_nobody(db);
    fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    const std::string hash = sha256_hex(test::read_file(db));
    auto r = as_nobody("run '" + job + "' --db '" + db.string() + "' --cache-dir '" +
                       (dir / "cache-nobody").string() + "'");
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find(db.string() + ": the database is read-only to this process"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("Fix: make the file and its folder writable"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("compiled"), std::string::npos) << "it ran: " << r.out;
    EXPECT_EQ(sha256_hex(test::read_file(db)), hash);
    tally("fault read-only-file refused 1");
    tally("message " + line_with(r.out, "database error"));
  }
  {  // the folder read-only
    const fs::path folder = dir / "ro-folder";
    fs::create_directories(folder);
    const fs::path db = folder / "g.db";
    fs::copy_file(made, db);
    owned_by_nobody(db);
    owned_by_nobody(folder);
    fs::permissions(folder, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                fs::perms::group_exec | fs::perms::others_read |
                                fs::perms::others_exec);
    const std::string hash = sha256_hex(test::read_file(db));
    auto r = as_nobody("run '" + job + "' --db '" + db.string() + "' --cache-dir '" +
                       (dir / "cache-nobody").string() + "'");
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find(db.string() + ": "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Fix: "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("compiled"), std::string::npos) << "it ran: " << r.out;
    EXPECT_EQ(sha256_hex(test::read_file(db)), hash);
    fs::permissions(folder, fs::perms::all);
    tally("fault read-only-folder refused 1");
    tally("message " + line_with(r.out, "database error"));
  }
}

// ---------------------------------------------------------------------------------------------
// The cubin cache, the driver's memory, NVRTC

// Four cache entries damaged on disk (a cubin cut in half, one overwritten with garbage, one
// emptied, a metadata file of garbage): the next run finds each (its hash no longer matches, or
// it cannot be read), compiles those four again and rewrites them; its results equal the first
// run's. About 10 s.
TEST(Faults, ADamagedCubinCacheEntryIsRecompiledAndTheRunIsCorrect) {
  test::TempDir dir;
  const std::string job = vector_add_job(dir, kOneContext);
  const fs::path cache = dir / "cache";
  auto run = [&](const std::string& db) {
    return test::run_command(with_fake(kNoFaults) + "run '" + job + "' --db '" +
                             (dir / db).string() + "' --cache-dir '" + cache.string() + "'");
  };
  auto first = run("a.db");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  std::vector<fs::path> entries;
  for (const auto& e : fs::recursive_directory_iterator(cache))
    if (e.path().extension() == ".cubin") entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  ASSERT_EQ(entries.size(), 24u);
  std::vector<std::string> original;
  for (std::size_t i = 0; i < 4; ++i) original.push_back(test::read_file(entries[i]));
  fs::resize_file(entries[0], fs::file_size(entries[0]) / 2);
  test::write_file(entries[1], std::string(original[1].size(), '\x5a'));
  fs::resize_file(entries[2], 0);
  fs::path meta = entries[3];
  test::write_file(meta.replace_extension(".json"), "{\"cubin_hash\": garbage");
  auto second = run("b.db");
  ASSERT_EQ(second.exit_code, 0) << second.out;
  EXPECT_NE(second.out.find("compiled 24 (20 from cache)"), std::string::npos) << second.out;
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(test::read_file(entries[i]), original[i]) << entries[i] << " was not rewritten";
  auto third = run("c.db");
  EXPECT_NE(third.out.find("compiled 24 (24 from cache)"), std::string::npos) << third.out;
  // The same results: each configuration's status and the winner.
  auto outcome = [&](const std::string& db) {
    std::map<std::string, std::string> by_config;
    db::Store store((dir / db).string());
    for (const auto& m : store.measurements(1))
      if (m.reason.rfind("re-measurement", 0) != 0) by_config[m.config_key] = m.status.str();
    by_config["winner"] = store.winners("vector_add").at(0).config_key;
    return by_config;
  };
  EXPECT_EQ(outcome("b.db"), outcome("a.db"));
  tally("fault cache-damaged entries 4 recompiled 4");
}

// The driver runs out of memory mid-run (FAKE_CUDA_ALLOCS: each process allocates the first
// context's three buffers, and the second context's cannot be allocated: memory another process
// took). The 1024-thread variants of the first context lose the CUDA context on the way (each
// stored as runtime, the run going on in a new process). The run stops as failed with the
// driver's error (what it measured stays), and once memory is back `run --resume` completes it,
// each pair once. Recording the allocation failure against each of the second context's variants
// instead would store them as failed for good (FakeDriver.AnErrorMidRun... has the same
// semantics). About 10 s.
TEST(Faults, ADriverAllocationFailureMidRunStopsTheRunResumably) {
  test::TempDir dir;
  const std::string job = vector_add_job(dir, kTwoContexts);
  const std::string db = (dir / "g.db").string();
  const std::string run =
      "run '" + job + "' --db '" + db + "' --cache-dir '" + (dir / "cache").string() + "'";
  auto r = test::run_command(with_fake("FAKE_CUDA_ALLOCS=3") + run);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--resume 1` measures the rest"), std::string::npos) << r.out;
  EXPECT_EQ(integrity(db), "ok");
  const std::int64_t before = stored(db);
  EXPECT_GE(before, 24);  // the first context whole
  EXPECT_LT(before, 48);
  EXPECT_EQ(db::Store(db).run(1)->status, db::RunStatus::kFailed);
  auto on = test::run_command(with_fake() + run + " --resume 1");
  ASSERT_EQ(on.exit_code, 0) << on.out;
  const Measured m = measured(db);
  EXPECT_EQ(m.pairs_of_run.at(1), 48u);
  expect_each_pair_once(m);
  tally("fault driver-alloc run-stopped-resumably stored-before " + std::to_string(before));
}

// NVRTC failing as when it runs out of memory (tests/fake_cuda/nvrtc_faults.cpp in front of the
// real NVRTC: every 5th nvrtcCompileProgram, and the 3rd nvrtcCreateProgram): each such variant
// is stored as a compile failure naming NVRTC_ERROR_OUT_OF_MEMORY, the run goes on, and nothing
// failed is cached, so a later run compiles those variants. About 10 s.
TEST(Faults, NvrtcOutOfMemoryFailsThatVariantsCompileAndTheRunGoesOn) {
  test::TempDir dir;
  const std::string job = vector_add_job(dir, kOneContext);
  const std::string db = (dir / "g.db").string(), cache = (dir / "cache").string();
  const std::string preload = std::string("LD_PRELOAD='") + NVRTC_FAULTS_LIB + "' ";
  auto r = test::run_command(
      with_fake(preload + "NVRTC_FAULTS_OOM_EVERY=5 NVRTC_FAULTS_CREATE_OOM_AT=3 " + kNoFaults) +
      "run '" + job + "' --db '" + db + "' --cache-dir '" + cache + "' -j 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  int oom = 0;
  for (const auto& m : db::Store(db).measurements(1)) {
    if (m.status != db::Status::kCompile) continue;
    EXPECT_NE((m.reason + m.log).find("NVRTC_ERROR_OUT_OF_MEMORY"), std::string::npos)
        << m.reason << "\n"
        << m.log;
    ++oom;
  }
  // 24 compiles: the 3rd creation fails, and every 5th of the 23 compiles after it.
  EXPECT_EQ(oom, 1 + 4) << r.out;
  const Measured m = measured(db);
  EXPECT_EQ(m.pairs_of_run.at(1), 24u);
  expect_each_pair_once(m);
  EXPECT_EQ(cubins(cache), 24u - oom);
  auto again = test::run_command(with_fake(kNoFaults) + "run '" + job + "' --db '" + db +
                                 "' --cache-dir '" + cache + "'");
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("compiled 24 (" + std::to_string(24 - oom) + " from cache)"),
            std::string::npos)
      << again.out;
  tally("fault nvrtc-oom variants-recorded " + std::to_string(oom));
}

}  // namespace
}  // namespace gputune
