// Starting `gputune serve` from tests, and talking to it over HTTP.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace gputune::test {

/// A `gputune serve` child process on a free port. Environment entries are added to the child's.
class Daemon {
 public:
  Daemon(const std::string& db, std::vector<std::string> extra_args = {},
         std::vector<std::string> env = {}) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      for (auto& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<std::string> args = {GPUTUNE_BINARY, "serve", "--db", db, "--port", "0"};
      args.insert(args.end(), extra_args.begin(), extra_args.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(GPUTUNE_BINARY, argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
    // The first line names the URL; the next ones the token.
    char line[4096];
    static const std::regex url_re(R"((http://127\.0\.0\.1:\d+)/)");
    while (std::fgets(line, sizeof line, out_)) {
      output_ += line;
      std::smatch m;
      std::string l(line);
      if (url_.empty() && std::regex_search(l, m, url_re)) url_ = m[1];
      if (l.find("write token") != std::string::npos) break;
    }
    token_ = read_file(db + ".token");
  }
  ~Daemon() { stop(); }

  const std::string& url() const { return url_; }
  const std::string& token() const { return token_; }
  const std::string& output() const { return output_; }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  /// SIGKILL (kill -9) and reap it: no shutdown of its own; its workers are left to notice.
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    if (out_) fclose(out_), out_ = nullptr;
  }

  /// SIGTERM and wait; returns the exit status.
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    if (out_) fclose(out_), out_ = nullptr;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

  nlohmann::json get(const std::string& path, int* status = nullptr) const {
    httplib::Client c(url_);
    auto r = c.Get(path.c_str());
    if (status) *status = r ? r->status : 0;
    if (!r) return nullptr;
    try {
      return nlohmann::json::parse(r->body);
    } catch (...) {
      return r->body;
    }
  }

  /// Waits until the queue item has one of the final states; returns it.
  nlohmann::json wait_for_job(std::int64_t id, double seconds) const {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    nlohmann::json item;
    while (std::chrono::steady_clock::now() < until) {
      for (auto& q : get("/api/queue?limit=100"))
        if (q["id"] == id) item = q;
      std::string s = item.is_null() ? "" : item["status"].get<std::string>();
      if (s == "done" || s == "failed" || s == "cancelled" || s == "no_device") return item;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return item;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::string url_, token_, output_;
};

}  // namespace gputune::test
