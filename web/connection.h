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

#include <string>

namespace gputune::web {

class ConnectionStream : public httplib::Stream {
 public:
  /// Reads wait up to `read_timeout_ms` for data, a flush up to `write_timeout_ms` for room.
  ConnectionStream(int sock, int read_timeout_ms, int write_timeout_ms);

  bool is_readable() const override;
  bool is_writable() const override { return true; }  ///< writes are gathered; flush() waits
  ssize_t read(char* ptr, size_t size) override;
  /// Gathers; sends once 64 KiB are gathered (a big body), else at flush(). -1 when that fails.
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return sock_; }

  /// Sends what was gathered; false when the peer is gone or a write timed out.
  bool flush();

 private:
  int sock_, read_timeout_ms_, write_timeout_ms_;
  std::string in_;  ///< read ahead: httplib reads a request's line and headers a byte at a time
  size_t in_at_ = 0;
  std::string out_;
};

/// Waits up to `timeout_ms` until `sock` has something to read (a request, or its end) or
/// `stop_fd` is readable (the server stops). True only for the first.
bool wait_for_request(int sock, int stop_fd, int timeout_ms);

}  // namespace gputune::web
