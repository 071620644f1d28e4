// Launcher connections: non-blocking frame I/O, the poll set of one loop pass, TCP set-up.
#include "loom/dsm/runtime/launch/link.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "loom/dsm/common/error.hpp"

namespace loom::runtime::launch {

Link::Link(int fd, std::string name) : fd_(fd), name_(std::move(name)) {
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on a socket pair
}

Link::~Link() {
  if (fd_ >= 0) ::close(fd_);
}

void Link::send(std::vector<std::byte> frame) {
  if (fd_ < 0) return;
  out_.insert(out_.end(), frame.begin(), frame.end());
  on_events(POLLOUT);  // most frames go out at once
}

bool Link::on_events(short revents) {
  if (fd_ < 0) return false;
  if (revents & POLLIN) {
    std::byte buf[65536];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        in_.insert(in_.end(), buf, buf + n);
        heard_ = Clock::now();
        continue;
      }
      if (n == 0) {
        close("the other end closed the connection");
        return false;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      close(std::string("reading failed: ") + std::strerror(errno));
      return false;
    }
  }
  if ((revents & (POLLOUT | POLLERR | POLLHUP)) && !out_.empty()) {
    while (!out_.empty()) {
      const ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        out_.erase(out_.begin(), out_.begin() + n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      close(std::string("writing failed: ") + std::strerror(errno));
      return false;
    }
  }
  if ((revents & (POLLERR | POLLHUP)) && !(revents & POLLIN)) {
    close("the connection failed");
    return false;
  }
  return true;
}

void Link::flush(std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (fd_ >= 0 && !out_.empty() && Clock::now() < until) {
    pollfd p{fd_, POLLOUT, 0};
    ::poll(&p, 1, 20);
    if (!on_events(POLLOUT)) return;
  }
}

void Link::close(const std::string& why) {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  why_ = why;
}

void PollSet::add(int fd, short events, std::function<void(short)> on_ready) {
  fds_.push_back({fd, events, 0});
  handlers_.push_back(std::move(on_ready));
}

void PollSet::wait(int ms) {
  const int n = ::poll(fds_.data(), fds_.size(), ms);
  if (n > 0)
    for (size_t i = 0; i < fds_.size(); ++i)
      if (fds_[i].revents != 0) handlers_[i](fds_[i].revents);
  fds_.clear();
  handlers_.clear();
}

namespace {
addrinfo* resolve(const std::string& host, int port, bool passive, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    *why = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return nullptr;
  }
  return res;
}
}  // namespace

int tcp_connect(const std::string& host, int port, std::chrono::milliseconds limit, std::string* why) {
  addrinfo* res = resolve(host, port, false, why);
  if (res == nullptr) return -1;
  int fd = -1;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(limit.count())) == 1) {
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = ETIMEDOUT;
      }
    }
    if (err == 0) break;
    *why = std::strerror(err);
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

int tcp_listen(const std::string& host, int& port) {
  std::string why;
  addrinfo* res = resolve(host, port, true, &why);
  if (res == nullptr) fail("launcher: ", why);
  const int fd = ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  if (fd < 0) {
    freeaddrinfo(res);
    fail_errno("launcher: socket");
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 256) != 0) {
    const int e = errno;
    freeaddrinfo(res);
    ::close(fd);
    throw SystemError("launcher: cannot listen on " + (host.empty() ? std::string("*") : host) + ":" + std::to_string(port) +
                          (e == EADDRNOTAVAIL ? " (this host does not have that address: node rank 0 runs where the rendezvous points)" : ""),
                      e);
  }
  freeaddrinfo(res);
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  port = ntohs(sa.sin_port);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

}  // namespace loom::runtime::launch
