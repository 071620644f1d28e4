// The shm queue pair's set-up and connection, the receive queue, the RNR wait for a peer's
// receive, and completions.
#include <unistd.h>

#include <chrono>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/fabric/shm/shm_qp.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/futex.hpp"

namespace loom::fabric::shm {

namespace {
std::atomic<uint64_t> g_next_qp_uid{1};
}  // namespace

uint64_t next_qp_uid() { return g_next_qp_uid.fetch_add(1, std::memory_order_relaxed); }

ShmQp::ShmQp(ShmProvider& p, uint32_t qpn, int peer, ShmCq& scq, ShmCq& rcq, const QpCaps& caps)
    : p_(p), qpn_(qpn), peer_(peer), scq_(scq), rcq_(rcq), caps_(caps), single_thread_(caps.single_thread) {
  uint32_t cap = round_pow2(caps.max_recv_wr < 1 ? 1 : caps.max_recv_wr);
  size_t bytes = sizeof(RqHeader) + sizeof(RqEntry) * cap;
  rq_map_ = Mapping::create(p.path("rq", p.rank(), qpn), bytes);
  rq_ = new (rq_map_.addr()) RqHeader();
  rq_entries_ = reinterpret_cast<RqEntry*>(static_cast<uint8_t*>(rq_map_.addr()) + sizeof(RqHeader));
  rq_->capacity = cap;
  rq_->mask = cap - 1;
  rq_cap_ = cap;
  rq_->qp_num = qpn;
  rq_->recv_cq = rcq.id();
  rq_->owner_rank = p.rank();
  rq_->head.store(0);
  rq_->tail.store(0);
  rq_->magic = kRqMagic;
}

ShmQp::~ShmQp() {
  if (wire_ != nullptr) wire_->forget(this, wire_posted_);  // first: the engine may be inside this QP
  p_.forget_qp(qpn_);
  scq_.reserved_send.fetch_sub(caps_.max_send_wr);
  rcq_.reserved_recv.fetch_sub(caps_.max_recv_wr);
  ::unlink(p_.path("rq", p_.rank(), qpn_).c_str());
}

void ShmQp::connect(std::span<const std::byte> peer_endpoint) {
  auto b = decode_endpoint<EndpointBlob>(peer_endpoint, kEndpointMagic, peer_, "shm");
  std::lock_guard<std::mutex> g(post_mu_);
  peer_rq_map_ = Mapping::open(p_.path("rq", peer_, b.qp_num));
  if (peer_rq_map_.size() < sizeof(RqHeader)) fail("shm: peer receive queue file is truncated");
  peer_rq_ = peer_rq_map_.as<RqHeader>();
  if (peer_rq_->magic != kRqMagic || peer_rq_->owner_rank != peer_ || peer_rq_->qp_num != b.qp_num)
    fail("shm: peer receive queue of rank ", peer_, " QP ", b.qp_num, " is not valid");
  uint64_t need = sizeof(RqHeader) + uint64_t{sizeof(RqEntry)} * peer_rq_->capacity;
  if (peer_rq_->capacity == 0 || (peer_rq_->capacity & (peer_rq_->capacity - 1)) != 0 || peer_rq_map_.size() < need)
    fail("shm: peer receive queue of rank ", peer_, " has a bad capacity");
  peer_rq_entries_ = reinterpret_cast<RqEntry*>(static_cast<uint8_t*>(peer_rq_map_.addr()) + sizeof(RqHeader));
  peer_rq_cap_ = peer_rq_->capacity;
  peer_cq_map_ = Mapping::open(p_.path("cq", peer_, peer_rq_->recv_cq));
  peer_cq_ = peer_cq_map_.as<CqHeader>();
  if (peer_cq_map_.size() < sizeof(CqHeader) || peer_cq_->magic != kCqMagic ||
      peer_cq_map_.size() < sizeof(CqHeader) + uint64_t{sizeof(CqSlot)} * peer_cq_->capacity)
    fail("shm: peer completion queue of rank ", peer_, " is not valid");
  peer_cq_cap_ = peer_cq_->capacity;
  if (peer_cq_cap_ == 0 || (peer_cq_cap_ & (peer_cq_cap_ - 1)) != 0)
    fail("shm: peer completion queue of rank ", peer_, " has a bad capacity");
  peer_cq_slots_ = reinterpret_cast<CqSlot*>(static_cast<uint8_t*>(peer_cq_map_.addr()) + sizeof(CqHeader));
  peer_qpn_ = b.qp_num;
  peer_keys_ = p_.key_table(peer_);
  if (peer_keys_ == nullptr) fail("shm: cannot map the key table of rank ", peer_);
  state_.store(QpState::Ready);
}

bool ShmQp::take_recv(RqEntry* out, Status* why) {
  // The RNR retry of a NIC, done on the posting thread: wait (spin, yield, sleep) until the
  // target posts a receive, the peer dies, or LOOM_SHM_RNR_TIMEOUT_MS passes; meanwhile this
  // thread's PostWaitHook runs (the service thread frees its own receive buffers in it).
  wait::Backoff backoff;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    uint64_t h = peer_rq_->head.load(std::memory_order_relaxed);
    uint64_t tl = peer_rq_->tail.load(std::memory_order_acquire);
    if (tl != h) {
      if (tl - h > peer_rq_cap_) { *why = Status::RemoteOperationalError; return false; }
      *out = peer_rq_entries_[h & (peer_rq_cap_ - 1)];
      peer_rq_->head.store(h + 1, std::memory_order_release);
      return true;
    }
    if (wire_ != nullptr) {  // the wire's engine tries again later, not holding other QPs back
      *why = Status::ReceiverNotReady;
      return false;
    }
    if (t_post_wait_hook.fn != nullptr) t_post_wait_hook.fn(t_post_wait_hook.arg);
    if (backoff.should_sleep()) {
      if (!p_.peer_alive(peer_)) { *why = Status::PeerUnreachable; return false; }
      uint64_t limit = p_.rnr_timeout_ns();
      if (limit != 0 && static_cast<uint64_t>((std::chrono::steady_clock::now() - start).count()) > limit) {
        *why = Status::ReceiverNotReady;
        return false;
      }
    }
    backoff.pause();
  }
}

