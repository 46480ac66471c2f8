/** \file web/server.cpp
 * Owns: building a Server (its routes, static files, error pages, HTTP settings), binding,
 * running and stopping it, answering one request from memory (Server::handle), and the checks a
 * request's token and a submitted path get. The routes themselves are routes.cpp's; the state
 * they share, server_impl.h's.
 */
#include "web/server.h"

#include <filesystem>

#include "web/assets.h"
#include "web/server_impl.h"

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
