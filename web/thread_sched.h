/** \file web/thread_sched.h
 * Owns: what the daemon reads from the Linux scheduler about one thread: the time it spent
 * runnable but waiting for a core (/proc/thread-self/schedstat), for the Server-Timing header,
 * so that a slow answer on a busy machine tells the wait for a core from the server's work
 * (bench/results/load-vm-rebuilds-2026-11-28.md).
 * Must not: know about HTTP or the database, or change how a thread is scheduled. */
#pragma once

namespace gputune::web {

/// Nanoseconds the calling thread has waited on a run queue since it started; -1 when the kernel
/// does not say (no /proc/thread-self/schedstat).
long long thread_run_queue_ns();

}  // namespace gputune::web
