#include "app/daemon.h"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "app/job_files.h"
#include "cuda/cache_admin.h"
#include "cuda/driver.h"
#include "db/store.h"
#include "tuner/common/stop_signals.h"
#include "tuner/common/tuning_job.h"
#include "tuner/compile/compile_and_inspect.h"
#include "tuner/run/measurement_row.h"
#include "tuner/run/pipeline.h"
#include "tuner/tools/generate.h"
#include "variants/hash.h"
#include "web/server.h"

namespace gputune::app {

// jemalloc's control entry point: defined where the binary runs on jemalloc (GPUTUNE_JEMALLOC in
// CMakeLists.txt, or preloaded), null otherwise.
extern "C" int mallctl(const char*, void*, size_t*, void*, size_t) __attribute__((weak));

namespace {

std::atomic<bool> g_stop{false};  // a worker was asked to stop

/// The allocator this process runs on, for the daemon's first line: "jemalloc 5.3.0", "glibc
/// malloc", or AddressSanitizer's in the checking build.
std::string allocator_name() {
#if defined(__SANITIZE_ADDRESS__)
  return "AddressSanitizer's malloc";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return "AddressSanitizer's malloc";
#endif
#endif
  if (!mallctl) return "glibc malloc";
  const char* version = nullptr;
  size_t size = sizeof version;
  if (mallctl("version", static_cast<void*>(&version), &size, nullptr, 0) != 0 || !version)
    return "jemalloc";
  const std::string v = version;  // "5.3.0-0-g54eaed1d..."
  return "jemalloc " + v.substr(0, v.find('-'));
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string random_token() {
  std::random_device rd;
  std::ostringstream s;
  for (int i = 0; i < 8; ++i) s << std::hex << rd();
  std::string t = s.str();
  while (t.size() < 64) t += "0";
  return t.substr(0, 64);
}

}  // namespace

std::string load_or_create_token(const std::string& db_path, bool& created) {
  std::string path = db_path + ".token";
  created = false;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd >= 0) {
    std::string t = random_token();
    bool ok = ::write(fd, t.data(), t.size()) == static_cast<ssize_t>(t.size());
    ::close(fd);
    if (!ok) throw std::runtime_error("cannot write the token file " + path);
    created = true;
    return t;
  }
  if (errno != EEXIST)
    throw std::runtime_error("cannot create the token file " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077))
    throw std::runtime_error(path + " is readable by others (mode " +
                             std::to_string(st.st_mode & 0777) + "); fix: chmod 600 " + path);
  std::ifstream in(path);
  std::string t;
  std::getline(in, t);
  if (t.size() < 32)
    throw std::runtime_error(path + " does not hold a token; delete it to make a new one");
  return t;
}

// ---------------------------------------------------------------------------------------------
// Worker

