/** \file web/server.h
 * Owns: the HTTP API (JSON) and the dashboard (static HTML/JS/CSS compiled into the binary, SVG
 * charts drawn here) of `gputune serve`. Reads through db/Browser (db/interchange for a run's
 * T4 download, select/ for a kernel's runtime selection); writes only the job queue (submit,
 * cancel), and only with the write token.
 * Security: binds to loopback unless told otherwise; write endpoints need "Authorization: Bearer
 * TOKEN"; read endpoints are open on loopback and need the token from elsewhere; every parameter
 * is validated (4xx with a JSON error); static files come from memory, so no path reaches the disk.
 * Must not: touch the GPU, run jobs, or write SQL (db/ does). */
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "db/browse.h"

namespace gputune::web {

struct ServerOptions {
  std::string db_path;
  std::string token;  ///< write token (required for POST)
  std::string bind = "127.0.0.1";
  int port = 8080;  ///< 0: any free port
  /// How a stored winner's source is had when it is not the kernel file's (a naive kernel's
  /// generated variant); the kernel page shows it. None: not shown.
  db::SourceCommand source_command;
  /// A cached derived result (chart, series, tuned header, runtime selection table) that took at
  /// least `rebuild_floor_s` to build is rebuilt after the database changed at most once per
  /// `rebuild_factor` times its build time (so rebuilding takes at most about 1/factor of the
  /// time while a worker tunes).
  double rebuild_floor_s = 0.01, rebuild_factor = 20;
  /// Such a rebuild runs on a background thread this many nice steps below normal (web/rebuilds.h),
  /// while requests are served the result built before: 19 (the lowest), 0 for none.
  int rebuild_nice = 19;
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  /// Binds; returns the port (useful with port 0). Throws std::runtime_error naming address and
  /// port.
  int bind();
  /// Serves until stop() (blocks).
  void run();
  /// Thread-safe and signal-safe enough to call from a signal-watching thread.
  void stop();
  /// Answers one request given as the bytes a client sends (request line, headers, body), as
  /// run() answers it on a connection from `remote_addr`, and returns the response's bytes ("" for
  /// no bytes at all). In this process and thread, without a socket: for the fuzz target
  /// (tests/fuzz/web_fuzz.cpp) and tests.
  std::string handle(std::string_view request, const std::string& remote_addr = "127.0.0.1");
  /// Waits until no background rebuild of a cached result is queued or running, so that the
  /// next request is served what was stored before this call (tests; see ServerOptions).
  void settle();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Constant-time comparison of a presented token with the expected one.
bool token_matches(const std::string& presented, const std::string& expected);
/// True for 127.0.0.0/8 and ::1 (also IPv4-mapped).
bool is_loopback(const std::string& address);

/// The most POST /api/jobs takes: the job, its kernel and its files (base64) in JSON.
inline constexpr std::size_t kMaxJobRequestBytes = 128u << 20;

/// The longest path, and name in it, of a file submitted with a job: the worker writes it under
/// a folder of its own, and the system's limits are 4096 and 255 bytes.
inline constexpr std::size_t kMaxSubmittedPathBytes = 3072, kMaxSubmittedNameBytes = 255;

/// The problem with the path of a file submitted with a job ("" when there is none): it must
/// be absolute and normal (no `.`, `..`, doubled or trailing `/`), without NUL bytes, at most
/// kMaxSubmittedPathBytes long with no name longer than kMaxSubmittedNameBytes.
std::string bad_submitted_path(const std::string& path);

}  // namespace gputune::web
