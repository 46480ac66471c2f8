/** \file tuner/common/exit_codes.h
 * Owns: the exit codes of every gputune command (documented in the README and in `gputune
 * --help`), in one place, so that a stage that only ends a process (the hang watch, the CPU
 * check) need not include the pipeline. Must not: include anything. */
#pragma once

namespace gputune::tuner {

enum ExitCode : int {
  kExitOk = 0,
  kExitInternal = 1,
  kExitBadInput = 2,
  kExitNoDevice = 3,     ///< everything compiled, inspected and stored; nothing timed
  kExitNoCorrect = 4,    ///< timed, but no variant produced a correct result
  kExitInterrupted = 5,  ///< stopped early (cancelled, or the daemon is shutting down)
  kExitCheckFailed = 6,  ///< `check`: some configurations differ from the reference on the CPU
  /// `batch`: every job ran, but a winner got slower than the previous run's by more than the
  /// threshold (a job that failed gives its own code)
  kExitRegression = 7,
};

}  // namespace gputune::tuner
