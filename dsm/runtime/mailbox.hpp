#pragma once
// Pairwise exchange of bytes between two processes, for set-ups two ranks make together (an
// rpipe's two ends trade their queue pairs' endpoints and memory keys here) where a collective
// over the job would be wrong: a message is a one-way service call, kept by the receiver under
// (sender, tag) until a thread takes it. The handler is registered when the Runtime starts, so a
// message sent before its receiver asks is never lost.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "loom/dsm/runtime/peer_watch.hpp"
#include "loom/dsm/runtime/service.hpp"

namespace loom::runtime {

class Mailbox {
 public:
  Mailbox(Service& service, PeerWatch& peers);
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // Leaves `bytes` for rank `dest` under `tag` (at most max_payload() bytes).
  void send(int dest, uint64_t tag, std::span<const std::byte> bytes);
  // The oldest message rank `src` left here under `tag`; waits (woken by its arrival) until one
  // is, and fails naming `what` if `src` cannot take part any more.
  std::vector<std::byte> receive(int src, uint64_t tag, const char* what);
  size_t max_payload() const;
  // How many times this process asked for (peer, family) before: pairwise set-ups numbered this
  // way match up when both ranks make them in the same order (and start again with a new Runtime).
  uint64_t sequence(int peer, uint64_t family);
  // Messages kept and not yet taken (a test's view of leaks).
  size_t kept() const;

 private:
  void keep(int src, std::span<const std::byte> payload);

  Service& service_;
  PeerWatch& peers_;
  uint32_t function_ = 0;
  mutable std::mutex mu_;
  std::condition_variable arrived_;
  std::map<std::pair<int, uint64_t>, std::deque<std::vector<std::byte>>> box_;
  std::map<std::pair<int, uint64_t>, uint64_t> sequences_;
};

}  // namespace loom::runtime
