#pragma once
// The verbs queue pair: an RC ibv_qp, its state transitions at connect and reset, posting, and
// the bookkeeping that keeps the send queue within its depth.
#include "loom/dsm/fabric/verbs/verbs_cq.hpp"

namespace loom::fabric::verbs {

class VerbsQp : public QueuePair {
 public:
  VerbsQp(VerbsProvider& p, int peer, VerbsCq& scq, VerbsCq& rcq, const QpCaps& caps) : p_(p), peer_(peer), caps_(caps) {
    ibv_qp_init_attr ia{};
    ia.send_cq = scq.cq();
    ia.recv_cq = rcq.cq();
    ia.cap.max_send_wr = caps.max_send_wr;
    ia.cap.max_recv_wr = caps.max_recv_wr;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = caps.max_inline;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;
    ibv_pd* pd = p.pd();
    if (caps.single_thread) {
      // A thread domain lets the device library drop its own locks (mlx5 does; rxe has none to
      // offer, and the QP is then an ordinary one: the promise costs nothing either way).
      ibv_td_init_attr ta{};
      td_ = ibv_alloc_td(p.context(), &ta);
      if (td_ != nullptr) {
        ibv_parent_domain_init_attr pa{};
        pa.pd = p.pd();
        pa.td = td_;
        parent_ = ibv_alloc_parent_domain(p.context(), &pa);
        if (parent_ != nullptr) {
          pd = parent_;
        } else {
          ibv_dealloc_td(td_);
          td_ = nullptr;
        }
      }
      if (td_ == nullptr) log::debug("verbs: the device offers no thread domains; a single-thread QP to rank ", peer, " is an ordinary one");
    }
    qp_ = ibv_create_qp(pd, &ia);
    if (qp_ == nullptr) {
      int e = errno;
      if (parent_ != nullptr) ibv_dealloc_pd(parent_);
      if (td_ != nullptr) ibv_dealloc_td(td_);
      errno = e;
      fail_errno("verbs: ibv_create_qp to rank " + std::to_string(peer));
    }
    // The device may round the queues up; Loom enforces the depths asked for (below), so the
    // extra is headroom and a CQ sized by the requested depth can never overrun.
    if (ia.cap.max_inline_data < caps_.max_inline) caps_.max_inline = ia.cap.max_inline_data;
    send_cq_ = &scq;
    recv_cq_ = &rcq;
    std::random_device rd;
    psn_ = rd() & 0xffffff;
    p.set_qp_peer(qp_->qp_num, peer);
    to_init();
  }
  ~VerbsQp() override {
    p_.forget_qp(qp_->qp_num);
    ibv_destroy_qp(qp_);
    if (parent_ != nullptr) ibv_dealloc_pd(parent_);
    if (td_ != nullptr) ibv_dealloc_td(td_);
  }

  std::vector<std::byte> endpoint() const override {
    EndpointBlob b{};
    b.magic = kEndpointMagic;
    b.rank = p_.rank();
    b.qp_num = qp_->qp_num;
    b.psn = psn_;
    b.lid = p_.lid();
    b.port = p_.port();
    b.mtu = static_cast<uint8_t>(p_.mtu());
    std::memcpy(b.gid, p_.gid().raw, 16);
    return encode_endpoint(b);
  }

  void connect(std::span<const std::byte> peer_endpoint) override {
    auto b = decode_endpoint<EndpointBlob>(peer_endpoint, kEndpointMagic, peer_, "verbs");
    if (b.mtu < IBV_MTU_256 || b.mtu > IBV_MTU_4096) fail("verbs: endpoint of rank ", peer_, " has a bad MTU code");
    peer_ep_ = b;
    std::lock_guard<std::mutex> g(mu_);
    to_rtr_rts();
    connected_.store(true, std::memory_order_release);  // pairs with the posters' acquire: the QP is in RTS
    error_.store(false);
  }

  // The contract's request as a verbs work request (sg_list pointing at `sge`).
  PostResult to_ibv(const SendWr& wr, ibv_send_wr& w, ibv_sge& sge) const {
    if (PostResult bad = check_send(wr, caps_); bad != PostResult::Ok) return bad;
    sge = ibv_sge{wr.local.addr, wr.local.length, wr.local.lkey};
    w.wr_id = wr.wr_id;
    w.sg_list = &sge;
    w.num_sge = wr.local.length == 0 ? 0 : 1;
    w.send_flags = wr.signaled ? static_cast<unsigned>(IBV_SEND_SIGNALED) : 0u;
    switch (wr.opcode) {
      case Opcode::Write:
        w.opcode = IBV_WR_RDMA_WRITE;
        break;
      case Opcode::WriteWithImm:
        w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        w.imm_data = htonl(wr.imm);
        break;
      case Opcode::Read:
        w.opcode = IBV_WR_RDMA_READ;
        break;
      case Opcode::Send:
        w.opcode = IBV_WR_SEND;
        break;
      case Opcode::CompareSwap:
      case Opcode::FetchAdd:
        w.opcode = wr.opcode == Opcode::FetchAdd ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
        w.wr.atomic.remote_addr = wr.remote_addr;
        w.wr.atomic.rkey = wr.rkey;
        w.wr.atomic.compare_add = wr.compare_add;
        w.wr.atomic.swap = wr.swap;
        break;
      default:
        return PostResult::InvalidArgument;
    }
    if (wr.opcode == Opcode::Write || wr.opcode == Opcode::WriteWithImm || wr.opcode == Opcode::Read) {
      w.wr.rdma.remote_addr = wr.remote_addr;
      w.wr.rdma.rkey = wr.rkey;
    }
    if (wr.inline_data) w.send_flags |= IBV_SEND_INLINE;
    return PostResult::Ok;
  }
  // send_mu_ held: the request is the device's now.
  void note_posted(const SendWr& wr) {
    ++posted_;
    if (wr.signaled) signaled_.push_back(posted_);
    p_.count_post(peer_, wr.opcode == Opcode::FetchAdd || wr.opcode == Opcode::CompareSwap);
  }

