/** \file web/connection.h
 * Owns: one keep-alive HTTP connection's socket as httplib's Stream, for the daemon's own
 * connection loop (web/server.cpp). A response's writes (httplib writes the headers and the body
 * separately) are gathered and sent once, so that the client wakes once per response, not once
 * for the headers and again for the body; and a connection waits for its next request in one
 * poll (with a stop descriptor), where httplib's loop woke every 11 ms per idle connection. On 2
 * cores each wake-up may wait a scheduler tick (4 ms) for a core: bench/results/load-*.md.
 * Must not: know about routes, handlers or the database. */
#pragma once

#include <httplib.h>

#include <functional>
#include <string>

namespace gputune::web {

class ConnectionStream : public httplib::Stream {
 public:
  /// Reads wait up to `read_timeout_ms` for data, a flush up to `write_timeout_ms` for room.
  ConnectionStream(int sock, int read_timeout_ms, int write_timeout_ms);

  bool is_readable() const override;
  /// Writes are gathered and flush() waits for room: false only once a send failed.
  bool is_writable() const override { return !failed_; }
  /// Sends what was gathered first (httplib's "100 Continue" before it reads a request's body).
  ssize_t read(char* ptr, size_t size) override;
  /// Gathers; a write of 64 KiB or more (a big body) is sent at once, after what was gathered.
  /// -1 once a send failed.
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return sock_; }

  /// Sends what was gathered; false when the peer is gone or a write timed out (then and after).
  bool flush();
  /// Bytes read ahead and not yet taken (the next request of a client that pipelines).
  bool buffered() const { return in_at_ < in_.size(); }

 private:
  bool send_all(const char* ptr, size_t size);

  int sock_, read_timeout_ms_, write_timeout_ms_;
  std::string in_;  ///< read ahead: httplib's line reader takes a request's head a byte at a time
  size_t in_at_ = 0;
  std::string out_;
  bool failed_ = false;
};

/// What a connection waiting for its next request should do.
enum class Wait {
  kRequest,  ///< `sock` has something to read: a request, or its end
  kPark,     ///< a task waits for a thread and `claim` gave this connection the turn to give way
  kEnd,      ///< the keep-alive time is up, the server stops (`stop_fd`), or poll failed
};
/// Waits up to `timeout_ms` for `sock`'s next request. While `pressure_fd` is readable (a task
/// waits for a thread: web/connection_pool.h) it asks `claim`; -1 for `pressure_fd` or `stop_fd`:
/// none. A request already readable wins over the other two.
Wait wait_for_request(int sock, int stop_fd, int pressure_fd, int timeout_ms,
                      const std::function<bool()>& claim);

}  // namespace gputune::web
