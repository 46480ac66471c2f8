#include "web/server.h"

#include <httplib.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "db/browse.h"
#include "db/interchange.h"
#include "db/store.h"
#include "db/tuned_header.h"
#include "select/decision_table.h"
#include "select/select.h"
#include "variants/hash.h"
#include "variants/job.h"
#include "variants/space.h"
#include "web/assets.h"
#include "web/charts.h"
#include "web/connection.h"
#include "web/connection_pool.h"
#include "web/rebuilds.h"
#include "web/thread_sched.h"

namespace gputune::web {

using nlohmann::json;

bool token_matches(const std::string& presented, const std::string& expected) {
  if (expected.empty() || presented.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  return diff == 0;
}

bool is_loopback(const std::string& a) {
  return a.rfind("127.", 0) == 0 || a == "::1" || a.rfind("::ffff:127.", 0) == 0;
}

namespace {

/// An error for the client: HTTP status, message, and the parameter it concerns.
struct HttpError {
  int status;
  std::string message, field;
};

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

/// A job's `files`: [{"path": "/abs/normal", "base64": "..."}], each path once.
std::vector<db::QueueFile> submitted_files(const json& body) {
  std::vector<db::QueueFile> out;
  if (!body.contains("files")) return out;
  if (!body["files"].is_array())
    throw HttpError{400, "files must be a list of {\"path\", \"base64\"} objects", "files"};
  std::set<std::string> seen;
  for (size_t i = 0; i < body["files"].size(); ++i) {
    const json& f = body["files"][i];
    const std::string at = "files[" + std::to_string(i) + "]";
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("base64") ||
        !f["base64"].is_string())
      throw HttpError{400, at + " must be an object with string fields path and base64", at};
    db::QueueFile q;
    q.path = f["path"].get<std::string>();
    if (const std::string why = bad_submitted_path(q.path); !why.empty())
      throw HttpError{400, at + ".path '" + q.path + "' " + why, at + ".path"};
    if (!seen.insert(q.path).second)
      throw HttpError{400, at + ".path '" + q.path + "' is given twice", at + ".path"};
    auto bytes = base64_decode(f["base64"].get<std::string>());
    if (!bytes) throw HttpError{400, at + ".base64 is not base64", at + ".base64"};
    q.bytes = std::move(*bytes);
    out.push_back(std::move(q));
  }
  return out;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  // Replace, not throw: an error message may quote the client's bytes (a field name cut in the
  // middle of a UTF-8 sequence), and the client must still get it.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

std::int64_t int_param(const httplib::Request& req, const std::string& name, std::int64_t dflt,
                       std::int64_t lo, std::int64_t hi) {
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

std::string str_param(const httplib::Request& req, const std::string& name, size_t max_len = 200) {
  if (!req.has_param(name)) return {};
  std::string v = req.get_param_value(name);
  if (v.size() > max_len) throw HttpError{400, name + " is too long", name};
  return v;
}

std::int64_t path_id(const httplib::Request& req, size_t i = 1) {
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

/// A connection in memory: the request's bytes to read, the response's written.
class MemoryStream : public httplib::Stream {
 public:
  MemoryStream(std::string_view in, std::string remote) : in_(in), remote_(std::move(remote)) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - at_);
    if (n) std::memcpy(ptr, in_.data() + at_, n);
    at_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = remote_, port = 50000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1", port = 8080;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  std::string out;

 private:
  std::string_view in_;
  size_t at_ = 0;
  std::string remote_;
};

}  // namespace

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

void Server::Impl::static_files() {
  for (const Asset& a : assets()) {
    std::string path = a.path;
    auto serve = [&a](const httplib::Request&, httplib::Response& res) {
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; img-src 'self' data:; style-src 'self'");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_content(a.data, a.size, a.mime);
    };
    get("/" + path, serve);
    if (path == "index.html")  // one shell for every page: app.js draws by path
      for (const char* page : {"/", "/kernel.html", "/run.html", "/history.html"}) get(page, serve);
  }
}

void Server::Impl::routes() {
  kernel_routes();
  run_routes();
  chart_routes();
  write_routes();
}

/// The kernels, their devices, contexts and tuned headers.
void Server::Impl::kernel_routes() {
  get("/api/devices", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, db::Browser(store()).devices());
  });
  get("/api/kernels", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, db::Browser(store()).kernels());
  });
  get(R"(/api/kernels/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto k = db::Browser(store(), opt.source_command).kernel(path_id(req));
    if (!k) throw HttpError{404, "no such kernel", "id"};
    send_json(res, 200, *k);
  });
  // The kernel's winners as a C/C++ header (db/tuned_header.h), this version of its source only.
  get(R"(/api/kernels/(\d+)/header)", [this](const httplib::Request& req, httplib::Response& res) {
    auto k = db::Browser(store()).kernel(path_id(req));
    if (!k) throw HttpError{404, "no such kernel", "id"};
    const std::string name = (*k)["name"].get<std::string>();
    std::string text;
    try {
      text = db::tuned_header(
          store(), (*k)["hash"].get<std::string>(),
          {str_param(req, "context"), str_param(req, "device"), "the daemon's database", ""});
    } catch (const std::invalid_argument& e) {
      throw HttpError{404, e.what(), "id"};
    }
    std::string file = db::macro_suffix(name) + "_tuned.h";
    res.set_header("Content-Disposition", "attachment; filename=\"" + file + "\"");
    res.set_content(text, "text/x-c; charset=utf-8");
  });
  // Runtime selection (select::Table::choose) for a device and problem size: what `gputune best
  // --size` answers, with how it was obtained. The kernel by id (its name is used: the newest
  // version of its source answers) or by name.
  get(R"(/api/kernels/([^/]+)/select)",
      [this](const httplib::Request& req, httplib::Response& res) {
        send_json(res, 200, select_answer(req));
      });
  get("/api/contexts", [this](const httplib::Request& req, httplib::Response& res) {
    std::string kernel = str_param(req, "kernel");
    if (kernel.empty()) throw HttpError{400, "kernel is required", "kernel"};
    json out = json::array();
    for (auto& c : store().contexts(kernel))
      out.push_back({{"id", c.id},
                     {"label", c.label},
                     {"device", c.device},
                     {"problem_size", json::parse(c.problem_size_json)},
                     {"arch", c.arch}});
    send_json(res, 200, out);
  });
}

