#include "web/thread_sched.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace gputune::web {

namespace {

/// The thread's own schedstat file, opened once per thread (it names the thread that opened it).
struct SchedstatFile {
  int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  ~SchedstatFile() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

long long thread_run_queue_ns() {
  thread_local SchedstatFile file;
  if (file.fd < 0) return -1;
  char text[96];
  const ssize_t n = pread(file.fd, text, sizeof text - 1, 0);
  if (n <= 0) return -1;
  text[n] = '\0';
  // "on-CPU-ns run-queue-ns timeslices"
  char* rest = nullptr;
  std::strtoll(text, &rest, 10);
  if (rest == text) return -1;
  char* end = nullptr;
  const long long waited = std::strtoll(rest, &end, 10);
  return end == rest ? -1 : waited;
}

}  // namespace gputune::web
