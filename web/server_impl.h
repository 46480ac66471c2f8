/** \file web/server_impl.h
 * Owns: what the server's files share (web/ only; cmake/layers.cmake refuses it elsewhere): the
 * server's state and request plumbing (Server::Impl: the database connection per thread, access
 * control and error translation, the cache of derived results and the selection tables, route
 * registration), the HTTP server with gputune's connection loop (HttpServer), and the helpers
 * handlers use to read parameters and answer (HttpError, send_json, int_param, ...).
 * server.cpp builds and runs a Server; routes.cpp holds the API's routes.
 * Must not: answer a route itself, or read the database but through db::Browser and db::Store.
 */
#pragma once

#include <httplib.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "db/browse.h"
#include "db/store.h"
#include "select/decision_table.h"
#include "select/select.h"
#include "variants/job.h"
#include "web/connection.h"
#include "web/connection_pool.h"
#include "web/rebuilds.h"
#include "web/server.h"
#include "web/thread_sched.h"

namespace gputune::web {

using nlohmann::json;

/// An error for the client: HTTP status, message, and the parameter it concerns.
struct HttpError {
  int status;
  std::string message, field;
};

inline std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

inline void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  // Replace, not throw: an error message may quote the client's bytes (a field name cut in the
  // middle of a UTF-8 sequence), and the client must still get it.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

inline std::int64_t int_param(const httplib::Request& req, const std::string& name,
                              std::int64_t dflt, std::int64_t lo, std::int64_t hi) {
  if (!req.has_param(name)) return dflt;
  const std::string v = req.get_param_value(name);
  static const std::regex digits("-?[0-9]{1,18}");
  if (!std::regex_match(v, digits)) throw HttpError{400, name + " must be an integer", name};
  std::int64_t x = std::stoll(v);
  if (x < lo || x > hi)
    throw HttpError{
        400, name + " must be between " + std::to_string(lo) + " and " + std::to_string(hi), name};
  return x;
}

inline std::string str_param(const httplib::Request& req, const std::string& name,
                             size_t max_len = 200) {
  if (!req.has_param(name)) return {};
  std::string v = req.get_param_value(name);
  if (v.size() > max_len) throw HttpError{400, name + " is too long", name};
  return v;
}

inline std::int64_t path_id(const httplib::Request& req, size_t i = 1) {
  const std::string v = req.matches[static_cast<int>(i)];
  if (v.size() > 18) throw HttpError{400, "id out of range", "id"};
  return std::stoll(v);
}

/// httplib's server with its handling of one connection's request reachable (Server::handle),
/// a connection loop of its own (web/connection.h): a response leaves in one send, and an idle
/// keep-alive connection sleeps until its next request or stop_idle_connections(); and request
/// threads that an idle connection gives back when another needs one (web/connection_pool.h).
class HttpServer : public httplib::Server {
 public:
  using httplib::Server::process_request;
  HttpServer()
      : stop_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        pool_(CPPHTTPLIB_THREAD_POOL_COUNT,
              [this](int sock, std::size_t requests_left) { serve(sock, requests_left); }) {
    if (stop_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
    new_task_queue = [this] { return pool_.task_queue(); };
  }
  ~HttpServer() override {
    pool_.shutdown();  // its threads serve through this object: joined before it goes
    ::close(stop_fd_);
  }
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  /// Wakes every connection waiting for its next request, to close: before stop(), which
  /// joins the threads that serve them. The server does not serve again after it.
  void stop_idle_connections() {
    const std::uint64_t one = 1;
    if (::write(stop_fd_, &one, sizeof one) < 0) {
    }  // already signalled: the counter is non-zero
  }

 private:
  static int ms(time_t sec, time_t usec) { return static_cast<int>(sec * 1000 + usec / 1000); }
  /// A new connection: served on the pool's thread (httplib's accept loop enqueues it).
  bool process_and_close_socket(socket_t sock) override {
    serve(sock, keep_alive_max_count_);
    return true;
  }
  /// As httplib's loop: up to keep_alive_max_count_ requests, each within the keep-alive timeout
  /// of the one before, the last answered with "Connection: close". A connection waiting for its
  /// next request while a task waits for a thread is parked instead (its thread taken back);
  /// its next request brings it here again with the requests it has left.
  void serve(int sock, std::size_t requests_left) {
    ConnectionStream strm(sock, ms(read_timeout_sec_, read_timeout_usec_),
                          ms(write_timeout_sec_, write_timeout_usec_));
    const int keep_alive_ms = ms(keep_alive_timeout_sec_, 0);
    for (std::size_t left = requests_left; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
      // a pipelined request may be read ahead already: the socket then has nothing to say
      if (!strm.buffered()) {
        const Wait w = wait_for_request(sock, stop_fd_, pool_.pressure_fd(), keep_alive_ms,
                                        [this] { return pool_.take_pressure(); });
        if (w == Wait::kPark) {
          pool_.park(sock, left, keep_alive_ms);
          return;
        }
        if (w == Wait::kEnd) break;
      }
      bool closed = false;
      bool ok = process_request(strm, left == 1, closed, nullptr);
      ok = strm.flush() && ok;
      if (!ok || closed) break;
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  int stop_fd_;
  ConnectionPool pool_;  ///< last: its threads use the rest
};

struct Server::Impl {
  ServerOptions opt;
  HttpServer http;
  std::mutex mu;

  /// One connection per server thread (SQLite connections are not shared between threads).
  db::Store& store() {
    thread_local std::map<std::string, std::unique_ptr<db::Store>> stores;
    auto& s = stores[opt.db_path];
    if (!s) s = std::make_unique<db::Store>(opt.db_path);
    return *s;
  }

  bool authorized(const httplib::Request& req) const {
    std::string h = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    return h.rfind(prefix, 0) == 0 && token_matches(h.substr(prefix.size()), opt.token);
  }

  /// Wraps a handler: access control, error translation.
  httplib::Server::Handler wrap(
      bool write, std::function<void(const httplib::Request&, httplib::Response&)> fn) {
    return [this, write, fn](const httplib::Request& req, httplib::Response& res) {
      // httplib's pool threads, named for top -H and perf (bench/sched_delays.py)
      thread_local const bool named = pthread_setname_np(pthread_self(), "gputune-http") == 0;
      (void)named;
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = thread_cpu_ms();
      const long long queued_start = thread_run_queue_ns();
      try {
        if (write && !authorized(req))
          throw HttpError{
              401, "this endpoint needs the write token: send 'Authorization: Bearer TOKEN'", ""};
        if (!write && !is_loopback(req.remote_addr) && !authorized(req))
          throw HttpError{401, "reads from outside loopback need the token", ""};
        fn(req, res);
      } catch (const HttpError& e) {
        send_json(res, e.status, {{"error", e.message}, {"field", e.field}});
      } catch (const db::QueryError& e) {
        send_json(res, 400, {{"error", e.what()}, {"field", e.field}});
      } catch (const JobError& e) {
        send_json(res, 400, {{"error", e.what()}, {"field", e.field}});
      } catch (const json::exception& e) {
        send_json(res, 400,
                  {{"error", std::string("malformed JSON: ") + e.what()}, {"field", "body"}});
      } catch (const std::exception& e) {
        send_json(res, 500, {{"error", e.what()}, {"field", ""}});
      }
      set_server_timing(res, start, cpu_start, queued_start);
    };
  }
  /// The calling thread's CPU time in ms.
  static double thread_cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
  }
  /// Server-Timing (shown by a browser's developer tools, read by bench/load_bench): how long
  /// the handler took ("app;dur=MS"), how much CPU its thread used meanwhile ("cpu;dur=MS") and
  /// how long it waited for a core ("queue;dur=MS", where the kernel says; the rest it waited
  /// for a lock or the disk), after how a cached result was had, where it was.
  static void set_server_timing(httplib::Response& res, std::chrono::steady_clock::time_point start,
                                double cpu_start, long long queued_start) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    char dur[128];
    int n = std::snprintf(dur, sizeof dur, "app;dur=%.3f, cpu;dur=%.3f", ms,
                          thread_cpu_ms() - cpu_start);
    const long long queued_end = queued_start < 0 ? -1 : thread_run_queue_ns();
    if (queued_end >= queued_start && queued_start >= 0)
      std::snprintf(dur + n, sizeof dur - static_cast<size_t>(n), ", queue;dur=%.3f",
                    static_cast<double>(queued_end - queued_start) * 1e-6);
    std::string timing = res.get_header_value("Server-Timing");
    res.headers.erase("Server-Timing");
    res.set_header("Server-Timing", timing.empty() ? dur : timing + ", " + dur);
  }

  /// When a cached result was built, from which database (or run) version, and in how long.
  struct Built {
    std::int64_t version = -1;
    std::chrono::steady_clock::time_point at;
    double seconds = 0;
  };
  static Built built_since(std::int64_t version, std::chrono::steady_clock::time_point start) {
    return {version, start,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  }
  /// What a lookup of a cached result (`b`) does for `version`: serve it (its own version), build
  /// a new one on this thread (a result quick to build, under ServerOptions::rebuild_floor_s), or
  /// serve it while `rebuilds` builds its successor, at most once per rebuild_factor (20) build
  /// times (a slow one: a tuned header over a million measurements, a selection table, a chart of
  /// a big run). While a worker stores measurements every moment, rebuilding then takes at most
  /// about 5% of a core, at nice 19, and no request waits for it; the newest measurements show
  /// within 20 build times and one rebuild.
  enum class Lookup { kServe, kBuildHere, kServeStale, kServeStaleAndRebuild };
  Lookup lookup(const Built& b, std::int64_t version,
                std::chrono::steady_clock::time_point now) const {
    if (b.version == version) return Lookup::kServe;
    if (b.seconds < opt.rebuild_floor_s) return Lookup::kBuildHere;
    const double age = std::chrono::duration<double>(now - b.at).count();
    return age < opt.rebuild_factor * b.seconds ? Lookup::kServeStale
                                                : Lookup::kServeStaleAndRebuild;
  }

  // Derived results (series, aggregates, charts, headers), cached until the run (or the
  // database) changes, as lookup() says.
  struct CacheEntry {
    Built built;
    std::shared_ptr<const std::string> body;
  };
  enum Cache { kNoCache, kRunCache, kGlobalCache };
  std::mutex cache_mu;
  std::map<std::string, CacheEntry> cache;
  /// Builds a cached route's body for a request (its path's matches set): on a request thread or
  /// in `rebuilds`.
  using Builder = std::function<std::string(const httplib::Request&)>;
  std::int64_t version_of(Cache kind, const httplib::Request& req) {
    return kind == kRunCache ? db::Browser(store()).run_version(path_id(req)) : global_version();
  }
  /// The body for `req`, and how it was had ("hit", "stale" or "built", for Server-Timing).
  std::pair<std::shared_ptr<const std::string>, const char*> cached(const httplib::Request& req,
                                                                    Cache kind,
                                                                    const std::regex& route,
                                                                    const Builder& build) {
    std::string key = req.path + "?";
    for (auto& [k, v] : req.params)
      if (k != "t") key += k + "=" + v + "&";  // t= only defeats the browser's cache
    const std::int64_t version = version_of(kind, req);
    const auto start = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(cache_mu);
      auto it = cache.find(key);
      if (it != cache.end()) switch (lookup(it->second.built, version, start)) {
          case Lookup::kServe:
            return {it->second.body, "hit"};
          case Lookup::kServeStaleAndRebuild:
            rebuilds.post("cache " + key,
                          [this, key, kind, route, build, path = req.path, params = req.params] {
                            httplib::Request r;
                            r.method = "GET", r.path = path, r.params = params;
                            std::regex_match(r.path, r.matches, route);
                            rebuild_cached(key, kind, r, build);
                          });
            [[fallthrough]];
          case Lookup::kServeStale:
            return {it->second.body, "stale"};
          case Lookup::kBuildHere:
            break;
        }
    }
    auto body = std::make_shared<const std::string>(build(req));
    const Built built = built_since(version, start);
    std::lock_guard<std::mutex> lock(cache_mu);
    if (cache.size() > 512) cache.clear();
    cache[key] = {built, body};
    return {body, "built"};
  }
  /// A background rebuild of a cached result. When it fails (the run is gone), the entry goes,
  /// so that the next request builds it and gets the error.
  void rebuild_cached(const std::string& key, Cache kind, const httplib::Request& r,
                      const Builder& build) {
    try {
      const std::int64_t version = version_of(kind, r);
      const auto start = std::chrono::steady_clock::now();
      auto body = std::make_shared<const std::string>(build(r));
      const Built built = built_since(version, start);
      std::lock_guard<std::mutex> lock(cache_mu);
      cache[key] = {built, body};
    } catch (...) {
      std::lock_guard<std::mutex> lock(cache_mu);
      cache.erase(key);
      rethrow_with_message();
    }
  }
  /// Rethrows the exception being handled, an HttpError as a std::runtime_error with its message.
  [[noreturn]] static void rethrow_with_message() {
    try {
      throw;
    } catch (const HttpError& e) {
      throw std::runtime_error(std::to_string(e.status) + " " + e.message);
    }
  }
  std::int64_t global_version() { return db::Browser(store()).measurements_version(); }

  // The runtime selection table (select::table_from_store) of the whole database per kernel,
  // rebuilt when a measurement was added since, as lookup() says: a lookup is then the table's
  // memoized choose().
  struct SelectEntry {
    select::Table table;
    Built built;
  };
  std::mutex select_mu;
  std::map<std::string, SelectEntry> select_tables;
  select::Table selection(const std::string& kernel) {
    const std::int64_t version = global_version();
    const auto now = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(select_mu);
      auto it = select_tables.find(kernel);
      if (it != select_tables.end()) switch (lookup(it->second.built, version, now)) {
          case Lookup::kServe:
            return it->second.table;
          case Lookup::kServeStaleAndRebuild:
            rebuilds.post("selection " + kernel, [this, kernel] {
              try {
                build_selection(kernel);
              } catch (...) {
                std::lock_guard<std::mutex> lock(select_mu);
                select_tables.erase(kernel);
                rethrow_with_message();
              }
            });
            [[fallthrough]];
          case Lookup::kServeStale:
            return it->second.table;
          case Lookup::kBuildHere:
            break;
        }
    }
    return build_selection(kernel);
  }
  /// Builds the selection table of `kernel` from the database as it is now, and keeps it.
  select::Table build_selection(const std::string& kernel) {
    const std::int64_t version = global_version();
    const auto start = std::chrono::steady_clock::now();
    select::DecisionTable data = select::table_from_store(store(), kernel);
    data.origin = "the daemon's database";
    if (data.kernels.empty()) {  // say which kernels there are, as select would over all of them
      std::string names;
      for (const auto& k : db::Browser(store()).kernels())
        names += (names.empty() ? "" : ", ") + k.value("name", std::string());
      throw HttpError{404,
                      "no kernel '" + kernel + "' in the daemon's database; it has: " +
                          (names.empty() ? "none" : names) +
                          ". Fix: tune it and export again, or name one of those.",
                      "id"};
    }
    auto t = select::Table::from(std::move(data));
    if (!t) throw std::runtime_error(t.error().message);
    const Built built = built_since(version, start);
    std::lock_guard<std::mutex> lock(select_mu);
    if (select_tables.size() > 256) select_tables.clear();
    select_tables[kernel] = SelectEntry{*t, built};
    return std::move(t).value();
  }
  json select_answer(const httplib::Request& req);