json Server::Impl::select_answer(const httplib::Request& req) {
  std::string kernel = req.matches[1];
  if (!kernel.empty() &&
      std::all_of(kernel.begin(), kernel.end(), [](unsigned char c) { return std::isdigit(c); })) {
    auto k = kernel.size() > 18 ? std::nullopt : db::Browser(store()).kernel(std::stoll(kernel));
    if (!k) throw HttpError{404, "no kernel with id " + kernel, "id"};
    kernel = (*k)["name"].get<std::string>();
  }
  const std::string device = str_param(req, "device"), arch = str_param(req, "arch", 40);
  if (device.empty())
    throw HttpError{400,
                    "device is required: the GPU's name as the driver gives it, e.g. "
                    "device=NVIDIA%20H100%2080GB%20HBM3 (the kernel page lists its devices)",
                    "device"};
  const std::string size_text = str_param(req, "size");
  if (size_text.empty())
    throw HttpError{400, "size is required: the problem size, e.g. size=2048,2048", "size"};
  select::Input input;
  static const std::regex one("[0-9]{1,15}");
  size_t at = 0;
  while (at <= size_text.size()) {
    const size_t end = std::min(size_text.find_first_of(",x", at), size_text.size());
    const std::string part = size_text.substr(at, end - at);
    if (!std::regex_match(part, one) || std::stoll(part) < 1)
      throw HttpError{400,
                      "size '" + size_text + "': '" + part +
                          "' is not a positive integer. Fix: give the problem size as positive "
                          "integers separated by commas, e.g. size=2048,2048",
                      "size"};
    input.problem_size.push_back(std::stoll(part));
    at = end + 1;
  }
  for (const auto& [name, v] : req.params)
    if (name.rfind("value.", 0) == 0) {
      char* rest = nullptr;
      const double x = std::strtod(v.c_str(), &rest);
      if (v.empty() || *rest || !std::isfinite(x))
        throw HttpError{400, name + " must be a number", name};
      input.values[name.substr(6)] = x;
    }
  auto choice = selection(kernel).choose(kernel, {device, arch}, input);
  if (!choice) {
    const select::Error& e = choice.error();
    const bool unknown = e.code == select::Error::Code::kUnknownKernel ||
                         e.code == select::Error::Code::kUnknownDevice;
    const bool bad = e.code == select::Error::Code::kBadInput;
    throw HttpError{unknown ? 404
                    : bad   ? 400
                            : 422,
                    e.message,
                    e.code == select::Error::Code::kUnknownKernel   ? "id"
                    : e.code == select::Error::Code::kUnknownDevice ? "device"
                    : bad                                           ? "size"
                                                                    : ""};
  }
  const select::Choice& c = *choice;
  json params = json::array();
  for (const auto& [name, value] : c.params) params.push_back({{"name", name}, {"value", value}});
  json expected = nullptr;
  if (c.expected)
    expected = {{"contexts", c.expected->contexts},
                {"unknown", c.expected->unknown},
                {"median", c.expected->median},
                {"worst", c.expected->worst},
                {"mean", c.expected->mean}};
  return {{"kernel", c.kernel},
          {"device", c.device},
          {"asked", {{"device", device}, {"arch", arch}, {"size", input.problem_size}}},
          {"how", select::to_string(c.how)},
          {"config", c.config},
          {"params", params},
          {"from", c.from},
          {"measured_ms", c.measured_ms ? json(*c.measured_ms) : json(nullptr)},
          {"expected", expected},
          {"grid", c.has_geometry ? json(c.grid) : json(nullptr)},
          {"block", c.has_geometry ? json(c.block) : json(nullptr)},
          {"dynamic_smem", c.has_geometry ? json(c.dynamic_smem) : json(nullptr)},
          {"explain", c.explain()}};
}

