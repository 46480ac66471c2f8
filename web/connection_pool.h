/** \file web/connection_pool.h
 * Owns: the daemon's request threads, and the keep-alive connections parked between requests.
 * httplib gives a connection a pool thread for its whole life, so a keep-alive connection waiting
 * for its next request held a thread until its 5 s timeout: with as many idle clients as threads
 * (8 here; a browser opens up to 6 per page), a new client's request waited up to 5 s. Here a
 * connection waiting for its next request gives its thread back as soon as a task (a new
 * connection, or a parked one whose request came) waits for a thread, and waits in one epoll
 * thread instead; its next request brings it back to a thread. While a thread is free for every
 * task, a connection keeps its thread, so a request costs one wake-up as before.
 * Must not: know about HTTP requests, routes or the database (the server's `serve` does). */
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace gputune::web {

class ConnectionPool {
 public:
  /// Serves a connection from where it stands: up to `requests_left` more requests.
  using Serve = std::function<void(int sock, std::size_t requests_left)>;

  /// Starts `threads` request threads and the parking thread.
  ConnectionPool(std::size_t threads, Serve serve);
  /// shutdown() if it was not called.
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  /// A task for a request thread (httplib's accept loop: a new connection).
  void enqueue(std::function<void()> task);
  /// Closes the parked connections, lets the request threads finish the tasks queued, joins
  /// them. Later tasks run on the calling thread, later parked connections are closed.
  void shutdown();

  /// Readable while a task waits for a thread: a connection waiting for its next request polls
  /// it beside its socket, and parks when take_pressure() gives it the turn.
  int pressure_fd() const { return pressure_.fd; }
  /// One waiting task's claim on a thread: true when the caller should park its connection
  /// and return to take a task.
  bool take_pressure();
  /// Waits for `sock`'s next request off any request thread: when it is readable, serve(sock,
  /// requests_left) runs as a task; after `keep_alive_ms` without one it is closed.
  void park(int sock, std::size_t requests_left, int keep_alive_ms);

  /// A view for httplib (Server::new_task_queue): it deletes the view, not the pool.
  httplib::TaskQueue* task_queue();

 private:
  struct Parked {
    std::size_t requests_left;
    std::chrono::steady_clock::time_point until;
  };
  void run_tasks();
  void run_parking();
  void drain_pressure();
  static void close_socket(int sock);

  /// A descriptor closed with its owner.
  struct Fd {
    explicit Fd(int fd, const char* what);
    ~Fd();
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    const int fd;
  };

  const Serve serve_;
  const Fd pressure_;  ///< eventfd (semaphore): a token per task waiting beyond the idle threads
  const Fd epoll_;     ///< the parked connections
  const Fd wake_;      ///< eventfd: the parking thread looks again (a first park, or stop)

  mutable std::mutex mu_;
  std::condition_variable task_ready_;
  std::deque<std::function<void()>> tasks_;
  std::size_t idle_threads_ = 0;
  bool stopping_ = false;
  bool joined_ = false;           ///< the request threads are gone: a task runs on its caller
  std::map<int, Parked> parked_;  ///< by socket

  std::vector<std::thread> threads_;
  std::thread parking_;  ///< last: started after the rest is ready
};

}  // namespace gputune::web