  PostResult post_send(const SendWr& wr) override {
    ibv_send_wr w{};
    ibv_sge sge{};
    if (PostResult bad = to_ibv(wr, w, sge); bad != PostResult::Ok) return bad;
    if (!connected_.load(std::memory_order_acquire)) return PostResult::NotConnected;
    // Send-queue accounting as in the contract: an entry is in use until a completion of it or
    // of a later request is polled. The lock makes our order the NIC's order (ibv_post_send
    // takes the provider's own lock anyway).
    std::lock_guard<std::mutex> g(send_mu_);
    // Pairs with the completer's release of `retired_` below (on_send_completion).
    if (posted_ - retired_.load(std::memory_order_acquire) >= caps_.max_send_wr) return PostResult::QueueFull;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp_, &w, &bad);
    if (rc == 0) {
      note_posted(wr);
      return PostResult::Ok;
    }
    if (rc == ENOMEM) return PostResult::QueueFull;
    log::debug("verbs: ibv_post_send to rank ", peer_, ": ", std::strerror(rc));
    return PostResult::InvalidArgument;
  }

  // The requests as one linked list: one lock and one doorbell for all of them.
  BatchResult post_send_batch(std::span<const SendWr> wrs) override {
    constexpr size_t kMax = 32;
    if (wrs.size() > kMax) {
      BatchResult r = post_send_batch(wrs.first(kMax));
      if (r.accepted < kMax) return r;
      BatchResult rest = post_send_batch(wrs.subspan(kMax));
      return {kMax + rest.accepted, rest.failure};
    }
    ibv_send_wr w[kMax];
    ibv_sge sge[kMax];
    BatchResult r;
    size_t n = 0;
    for (; n < wrs.size(); ++n) {
      w[n] = ibv_send_wr{};
      sge[n] = ibv_sge{};
      if (PostResult bad = to_ibv(wrs[n], w[n], sge[n]); bad != PostResult::Ok) {
        r.failure = bad;
        break;
      }
      w[n].sg_list = w[n].num_sge == 0 ? nullptr : &sge[n];
      if (n > 0) w[n - 1].next = &w[n];
    }
    if (n == 0) return r;
    if (!connected_.load(std::memory_order_acquire)) return {0, PostResult::NotConnected};
    std::lock_guard<std::mutex> g(send_mu_);
    const uint64_t free = caps_.max_send_wr - (posted_ - retired_.load(std::memory_order_acquire));
    if (n > free) {
      n = static_cast<size_t>(free);
      r.failure = PostResult::QueueFull;
      if (n == 0) return r;
      w[n - 1].next = nullptr;
    }
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp_, &w[0], &bad);
    const size_t ok = rc == 0 ? n : static_cast<size_t>(bad - &w[0]);
    for (size_t i = 0; i < ok; ++i) note_posted(wrs[i]);
    r.accepted = ok;
    if (rc != 0) {
      log::debug("verbs: ibv_post_send of a list to rank ", peer_, ": ", std::strerror(rc));
      r.failure = rc == ENOMEM ? PostResult::QueueFull : PostResult::InvalidArgument;
    }
    return r;
  }

  // A send completion of this QP was polled: the oldest signaled request (and everything
  // before it) is done. In the error state every request completes, signaled or not.
  void on_send_completion(bool error) {
    std::lock_guard<std::mutex> g(send_mu_);
    // The releases of `retired_` pair with post_send's acquire: a poster sees the entries
    // free only after the device is done with them.
    if (error || error_.load()) {
      retired_.store(posted_, std::memory_order_release);
      signaled_.clear();
      return;
    }
    if (!signaled_.empty()) {
      retired_.store(signaled_.front(), std::memory_order_release);
      signaled_.pop_front();
    }
  }
  void on_recv_completion() { recv_consumed_.fetch_add(1, std::memory_order_acq_rel); }
  bool is_send_cq(const void* cq) const { return cq == send_cq_; }
  bool is_recv_cq(const void* cq) const { return cq == recv_cq_; }

  PostResult post_recv(const RecvWr& wr) override {
    ibv_sge sge{wr.local.addr, wr.local.length, wr.local.lkey};
    ibv_recv_wr w{};
    w.wr_id = wr.wr_id;
    w.sg_list = &sge;
    w.num_sge = 1;
    std::lock_guard<std::mutex> g(recv_mu_);
    // Pairs with on_recv_completion's acq_rel increment (the completer consumed that receive).
    if (recv_posted_ - recv_consumed_.load(std::memory_order_acquire) >= caps_.max_recv_wr) return PostResult::QueueFull;
    ibv_recv_wr* bad = nullptr;
    int rc = ibv_post_recv(qp_, &w, &bad);
    if (rc == 0) {
      ++recv_posted_;
      return PostResult::Ok;
    }
    return rc == ENOMEM ? PostResult::QueueFull : PostResult::InvalidArgument;
  }

  QpState state() const override {
    if (!connected_.load(std::memory_order_acquire)) return QpState::Init;
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    if (ibv_query_qp(qp_, &a, IBV_QP_STATE, &ia) == 0) {
      if (a.qp_state == IBV_QPS_ERR || a.qp_state == IBV_QPS_SQE) return QpState::Error;
      if (a.qp_state == IBV_QPS_RTS) return error_.load() ? QpState::Error : QpState::Ready;
    }
    return error_.load() ? QpState::Error : QpState::Init;
  }

  void reset() override {
    std::lock_guard<std::mutex> g(mu_);
    if (!connected_.load()) return;
    // RESET -> INIT -> RTR -> RTS with the same peer and the initial PSNs: when both ends of
    // the pair reset (the contract's recovery), their sequence numbers agree again.
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    if (ibv_modify_qp(qp_, &a, IBV_QP_STATE) != 0) fail_errno("verbs: modify QP to RESET");
    // RESET empties both queues.
    {
      std::lock_guard<std::mutex> gs(send_mu_);
      retired_.store(posted_);
      signaled_.clear();
    }
    {
      std::lock_guard<std::mutex> gr(recv_mu_);
      recv_consumed_.store(recv_posted_);
    }
    to_init();
    to_rtr_rts();
    error_.store(false);
  }

  uint32_t qp_num() const override { return qp_->qp_num; }
  int peer_rank() const override { return peer_; }
  const QpCaps& caps() const override { return caps_; }
  bool inline_helps() const override { return true; }
  void mark_error() { error_.store(true); }

 private:
  void to_init() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = p_.port();
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    int rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0) throw SystemError("verbs: modify QP to INIT", rc);
  }
  void to_rtr_rts() {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = std::min(p_.mtu(), static_cast<ibv_mtu>(peer_ep_.mtu));
    a.dest_qp_num = peer_ep_.qp_num;
    a.rq_psn = peer_ep_.psn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    ibv_gid pg;
    std::memcpy(pg.raw, peer_ep_.gid, 16);
    if (!gid_zero(pg) && (peer_ep_.lid == 0 || p_.lid() == 0 || settings::get_bool(settings::dsm::kVerbsGrh))) {
      // RoCE (and IB across subnets) routes by GID: the address vector carries a GRH.
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.dgid = pg;
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(p_.gid_index());
      a.ah_attr.grh.hop_limit = 64;
    }
    a.ah_attr.dlid = peer_ep_.lid;
    a.ah_attr.port_num = p_.port();
    int rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0) throw SystemError("verbs: modify QP to RTR (peer rank " + std::to_string(peer_) + ")", rc);
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = static_cast<uint8_t>(settings::get_int(settings::dsm::kVerbsTimeout));
    a.retry_cnt = static_cast<uint8_t>(settings::get_int(settings::dsm::kVerbsRetry));
    a.rnr_retry = 7;  // retry forever: a receiver that has not posted yet is not an error
    a.sq_psn = psn_;
    a.max_rd_atomic = 16;
    rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                    IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0) throw SystemError("verbs: modify QP to RTS", rc);
  }

  VerbsProvider& p_;
  int peer_;
  QpCaps caps_;
  ibv_qp* qp_ = nullptr;
  ibv_td* td_ = nullptr;      // single_thread QPs, where the device has thread domains
  ibv_pd* parent_ = nullptr;  // ... and the parent domain that carries it
  uint32_t psn_ = 0;
  EndpointBlob peer_ep_{};
  std::mutex mu_;
  std::atomic<bool> connected_{false};
  std::atomic<bool> error_{false};
  const void* send_cq_ = nullptr;
  const void* recv_cq_ = nullptr;
  std::mutex send_mu_;
  uint64_t posted_ = 0;
  std::atomic<uint64_t> retired_{0};
  std::deque<uint64_t> signaled_;
  std::mutex recv_mu_;
  uint64_t recv_posted_ = 0;
  std::atomic<uint64_t> recv_consumed_{0};
};

}  // namespace loom::fabric::verbs
