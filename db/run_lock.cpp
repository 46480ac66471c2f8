/** \file db/run_lock.cpp
 * Owns: RunLock (db/run_lock.h). */
#include "db/run_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "db/sqlite.h"

namespace gputune::db {

std::string run_lock_path(const std::string& db_path) { return db_path + ".runs.lock"; }

namespace {

bool try_lock(int fd, std::int64_t run_id) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(run_id);
  fl.l_len = 1;
  fl.l_pid = 0;  // must be 0 for OFD locks
  return fcntl(fd, F_OFD_SETLK, &fl) == 0;
}

}  // namespace

RunLock RunLock::acquire(const std::string& db_path, std::int64_t run_id, double wait_s,
                         const std::function<void()>& on_wait,
                         const std::function<bool()>& give_up) {
  RunLock lock;
  if (db_path.empty() || db_path == ":memory:" || db_path.rfind("file:", 0) == 0) return lock;
  const int fd = ::open(run_lock_path(db_path).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return lock;  // a folder that cannot be written: the run fails on its own
  lock.fd_ = fd;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  bool told = false;
  while (!try_lock(fd, run_id)) {
    if (errno != EAGAIN && errno != EACCES && errno != EINTR) {
      ::close(fd);  // a file system without these locks (some network ones): no claim
      lock.fd_ = -1;
      return lock;
    }
    if (std::chrono::steady_clock::now() >= until)
      throw DbError("run " + std::to_string(run_id) + " of " + db_path +
                    " is still being measured by another process (it holds " +
                    run_lock_path(db_path) + " after " + std::to_string(wait_s) +
                    " s). Fix: wait for that process to end, or stop it, then resume");
    if (give_up && give_up())
      throw DbError("stopped while waiting for another process to finish run " +
                    std::to_string(run_id) + " of " + db_path + " (nothing was changed)");
    if (!told && on_wait) on_wait();
    told = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return lock;
}

RunLock& RunLock::operator=(RunLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace gputune::db
