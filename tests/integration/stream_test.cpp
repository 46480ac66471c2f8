// The streaming run with the fake driver (tests/fake_cuda): the GPU measures from the first
// seconds, compiles overlap measurements, the budget bounds the compiles, a slow compile does not
// stall what is ready, and a run stopped early still has a (provisional) winner. Orchestration
// only: the fake driver's times are its own clock's.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "db/store.h"
#include "test_util.h"

namespace gputune {
namespace {

namespace fs = std::filesystem;

using test::with_fake;

/// The cubins in a cache folder, with the time each was written.
std::vector<fs::file_time_type> cubins(const fs::path& cache) {
  std::vector<fs::file_time_type> out;
  std::error_code ec;
  if (fs::exists(cache, ec))
    for (const auto& e : fs::recursive_directory_iterator(cache, ec))
      if (e.path().extension() == ".cubin") out.push_back(e.last_write_time());
  return out;
}

/// A stored `created_at` (UTC, milliseconds) as a file time.
fs::file_time_type file_time_of(const std::string& created_at) {
  std::tm tm{};
  int ms = 0;
  std::sscanf(created_at.c_str(), "%d-%d-%dT%d:%d:%d.%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
              &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms);
  tm.tm_year -= 1900, tm.tm_mon -= 1;
  const auto sys =
      std::chrono::system_clock::from_time_t(timegm(&tm)) + std::chrono::milliseconds(ms);
  return std::chrono::file_clock::from_sys(sys);
}

/// `gputune run` of dir/job.json on the fake driver, into dir/g.db, with 2 compile workers and
/// the cubin and analysis cache dir/cache (empty at first). `env`: the fake driver's settings
/// (by default its fault at 1024 threads per block is off: these tests are about the stream).
test::CommandResult run_job(const test::TempDir& dir,
                            const std::string& env = "FAKE_CUDA_FAULT_BLOCK=0") {
  return test::run_command(with_fake(env) + "run '" + (dir / "job.json").string() + "' --db '" +
                           (dir / "g.db").string() + "' -j 2 --cache-dir '" +
                           (dir / "cache").string() + "'");
}

bool is_timed(db::Status status) {
  return status == db::Status::kCorrect || status == db::Status::kRuntime ||
         status == db::Status::kCorrectness || status == db::Status::kTimeout;
}

/// vector_add, one context of 1M, with `extra` values of a parameter that changes nothing (more
/// configurations), and a header of helper functions that makes each compile take a while.
nlohmann::json job_in(const test::TempDir& dir, int extra = 1, bool slow_compiles = true) {
  auto job = test::vector_add_job_in(dir, slow_compiles ? 4000 : 0);
  if (extra > 1) {
    std::string values = "[";
    for (int v = 0; v < extra; ++v) values += (v ? ", " : "") + std::to_string(v);
    job["ConfigurationSpace"]["TuningParameters"].push_back(
        {{"Name", "spare"}, {"Type", "int"}, {"Values", values + "]"}, {"Default", 0}});
  }
  return job;
}

// The default configuration is compiled and measured first, at once: by the time the first
// outcome is stored, the only variant compiled is the default (before, every variant of the plan
// was compiled first). The rest are compiled while the GPU measures.
TEST(Stream, TheFirstMeasurementComesBeforeTheBulkOfTheCompiles) {
  test::TempDir dir;
  auto job = job_in(dir);
  job["GPUTune"]["Search"] = {{"Strategy", "brute_force"}};
  test::write_file(dir / "job.json", job.dump());
  const fs::path cache = dir / "cache";
  const std::string db = (dir / "g.db").string();
  auto r = run_job(dir);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  db::Store store(db);
  std::string first;
  size_t timed = 0;
  for (const auto& m : store.measurements(1))
    if (is_timed(m.status) && m.reason.rfind("re-measurement", 0) != 0) {
      ++timed;
      if (first.empty() || m.created_at < first) first = m.created_at;
    }
  ASSERT_EQ(timed, 24u) << r.out;
  const auto written = cubins(cache);
  ASSERT_EQ(written.size(), 24u);
  const fs::file_time_type at = file_time_of(first);
  size_t before = 0;
  for (const auto& t : written) before += t <= at;
  EXPECT_LE(before, 1u) << "compiled before the first measurement was stored";
}

// model_guided with a budget: it asks for configurations as it goes, no further ahead than its
// look-ahead (two per compile worker), so what it compiles is bounded by the budget (plus the
// look-ahead, the regret sample and the default), not by the space; and it measures exactly its
// budget. `env`: the fake driver's settings; `lost`: whether a variant must lose the CUDA
// context on the way (the run then goes on in new processes, resumed).
void budget_bounds_the_search(const std::string& env, bool lost) {
  test::TempDir dir;
  auto job = job_in(dir, 10, /*slow_compiles=*/false);  // 240 configurations
  job["GPUTune"]["Search"] = {{"Strategy", "model_guided"}};
  job["GPUTune"]["Pruner"] = {{"ModelMargin", 100.0}, {"RegretSample", 2}};
  job["GPUTune"]["Budget"] = {{"Configurations", 6}};
  test::write_file(dir / "job.json", job.dump());
  const fs::path cache = dir / "cache";
  const std::string db = (dir / "g.db").string();
  auto r = run_job(dir, env);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ASSERT_EQ(r.out.find("lost the CUDA context") != std::string::npos, lost) << r.out;
  const size_t lookahead = 4, regret = 2;
  db::Store store(db);
  // Measured by the search: exactly the budget (a variant that lost the context counts, as any
  // failed measurement). Compiled besides: the look-ahead, the regret sample, the default, what
  // rules 1-3 ruled out once compiled (here the same binary and launch as one measured: the
  // spare parameter changes nothing), and what waited while one ordered before it was compiled
  // first (the log counts those).
  size_t searched = 0, sampled = 0, ruled_out = 0;
  for (const auto& m : store.measurements(1)) {
    if (m.status == db::Status::kConstraints && m.reason.rfind("pruned by rule model", 0) != 0)
      ++ruled_out;
    if (!is_timed(m.status) || m.reason.rfind("re-measurement", 0) == 0) continue;
    if (m.reason.find("regret sample") != std::string::npos)
      ++sampled;
    else
      ++searched;
  }
  EXPECT_EQ(searched, 6u) << r.out;
  EXPECT_EQ(sampled, regret) << r.out;
  EXPECT_EQ(store.run(1)->budget, std::optional<std::int64_t>(6));
  if (lost) return;  // each new process compiles what it resumes again (from the cache)
  size_t parked = 0;
  if (auto at = r.out.find("gputune: model_guided: "); at != std::string::npos)
    if (r.out.find(" times a compiled variant waited", at) != std::string::npos)
      parked = std::stoul(r.out.substr(at + 23));
  EXPECT_LE(cubins(cache).size(), 6 + lookahead + regret + 1 + ruled_out + parked) << r.out;
  EXPECT_LE(parked, 6u) << "at most as many as the budget";
}

TEST(Stream, TheBudgetBoundsTheCompilesAndTheStreamStopsExactlyAtIt) {
  budget_bounds_the_search("FAKE_CUDA_FAULT_BLOCK=0", false);
}

// The same search where 512-thread blocks lose the CUDA context (the model proposes some early,
// and the regret sample draws some): each resumed process counts what the ones before measured,
// failed or not, against the budget and the sample, so the search still measures exactly 6 and
// the sample times 2. (Before, a resumed process counted only the correct ones, and kept as
// "first of its binary" one that the process before had pruned as a duplicate: 7 searched, 3
// sampled.)
TEST(Stream, TheBudgetAndTheRegretSampleHoldAcrossLostContexts) {
  budget_bounds_the_search("FAKE_CUDA_FAULT_BLOCK=512", true);
}

// One variant compiles slowly (a second kernel of 150 dependent sinf calls keeps ptxas busy for
// a second or two): the variants proposed after it that compiled meanwhile are measured before
// it, instead of the GPU waiting for it. (NVRTC runs its back end in parallel across threads;
// its front end it runs one compile at a time, so a slow parse would hold the others too.)
TEST(Stream, ASlowCompileDoesNotStallTheMeasurementsOfReadyCubins) {
  test::TempDir dir;
  auto job = job_in(dir, 1, /*slow_compiles=*/false);
  job["GPUTune"]["Search"] = {{"Strategy", "brute_force"}};
  test::write_file(dir / "job.json", job.dump());
  // 32,2 (the second configuration of the plan after the default).
  std::string slow =
      "#if block_size_x == 32 && tile_size_x == 2\n"
      "extern \"C\" __global__ void slow_extra(float* a) {\n"
      "  float acc = a[threadIdx.x];\n";
  for (int k = 0; k < 150; ++k)
    slow += "  acc = sinf(acc * 1.0001f + a[(threadIdx.x + " + std::to_string(k) + ") % 64]);\n";
  slow += "  a[threadIdx.x] = acc;\n}\n#endif\n";
  test::write_file(dir / "vector_add.cu", test::read_file(dir / "vector_add.cu") + slow);
  const std::string db = (dir / "g.db").string();
  auto r = run_job(dir);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  db::Store store(db);
  std::map<std::string, std::int64_t> row;  // configuration -> its first-pass row id
  for (const auto& m : store.measurements(1))
    if (is_timed(m.status) && m.reason.rfind("re-measurement", 0) != 0) row[m.config_key] = m.id;
  ASSERT_EQ(row.size(), 24u) << r.out;
  ASSERT_TRUE(row.count("32,2"));
  // Proposed after it (the plan's order, the default first): 32,4 onwards.
  size_t overtook = 0;
  for (const char* later : {"32,4", "32,8", "64,1", "64,2", "64,4", "64,8"})
    overtook += row.at(later) < row.at("32,2");
  EXPECT_GE(overtook, 3u) << "the GPU waited for the slow compile: " << r.out;
}

// Stopped (SIGINT) after a few measurements, a run still names each context's fastest first pass
// as its winner, provisional: `best` answers and says so. The resume finishes the run, measures
// each configuration once, and replaces the provisional winner by its re-measured one.
TEST(Stream, AStoppedRunHasAProvisionalWinnerThatItsResumeSettles) {
  test::TempDir dir;
  auto job = job_in(dir, 1, /*slow_compiles=*/false);
  job["GPUTune"]["Search"] = {{"Strategy", "brute_force"}};
  test::write_file(dir / "job.json", job.dump());
  const std::string db = (dir / "g.db").string(), log = (dir / "out.txt").string();
  const std::string cache = (dir / "cache").string(), file = (dir / "job.json").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("LD_LIBRARY_PATH", FAKE_CUDA_DIR, 1);
    setenv("FAKE_CUDA_SLOW_MS", "30", 1);  // every launch 30 ms: a measurement takes a while
    signal(SIGINT, SIG_DFL);
    if (!std::freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), STDERR_FILENO) < 0)
      _exit(126);
    execl(GPUTUNE_BINARY, GPUTUNE_BINARY, "run", file.c_str(), "--db", db.c_str(), "--cache-dir",
          cache.c_str(), "-j", "2", static_cast<char*>(nullptr));
    _exit(127);
  }
  auto correct = [&] {
    size_t n = 0;
    if (fs::exists(db)) try {
        for (const auto& m : db::Store(db).measurements(1)) n += m.status == db::Status::kCorrect;
      } catch (const std::exception&) {  // the schema is still being created
      }
    return n;
  };
  for (int i = 0; i < 1200 && correct() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(pid, SIGINT);
  const auto status = test::wait_for_child(pid, 30);
  const std::string out = test::read_file(log);
  ASSERT_TRUE(status) << out;
  ASSERT_TRUE(WIFEXITED(*status)) << out;
  ASSERT_EQ(WEXITSTATUS(*status), 5) << out;
  EXPECT_NE(out.find("(provisional: the fastest first pass, not re-measured)"), std::string::npos)
      << out;
  auto best = test::run_command(with_fake() + "best vector_add --db '" + db + "' --json");
  ASSERT_EQ(best.exit_code, 0) << best.out;
  auto w = nlohmann::json::parse(best.out.substr(0, best.out.find('\n')));
  EXPECT_TRUE(w["provisional"].get<bool>()) << best.out;
  auto text = test::run_command(with_fake() + "best vector_add --db '" + db + "'");
  EXPECT_NE(text.out.find("provisional: the fastest first pass of run 1"), std::string::npos)
      << text.out;
  // The resume finishes it: every configuration once, a re-measured winner.
  auto resumed = test::run_command(with_fake() + "run '" + file + "' --db '" + db +
                                   "' --cache-dir '" + cache + "' -j 2 --resume 1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  db::Store store(db);
  std::map<std::string, int> seen;
  for (const auto& m : store.measurements(1))
    if (m.reason.rfind("re-measurement", 0) != 0) ++seen[m.config_key];
  EXPECT_EQ(seen.size(), 24u);
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 1) << key << " measured twice";
  auto settled = store.winners("vector_add");
  ASSERT_EQ(settled.size(), 1u);
  EXPECT_FALSE(settled[0].provisional);
  bool remeasured = false;
  for (const auto& m : store.measurements(1))
    remeasured = remeasured ||
                 (m.id == settled[0].measurement_id && m.reason.rfind("re-measurement", 0) == 0);
  EXPECT_TRUE(remeasured) << "the winner is a re-measured time";
}

}  // namespace
}  // namespace gputune