/// Runs, their measurements and what is derived from them (JSON), winners, the queue.
void Server::Impl::run_routes() {
  get("/api/runs", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200,
              db::Browser(store()).runs(static_cast<int>(int_param(req, "limit", 20, 1, 1000)),
                                        int_param(req, "offset", 0, 0, INT64_MAX / 2)));
  });
  get(R"(/api/runs/(\d+))", [this](const httplib::Request& req, httplib::Response& res) {
    auto r = db::Browser(store()).run(path_id(req));
    if (!r) throw HttpError{404, "no such run", "id"};
    send_json(res, 200, *r);
  });
  // One tuning problem of a run (a context; a kernel where several share its label) as a T4
  // results file (db::export_t4); 400 with the list of its problems when the choice is open.
  get(R"(/api/runs/(\d+)/t4)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::int64_t id = path_id(req);
    if (!store().run(id)) throw HttpError{404, "no such run", "id"};
    const std::string context = str_param(req, "context"), kernel = str_param(req, "kernel");
    std::string text;
    try {
      text = db::export_t4(store(), id, context, kernel);
    } catch (const std::invalid_argument& e) {
      throw HttpError{400, e.what(), "context"};
    }
    std::string file = "run" + std::to_string(id) + (context.empty() ? "" : "-" + context);
    for (char& ch : file)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
    res.set_header("Content-Disposition", "attachment; filename=\"" + file + ".t4.json\"");
    res.set_content(text + "\n", "application/json");
  });
  get(R"(/api/runs/(\d+)/measurements)",
      [this](const httplib::Request& req, httplib::Response& res) {
        db::MeasurementQuery q;
        q.run_id = path_id(req);
        q.context_id = int_param(req, "context", 0, 0, INT64_MAX / 2);
        q.status = str_param(req, "status", 20);
        q.search = str_param(req, "q", 200);
        if (req.has_param("sort")) q.sort = str_param(req, "sort", 20);
        std::string order = req.has_param("order") ? str_param(req, "order", 4) : "asc";
        if (order != "asc" && order != "desc")
          throw HttpError{400, "order must be asc or desc", "order"};
        q.descending = order == "desc";
        q.limit = static_cast<int>(int_param(req, "limit", 50, 1, 1000));
        q.offset = int_param(req, "offset", 0, 0, INT64_MAX / 2);
        if (!store().run(q.run_id)) throw HttpError{404, "no such run", "id"};
        send_json(res, 200, db::Browser(store()).measurements(q));
      });
  get(R"(/api/runs/(\d+)/best_over_time)",
      [this](const httplib::Request& req, httplib::Response& res) {
        send_json(res, 200, db::Browser(store()).best_over_time(path_id(req)));
      });
  get(R"(/api/runs/(\d+)/parameters)", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200,
              db::Browser(store()).parameter_effects(
                  path_id(req), int_param(req, "context", 0, 0, INT64_MAX / 2)));
  });
  get(R"(/api/runs/(\d+)/predicted)", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200, db::Browser(store()).predicted_vs_measured(path_id(req)));
  });
  get("/api/winners", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200,
              db::Browser(store()).winners(static_cast<int>(int_param(req, "limit", 20, 1, 1000))));
  });
  get("/api/best", [this](const httplib::Request& req, httplib::Response& res) {
    std::string kernel = str_param(req, "kernel");
    if (kernel.empty()) throw HttpError{400, "kernel is required", "kernel"};
    auto ws = store().winners(kernel, str_param(req, "context"), str_param(req, "device"));
    if (ws.empty()) throw HttpError{404, "no winner stored for this kernel and context", "kernel"};
    json out = json::array();
    for (auto& w : ws)
      out.push_back({{"kernel", w.kernel},
                     {"context", w.context_label},
                     {"device", w.device},
                     {"time_ms", w.time_ms},
                     {"configuration", json::parse(w.params_json)},
                     {"key", w.config_key},
                     {"run_id", w.run_id}});
    send_json(res, 200, out);
  });
  get(R"(/api/contexts/(\d+)/history)",
      [this](const httplib::Request& req, httplib::Response& res) {
        auto h = db::Browser(store()).context_history(path_id(req));
        if (!h) throw HttpError{404, "no such context", "id"};
        send_json(res, 200, *h);
      });
  get("/api/queue", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200,
              db::Browser(store()).queue(static_cast<int>(int_param(req, "limit", 50, 1, 1000))));
  });
}

