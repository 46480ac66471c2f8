#include "web/connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace gputune::web {

namespace {

constexpr size_t kReadAhead = 4096;
constexpr size_t kSendAt = 64 * 1024;

/// poll() on one descriptor for `events`, restarted after a signal; >0 ready, 0 timeout, <0 error.
int poll_one(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, timeout_ms);
    if (n >= 0 || errno != EINTR) return n;
  }
}

void address_of(const sockaddr_storage& a, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST] = {}, serv[NI_MAXSERV] = {};
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

}  // namespace

ConnectionStream::ConnectionStream(int sock, int read_timeout_ms, int write_timeout_ms)
    : sock_(sock), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms) {}

bool ConnectionStream::is_readable() const {
  return in_at_ < in_.size() || poll_one(sock_, POLLIN, read_timeout_ms_) > 0;
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (!out_.empty() && !flush()) return -1;  // "100 Continue": the client waits for it
  if (in_at_ == in_.size()) {
    if (!is_readable()) return -1;
    in_.resize(std::max(kReadAhead, size));
    ssize_t n;
    do n = ::recv(sock_, in_.data(), in_.size(), 0);
    while (n < 0 && errno == EINTR);
    in_.resize(n > 0 ? static_cast<size_t>(n) : 0);
    in_at_ = 0;
    if (n <= 0) return n;
  }
  const size_t n = std::min(size, in_.size() - in_at_);
  std::memcpy(ptr, in_.data() + in_at_, n);
  in_at_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (failed_) return -1;
  if (size >= kSendAt) {  // a big body: not copied
    if (!flush() || !send_all(ptr, size)) return -1;
    return static_cast<ssize_t>(size);
  }
  out_.append(ptr, size);
  if (out_.size() >= kSendAt && !flush()) return -1;
  return static_cast<ssize_t>(size);
}

bool ConnectionStream::flush() {
  const bool sent = send_all(out_.data(), out_.size());
  out_.clear();
  return sent;
}

bool ConnectionStream::send_all(const char* ptr, size_t size) {
  size_t at = 0;
  while (!failed_ && at < size) {
    const ssize_t n = ::send(sock_, ptr + at, size - at, MSG_NOSIGNAL);
    if (n > 0) {
      at += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // a send timeout (SO_SNDTIMEO, set by httplib) or a full buffer: wait for room once more
      if (poll_one(sock_, POLLOUT, write_timeout_ms_) <= 0) failed_ = true;
    } else {
      failed_ = true;
    }
  }
  return !failed_;
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getpeername(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, len, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(sock_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, len, ip, port);
}

Wait wait_for_request(int sock, int stop_fd, int pressure_fd, int timeout_ms,
                      const std::function<bool()>& claim) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  pollfd p[3] = {{sock, POLLIN, 0}, {stop_fd, POLLIN, 0}, {pressure_fd, POLLIN, 0}};
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now())
                          .count();
    // poll() skips a negative descriptor
    const int n = ::poll(p, 3, static_cast<int>(std::max<long long>(left, 0)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Wait::kEnd;  // the time is up, or an error
    if (p[0].revents) return Wait::kRequest;
    if (p[1].revents) return Wait::kEnd;
    if (p[2].revents && claim()) return Wait::kPark;
    // another connection took the turn: wait on (the pressure fd is not readable once taken)
  }
}

}  // namespace gputune::web
