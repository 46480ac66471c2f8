#include "tuner/hang_watch.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "db/store.h"
#include "tuner/pipeline.h"

namespace gputune::tuner {

HangWatch::HangWatch(std::string db_path, std::int64_t run_id, double limit_s, std::string resume)
    : db_path_(std::move(db_path)),
      run_id_(run_id),
      limit_(limit_s),
      resume_(std::move(resume)),
      thread_([this] { watch(); }) {}

HangWatch::~HangWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HangWatch::begin(std::int64_t context_id, std::int64_t variant_id, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  active_ = true;
  since_ = std::chrono::steady_clock::now();
  context_id_ = context_id, variant_id_ = variant_id, what_ = what;
  cv_.notify_all();
}

void HangWatch::end() {
  std::lock_guard<std::mutex> lock(mu_);
  active_ = false;
}

void HangWatch::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!quit_) {
    if (!active_) {
      cv_.wait(lock);
      continue;
    }
    const auto deadline =
        since_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(limit_);
    const auto begun = since_;
    cv_.wait_until(lock, deadline);
    if (!quit_ && active_ && since_ == begun && std::chrono::steady_clock::now() >= deadline)
      stop_the_run();
  }
}

void HangWatch::stop_the_run() {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", limit_.count());
  const std::string hung = std::string("hung: its measurement did not return within ") + limit +
                           " s (--kernel-timeout), and a running kernel cannot be interrupted";
  const std::string message = "stopped: " + what_ + " hung (no return within " + limit + " s); `" +
                              resume_ + "` goes on without it";
  try {
    db::Store store(db_path_);
    db::MeasurementRecord m;
    m.run_id = run_id_, m.context_id = context_id_, m.variant_id = variant_id_;
    m.status = "timeout", m.reason = hung;
    store.add_measurement(m);
    store.stop_run(run_id_, "interrupted", message);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gputune: could not store that the run stopped: %s\n", e.what());
  }
  std::fprintf(stderr, "\ngputune: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(kExitInterrupted);  // the driver ends the kernel and frees the GPU with the process
}

}  // namespace gputune::tuner
