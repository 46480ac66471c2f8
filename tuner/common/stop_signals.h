/** \file tuner/common/stop_signals.h
 * Owns: what SIGINT (Ctrl-C) and SIGTERM do. In the commands that stop cleanly (`run`, `check`,
 * `generate --check`, the daemon's workers) the first asks the command to stop (stop_requested(),
 * an optional action, a message) and a second ends the process at once; the other commands that
 * compile (`prune`, `replay`) end at once. No signal handler is involved: the signals are blocked
 * in every thread and one watcher thread takes them (sigwaitinfo). NVRTC installs handlers of its
 * own during its first compile (one that catches a signal ends the process with exit code 4) and
 * then restores ours without SA_SIGINFO; with the signals blocked, what it installs never runs.
 * Also owns the protocol of a forwarded stop (the supervisor of `run`, tuner/run/hang_watch.h,
 * passes on a signal sent to it alone, marked; when the whole process group got the signal, the
 * copy arrives after the original and is not a second one). Must not: know what the commands do
 * (they poll stop_requested() or pass an action).
 */
#pragma once

#include <signal.h>

#include <functional>
#include <string>

namespace gputune::tuner {

/// The value a supervisor's forwarded stop signal carries (sigqueue).
constexpr int kForwardedSignal = 0x67747075;

/// Starts watching SIGINT and SIGTERM (one the shell set to be ignored, such as a background
/// job's SIGINT, stays ignored). Call once, before the process starts any other thread: threads
/// inherit the blocked mask. On the first signal the watcher writes `message` to stderr and calls
/// `on_first` (from the watcher thread; it may block briefly). With `second_quits` false, later
/// signals repeat the request instead of ending the process (the daemon's workers: their server
/// sends SIGTERM after the terminal's SIGINT, and they must still finish the measurement in hand).
void watch_stop_signals(std::string message, std::function<void()> on_first = {},
                        bool second_quits = true);

/// For commands that have nothing to stop cleanly (prune, replay): the first SIGINT or SIGTERM
/// ends the process as it does by default (exit 130 or 143 in a shell). Without this, one that
/// arrives while NVRTC's own handler is installed (during its first compile) ends the process with
/// exit code 4, which in gputune's table means "no correct variant". Call before any thread
/// starts; not together with watch_stop_signals.
void end_on_stop_signals();

/// Whether a stop signal arrived since watch_stop_signals.
bool stop_requested() noexcept;

/// The signal mask processes this one starts should get: the one before watch_stop_signals.
sigset_t spawn_signal_mask();

}  // namespace gputune::tuner
