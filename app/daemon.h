/** \file app/daemon.h
 * Owns: the daemon's process model. `serve` runs the HTTP server (web/) and supervises one worker
 * process per visible GPU; `run_worker` is such a process: it takes jobs from the queue in the
 * database and runs the pipeline on its GPU. A kernel that crashes or hangs kills at most its
 * worker: the supervisor records the variant it was measuring as failed (runtime, or timeout after
 * the per-kernel limit), puts the job back in the queue, and starts a new worker, which resumes the
 * run without repeating finished measurements.
 * Must not: write SQL (db/ does) or parse HTTP (web/ does). */
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace gputune::app {

struct ServeOptions {
  std::string db_path;
  std::string bind = "127.0.0.1";
  int port = 8080;
  double kernel_timeout_s = 120;  ///< a measurement running longer gets its worker killed
  std::filesystem::path cache_dir;
  bool no_gpu = false;    ///< start no workers (serve the dashboard only)
  std::string self_exe;   ///< the gputune binary (workers are `gputune worker`)
  int max_attempts = 20;  ///< a job whose worker died this often is failed
  /// the workers' --compile-nice (tuner::set_compile_nice); none: their default
  std::optional<int> compile_nice;
  /// nice steps of the server's background rebuilds of slow cached results
  /// (web::ServerOptions::rebuild_nice)
  int rebuild_nice = 19;
};

/// Blocks until SIGTERM or SIGINT; returns the exit code.
int serve(const ServeOptions& options);

struct WorkerOptions {
  std::string db_path;
  int device = 0;
  std::filesystem::path cache_dir;
};

/// A worker process: runs queued jobs on one GPU until SIGTERM.
int run_worker(const WorkerOptions& options);

/// The write token stored next to the database (DB.token, mode 0600), created on first use.
/// `created` tells whether it was made now (it is printed only then).
std::string load_or_create_token(const std::string& db_path, bool& created);

}  // namespace gputune::app
