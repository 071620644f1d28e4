// Queue pairs to ranks on this host under the shm+verbs provider: key translation, the atomic
// lane, and the endpoint that carries both.
#include "loom/dsm/fabric/hybrid/same_host_qp.hpp"

#include <cstring>

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/error.hpp"

namespace loom::fabric::hybrid {

AtomicLane::AtomicLane(std::unique_ptr<CompletionQueue> cq, std::unique_ptr<QueuePair> qp) : cq_(std::move(cq)), qp_(std::move(qp)) {}

AtomicLane::~AtomicLane() {
  qp_.reset();  // before its queue
}

Status AtomicLane::run(const SendWr& wr, uint32_t& byte_len) {
  std::lock_guard<std::mutex> g(mu_);
  SendWr w = wr;
  w.signaled = true;
  if (const PostResult r = qp_->post_send(w); r != PostResult::Ok)
    return r == PostResult::NotConnected ? Status::WorkRequestFlushed : Status::LocalOperationError;
  Completion c;
  wait::Backoff b;
  while (cq_->poll(std::span(&c, 1)) == 0) {
    if (b.should_sleep()) cq_->wait(std::chrono::milliseconds(100));
    else b.spin_or_yield();
  }
  byte_len = c.byte_len;
  // A failure moves the shm queue pair to the error state (post_foreign); the caller's reset()
  // of both ends then resets the lane too (SameHostQp::reset), as the contract's recovery asks.
  return c.status;
}

SameHostQp::SameHostQp(std::unique_ptr<QueuePair> shm_qp, std::unique_ptr<AtomicLane> lane, const AliasFile* own,
                       std::function<const AliasFile*(int)> peer_aliases)
    : shm_(static_cast<shm::ShmQp*>(shm_qp.release())), lane_(std::move(lane)), own_(own), peer_aliases_(std::move(peer_aliases)) {}

SameHostQp::~SameHostQp() = default;

// [u32 length][the shm endpoint][u32 length][the lane's endpoint, or nothing]
std::vector<std::byte> SameHostQp::endpoint() const {
  std::vector<std::byte> out;
  auto part = [&](const std::vector<std::byte>& p) {
    const auto len = static_cast<uint32_t>(p.size());
    const size_t at = out.size();
    out.resize(at + 4 + p.size());
    std::memcpy(out.data() + at, &len, 4);
    if (!p.empty()) std::memcpy(out.data() + at + 4, p.data(), p.size());
  };
  part(shm_->endpoint());
  part(lane_ ? lane_->endpoint() : std::vector<std::byte>{});
  return out;
}

void SameHostQp::connect(std::span<const std::byte> ep) {
  auto take = [&](const char* what) {
    uint32_t len;
    if (ep.size() < 4) fail("shm+verbs: the endpoint of rank ", peer_rank(), " is cut short (", what, ")");
    std::memcpy(&len, ep.data(), 4);
    if (len > ep.size() - 4) fail("shm+verbs: the endpoint of rank ", peer_rank(), " is cut short (", what, ")");
    auto p = ep.subspan(4, len);
    ep = ep.subspan(4 + len);
    return p;
  };
  const auto shm_ep = take("shm part");
  const auto lane_ep = take("device part");
  if (!ep.empty()) fail("shm+verbs: the endpoint of rank ", peer_rank(), " has bytes after its end");
  if (lane_.operator bool() != !lane_ep.empty())
    fail("shm+verbs: rank ", peer_rank(), " and this rank disagree on device atomics (mixed devices on one host?)");
  peer_ = peer_aliases_(peer_rank());
  if (peer_ == nullptr) fail("shm+verbs: cannot map the key aliases of rank ", peer_rank());
  shm_->connect(shm_ep);
  if (lane_) lane_->connect(lane_ep);
}

PostResult SameHostQp::post_send(const SendWr& wr) {
  if (lane_ && (wr.opcode == Opcode::FetchAdd || wr.opcode == Opcode::CompareSwap))
    return shm_->post_foreign(wr, [&](uint32_t& byte_len) { return lane_->run(wr, byte_len); });
  SendWr w = wr;
  if (!w.inline_data && w.local.length != 0) w.local.lkey = local_key(w.local.lkey);
  if (w.opcode != Opcode::Send) w.rkey = remote_key(w.rkey);
  return shm_->post_send(w);
}

PostResult SameHostQp::post_write(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data) {
  if (!inline_data && local.length != 0) local.lkey = local_key(local.lkey);
  return shm_->post_write(local, remote_addr, remote_key(rkey), inline_data);
}

PostResult SameHostQp::post_recv(const RecvWr& wr) {
  RecvWr w = wr;
  w.local.lkey = local_key(w.local.lkey);
  return shm_->post_recv(w);
}

void SameHostQp::reset() {
  shm_->reset();
  if (lane_) lane_->reset();
}

}  // namespace loom::fabric::hybrid
