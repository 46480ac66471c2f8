#include "web/connection_pool.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace gputune::web {

namespace {

/// httplib's view of the pool: it deletes the view after shutdown(), not the pool.
class View : public httplib::TaskQueue {
 public:
  explicit View(ConnectionPool& pool) : pool_(pool) {}
  void enqueue(std::function<void()> fn) override { pool_.enqueue(std::move(fn)); }
  void shutdown() override { pool_.shutdown(); }

 private:
  ConnectionPool& pool_;
};

void signal_fd(int fd) {
  const std::uint64_t one = 1;
  if (::write(fd, &one, sizeof one) < 0) {
  }  // EAGAIN: the counter is full, it is readable anyway
}

}  // namespace

ConnectionPool::Fd::Fd(int f, const char* what) : fd(f) {
  if (fd < 0) throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

ConnectionPool::Fd::~Fd() { ::close(fd); }

ConnectionPool::ConnectionPool(std::size_t threads, Serve serve)
    : serve_(std::move(serve)),
      pressure_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE), "eventfd"),
      epoll_(epoll_create1(EPOLL_CLOEXEC), "epoll_create1"),
      wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd") {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_.fd;
  if (epoll_ctl(epoll_.fd, EPOLL_CTL_ADD, wake_.fd, &ev) != 0)
    throw std::runtime_error(std::string("epoll_ctl: ") + std::strerror(errno));
  for (std::size_t i = 0; i < std::max<std::size_t>(1, threads); ++i)
    threads_.emplace_back([this] { run_tasks(); });
  parking_ = std::thread([this] { run_parking(); });
}

ConnectionPool::~ConnectionPool() { shutdown(); }

httplib::TaskQueue* ConnectionPool::task_queue() { return new View(*this); }

void ConnectionPool::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!joined_) {
      tasks_.push_back(std::move(task));
      // more tasks than threads free to take them: a waiting connection may give its thread
      if (tasks_.size() > idle_threads_) signal_fd(pressure_.fd);
      task_ready_.notify_one();
      return;
    }
  }
  task();  // after shutdown (httplib does not enqueue then): still served, never dropped
}

void ConnectionPool::run_tasks() {
  pthread_setname_np(pthread_self(), "gputune-http");  // as top -H and perf show it
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_threads_;
    task_ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    --idle_threads_;
    if (tasks_.empty()) return;  // stopping, and every task taken
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    if (tasks_.empty()) drain_pressure();  // no task waits: no connection needs to give way
    lock.unlock();
    try {
      task();
    } catch (const std::exception& e) {  // a connection's task; the thread serves on
      std::fprintf(stderr, "gputune serve: a connection ended with an error: %s\n", e.what());
    }
    lock.lock();
  }
}

void ConnectionPool::drain_pressure() {
  std::uint64_t v;
  while (::read(pressure_.fd, &v, sizeof v) == sizeof v) {
  }
}

bool ConnectionPool::take_pressure() {
  std::uint64_t v;
  return ::read(pressure_.fd, &v, sizeof v) == sizeof v;
}

void ConnectionPool::close_socket(int sock) {
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
}

void ConnectionPool::park(int sock, std::size_t requests_left, int keep_alive_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) {
    lock.unlock();
    close_socket(sock);
    return;
  }
  // One-shot: a readable socket is handed to a thread once, and parked again (added anew) later.
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.fd = sock;
  if (epoll_ctl(epoll_.fd, EPOLL_CTL_ADD, sock, &ev) != 0) {
    lock.unlock();
    close_socket(sock);
    return;
  }
  const bool first = parked_.empty();
  parked_[sock] = {requests_left,
                   std::chrono::steady_clock::now() + std::chrono::milliseconds(keep_alive_ms)};
  if (first) signal_fd(wake_.fd);  // the parking thread slept without a time limit
}

void ConnectionPool::run_parking() {
  epoll_event events[64];
  std::vector<std::pair<int, std::size_t>> ready;
  std::vector<int> expired;
  for (;;) {
    int timeout_ms = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
      if (!parked_.empty()) {
        auto first = std::chrono::steady_clock::time_point::max();
        for (const auto& [sock, p] : parked_) first = std::min(first, p.until);
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                              first - std::chrono::steady_clock::now())
                              .count();
        timeout_ms = static_cast<int>(std::clamp<long long>(left + 1, 0, 60000));
      }
    }
    const int n = epoll_wait(epoll_.fd, events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) {
      std::fprintf(stderr, "gputune serve: epoll_wait: %s\n", std::strerror(errno));
      break;
    }
    ready.clear(), expired.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
      for (int i = 0; i < n; ++i) {
        if (events[i].data.fd == wake_.fd) {
          std::uint64_t v;
          if (::read(wake_.fd, &v, sizeof v) < 0) {
          }  // already reset
          continue;
        }
        auto it = parked_.find(events[i].data.fd);
        if (it == parked_.end()) continue;
        epoll_ctl(epoll_.fd, EPOLL_CTL_DEL, it->first, nullptr);
        ready.emplace_back(it->first, it->second.requests_left);
        parked_.erase(it);
      }
      const auto now = std::chrono::steady_clock::now();
      for (auto it = parked_.begin(); it != parked_.end();)
        if (it->second.until <= now) {
          epoll_ctl(epoll_.fd, EPOLL_CTL_DEL, it->first, nullptr);
          expired.push_back(it->first);
          it = parked_.erase(it);
        } else {
          ++it;
        }
    }
    for (int sock : expired) close_socket(sock);
    for (const auto& r : ready)  // (clang 14 cannot capture a structured binding)
      enqueue([this, sock = r.first, left = r.second] { serve_(sock, left); });
  }
  // Stopping: the parked connections are closed (a client sees its keep-alive end).
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [sock, p] : parked_) {
    epoll_ctl(epoll_.fd, EPOLL_CTL_DEL, sock, nullptr);
    close_socket(sock);
  }
  parked_.clear();
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  signal_fd(wake_.fd);
  parking_.join();
  task_ready_.notify_all();
  for (auto& t : threads_) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  joined_ = true;
}

}  // namespace gputune::web
