// GPU fault tests (ctest label `gpu`, skipped without a driver or device): variants of one kernel
// that write far out of bounds, trap (`__trap()`) and never end, beside correct ones, in one
// context of one `gputune run`. The faulting ones are stored as runtime (each loses the process's
// CUDA context: the run goes on in a new process), the endless one as timeout (the run restarts
// past it), the run completes, and the correct variants measured after the faults are verified
// and timed as in a run without any fault.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "cuda/driver.h"
#include "daemon_util.h"
#include "db/store.h"
#include "test_util.h"

namespace gputune {
namespace {

using nlohmann::json;

constexpr const char* kFaultyKernel = R"(
// fault: 0 correct, 1 a write far out of bounds, 2 __trap(), 3 a loop that never ends
__global__ void faulty(float* c, const float* a, int n) {
  const int i = blockIdx.x * block_size_x + threadIdx.x;
#if fault == 1
  if (i == 0) c[(size_t)1 << 38] = 1.0f;  // 1 TiB past the buffer: unmapped
#elif fault == 2
  if (i == 0) __trap();
#elif fault == 3
  if (i == 0) {
    volatile const int* bits = reinterpret_cast<volatile const int*>(a);
    while (bits[0] != 0x7fffffff) {  // a NaN pattern; the inputs are in [0, 1)
    }
  }
#endif
  if (i < n) c[i] = 2.0f * a[i];
})";

/// faulty.cu and job.json in `dir`: block_size_x x fault, in one context of 1M elements.
std::string faulty_job(const test::TempDir& dir, const std::string& faults) {
  test::write_file(dir / "faulty.cu", kFaultyKernel);
  json job = {
      {"General", {{"BenchmarkName", "faulty"}, {"OutputFormat", "JSON"}}},
      {"ConfigurationSpace",
       {{"TuningParameters",
         {{{"Name", "block_size_x"}, {"Type", "int"}, {"Values", "[128, 256]"}, {"Default", 128}},
          {{"Name", "fault"}, {"Type", "int"}, {"Values", faults}, {"Default", 0}}}},
        {"Conditions", json::array()}}},
      {"KernelSpecification",
       {{"Language", "CUDA"},
        {"KernelName", "faulty"},
        {"KernelFile", "faulty.cu"},
        {"LocalSize", {{"X", "block_size_x"}, {"Y", "1"}, {"Z", "1"}}},
        {"GlobalSize",
         {{"X", "(ProblemSize[0] + block_size_x - 1) // block_size_x"}, {"Y", "1"}, {"Z", "1"}}},
        {"GlobalSizeType", "CUDA"},
        {"Arguments",
         {{{"Name", "c"},
           {"Type", "float"},
           {"MemoryType", "Vector"},
           {"AccessType", "WriteOnly"},
           {"Size", "ProblemSize[0]"},
           {"FillType", "Constant"},
           {"FillValue", 0.0},
           {"Output", 1}},
          {{"Name", "a"},
           {"Type", "float"},
           {"MemoryType", "Vector"},
           {"AccessType", "ReadOnly"},
           {"Size", "ProblemSize[0]"},
           {"FillType", "Random"},
           {"FillValue", 1.0}},
          {{"Name", "n"},
           {"Type", "int32"},
           {"MemoryType", "Scalar"},
           {"FillType", "Constant"},
           {"FillValue", "ProblemSize[0]"}}}}}},
      {"GPUTune",
       {{"Contexts", {{{"Name", "1M"}, {"ProblemSize", {1048576}}}}},
        {"Search", {{"Strategy", "brute_force"}}},
        {"Measurement", {{"Repeats", 10}, {"WarmUp", 2}}}}}};
  test::write_file(dir / "job.json", job.dump(1));
  return (dir / "job.json").string();
}

/// Each configuration's first-pass measurement of run 1: status, reason, time.
std::map<std::string, db::MeasurementRow> by_config(const std::string& db) {
  std::map<std::string, db::MeasurementRow> out;
  for (auto& m : db::Store(db).measurements(1))
    if (m.reason.rfind("re-measurement", 0) != 0) {
      EXPECT_EQ(out.count(m.config_key), 0u) << m.config_key << " measured twice";
      out[m.config_key] = m;
    }
  return out;
}

TEST(GpuFaults, OutOfBoundsTrapAndEndlessVariantsAreStoredAndTheOthersAreUnaffected) {
  const auto& d = cuda::Driver::instance();
  if (!d.available()) GTEST_SKIP() << "no CUDA device: " << d.unavailable_reason();
  test::TempDir dir, clean;
  const std::string db = (dir / "g.db").string(), clean_db = (clean / "g.db").string();
  auto r = test::run_gputune("run '" + faulty_job(dir, "[0, 1, 2, 3]") + "' --db '" + db +
                             "' --cache-dir '" + (dir / "cache").string() + "' --kernel-timeout 5");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("restarting"), std::string::npos) << r.out;  // past the endless one
  // past each that lost the context: CUDA cannot go on in the process that ran it
  EXPECT_NE(r.out.find("lost the CUDA context (stored as runtime); going on in a new process"),
            std::string::npos)
      << r.out;
  auto c = test::run_gputune("run '" + faulty_job(clean, "[0]") + "' --db '" + clean_db +
                             "' --cache-dir '" + (clean / "cache").string() + "'");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  const auto faulted = by_config(db), alone = by_config(clean_db);
  ASSERT_EQ(faulted.size(), 8u) << r.out;
  for (const char* block : {"128", "256"}) {
    const std::string b = block;
    const auto& oob = faulted.at(b + ",1");
    EXPECT_EQ(oob.status, db::Status::kRuntime) << oob.reason;
    EXPECT_NE(oob.reason.find("the CUDA context is lost"), std::string::npos) << oob.reason;
    const auto& trap = faulted.at(b + ",2");
    EXPECT_EQ(trap.status, db::Status::kRuntime) << trap.reason;
    EXPECT_NE(trap.reason.find("the CUDA context is lost"), std::string::npos) << trap.reason;
    const auto& endless = faulted.at(b + ",3");
    EXPECT_EQ(endless.status, db::Status::kTimeout) << endless.reason;
    EXPECT_NE(endless.reason.find("hung"), std::string::npos) << endless.reason;
    // The correct variant: verified, and timed as in a run of it alone (within a factor 1.5;
    // the 256-thread one is measured after the faults, resets and a restart).
    const auto& ok = faulted.at(b + ",0");
    ASSERT_EQ(ok.status, db::Status::kCorrect) << ok.reason;
    const auto& ref = alone.at(b + ",0");
    ASSERT_EQ(ref.status, db::Status::kCorrect) << ref.reason;
    ASSERT_TRUE(ok.time_ms && ref.time_ms);
    EXPECT_LT(*ok.time_ms, 1.5 * *ref.time_ms) << b;
    EXPECT_GT(*ok.time_ms, *ref.time_ms / 1.5) << b;
  }
  EXPECT_EQ(db::Store(db).run(1)->status, db::RunStatus::kDone);
  EXPECT_EQ(db::Store(db).winners("faulty").size(), 1u);
}

