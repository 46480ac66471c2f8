#include "web/rebuilds.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

namespace gputune::web {

Rebuilds::Rebuilds(int nice) : thread_([this, nice] { loop(nice); }) {}

Rebuilds::~Rebuilds() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  thread_.join();
}

bool Rebuilds::post(const std::string& key, std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || !pending_.insert(key).second) return false;
    queue_.emplace_back(key, std::move(job));
  }
  wake_.notify_one();
  return true;
}

void Rebuilds::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return pending_.empty() || stop_; });
}

std::int64_t Rebuilds::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

int Rebuilds::thread_nice() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nice_;
}

void Rebuilds::loop(int nice) {
  pthread_setname_np(pthread_self(), "gputune-rebuild");  // as top -H and perf show it
  // Linux gives each thread its own nice value: this lowers this thread only.
  const auto tid = static_cast<id_t>(gettid());
  if (nice > 0) {
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if ((now == -1 && errno != 0) || setpriority(PRIO_PROCESS, tid, nice < 19 ? nice : 19) != 0)
      std::fprintf(stderr,
                   "gputune serve: background rebuilds keep the normal priority (setpriority: "
                   "%s); they compete with requests for the cores\n",
                   std::strerror(errno));
  }
  errno = 0;
  const int got = getpriority(PRIO_PROCESS, tid);
  std::unique_lock<std::mutex> lock(mu_);
  nice_ = got;
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    auto [key, job] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      job();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gputune serve: rebuilding %s failed: %s\n", key.c_str(), e.what());
    } catch (...) {
      std::fprintf(stderr, "gputune serve: rebuilding %s failed\n", key.c_str());
    }
    lock.lock();
    pending_.erase(key);
    ++finished_;
    if (pending_.empty()) idle_.notify_all();
  }
  pending_.clear();
  idle_.notify_all();
}

}  // namespace gputune::web