  /// Derived results (series, aggregates, charts) are served from memory while the run (or, for a
  /// context's history, the database) has no new measurement.
  static Cache cache_kind(const std::string& pattern) {
    static const std::map<std::string, Cache> kinds = {
        {R"(/api/runs/(\d+)/best_over_time)", kRunCache},
        {R"(/api/runs/(\d+)/parameters)", kRunCache},
        {R"(/api/runs/(\d+)/predicted)", kRunCache},
        {R"(/api/runs/(\d+)/best.svg)", kRunCache},
        {R"(/api/runs/(\d+)/scatter.svg)", kRunCache},
        {R"(/api/runs/(\d+)/parameters.svg)", kRunCache},
        {R"(/api/contexts/(\d+)/history)", kGlobalCache},
        // a tuned header reads every winner of the kernel: 1.4 to 2.7 s under load (load_bench)
        {R"(/api/kernels/(\d+)/header)", kGlobalCache},
        {R"(/api/contexts/(\d+)/history.svg)", kGlobalCache}};
    auto it = kinds.find(pattern);
    return it == kinds.end() ? kNoCache : it->second;
  }

  void get(const std::string& pattern,
           std::function<void(const httplib::Request&, httplib::Response&)> fn) {
    const Cache cache = cache_kind(pattern);
    if (cache == kNoCache) {
      http.Get(pattern, wrap(false, std::move(fn)));
      return;
    }
    // Built with a response of its own, so that it can be built on any thread (Rebuilds).
    const Builder build = [fn](const httplib::Request& req) {
      httplib::Response res;
      fn(req, res);
      if (res.status != -1 && res.status != 200)  // -1: the handler left the default (200)
        throw HttpError{res.status, json::parse(res.body).value("error", "error"), ""};
      // the type, the download name (a header file's) and the body
      return res.get_header_value("Content-Type") + "\n" +
             res.get_header_value("Content-Disposition") + "\n" + res.body;
    };
    http.Get(pattern, wrap(false, [this, build, cache, route = std::regex(pattern)](
                                      const httplib::Request& req, httplib::Response& res) {
               const auto [body, how] = cached(req, cache, route, build);
               const auto type_end = body->find('\n'), name_end = body->find('\n', type_end + 1);
               res.status = 200;
               res.set_header("Cache-Control", "no-store");
               res.set_header("Server-Timing", std::string("cache;desc=\"") + how + "\"");
               if (name_end > type_end + 1)
                 res.set_header("Content-Disposition",
                                body->substr(type_end + 1, name_end - type_end - 1));
               res.set_content(body->data() + name_end + 1, body->size() - name_end - 1,
                               body->substr(0, type_end));
             }));
  }

  void routes();  ///< every route, by group:
  void kernel_routes();
  void run_routes();
  void chart_routes();
  void write_routes();
  void static_files();

  explicit Impl(ServerOptions o) : opt(std::move(o)), rebuilds(opt.rebuild_nice) {}
  /// Last, so that it is gone (its thread joined) before anything its jobs use.
  Rebuilds rebuilds;
};

}  // namespace gputune::web