// The same out-of-bounds and trapping variants submitted to `gputune serve`: each ends its
// worker's CUDA context, the worker stores it and ends, and the supervisor's new worker resumes
// the job, which completes with the correct variants verified and a winner. The lost contexts
// cost no attempts (a job fails after 20 worker deaths).
TEST(GpuFaults, TheDaemonsWorkerGoesOnPastEachLostContext) {
  const auto& d = cuda::Driver::instance();
  if (!d.available()) GTEST_SKIP() << "no CUDA device: " << d.unavailable_reason();
  test::TempDir dir;
  const std::string db = (dir / "g.db").string();
  test::Daemon daemon(db, {"--cache-dir", (dir / "cache").string()});
  ASSERT_FALSE(daemon.url().empty()) << daemon.output();
  auto r = test::run_gputune("submit '" + faulty_job(dir, "[0, 1, 2]") + "' --server " +
                             daemon.url() + " --token " + daemon.token());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto id = json::parse(r.out.substr(r.out.find('{')))["id"].get<std::int64_t>();
  const json item = daemon.wait_for_job(id, 120);
  ASSERT_EQ(item["status"], "done") << item.dump();
  EXPECT_EQ(item["attempts"], 1) << item.dump();
  db::Store store(db);
  std::map<std::string, db::MeasurementRow> first;
  for (auto& m : store.measurements(item["run_id"].get<std::int64_t>()))
    if (m.reason.rfind("re-measurement", 0) != 0) {
      EXPECT_EQ(first.count(m.config_key), 0u) << m.config_key << " measured twice";
      first[m.config_key] = m;
    }
  ASSERT_EQ(first.size(), 6u);
  for (const char* block : {"128", "256"}) {
    const std::string b = block;
    for (const char* fault : {",1", ",2"}) {
      const auto& m = first.at(b + fault);
      EXPECT_EQ(m.status, db::Status::kRuntime) << m.config_key << ": " << m.reason;
      EXPECT_NE(m.reason.find("the CUDA context is lost"), std::string::npos) << m.reason;
    }
    EXPECT_EQ(first.at(b + ",0").status, db::Status::kCorrect) << first.at(b + ",0").reason;
  }
  EXPECT_EQ(store.winners("faulty").size(), 1u);
  EXPECT_EQ(daemon.stop(), 0);
}

}  // namespace
}  // namespace gputune
