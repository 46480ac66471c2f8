/** \file tuner/common/progress.h
 * Owns: the live progress line (done/total, failures, best so far, ETA) on a terminal; silent when
 * disabled (not a terminal, or --quiet).
 * Must not: compute anything the run depends on. */
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace gputune::tuner {

class Progress {
 public:
  Progress(std::string what, std::size_t total, bool enabled);
  void update(std::size_t done, std::size_t failures, std::optional<double> best_ms);
  void finish();
  /// A total that changes as the work goes on (the screen: what could still come within the
  /// margin shrinks as the best falls).
  void set_total(std::size_t total) { total_ = total; }
  /// The line update() would print (exposed for tests).
  static std::string format(const std::string& what, std::size_t done, std::size_t total,
                            std::size_t failures, std::optional<double> best_ms, double elapsed_s);

 private:
  std::string what_;
  std::size_t total_;
  bool enabled_;
  bool printed_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

/// True when stderr is a terminal.
bool stderr_is_terminal();

}  // namespace gputune::tuner
