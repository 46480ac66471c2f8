/** \file web/rebuilds.h
 * Owns: the daemon's background rebuilds of slow cached results (a tuned header, a selection
 * table, a chart over a big run): one thread at the lowest CPU priority (nice 19) that runs them
 * one at a time, each key at most once at a time. A request is answered with the result built
 * before while its successor is built here, so no request waits for a rebuild, and a rebuild
 * takes only the CPU time that requests leave (on 2 cores a tuned header rebuilt on a request
 * thread held a core for 0.4 s and put the other endpoints' p99 over their targets:
 * bench/results/load-*.md).
 * Must not: know about HTTP or the database; its jobs do. */
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace gputune::web {

class Rebuilds {
 public:
  /// Starts the thread; `nice` (0..19) is its priority below normal (0: no change). A thread
  /// that cannot lower its priority says so once on stderr and still runs the jobs.
  explicit Rebuilds(int nice = 19);
  /// Lets the job in progress finish and drops those queued.
  ~Rebuilds();
  Rebuilds(const Rebuilds&) = delete;
  Rebuilds& operator=(const Rebuilds&) = delete;

  /// Queues `job` under `key` unless a job of that key is queued or running; true when queued.
  /// A job that throws is reported on stderr with its key; the thread goes on.
  bool post(const std::string& key, std::function<void()> job);
  /// Waits until nothing is queued or running (tests, and a caller that needs the new result).
  void drain();
  /// Jobs finished (thrown or not) since the start.
  std::int64_t finished() const;
  /// The nice value the thread runs at (read by the thread itself; -100 before it started).
  int thread_nice() const;

 private:
  void loop(int nice);

  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::pair<std::string, std::function<void()>>> queue_;
  std::set<std::string> pending_;  ///< keys queued or running
  bool stop_ = false;
  std::int64_t finished_ = 0;
  int nice_ = -100;
  std::thread thread_;  ///< last: started after the rest is ready
};

}  // namespace gputune::web
