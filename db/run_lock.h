/** \file db/run_lock.h
 * Owns: one process's exclusive claim on a run while it measures, so that a resume never runs
 * beside a process still finishing the same run (the child of a `gputune run` killed with
 * SIGKILL is told to stop, finishes and stores the variant in flight, and only then exits; a
 * resume started meanwhile would measure that variant again). An open-file-description lock
 * (fcntl F_OFD_SETLK) on byte `run_id` of `<database>.runs.lock`: per run, released by the kernel
 * when the process ends however it ends, never inherited across exec.
 * Must not: read or write the database. */
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace gputune::db {

class RunLock {
 public:
  RunLock() = default;
  /// Claims run `run_id` of the database at `db_path`, waiting up to `wait_s` seconds while
  /// another process holds it (`on_wait` is called once, when the wait begins; `give_up`, when
  /// given, is asked while waiting: this process was told to stop). Throws DbError naming the run
  /// and the fix when the other process does not let go, or when it gave up. Never call it inside
  /// a write transaction: the other process needs the database to finish. Without a lock file
  /// (a database in memory, a folder that cannot be written) it claims nothing and says so in
  /// `held()`.
  static RunLock acquire(const std::string& db_path, std::int64_t run_id, double wait_s,
                         const std::function<void()>& on_wait = {},
                         const std::function<bool()>& give_up = {});
  RunLock(RunLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RunLock& operator=(RunLock&& o) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// The lock file of a database: `<db_path>.runs.lock`.
std::string run_lock_path(const std::string& db_path);

}  // namespace gputune::db
