#include "tuner/common/progress.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

namespace gputune::tuner {

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string what, std::size_t total, bool enabled)
    : what_(std::move(what)),
      total_(total),
      enabled_(enabled && total > 0),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

std::string Progress::format(const std::string& what, std::size_t done, std::size_t total,
                             std::size_t failures, std::optional<double> best_ms, double elapsed) {
  std::ostringstream s;
  s << what << " [" << done << "/" << total << "] failures " << failures;
  if (best_ms) s << "  best " << *best_ms << " ms";
  if (done > 0 && done < total) {
    auto eta = static_cast<long>(
        elapsed / static_cast<double>(done) * static_cast<double>(total - done) + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld", eta / 60, eta % 60);
    s << "  ETA " << buf;
  }
  return s.str();
}

void Progress::update(std::size_t done, std::size_t failures, std::optional<double> best_ms) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r\033[K%s",
               format(what_, done, total_, failures, best_ms, elapsed).c_str());
  std::fflush(stderr);
  printed_ = true;
}

void Progress::finish() {
  if (enabled_ && printed_) std::fprintf(stderr, "\n");
  printed_ = false;
}

}  // namespace gputune::tuner