int run_worker(const WorkerOptions& o) {
  // SIGTERM (the server stopping) or SIGINT (Ctrl-C on its terminal; the server's SIGTERM follows):
  // finish the measurement in hand, then stop. Taken by a watcher thread, so the handlers NVRTC
  // installs during its first compile do not decide (tuner/common/stop_signals.h).
  tuner::watch_stop_signals(
      "", [] { g_stop = true; }, /*second_quits=*/false);
  std::string name = "gpu" + std::to_string(o.device);
  db::Store store(o.db_path);
  // One folder per daemon (its database) and worker: two daemons on one machine never share it;
  // under a folder of this user's own (write_out refuses one that others can write).
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("gputune-jobs-" + std::to_string(geteuid())) /
      (sha256_hex(std::filesystem::absolute(o.db_path).lexically_normal().string()).substr(0, 16) +
       "-" + name);
  std::cerr << "gputune worker " << name << " (pid " << getpid() << "): waiting for jobs\n";
  while (!g_stop) {
    auto item = store.claim_next(name);
    if (!item) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      continue;
    }
    std::cerr << "gputune worker " << name << ": job " << item->id << " (" << item->name << ")\n";
    db::QueueStatus status = db::QueueStatus::kFailed;
    std::string message;
    bool context_lost = false;
    try {
      // The job, its kernel and the files they read, each at its submitting machine's path under
      // this worker's own folder (the same folder every time: cache keys stay the same).
      SubmittedJob sub{item->job_file, item->document, item->kernel_source, {}, item->client_cwd};
      for (auto& f : store.queue_files(item->id)) sub.files.push_back({f.path, f.bytes});
      Job job = load_job(write_out(root, sub));
      use_copies(job, root, item->client_cwd);
      tuner::prepare_naive(job);
      job.device_index = o.device;
      tuner::RunOptions ro;
      ro.db_path = o.db_path;
      ro.cache_dir = o.cache_dir;
      ro.resume_run = item->run_id;
      ro.on_run_started = [&](std::int64_t run) { store.set_queue_run(item->id, run); };
      ro.on_measure_start = [&](std::int64_t ctx, std::int64_t var) {
        store.set_in_flight(item->id, ctx, var);
      };
      ro.should_stop = [&] { return g_stop.load() || store.cancel_requested(item->id); };
      tuner::RunReport rep = run_job(job, ro);
      message = rep.message;
      context_lost = rep.context_lost;
      switch (rep.exit_code) {
        case tuner::kExitOk:
          status = db::QueueStatus::kDone;
          break;
        case tuner::kExitNoDevice:
          status = db::QueueStatus::kNoDevice;
          break;
        case tuner::kExitInterrupted:
          status = store.cancel_requested(item->id) ? db::QueueStatus::kCancelled
                                                    : db::QueueStatus::kQueued;
          break;
        default:
          status = db::QueueStatus::kFailed;
      }
    } catch (const std::exception& e) {
      message = e.what();
    }
    // Messages name the files as they were submitted, not the worker's copies.
    for (size_t at; (at = message.find(root.string())) != std::string::npos;)
      message.erase(at, root.string().size());
    if (context_lost) {
      // A variant lost this process's CUDA context (it is stored as runtime). CUDA cannot go on
      // here: the job goes back to the queue, not counted as an attempt, and this worker ends;
      // the supervisor starts a new one, which resumes the run without that variant.
      store.requeue_running(name, /*count_attempt=*/false);
    } else if (status == db::QueueStatus::kQueued) {
      store.requeue_running(name);  // shutting down: the next start resumes it
    } else {
      store.finish_queue(item->id, status, message);
    }
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
    std::cerr << "gputune worker " << name << ": job " << item->id << " " << status << ": "
              << message << "\n";
    cuda::trim_cache_after_use(tuner::cache_for(o.cache_dir).dir(), std::cerr);
    if (context_lost) return tuner::kExitInterrupted;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Supervisor

namespace {

struct WorkerProc {
  int device = 0;
  pid_t pid = -1;
  std::string name;
  std::string kill_reason;  // set when the supervisor killed it for a hang
  int restarts = 0;
};

pid_t spawn_worker(const ServeOptions& o, int device) {
  const pid_t server = getpid();
  // The command line is built before fork: the child of a threaded process must not allocate.
  const std::string dev = std::to_string(device), cache = o.cache_dir.string();
  const std::string nice = o.compile_nice ? std::to_string(*o.compile_nice) : "";
  std::vector<const char*> argv = {o.self_exe.c_str(), "worker",   "--db",
                                   o.db_path.c_str(),  "--device", dev.c_str()};
  if (!cache.empty()) argv.insert(argv.end(), {"--cache-dir", cache.c_str()});
  if (!nice.empty()) argv.insert(argv.end(), {"--compile-nice", nice.c_str()});
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    // The worker ends with the server however the server ends (kill -9 included): told to stop
    // (SIGTERM), it stores the measurement in hand, puts its job back in the queue and exits, so
    // a restarted server's worker resumes the run alone. Without this an orphaned worker went on
    // tuning unsupervised (no hang limit) beside the new one. (The signal comes when the thread
    // that forked ends: the main thread, or the supervisor thread, which ends only on shutdown,
    // when the workers are told to stop anyway.)
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != server) _exit(0);  // the server died before prctl
    sigset_t all;
    sigemptyset(&all);
    pthread_sigmask(SIG_SETMASK, &all, nullptr);
    execv(o.self_exe.c_str(), const_cast<char* const*>(argv.data()));
    std::perror("gputune: exec worker");
    _exit(127);
  }
  return pid;
}

/// Blames the variant a dead worker was measuring and puts its job back in the queue.
void handle_worker_death(db::Store& store, WorkerProc& w, int wait_status, int max_attempts) {
  std::string why =
      !w.kill_reason.empty() ? w.kill_reason
      : WIFSIGNALED(wait_status)
          ? "worker process killed by signal " + std::to_string(WTERMSIG(wait_status))
          : "worker process exited with code " + std::to_string(WEXITSTATUS(wait_status));
  const db::Status status = w.kill_reason.empty() ? db::Status::kRuntime : db::Status::kTimeout;
  for (auto& item : store.queue(1000, false)) {
    if (item.status != db::QueueStatus::kRunning || item.worker != w.name) continue;
    // The variant it last began to measure, unless that one is stored already: the worker died
    // after storing it and before beginning the next (its in-flight mark stays until then), or
    // while re-measuring a winner. Blaming it again would measure that pair twice.
    if (item.run_id && item.inflight_context_id && item.inflight_variant_id) {
      const std::pair<std::int64_t, std::int64_t> pair{*item.inflight_context_id,
                                                       *item.inflight_variant_id};
      const auto stored = store.measured_pairs(*item.run_id);
      if (std::find(stored.begin(), stored.end(), pair) == stored.end())
        store.add_measurement(tuner::measurement_row({*item.run_id, pair.first, pair.second},
                                                     status,
                                                     why + " while measuring this variant"));
    }
    if (item.attempts >= max_attempts) {
      store.finish_queue(
          item.id, db::QueueStatus::kFailed,
          "its worker died " + std::to_string(item.attempts) + " times; last: " + why);
    }
  }
  store.requeue_running(w.name);
  std::cerr << "gputune serve: " << w.name << " (pid " << w.pid << ") died: " << why
            << "; restarting it\n";
}

}  // namespace

