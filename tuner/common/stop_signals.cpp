#include "tuner/common/stop_signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace gputune::tuner {
namespace {

std::atomic<bool> g_requested{false};
std::mutex g_mask_mutex;
bool g_watching = false;
sigset_t g_original_mask;  // valid when g_watching

// Ends the process as `sig` does by default (from the watcher thread, where it is blocked).
[[noreturn]] void quit_with(int sig) {
  signal(sig, SIG_DFL);
  sigset_t just;
  sigemptyset(&just);
  sigaddset(&just, sig);
  pthread_sigmask(SIG_UNBLOCK, &just, nullptr);
  raise(sig);
  _exit(128 + sig);  // not reached
}

void watch(sigset_t watched, std::string message, std::function<void()> on_first,
           bool second_quits) {
  for (;;) {
    siginfo_t info{};
    const int sig = sigwaitinfo(&watched, &info);
    if (sig < 0) {
      if (errno == EINTR) continue;
      return;  // cannot happen with a valid set; the signals stay pending, the command runs on
    }
    if (!g_requested.load()) {
      g_requested.store(true);
      if (!message.empty()) {
        const ssize_t ignored = write(STDERR_FILENO, message.data(), message.size());
        (void)ignored;
      }
      if (on_first) on_first();
      continue;
    }
    // The copy a supervisor forwarded of a signal this process got itself: not a second one.
    if (!second_quits || (info.si_code == SI_QUEUE && info.si_value.sival_int == kForwardedSignal))
      continue;
    quit_with(sig);  // a second one
  }
}

/// Blocks the stop signals the shell did not set to be ignored (once per process); the set.
sigset_t block_stop_signals() {
  std::lock_guard<std::mutex> lock(g_mask_mutex);
  if (g_watching) throw std::logic_error("the stop signals are watched already");
  sigset_t watched;
  sigemptyset(&watched);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaddset(&watched, sig);
  }
  if (pthread_sigmask(SIG_BLOCK, &watched, &g_original_mask) != 0)
    throw std::runtime_error(std::string("cannot block the stop signals: ") + std::strerror(errno));
  g_watching = true;
  return watched;
}

}  // namespace

void watch_stop_signals(std::string message, std::function<void()> on_first, bool second_quits) {
  std::thread(watch, block_stop_signals(), std::move(message), std::move(on_first), second_quits)
      .detach();
}

void end_on_stop_signals() {
  std::thread([watched = block_stop_signals()] {
    for (;;)
      if (const int sig = sigwaitinfo(&watched, nullptr); sig > 0) quit_with(sig);
  }).detach();
}

bool stop_requested() noexcept { return g_requested.load(); }

sigset_t spawn_signal_mask() {
  std::lock_guard<std::mutex> lock(g_mask_mutex);
  if (g_watching) return g_original_mask;
  sigset_t current;
  pthread_sigmask(SIG_SETMASK, nullptr, &current);
  return current;
}

}  // namespace gputune::tuner