void ShmQp::push_remote(const Completion& c, Status* sender_status) {
  if (!cq_push(peer_cq_, peer_cq_slots_, peer_cq_cap_, c, 0, 0)) {
    peer_cq_->overrun.store(1, std::memory_order_release);
    wait::futex_wake_all(wait::low_word(&peer_cq_->tail));
    *sender_status = Status::RemoteOperationalError;
  }
}

void ShmQp::complete(const SendWr& wr, uint64_t seq, Status status, uint32_t byte_len, std::unique_lock<std::mutex>& g) {
  if (status != Status::Success && status != Status::WorkRequestFlushed) {
    state_.store(QpState::Error, std::memory_order_release);
    log::debug("shm: QP ", qpn_, " to rank ", peer_, " entered the error state: ", to_string(wr.opcode), " ",
               to_string(status));
  }
  // An unsignaled request that failed reports too (as on a NIC); its completion may land after
  // later ones, which the CQ's spare entries absorb.
  if (!g.owns_lock() && !single_thread_) g.lock();
  Completion c;
  c.wr_id = wr.wr_id;
  c.status = status;
  c.opcode = wr.opcode;
  c.byte_len = byte_len;
  c.qp_num = qpn_;
  c.src_rank = p_.rank();
  if (!scq_.push_local(c, qpn_, seq)) {
    // Cannot happen while the send CQ holds max_send_wr of every QP attached (checked at
    // create_qp); kept as a loud failure rather than a lost completion.
    fail("shm: send completion queue overran on QP ", qpn_, " (posted ", posted_.load(), ", retired ", retired_.load(),
         ", seq ", seq, ", ", scq_.describe(), ")");
  }
}

PostResult ShmQp::post_recv(const RecvWr& wr) {
  std::unique_lock<std::mutex> g(recv_mu_, std::defer_lock);
  if (!single_thread_) g.lock();
  uint64_t h = rq_->head.load(std::memory_order_acquire);
  uint64_t t = rq_->tail.load(std::memory_order_relaxed);
  if (t - h >= caps_.max_recv_wr) return PostResult::QueueFull;
  rq_entries_[t & (rq_cap_ - 1)] = RqEntry{wr.wr_id, wr.local.addr, wr.local.length, wr.local.lkey};
  rq_->tail.store(t + 1, std::memory_order_release);
  return PostResult::Ok;
}

}  // namespace loom::fabric::shm
