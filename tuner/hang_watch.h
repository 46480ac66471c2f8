/** \file tuner/hang_watch.h
 * Owns: ending `gputune run` when a kernel launch does not return. A running GPU kernel cannot be
 * interrupted from its own process, so a watchdog thread, once a variant's measurement has run
 * longer than the limit, stores that variant as `timeout` and the run as interrupted (through its
 * own database connection), says how to go on (`--resume` skips the stored variant) and ends the
 * process with exit code 5; the driver frees the GPU as the process ends. The daemon's workers do
 * not need it: their supervisor kills a worker that hangs.
 * Consumes: the run's ids. Produces: nothing but those rows and the exit. Must not: touch the GPU.
 */
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace gputune::tuner {

class HangWatch {
 public:
  /// Watches measurements of run `run_id` in the database at `db_path`; `resume` is the command
  /// the message gives to go on (e.g. "gputune run job.json --resume 3").
  HangWatch(std::string db_path, std::int64_t run_id, double limit_s, std::string resume);
  ~HangWatch();
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  /// A variant's measurement (its launches) begins; `what` names it in the messages.
  void begin(std::int64_t context_id, std::int64_t variant_id, const std::string& what);
  /// It returned.
  void end();

 private:
  void watch();
  [[noreturn]] void stop_the_run();

  const std::string db_path_;
  const std::int64_t run_id_;
  const std::chrono::duration<double> limit_;
  const std::string resume_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  bool active_ = false;
  std::chrono::steady_clock::time_point since_;
  std::int64_t context_id_ = 0, variant_id_ = 0;
  std::string what_;
  std::thread thread_;  // last: started once everything above is set
};

}  // namespace gputune::tuner
