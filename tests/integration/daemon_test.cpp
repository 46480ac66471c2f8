// `gputune serve` end to end: the queue, workers (on the fake driver), crash and hang recovery,
// restart and resume, cancellation, the write token, and the API's validation.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <set>

#include "daemon_util.h"
#include "db/store.h"
#include "variants/hash.h"

namespace gputune {
namespace {

using nlohmann::json;

const std::string kFakeEnv = std::string("LD_LIBRARY_PATH=") + FAKE_CUDA_DIR;

std::string job_file(const test::TempDir& dir, const json& contexts,
                     const std::string& name = "job.json") {
  auto job = json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  job["GPUTune"]["Contexts"] = contexts;
  job["GPUTune"]["Measurement"] = {{"Repeats", 5}, {"WarmUp", 1}};
  test::write_file(dir / "vector_add.cu", test::read_file(test::examples_dir() / "vector_add.cu"));
  test::write_file(dir / name, job.dump());
  return (dir / name).string();
}

std::int64_t submit(const test::Daemon& d, const std::string& job) {
  auto r = test::run_gputune("submit '" + job + "' --server " + d.url() + " --token " + d.token());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto pos = r.out.find('{');
  if (pos == std::string::npos) return -1;
  return json::parse(r.out.substr(pos))["id"].get<std::int64_t>();
}

/// Every (context, variant) of a run is measured once in the first pass (re-measurements aside).
void expect_each_variant_once(db::Store& store, std::int64_t run) {
  std::map<std::pair<std::int64_t, std::int64_t>, int> seen;
  for (auto& m : store.measurements(run))
    if (m.reason.rfind("re-measurement", 0) != 0) seen[{m.context_id, m.variant_id}]++;
  for (auto& [k, n] : seen) EXPECT_EQ(n, 1) << "context " << k.first << " variant " << k.second;
}

TEST(Daemon, TunesASubmittedJobAndRecoversFromCrashesAndHangs) {
  test::TempDir dir;
  std::string db = (dir / "g.db").string();
  test::Daemon d(db, {"--kernel-timeout", "2", "--cache-dir", (dir / "cache").string()},
                 {kFakeEnv, "FAKE_CUDA_CRASH_BLOCK=64", "FAKE_CUDA_HANG_BLOCK=32"});
  ASSERT_FALSE(d.url().empty()) << d.output();
  EXPECT_NE(d.output().find("1 worker(s), one per GPU"), std::string::npos) << d.output();
  // The allocator the build chose (GPUTUNE_JEMALLOC): the daemon's latency under load rests on it.
  if (GPUTUNE_EXPECT_JEMALLOC)
    EXPECT_NE(d.output().find("; jemalloc 5."), std::string::npos) << d.output();
  else  // glibc's, or a sanitizer's in the checking build
    EXPECT_EQ(d.output().find("jemalloc"), std::string::npos) << d.output();
  EXPECT_NE(d.output().find("write token (printed only now"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(stat((db + ".token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  std::int64_t id = submit(d, job_file(dir, {{4096}}));
  json item = d.wait_for_job(id, 90);
  ASSERT_EQ(item["status"], "done") << item.dump();
  db::Store store(db);
  std::int64_t run = item["run_id"].get<std::int64_t>();
  int crashed = 0, hung = 0, lost = 0;
  for (auto& m : store.measurements(run)) {
    auto p = json::parse(m.params_json);
    if (p["block_size_x"] == 1024) {  // the fake driver's sticky fault: the worker ends, anew
      ++lost;
      EXPECT_EQ(m.status, db::Status::kRuntime);
      EXPECT_NE(m.reason.find("the CUDA context is lost"), std::string::npos) << m.reason;
    }
    if (p["block_size_x"] == 64) {
      ++crashed;
      EXPECT_EQ(m.status, db::Status::kRuntime);
      EXPECT_NE(m.reason.find("killed by signal 6"), std::string::npos) << m.reason;
    }
    if (p["block_size_x"] == 32) {
      ++hung;
      EXPECT_EQ(m.status, db::Status::kTimeout);
      EXPECT_NE(m.reason.find("per-kernel limit"), std::string::npos) << m.reason;
    }
  }
  EXPECT_EQ(crashed, 4);
  EXPECT_EQ(hung, 4);
  EXPECT_EQ(lost, 4);
  // Each crash and hang cost an attempt; a lost context, which the worker ends itself after
  // storing the variant, does not (the first claim is the first attempt).
  EXPECT_EQ(item["attempts"], 1 + crashed + hung) << item.dump();
  expect_each_variant_once(store, run);
  auto best = d.get("/api/best?kernel=vector_add&context=4096");
  ASSERT_TRUE(best.is_array()) << best.dump();
  EXPECT_EQ(best[0]["key"], "128,2");
  EXPECT_EQ(d.stop(), 0);
}

TEST(Daemon, ASubmittedJobTakesTheHeadersAndInputsItReadsAlong) {
  // Submitted from a project folder and run by a worker elsewhere: the headers the kernel
  // includes with quotes (in a subfolder, and through a relative -I) and its BinaryRaw input and
  // reference travel with the job. The project is deleted after submitting, as if the daemon ran
  // on another machine, and the daemon's working directory is not the project's.
  test::TempDir dir, project;
  const std::string db = (dir / "g.db").string();
  std::filesystem::create_directories(project.path() / "src" / "common");
  std::filesystem::create_directories(project.path() / "inc");
  std::filesystem::create_directories(project.path() / "data");
  std::string kernel = test::read_file(test::examples_dir() / "vector_add.cu");
  const std::string sum = "c[j] = a[j] + b[j]";
  ASSERT_NE(kernel.find(sum), std::string::npos);
  kernel.replace(kernel.find(sum), sum.size(), "c[j] = add2(a[j], b[j])");
  test::write_file(project / "src/vector_add.cu", "#include \"common/add.h\"\n" + kernel);
  test::write_file(project / "src/common/add.h",
                   "#include \"twice.h\"\n"
                   "__device__ inline float add2(float x, float y) { return TWICE(x) + y - x; }\n");
  test::write_file(project / "inc/twice.h", "#define TWICE(x) (2.0f * (x))\n");
  const int n = 4096;
  std::vector<float> a(n), expected(n);
  for (int i = 0; i < n; ++i) a[i] = 0.25f * static_cast<float>(i % 97), expected[i] = a[i] + 1.0f;
  test::write_file(project / "data/a.bin",
                   std::string(reinterpret_cast<const char*>(a.data()), n * sizeof(float)));
  test::write_file(project / "data/c.bin",
                   std::string(reinterpret_cast<const char*>(expected.data()), n * sizeof(float)));
  auto job = json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  auto& ks = job["KernelSpecification"];
  ks["KernelFile"] = "src/vector_add.cu";
  ks["CompilerOptions"] = {"-I", "inc"};  // relative to where `submit` runs, as Kernel Tuner has it
  ks["Arguments"][1] = {{"Name", "a"},
                        {"Type", "float"},
                        {"MemoryType", "Vector"},
                        {"Size", "ProblemSize[0]"},
                        {"FillType", "BinaryRaw"},
                        {"DataSource", "data/a.bin"}};
  ks["Arguments"][2]["FillType"] = "Constant";
  ks["Arguments"][2]["FillValue"] = 1.0;
  ks["ReferenceArguments"] = {{{"Name", "c_ref"},
                               {"TargetName", "c"},
                               {"FillType", "BinaryRaw"},
                               {"DataSource", "data/c.bin"},
                               {"ValidationMethod", "AbsoluteDifference"},
                               {"ValidationThreshold", 1e-6}}};
  job["GPUTune"]["Contexts"] = {{n}};
  job["GPUTune"]["Measurement"] = {{"Repeats", 3}, {"WarmUp", 1}};
  test::write_file(project / "job.json", job.dump(1));

  std::int64_t id = -1;
  {
    test::Daemon idle(db, {"--no-gpu"});
    // An input that is not there is this machine's to fix: nothing is queued.
    std::filesystem::rename(project / "data/a.bin", project / "data/a.moved");
    auto missing = test::run_command("cd '" + project.path().string() +
                                     "' && '" GPUTUNE_BINARY "' submit job.json --server " +
                                     idle.url() + " --token " + idle.token());
    EXPECT_EQ(missing.exit_code, 2) << missing.out;
    EXPECT_NE(missing.out.find("Arguments[1] (a).DataSource"), std::string::npos) << missing.out;
    EXPECT_TRUE(idle.get("/api/queue").empty());
    std::filesystem::rename(project / "data/a.moved", project / "data/a.bin");
    auto r = test::run_command("cd '" + project.path().string() +
                               "' && '" GPUTUNE_BINARY "' submit job.json --server " + idle.url() +
                               " --token " + idle.token());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto reply = json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(reply["files"], 4) << r.out;  // two headers, two inputs
    id = reply["id"].get<std::int64_t>();
    EXPECT_EQ(idle.stop(), 0);
  }
  {
    db::Store store(db);
    std::set<std::string> sent;
    for (auto& f : store.queue_files(id)) sent.insert(f.path);
    const std::string root = std::filesystem::canonical(project.path()).string();
    EXPECT_EQ(sent, (std::set<std::string>{root + "/data/a.bin", root + "/data/c.bin",
                                           root + "/inc/twice.h", root + "/src/common/add.h"}));
  }
  std::filesystem::remove_all(project.path());
  {
    test::Daemon worker(db, {"--cache-dir", (dir / "cache").string()}, {kFakeEnv});
    json item = worker.wait_for_job(id, 90);
    ASSERT_EQ(item["status"], "done") << item.dump();
    db::Store store(db);
    int correct = 0;
    for (auto& m : store.measurements(item["run_id"].get<std::int64_t>()))
      correct += m.status == db::Status::kCorrect;
    EXPECT_GT(correct, 10) << "the outputs match the reference that travelled with the job";
    EXPECT_TRUE(store.queue_files(id).empty()) << "a finished job's copies are dropped";
  }
}

// A job whose paths lead out of the worker's folder as far as the API lets them (its job file
// and files at absolute paths of this machine, a KernelFile that climbs with `..`), with a link
// planted in that folder before the worker starts where the copy of the submitted folder goes:
// the job is tuned from its copies, and nothing is written outside the worker's folder.
TEST(Daemon, ASubmittedJobWritesNothingOutsideTheWorkersFolder) {
  namespace fs = std::filesystem;
  test::TempDir dir, outside_dir;
  const std::string db = (dir / "g.db").string();
  const fs::path outside = fs::canonical(outside_dir.path());
  fs::create_directories(outside / "target");
  // The worker's folder (app/daemon.cpp run_worker), and the link in it.
  const fs::path parent = fs::temp_directory_path() / ("gputune-jobs-" + std::to_string(geteuid()));
  ::mkdir(parent.c_str(), 0700);
  const fs::path root =
      parent / (sha256_hex(fs::absolute(db).lexically_normal().string()).substr(0, 16) + "-gpu0");
  fs::create_directories((root / outside.relative_path()).parent_path());
  fs::create_directory_symlink(outside / "target", root / outside.relative_path());

  auto doc = json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  std::string climb;
  for (int i = 0; i < 40; ++i) climb += "../";
  doc["KernelSpecification"]["KernelFile"] =
      climb + (outside / "vector_add.cu").relative_path().string();
  doc["GPUTune"]["Contexts"] = {{4096}};
  doc["GPUTune"]["Measurement"] = {{"Repeats", 3}, {"WarmUp", 1}};
  const json body = {
      {"document", doc},
      {"kernel_source", test::read_file(test::examples_dir() / "vector_add.cu")},
      {"job_file", (outside / "job.json").string()},
      {"cwd", outside.string()},
      {"files",
       {{{"path", (outside / "inc/extra.h").string()}, {"base64", base64_encode("#define E 1\n")}},
        {{"path", (outside / "target/t.h").string()},
         {"base64", base64_encode("#define T 1\n")}}}}};
  test::Daemon d(db, {"--cache-dir", (dir / "cache").string()}, {kFakeEnv});
  ASSERT_FALSE(d.url().empty()) << d.output();
  httplib::Client c(d.url());
  const httplib::Headers auth = {{"Authorization", "Bearer " + d.token()}};
  auto r = c.Post("/api/jobs", auth, body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  json item = d.wait_for_job(json::parse(r->body)["id"].get<std::int64_t>(), 90);
  EXPECT_EQ(item["status"], "done") << item.dump();
  std::set<std::string> there;
  for (auto& e : fs::recursive_directory_iterator(outside))
    there.insert(fs::relative(e.path(), outside).string());
  EXPECT_EQ(there, std::set<std::string>{"target"}) << "nothing written outside";
  // The worker empties its folder right after it records the job as finished.
  for (int i = 0; i < 50 && fs::exists(fs::symlink_status(root)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root))) << "the worker's folder goes with the job";
}

TEST(Daemon, QueueSurvivesRestartsAndInterruptedRunsResume) {
  test::TempDir dir;
  std::string db = (dir / "g.db").string();
  std::int64_t id;
  {
    test::Daemon idle(db, {"--no-gpu"});
    EXPECT_NE(idle.output().find("no workers (--no-gpu)"), std::string::npos);
    id = submit(idle, job_file(dir, {{1 << 16}, {1 << 17}}));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_EQ(idle.get("/api/queue")[0]["status"], "queued");
    EXPECT_EQ(idle.stop(), 0);
  }
  {
    // Each launch takes 10 ms: stop the daemon part-way through the run.
    test::Daemon busy(db, {"--cache-dir", (dir / "cache").string()},
                      {kFakeEnv, "FAKE_CUDA_SLOW_MS=10"});
    EXPECT_NE(busy.output().find("write token in"), std::string::npos)
        << "the token is printed only once";
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      auto q = busy.get("/api/queue");
      if (!q[0]["run_id"].is_null()) {
        auto run = busy.get("/api/runs/" + std::to_string(q[0]["run_id"].get<std::int64_t>()));
        if (run["done"].get<int>() > 0 || !run["counts"].empty()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(busy.stop(), 0);
  }
  db::Store store(db);
  auto item = store.queue_item(id);
  ASSERT_TRUE(item);
  EXPECT_EQ(item->status, db::QueueStatus::kQueued) << "an interrupted job goes back to the queue";
  ASSERT_TRUE(item->run_id);
  size_t before = store.measurements(*item->run_id).size();
  EXPECT_GT(before, 0u);
  EXPECT_LT(before, 48u);
  {
    test::Daemon again(db, {"--cache-dir", (dir / "cache").string()}, {kFakeEnv});
    auto done = again.wait_for_job(id, 60);
    EXPECT_EQ(done["status"], "done") << done.dump();
    EXPECT_EQ(done["run_id"], *item->run_id) << "the same run continues";
  }
  expect_each_variant_once(store, *item->run_id);
  EXPECT_EQ(store.winners("vector_add").size(), 2u);
}

TEST(Daemon, CancelAndWriteToken) {
  test::TempDir dir;
  test::Daemon d((dir / "g.db").string(), {"--no-gpu"});
  std::int64_t id = submit(d, job_file(dir, {{1024}}));
  auto bad =
      test::run_gputune("cancel " + std::to_string(id) + " --server " + d.url() + " --token wrong");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("HTTP 401"), std::string::npos) << bad.out;
  auto ok = test::run_gputune("cancel " + std::to_string(id) + " --server " + d.url() +
                              " --token " + d.token());
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("\"status\":\"cancelled\""), std::string::npos) << ok.out;
  auto again = test::run_gputune("cancel " + std::to_string(id) + " --server " + d.url() +
                                 " --token " + d.token());
  EXPECT_NE(again.out.find("HTTP 409"), std::string::npos) << again.out;
  auto missing = test::run_gputune("cancel 999 --server " + d.url() + " --token " + d.token());
  EXPECT_NE(missing.out.find("HTTP 404"), std::string::npos) << missing.out;
  auto unreachable = test::run_gputune("cancel 1 --server http://127.0.0.1:1 --token x");
  EXPECT_NE(unreachable.out.find("is `gputune serve` running?"), std::string::npos)
      << unreachable.out;
}

TEST(Daemon, CancellingARunningJobStopsItAtTheNextVariant) {
  test::TempDir dir;
  std::string db = (dir / "g.db").string();
  test::Daemon d(db, {"--cache-dir", (dir / "cache").string()}, {kFakeEnv, "FAKE_CUDA_SLOW_MS=20"});
  std::int64_t id = submit(d, job_file(dir, {{1 << 16}, {1 << 17}}));
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    auto q = d.get("/api/queue")[0];
    if (q["status"] == "running" && !q["run_id"].is_null() &&
        !d.get("/api/runs/" + std::to_string(q["run_id"].get<std::int64_t>()))["counts"].empty())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto r = test::run_gputune("cancel " + std::to_string(id) + " --server " + d.url() + " --token " +
                             d.token());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto item = d.wait_for_job(id, 30);
  EXPECT_EQ(item["status"], "cancelled") << item.dump();
  auto run = d.get("/api/runs/" + std::to_string(item["run_id"].get<std::int64_t>()));
  EXPECT_EQ(run["status"], "interrupted") << run.dump();
  db::Store store(db);
  EXPECT_LT(store.measurements(item["run_id"].get<std::int64_t>()).size(), 48u);
}

// The server's SIGTERM can reach a worker while NVRTC compiles for the first time in that
// process (tests/data/slow_compile keeps it busy about a second), when NVRTC's own handlers are
// installed; one of those would end the worker with exit code 4. The worker takes the signal
// itself: it stops as asked (exit 0) and its job goes back to the queue.
TEST(Daemon, AWorkerStoppedDuringNvrtcsFirstCompileRequeuesItsJob) {
  test::TempDir dir;
  const std::string db = (dir / "g.db").string(), log = (dir / "worker.txt").string();
  const auto data = test::source_dir() / "tests/data/slow_compile";
  db::QueueItem q;
  q.name = "slow", q.job_file = "slow.json", q.kernel_file = "slow.cu";
  q.document = json::parse(test::read_file(data / "slow.json")).dump();
  q.kernel_source = test::read_file(data / "slow.cu");
  db::Store store(db);
  const std::int64_t id = store.enqueue(q);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!std::freopen(log.c_str(), "w", stdout) || dup2(fileno(stdout), STDERR_FILENO) < 0)
      _exit(126);
    setenv("LD_LIBRARY_PATH", FAKE_CUDA_DIR, 1);
    // No cubin cache: NVRTC must compile.
    execl(GPUTUNE_BINARY, GPUTUNE_BINARY, "worker", "--db", db.c_str(), "--device", "0",
          "--cache-dir", "-", static_cast<char*>(nullptr));
    _exit(127);
  }
  bool claimed = false;
  for (int i = 0; i < 1000 && !claimed; ++i) {
    claimed = store.queue_item(id)->status == db::QueueStatus::kRunning;
    if (!claimed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (claimed) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into the compile
  kill(pid, SIGTERM);
  const auto status = test::wait_for_child(pid, 30);
  const std::string out = test::read_file(log);
  ASSERT_TRUE(claimed) << out;
  ASSERT_TRUE(status) << "still running 30 s after SIGTERM: " << out;
  ASSERT_TRUE(WIFEXITED(*status)) << out;
  EXPECT_EQ(WEXITSTATUS(*status), 0) << out;
  EXPECT_NE(out.find("job " + std::to_string(id) + " queued"), std::string::npos) << out;
  EXPECT_EQ(store.queue_item(id)->status, db::QueueStatus::kQueued);
}

TEST(Daemon, ApiValidatesEverything) {
  test::TempDir dir;
  test::Daemon d((dir / "g.db").string(), {"--no-gpu"});
  httplib::Client c(d.url());
  httplib::Headers auth = {{"Authorization", "Bearer " + d.token()}};
  auto expect_json_error = [&](httplib::Result r, int status, const std::string& field) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    auto j = json::parse(r->body);
    EXPECT_TRUE(j.contains("error")) << r->body;
    if (!field.empty()) {
      EXPECT_EQ(j["field"], field) << r->body;
    }
  };
  expect_json_error(c.Get("/api/runs?limit=0"), 400, "limit");
  expect_json_error(c.Get("/api/runs?limit=abc"), 400, "limit");
  expect_json_error(c.Get("/api/runs?offset=-5"), 400, "offset");
  expect_json_error(c.Get("/api/runs/99999999999999999999"), 400, "id");
  expect_json_error(c.Get("/api/runs/1"), 404, "id");
  expect_json_error(c.Get("/api/kernels/7"), 404, "id");
  expect_json_error(c.Get("/api/best"), 400, "kernel");
  expect_json_error(c.Get("/api/queue?limit=5000"), 400, "limit");
  expect_json_error(c.Get("/api/nothing"), 404, "");
  expect_json_error(c.Post("/api/jobs", "{}", "application/json"), 401, "");
  expect_json_error(c.Post("/api/jobs", httplib::Headers{{"Authorization", "Bearer nope"}}, "{}",
                           "application/json"),
                    401, "");
  expect_json_error(c.Post("/api/jobs", auth, "{not json", "application/json"), 400, "body");
  expect_json_error(
      c.Post("/api/jobs", auth, R"({"document": {}, "kernel_source": ""})", "application/json"),
      400, "");
  json doc = json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  doc["ConfigurationSpace"]["Conditions"] = {
      {{"Expression", "block_size_x > 4096"}, {"Parameters", {"block_size_x"}}}};
  expect_json_error(
      c.Post("/api/jobs", auth, json({{"document", doc}, {"kernel_source", "x"}}).dump(),
             "application/json"),
      400, "ConfigurationSpace.Conditions");
  // A space too large to build is refused at once, not walked in the request.
  doc = json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  for (int p = 0; p < 6; ++p)
    doc["ConfigurationSpace"]["TuningParameters"].push_back(
        {{"Name", "p" + std::to_string(p)}, {"Type", "int"}, {"Values", "list(range(1000))"}});
  expect_json_error(
      c.Post("/api/jobs", auth, json({{"document", doc}, {"kernel_source", "x"}}).dump(),
             "application/json"),
      400, "ConfigurationSpace.TuningParameters");
  // A kernel source that cannot define the job's KernelName.
  expect_json_error(c.Post("/api/jobs", auth,
                           json({{"document", json::parse(test::read_file(test::examples_dir() /
                                                                          "vector_add.json"))},
                                 {"kernel_source", "__global__ void vectoradd(float* c) {}"}})
                               .dump(),
                           "application/json"),
                    400, "KernelSpecification.KernelName");
  for (const char* key : {"name", "job_file"}) {
    json body = {
        {"document", json::parse(test::read_file(test::examples_dir() / "vector_add.json"))},
        {"kernel_source", "x"},
        {key, 42}};
    expect_json_error(c.Post("/api/jobs", auth, body.dump(), "application/json"), 400, key);
  }
  // Files that travel with a job: absolute, normal paths, each once, in base64.
  json valid_doc = json::parse(test::read_file(test::examples_dir() / "vector_add.json"));
  const std::string valid_source = test::read_file(test::examples_dir() / "vector_add.cu");
  auto with_files = [&](const json& files) {
    return json({{"document", valid_doc}, {"kernel_source", valid_source}, {"files", files}})
        .dump();
  };
  const std::string h = base64_encode("#define X 1\n");
  for (auto& [files, field] : std::vector<std::pair<json, std::string>>{
           {json::object(), "files"},
           {json::array({"x.h"}), "files[0]"},
           {json::array({{{"path", "/p/x.h"}}}), "files[0]"},
           {json::array({{{"path", "p/x.h"}, {"base64", h}}}), "files[0].path"},
           {json::array({{{"path", "/p/../etc/x.h"}, {"base64", h}}}), "files[0].path"},
           {json::array({{{"path", "/p//x.h"}, {"base64", h}}}), "files[0].path"},
           {json::array({{{"path", "/p/x.h"}, {"base64", h}}, {{"path", "/p/x.h"}, {"base64", h}}}),
            "files[1].path"},
           {json::array({{{"path", "/p/x.h"}, {"base64", "not base64!"}}}), "files[0].base64"}})
    expect_json_error(c.Post("/api/jobs", auth, with_files(files), "application/json"), 400, field);
  auto ok =
      c.Post("/api/jobs", auth, with_files(json::array({{{"path", "/p/x.h"}, {"base64", h}}})),
             "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 201) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["files"], 1);
  EXPECT_EQ(base64_decode(h), "#define X 1\n");
  EXPECT_EQ(base64_decode("YWI="), "ab");
  EXPECT_EQ(base64_decode("YWJj"), "abc");
  EXPECT_EQ(base64_decode(""), "");
  EXPECT_FALSE(base64_decode("YWJ").has_value());
  EXPECT_FALSE(base64_decode("YW J").has_value());
  // Static files come from memory: no path reaches the disk.
  for (const char* p : {"/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
                        "/app.js/../../../etc/passwd", "/etc/passwd"}) {
    auto r = c.Get(p);
    ASSERT_TRUE(r);
    EXPECT_NE(r->status, 200) << p;
    EXPECT_EQ(r->body.find("root:"), std::string::npos) << p;
  }
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
}

TEST(Daemon, RefusesATokenFileOthersCanRead) {
  test::TempDir dir;
  std::string db = (dir / "g.db").string();
  test::write_file(db + ".token", std::string(64, 'a'));
  chmod((db + ".token").c_str(), 0644);
  auto r = test::run_gputune("serve --db '" + db + "' --port 0 --no-gpu");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("chmod 600"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gputune
