// Starting `gputune` on the fake driver (tests/fake_cuda) as a process a test can kill, and
// checking a database it wrote: shared by the tests that kill runs, batches and daemons.
// Needs FAKE_CUDA_DIR and GPUTUNE_BINARY (tests/CMakeLists.txt).
#pragma once

#include <signal.h>
#include <sqlite3.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace gputune::test {

/// Starts `gputune ARGS` on the fake driver in a process group of its own (as a shell's job: a
/// test can signal and end all of it), stdout and stderr into `log` (appended to with `append`),
/// SIGINT at its default, with `env` set (the fake driver's own switches).
inline pid_t start_in_group(const std::string& log, const std::vector<std::string>& args,
                            const std::vector<std::pair<std::string, std::string>>& env = {},
                            bool append = false) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    setenv("LD_LIBRARY_PATH", FAKE_CUDA_DIR, 1);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    signal(SIGINT, SIG_DFL);
    if (!std::freopen(log.c_str(), append ? "a" : "w", stdout) ||
        dup2(fileno(stdout), STDERR_FILENO) < 0)
      _exit(126);
    std::vector<char*> argv{const_cast<char*>(GPUTUNE_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(GPUTUNE_BINARY, argv.data());
    _exit(127);
  }
  if (pid > 0) setpgid(pid, pid);
  return pid;
}

/// `PRAGMA integrity_check`'s answer for the database at `path` ("cannot open" when it cannot).
inline std::string integrity(const std::string& path) {
  sqlite3* h = nullptr;
  std::string out = "cannot open";
  if (sqlite3_open_v2(path.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(h, 5000);
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
      out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return out;
}

}  // namespace gputune::test
