#pragma once
// A launcher's connection to another launcher (TCP) or to its node's leader rank (a socket
// pair): non-blocking, frames queued for writing and taken whole on reading.
#include <poll.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loom/dsm/runtime/launch/node_wire.hpp"

namespace loom::runtime::launch {

using Clock = std::chrono::steady_clock;

class Link {
 public:
  Link(int fd, std::string name);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  int fd() const { return fd_; }
  const std::string& name() const { return name_; }
  bool open() const { return fd_ >= 0; }
  void send(std::vector<std::byte> frame);
  // The events to poll for, and what poll() said of them. on_events returns false once the
  // connection is closed (end of file, an error); its reason is in why_closed().
  short events() const { return static_cast<short>(POLLIN | (out_.empty() ? 0 : POLLOUT)); }
  bool on_events(short revents);
  // The next whole frame read; an Error if what arrived is malformed.
  std::optional<Frame> next() { return take_frame(in_); }
  // Writes what is queued, waiting up to `limit` (a last word before closing).
  void flush(std::chrono::milliseconds limit);
  void close(const std::string& why);
  const std::string& why_closed() const { return why_; }
  Clock::time_point last_heard() const { return heard_; }

 private:
  int fd_;
  std::string name_;
  std::vector<std::byte> in_;
  std::vector<std::byte> out_;
  Clock::time_point heard_ = Clock::now();
  std::string why_;
};

// What one pass of a launcher's loop polls: descriptors and what to call when they are ready.
class PollSet {
 public:
  void add(int fd, short events, std::function<void(short)> on_ready);
  // Polls for up to `ms` and calls the handlers of the ready descriptors; clears the set.
  void wait(int ms);

 private:
  std::vector<pollfd> fds_;
  std::vector<std::function<void(short)>> handlers_;
};

// Connects to host:port (TCP, non-blocking), waiting up to `limit`; -1 with `why` on failure.
int tcp_connect(const std::string& host, int port, std::chrono::milliseconds limit, std::string* why);
// Listens on host:port (port 0: any); returns the descriptor and sets `port`; throws on failure.
int tcp_listen(const std::string& host, int& port);

}  // namespace loom::runtime::launch