/// Charts (SVG).
void Server::Impl::chart_routes() {
  auto svg = [](httplib::Response& res, const std::string& body) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(body, "image/svg+xml");
  };
  get(R"(/api/runs/(\d+)/best.svg)",
      [this, svg](const httplib::Request& req, httplib::Response& res) {
        db::Browser b(store());
        std::int64_t id = path_id(req);
        auto run = b.run(id);
        if (!run) throw HttpError{404, "no such run", "id"};
        std::map<std::int64_t, Series> by_ctx;
        for (auto& p : b.best_over_time(id)) {
          auto& s = by_ctx[p["context_id"].get<std::int64_t>()];
          s.x.push_back(p["index"].get<double>());
          s.y.push_back(p["best_ms"].get<double>());
        }
        std::vector<Series> series;
        for (auto& c : (*run)["contexts"]) {
          auto it = by_ctx.find(c["id"].get<std::int64_t>());
          if (it == by_ctx.end()) continue;
          it->second.name = c["label"].get<std::string>();
          series.push_back(it->second);
        }
        // A log time axis: the default configuration (85 ms) and the region where tuning happens
        // (5-6 ms) both readable.
        svg(res, line_chart("Best time so far", series, "correct measurements",
                            "best time (log scale)", true, Axis::log_ms));
      });
  get(R"(/api/runs/(\d+)/scatter.svg)", [this, svg](const httplib::Request& req,
                                                    httplib::Response& res) {
    Series pts;
    for (auto& p : db::Browser(store()).predicted_vs_measured(path_id(req))) {
      pts.x.push_back(p["predicted_ms"].get<double>());
      pts.y.push_back(p["time_ms"].get<double>());
    }
    svg(res, pts.x.empty()
                 ? empty_chart("Measured vs predicted", "no model predictions stored for this run")
                 : scatter_chart("Measured vs predicted", pts, "predicted time (log scale)",
                                 "measured time (log scale)", true, Axis::log_ms));
  });
  get(R"(/api/runs/(\d+)/parameters.svg)",
      [this, svg](const httplib::Request& req, httplib::Response& res) {
        std::vector<BarGroup> groups;
        auto eff = db::Browser(store()).parameter_effects(
            path_id(req), int_param(req, "context", 0, 0, INT64_MAX / 2));
        for (auto& p : eff["parameters"]) {
          if (p["values"].size() < 2) continue;  // a parameter with one value has no effect to show
          BarGroup g;
          g.name = p["parameter"].get<std::string>();
          for (auto& v : p["values"]) {
            g.labels.push_back(v["value"].is_string() ? v["value"].get<std::string>()
                                                      : v["value"].dump());
            g.values.push_back(v["best_ms"].get<double>());
          }
          groups.push_back(std::move(g));
        }
        svg(res, bar_chart("Best time per parameter value", groups, "best time", Axis::ms));
      });
  get(R"(/api/contexts/(\d+)/history.svg)",
      [this, svg](const httplib::Request& req, httplib::Response& res) {
        auto h = db::Browser(store()).context_history(path_id(req));
        if (!h) throw HttpError{404, "no such context", "id"};
        Series s;
        s.name = (*h)["context"].get<std::string>() + " on " + (*h)["device"].get<std::string>();
        for (auto& p : (*h)["runs"]) {
          s.x.push_back(p["run_id"].get<double>());
          s.y.push_back(p["best_ms"].get<double>());
        }
        svg(res, line_chart("Winning time per run: " + (*h)["kernel"].get<std::string>(), {s},
                            "run", "winning time (log scale)", false, Axis::log_ms));
      });
}

