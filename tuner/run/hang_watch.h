/** \file tuner/run/hang_watch.h
 * Owns: ending `gputune run` when a kernel launch does not return. A running GPU kernel cannot be
 * interrupted from its own process, so a watchdog thread, once a variant's measurement has run
 * longer than the limit, stores that variant as `timeout` and the run as interrupted (through its
 * own database connection), says how to go on (`--resume` skips the stored variant) and ends the
 * process with exit code 5; the driver frees the GPU as the process ends. The daemon's workers do
 * not need it: their supervisor kills a worker that hangs.
 * The same stop, with the variant stored as `runtime`, when a variant lost the process's CUDA
 * context (stop_after_lost_context): CUDA cannot go on in that process.
 * Also owns going on after such a stop: `gputune run` runs the tuning in a child process
 * (run_restarting) and, when the child's HangWatch reports a hang or a lost context through a
 * pipe, starts it again with `--resume RUN`, so one command measures the whole space. The
 * supervising process never loads the CUDA driver; it forwards SIGINT/SIGTERM sent to it, and the
 * job's time budget carries over the restarts.
 * Consumes: the run's ids. Produces: nothing but those rows and the exit. Must not: touch the GPU.
 */
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "db/store.h"

namespace gputune::tuner {

class HangWatch {
 public:
  /// Watches measurements of run `run_id` in the database at `db_path`; `resume` is the command
  /// the message gives to go on (e.g. "gputune run job.json --resume 3"). `report_fd` >= 0: a
  /// hang is also reported there for run_restarting (SupervisorLink::fd), as one to go on from
  /// unless `stopping` says the process was asked to stop. `spent_before_s`: seconds the run
  /// spent measuring before this process; a hang stores that plus this process's own
  /// (RunRow::seconds_spent), which the resume goes on counting.
  HangWatch(std::string db_path, std::int64_t run_id, double limit_s, std::string resume,
            int report_fd = -1, std::function<bool()> stopping = {}, double spent_before_s = 0);
  ~HangWatch();
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  /// A variant's measurement (its launches) begins; `what` names it in the messages. `row` is the
  /// row `run` would store for it (tuner/run/measurement_row.h): a hang stores it as `timeout`.
  void begin(const db::MeasurementRecord& row, const std::string& what);
  /// It returned.
  void end();
  /// The variant in flight lost the process's CUDA context (ContextLost: `error` its message,
  /// `reason` what is stored): stores its row as `runtime`, the run as interrupted, reports a
  /// fault to the supervisor as a hang is reported (run_restarting then resumes the run in a new
  /// process) and ends the process with exit code 5.
  [[noreturn]] void stop_after_lost_context(const std::string& error, const std::string& reason);

 private:
  void watch();
  [[noreturn]] void stop_the_run();
  /// Stores `row_` as `status`/`reason`, the run as interrupted with `message`, reports `kind`
  /// ("hung" or "fault") to the supervisor and ends the process.
  [[noreturn]] void stop(db::Status status, const std::string& reason, const std::string& message,
                         const char* kind);

  const std::string db_path_;
  const std::int64_t run_id_;
  const std::chrono::duration<double> limit_;
  const std::string resume_;
  const int report_fd_;
  const std::function<bool()> stopping_;
  const double spent_before_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  bool active_ = false;
  std::chrono::steady_clock::time_point since_;
  db::MeasurementRecord row_;
  std::string what_;
  std::thread thread_;  // last: started once everything above is set
};

/// What a child of run_restarting gets from its supervisor (through its environment).
struct SupervisorLink {
  int fd = -1;                ///< where HangWatch reports a hang; -1: not supervised
  double budget_spent_s = 0;  ///< measuring seconds the run's earlier processes spent
};
/// This process's link, read once from the environment. Under a supervisor it also arranges for
/// the process to get SIGTERM (and so stop cleanly) should the supervisor die first.
SupervisorLink supervisor_link();

/// `gputune run` under supervision: runs `args` (the arguments after the program's name, e.g.
/// {"run", "job.json"}) with this program in a child process and returns its exit code. When the
/// child stopped because a kernel hung, runs it again with `--resume RUN` (replacing a --resume
/// in `args`), at most `max_restarts` times; progress is certain, as resume skips what hung.
/// When a variant lost the child's CUDA context (HangWatch::stop_after_lost_context), runs it
/// again likewise without counting it: each such stop stores one more variant, and the same
/// variant reported twice stops instead.
/// Never restarts after a stop signal or any other exit. A child killed by a signal kills this
/// process with the same signal, unless `survive_child_signal` (then the result is 128 + the
/// signal, as a shell gives it: `gputune batch` goes on with its next job). A stop signal sent to
/// this process alone is passed on (the first marked as kForwardedSignal,
/// tuner/common/stop_signals.h; one from the terminal reached the child too).
int run_restarting(std::vector<std::string> args, int max_restarts, std::ostream& log,
                   bool survive_child_signal = false);

/// Whether SIGINT or SIGTERM reached this process since run_restarting first ran here.
bool supervisor_stop_requested() noexcept;

}  // namespace gputune::tuner