int serve(const ServeOptions& o) {
  // The HTTP threads each took a glibc arena of their own and kept what selection rebuilds and
  // header renders freed: over 3 minutes of load the daemon grew from 268 to 580 MiB, and with 2
  // arenas it stayed at 277-280 MiB (bench/results/load-vm-2026-11-27.md). The workers are
  // processes of their own (exec), unaffected.
  mallopt(M_ARENA_MAX, 2);
  // Signals go to one watcher thread; every other thread blocks them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  db::Store store(o.db_path);
  auto resumed = store.requeue_running();
  bool created = false;
  std::string token = load_or_create_token(o.db_path, created);

  web::ServerOptions so;
  so.db_path = o.db_path, so.token = token, so.bind = o.bind, so.port = o.port;
  so.source_command = tuner::generate_command;  // a naive kernel's winner: its generate command
  so.rebuild_nice = o.rebuild_nice;
  web::Server server(so);
  int port = server.bind();

  std::vector<WorkerProc> workers;
  std::string gpu_note;
  if (o.no_gpu) {
    gpu_note = "no workers (--no-gpu)";
  } else if (const cuda::Driver& d = cuda::Driver::instance(); !d.available()) {
    gpu_note = "no workers: " + d.unavailable_reason() + "; jobs stay queued";
  } else {
    for (int i = 0; i < d.device_count(); ++i)
      workers.push_back({i, -1, "gpu" + std::to_string(i), "", 0});
    gpu_note = std::to_string(workers.size()) + " worker(s), one per GPU";
  }
  std::cout << "gputune serve: http://" << o.bind << ":" << port << "/ (database " << o.db_path
            << "; " << gpu_note << "; " << allocator_name() << ")\n";
  if (!resumed.empty())
    std::cout << "gputune serve: resuming " << resumed.size() << " interrupted job(s)\n";
  if (created)
    std::cout << "gputune serve: write token (printed only now, kept in " << o.db_path
              << ".token, mode 0600): " << token << "\n";
  else
    std::cout << "gputune serve: write token in " << o.db_path << ".token\n";
  std::cout.flush();

  for (auto& w : workers) w.pid = spawn_worker(o, w.device);

  std::atomic<bool> stopping{false};
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&set, &sig);
    stopping = true;
    server.stop();
  });
  std::thread supervisor([&] {
    db::Store s(o.db_path);
    while (!stopping) {
      for (auto& w : workers) {
        int st = 0;
        if (w.pid > 0 && waitpid(w.pid, &st, WNOHANG) == w.pid) {
          handle_worker_death(s, w, st, o.max_attempts);
          w.kill_reason.clear();
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          w.pid = stopping ? -1 : spawn_worker(o, w.device);
          ++w.restarts;
          continue;
        }
        for (auto& item : s.queue(1000, false))
          if (item.status == db::QueueStatus::kRunning && item.worker == w.name &&
              item.inflight_since && now_s() - *item.inflight_since > o.kernel_timeout_s &&
              w.kill_reason.empty()) {
            w.kill_reason = "measurement exceeded the per-kernel limit of " +
                            std::to_string(o.kernel_timeout_s) + " s; worker killed";
            kill(w.pid, SIGKILL);
          }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });

  server.run();  // returns after stop()
  stopping = true;
  if (watcher.joinable()) {
    pthread_kill(watcher.native_handle(),
                 SIGTERM);  // wakes sigwait if the server stopped by itself
    watcher.join();
  }
  supervisor.join();
  // Workers finish the measurement in hand, store it, put their job back in the queue, and exit.
  for (auto& w : workers)
    if (w.pid > 0) kill(w.pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (auto& w : workers) {
    while (w.pid > 0) {
      int st;
      pid_t r = waitpid(w.pid, &st, WNOHANG);
      if (r == w.pid || r < 0) break;
      if (std::chrono::steady_clock::now() > deadline) {
        kill(w.pid, SIGKILL);
        waitpid(w.pid, &st, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  store.requeue_running();
  std::cout << "gputune serve: stopped\n";
  return 0;
}

}  // namespace gputune::app
