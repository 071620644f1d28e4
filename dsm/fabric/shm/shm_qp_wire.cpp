// A shm queue pair on an emulated wire: requests are timed by the wire model at post and carried
// out by the wire's engine thread when due; the posting thread only queues them.
#include <cstring>

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/shm/shm_qp.hpp"

namespace loom::fabric::shm {

namespace {
// How long a SEND waits before it looks for the peer's receive again (a NIC's RNR timer; the
// smallest InfiniBand allows is 10 us).
constexpr uint64_t kRnrRetryNs = 10'000;
}  // namespace

void ShmQp::attach_wire(const WireAttachment& w) {
  if (state() != QpState::Init) fail("shm: a QP joins the emulated wire before it connects");
  wire_ = w.engine;
  wire_spec_ = w.spec;
  wire_src_ = w.src;
  wire_dst_ = w.dst;
  wire_slots_ = uint64_t{caps_.max_send_wr} + WireEngine::kBatch + 1;
  wire_ops_ = std::make_unique<WireOp[]>(wire_slots_);
}

PostResult ShmQp::post_wired(const SendWr& wr, const uint8_t* inline_src) {
  // The lock keeps the send-queue entries in the order the engine receives the requests.
  std::unique_lock<std::mutex> g(post_mu_, std::defer_lock);
  if (!single_thread_) g.lock();
  uint64_t seq;
  if (!reserve_entry(&seq)) return PostResult::QueueFull;
  WireOp* op = &wire_ops_[seq % wire_slots_];
  // Free by the ring's size (WireEngine::kBatch); a wait here would be for the engine's current step.
  while (op->in_use.load(std::memory_order_acquire)) wait::cpu_relax();
  op->in_use.store(true, std::memory_order_relaxed);
  op->wr = wr;
  op->status = Status::Success;
  op->byte_len = 0;
  op->has_inline = false;
  op->seq = seq;
  if (inline_src != nullptr) {
    op->has_inline = true;
    std::memcpy(op->inline_bytes, inline_src, wr.local.length);
  }
  op->posted_at = wire_now();
  op->at = wire_schedule(*wire_spec_, wr.opcode, wr.local.length, op->posted_at, *wire_src_, *wire_dst_);
  wire_->post(this, op);
  ++wire_posted_;
  return PostResult::Ok;
}

bool ShmQp::wire_effect(WireOp& op, uint64_t now) {
  if (state_.load(std::memory_order_acquire) == QpState::Error) {
    op.status = Status::WorkRequestFlushed;
    return true;
  }
  // A READ sees the WRITEs before it on its queue pair, and a target that stored a word and then
  // looks at what those WRITEs placed (a doorbell's sleeper, invoke/bell_checks.hpp) either
  // finds their bytes or has its store seen here: a store-load pair, as a NIC's PCIe ordering
  // gives it.
  if (op.wr.opcode == Opcode::Read) wait::full_fence();
  op.status = execute(op.wr, op.has_inline ? op.inline_bytes : nullptr, op.byte_len);
  if (op.status == Status::ReceiverNotReady) {
    const uint64_t limit = p_.rnr_timeout_ns();
    if (!p_.peer_alive(peer_)) {
      op.status = Status::PeerUnreachable;
    } else if (limit == 0 || now - op.posted_at <= limit) {
      op.at.effect = now + kRnrRetryNs;
      return false;
    }
  }
  // A failure moves the QP to Error now, so that the requests behind it are flushed.
  if (op.status != Status::Success && op.status != Status::WorkRequestFlushed)
    state_.store(QpState::Error, std::memory_order_release);
  return true;
}

void ShmQp::wire_complete(const WireOp& op) {
  std::unique_lock<std::mutex> g(post_mu_, std::defer_lock);
  complete(op.wr, op.seq, op.status, op.byte_len, g);
}

}  // namespace loom::fabric::shm