/// Writes: the queue.
void Server::Impl::write_routes() {
  http.Post(
      "/api/jobs", wrap(true, [this](const httplib::Request& req, httplib::Response& res) {
        if (req.body.size() > kMaxJobRequestBytes)
          throw HttpError{413, "job too large (" + mib(kMaxJobRequestBytes) + " at most)", "body"};
        json body = json::parse(req.body);
        if (!body.is_object()) throw HttpError{400, "expected a JSON object", "body"};
        if (!body.contains("document") || !body["document"].is_object())
          throw HttpError{400, "document (the T1 job as a JSON object) is required", "document"};
        if (!body.contains("kernel_source") || !body["kernel_source"].is_string())
          throw HttpError{400, "kernel_source (the kernel file's text) is required",
                          "kernel_source"};
        auto optional_string = [&](const char* key, const char* fallback) {
          if (!body.contains(key)) return std::string(fallback);
          if (!body[key].is_string())
            throw HttpError{400, std::string(key) + " must be a string", key};
          return body[key].get<std::string>();
        };
        db::QueueItem q;
        q.name = optional_string("name", "");
        q.job_file = optional_string("job_file", "submitted.json");
        // Absolute as `submit` sends it, else a name the worker puts under a folder of its own.
        if (const std::string why =
                q.job_file.find('/') != std::string::npos ? bad_submitted_path(q.job_file)
                : q.job_file.find('\0') != std::string::npos ||
                        q.job_file.size() > kMaxSubmittedNameBytes || q.job_file == "." ||
                        q.job_file == ".." || q.job_file.empty()
                    ? "is not a file name"
                    : "";
            !why.empty())
          throw HttpError{400, "job_file " + why, "job_file"};
        // Validate the job as `gputune run` would, before it is queued.
        Job job = parse_job(body["document"], q.job_file);
        Space space = build_space(job);
        if (space.empty())
          throw HttpError{400, space.explain_empty(), "ConfigurationSpace.Conditions"};
        check_kernel_name(job, body["kernel_source"].get<std::string>());
        if (q.name.empty()) q.name = job.name;
        q.document = body["document"].dump();
        q.kernel_file = job.kernel_file.filename().string();
        q.kernel_source = body["kernel_source"].get<std::string>();
        q.client_cwd = optional_string("cwd", "");
        if (!q.client_cwd.empty() && !bad_submitted_path(q.client_cwd).empty())
          throw HttpError{400, "cwd " + bad_submitted_path(q.client_cwd), "cwd"};
        std::vector<db::QueueFile> files = submitted_files(body);
        std::int64_t id = store().enqueue(q, files);
        send_json(res, 201,
                  {{"id", id},
                   {"status", "queued"},
                   {"configurations", space.size()},
                   {"files", files.size()}});
      }));
  http.Post(R"(/api/jobs/(\d+)/cancel)",
            wrap(true, [this](const httplib::Request& req, httplib::Response& res) {
              std::int64_t id = path_id(req);
              auto item = store().queue_item(id);
              if (!item) throw HttpError{404, "no such job", "id"};
              if (!store().request_cancel(id))
                throw HttpError{409,
                                "job " + std::to_string(id) + " is already " +
                                    std::string(db::text(item->status)),
                                "id"};
              send_json(res, 200, queue_item_json(*store().queue_item(id)));
            }));
}

std::string bad_submitted_path(const std::string& path) {
  if (path.empty()) return "is empty";
  if (path.find('\0') != std::string::npos) return "holds a NUL byte";
  const std::filesystem::path p(path);
  if (!p.is_absolute()) return "is not absolute";
  if (path == "/") return "names a folder, not a file";
  if (path.find("//") != std::string::npos || (path.size() > 1 && path.back() == '/') ||
      p.lexically_normal().string() != path)
    return "is not normal (write it without '.', '..', '//' or a trailing '/')";
  // What the worker's system could not create (its folder comes before the path, too).
  if (path.size() > kMaxSubmittedPathBytes)
    return "is longer than " + std::to_string(kMaxSubmittedPathBytes) + " bytes";
  for (const auto& name : p)
    if (name.native().size() > kMaxSubmittedNameBytes)
      return "has a name longer than " + std::to_string(kMaxSubmittedNameBytes) + " bytes";
  return "";
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  db::Store probe(impl_->opt.db_path);  // fail now (bad file, not ours) rather than per request
  impl_->routes();
  impl_->static_files();
  // Called for every status >= 400; handlers' own JSON errors have a body already.
  impl_->http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string why =
        res.status == 404   ? "no such endpoint: " + req.path
        : res.status == 413 ? "request body too large (" + mib(kMaxJobRequestBytes) + " at most)"
        : res.status == 414
            ? "request line too long (" + std::to_string(CPPHTTPLIB_REQUEST_URI_MAX_LENGTH) +
                  " bytes at most): shorten the query"
            : "bad request";
    // A request line too long is refused before its path is read: it may be an /api/ one.
    if (req.path.rfind("/api/", 0) == 0 || res.status == 414)
      send_json(res, res.status, {{"error", why}, {"field", res.status == 414 ? "query" : ""}});
    else
      res.set_content(res.status == 404 ? "not found" : why, "text/plain");
  });
  impl_->http.set_payload_max_length(kMaxJobRequestBytes + 1024);
  // A response leaves in one send (web/connection.h), a big body in more: without TCP_NODELAY,
  // Nagle's algorithm and the client's delayed ACK could hold a response's last segment ~40 ms.
  impl_->http.set_tcp_nodelay(true);
  // httplib closes a keep-alive connection after 5 requests: a dashboard's client would then
  // connect again for every sixth (an accept, a hand-over to a pool thread). nginx's old default;
  // an idle connection still closes after httplib's 5 s.
  impl_->http.set_keep_alive_max_count(100);
}

Server::~Server() = default;

int Server::bind() {
  int port = impl_->opt.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(impl_->opt.bind);
    if (port < 0) throw std::runtime_error("cannot bind to " + impl_->opt.bind);
  } else if (!impl_->http.bind_to_port(impl_->opt.bind, port)) {
    throw std::runtime_error(
        "cannot listen on " + impl_->opt.bind + ":" + std::to_string(port) +
        " (in use, or not an address of this machine); pick another --port or --bind");
  }
  return port;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::stop() {
  impl_->http.stop_idle_connections();
  impl_->http.stop();
}

void Server::settle() { impl_->rebuilds.drain(); }

std::string Server::handle(std::string_view request, const std::string& remote_addr) {
  MemoryStream stream(request, remote_addr);
  bool closed = false;
  impl_->http.process_request(stream, true, closed, nullptr);
  return std::move(stream.out);
}

}  // namespace gputune::web
