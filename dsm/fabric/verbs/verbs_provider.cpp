#include "dsm/fabric/verbs/verbs_provider.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <numa.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <random>

#include "dsm/common/dsm_settings.hpp"
#include "dsm/common/error.hpp"
#include "dsm/common/log.hpp"

namespace loom::fabric::verbs {

namespace {

constexpr uint32_t kEndpointMagic = 0x4c4d5645;  // "LMVE"

struct EndpointBlob {
  uint32_t magic;
  int32_t rank;
  uint32_t qp_num;
  uint32_t psn;
  uint16_t lid;
  uint8_t port;
  uint8_t mtu;
  uint8_t gid[16];
};

const char* port_state_name(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    default: return "other";
  }
}

const char* mtu_name(ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256: return "256";
    case IBV_MTU_512: return "512";
    case IBV_MTU_1024: return "1024";
    case IBV_MTU_2048: return "2048";
    case IBV_MTU_4096: return "4096";
  }
  return "?";
}

std::string gid_string(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, buf, sizeof buf);
  return buf;
}

bool gid_zero(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b != 0) return false;
  return true;
}

Status map_status(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return Status::Success;
    case IBV_WC_LOC_LEN_ERR: return Status::LocalLengthError;
    case IBV_WC_LOC_PROT_ERR: return Status::LocalProtectionError;
    // rxe reports a bad local key and a short receive buffer this way, where mlx5 says
    // protection and length error.
    case IBV_WC_LOC_QP_OP_ERR: return Status::LocalOperationError;
    case IBV_WC_REM_ACCESS_ERR: return Status::RemoteAccessError;
    case IBV_WC_REM_INV_REQ_ERR: return Status::RemoteInvalidRequest;
    case IBV_WC_REM_OP_ERR: return Status::RemoteOperationalError;
    case IBV_WC_RNR_RETRY_EXC_ERR: return Status::ReceiverNotReady;
    case IBV_WC_WR_FLUSH_ERR: return Status::WorkRequestFlushed;
    case IBV_WC_RETRY_EXC_ERR: return Status::PeerUnreachable;
    default: return Status::RemoteOperationalError;
  }
}

Opcode map_opcode(ibv_wc_opcode o) {
  switch (o) {
    case IBV_WC_RDMA_WRITE: return Opcode::Write;
    case IBV_WC_RDMA_READ: return Opcode::Read;
    case IBV_WC_COMP_SWAP: return Opcode::CompareSwap;
    case IBV_WC_FETCH_ADD: return Opcode::FetchAdd;
    case IBV_WC_SEND: return Opcode::Send;
    case IBV_WC_RECV: return Opcode::Recv;
    case IBV_WC_RECV_RDMA_WITH_IMM: return Opcode::RecvWriteWithImm;
    default: return Opcode::Write;
  }
}

int access_flags(uint32_t a) {
  int f = 0;
  if (a & kLocalWrite) f |= IBV_ACCESS_LOCAL_WRITE;
  if (a & kRemoteWrite) f |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (a & kRemoteRead) f |= IBV_ACCESS_REMOTE_READ;
  if (a & kRemoteAtomic) f |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
  return f;
}

}  // namespace

std::vector<DeviceReport> survey(std::string* error) {
  std::vector<DeviceReport> out;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    if (error) {
      *error = errno == ENOSYS ? std::string("no RDMA devices: this kernel has no RDMA support (ibv_get_device_list: ") +
                                     std::strerror(errno) + ")"
                               : std::string("ibv_get_device_list failed: ") + std::strerror(errno);
    }
    return out;
  }
  for (int i = 0; i < n; ++i) {
    DeviceReport d;
    d.name = ibv_get_device_name(list[i]);
    ibv_context* c = ibv_open_device(list[i]);
    if (c == nullptr) {
      out.push_back(d);
      continue;
    }
    ibv_device_attr a{};
    if (ibv_query_device(c, &a) == 0) {
      d.max_qp = static_cast<uint32_t>(a.max_qp);
      d.max_qp_wr = static_cast<uint32_t>(a.max_qp_wr);
      d.max_cqe = static_cast<uint32_t>(a.max_cqe);
      d.max_mr = static_cast<uint32_t>(a.max_mr);
      d.max_sge = static_cast<uint32_t>(a.max_sge);
      d.max_mr_size = a.max_mr_size;
      d.atomic_cap = a.atomic_cap == IBV_ATOMIC_NONE ? "none" : a.atomic_cap == IBV_ATOMIC_HCA ? "hca" : "glob";
      for (uint8_t p = 1; p <= a.phys_port_cnt; ++p) {
        ibv_port_attr pa{};
        if (ibv_query_port(c, p, &pa) != 0) continue;
        PortReport r;
        r.device = d.name;
        r.port = p;
        r.active = pa.state == IBV_PORT_ACTIVE;
        r.state = port_state_name(pa.state);
        r.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
        r.lid = pa.lid;
        r.mtu = mtu_name(pa.active_mtu);
        for (int g = 0; g < pa.gid_tbl_len && r.gids.size() < 8; ++g) {
          ibv_gid gid{};
          if (ibv_query_gid(c, p, g, &gid) != 0 || gid_zero(gid)) continue;
          r.gids.push_back(std::to_string(g) + ": " + gid_string(gid));
        }
        d.ports.push_back(r);
      }
    }
    ibv_close_device(c);
    out.push_back(d);
  }
  ibv_free_device_list(list);
  if (out.empty() && error) *error = "no RDMA devices (no NIC driver or rdma_rxe/siw link is loaded)";
  return out;
}

// ---------------------------------------------------------------------------------------------
class VerbsCq : public CompletionQueue {
 public:
  VerbsCq(VerbsProvider& p, uint32_t depth) : p_(p) {
    channel_ = ibv_create_comp_channel(p.context());
    if (channel_ == nullptr) fail_errno("verbs: ibv_create_comp_channel");
    fcntl(channel_->fd, F_SETFL, fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
    cq_ = ibv_create_cq(p.context(), static_cast<int>(depth), this, channel_, 0);
    if (cq_ == nullptr) {
      int e = errno;
      ibv_destroy_comp_channel(channel_);
      throw SystemError("verbs: ibv_create_cq(" + std::to_string(depth) + ")", e);
    }
    wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    capacity_ = static_cast<uint32_t>(cq_->cqe);
  }
  ~VerbsCq() override {
    if (unacked_ > 0) ibv_ack_cq_events(cq_, unacked_);
    ibv_destroy_cq(cq_);
    ibv_destroy_comp_channel(channel_);
    if (wake_ >= 0) ::close(wake_);
  }

  int poll(std::span<Completion> out) override {
    // One poller at a time: the queue accounting of each completion must be done before the
    // next one is handed out, or a thread could credit a later completion while the QP still
    // counts an earlier one. A thread that finds another polling returns nothing and comes
    // back (it does not wait for the other).
    std::unique_lock<std::mutex> lk(poll_mu_, std::try_to_lock);
    if (!lk.owns_lock()) return 0;
    ibv_wc wc[32];
    int want = static_cast<int>(std::min<size_t>(out.size(), 32));
    int n = ibv_poll_cq(cq_, want, wc);
    if (n < 0) {
      overrun_.store(true);
      return 0;
    }
    for (int i = 0; i < n; ++i) {
      Completion& c = out[static_cast<size_t>(i)];
      c = Completion{};
      c.wr_id = wc[i].wr_id;
      c.status = map_status(wc[i].status);
      c.opcode = map_opcode(wc[i].opcode);
      c.byte_len = wc[i].byte_len;
      c.qp_num = wc[i].qp_num;
      c.with_imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) != 0;
      if (c.with_imm) c.imm = ntohl(wc[i].imm_data);
      c.src_rank = p_.peer_of_qp(wc[i].qp_num);
      p_.account(wc[i].qp_num, this, c.status != Status::Success, (wc[i].opcode & IBV_WC_RECV) != 0);
      if (c.status != Status::Success) {
        p_.mark_qp_error(wc[i].qp_num);
        log::debug("verbs: completion on QP ", wc[i].qp_num, ": ", ibv_wc_status_str(wc[i].status), " (vendor error ",
                   wc[i].vendor_err, ")");
      }
      if (c.opcode == Opcode::FetchAdd || c.opcode == Opcode::CompareSwap) c.byte_len = 8;
    }
    return n;
  }

  void wait(std::chrono::nanoseconds timeout) override {
    // Arm first and return: the caller polls once more before anything can be missed; the
    // next call sleeps until the completion channel or interrupt() fires.
    if (!armed_.exchange(true)) {
      ibv_req_notify_cq(cq_, 0);
      return;
    }
    pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_, POLLIN, 0}};
    int ms = static_cast<int>(std::max<int64_t>(1, timeout.count() / 1000000));
    if (::poll(fds, 2, ms) <= 0) return;
    if (fds[0].revents & POLLIN) {
      ibv_cq* cq;
      void* ctx;
      std::lock_guard<std::mutex> g(mu_);
      while (ibv_get_cq_event(channel_, &cq, &ctx) == 0) ++unacked_;
      if (unacked_ >= 64) {
        ibv_ack_cq_events(cq_, unacked_);
        unacked_ = 0;
      }
      armed_.store(false);
    }
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = ::read(wake_, &v, sizeof v);
    }
  }

  void interrupt() override {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t r = ::write(wake_, &one, sizeof one);
  }
  uint32_t capacity() const override { return capacity_; }
  bool overrun() const override { return overrun_.load(); }
  ibv_cq* cq() const { return cq_; }

 private:
  VerbsProvider& p_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  int wake_ = -1;
  uint32_t capacity_ = 0;
  std::atomic<bool> armed_{false};
  std::atomic<bool> overrun_{false};
  std::mutex poll_mu_;
  std::mutex mu_;
  unsigned unacked_ = 0;
};

// ---------------------------------------------------------------------------------------------
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
    connected_.store(true, std::memory_order_release);
    error_.store(false);
  }

  PostResult post_send(const SendWr& wr) override {
    if (PostResult bad = check_send(wr, caps_); bad != PostResult::Ok) return bad;
    ibv_send_wr w{};
    ibv_sge sge{wr.local.addr, wr.local.length, wr.local.lkey};
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
    if (!connected_.load(std::memory_order_acquire)) return PostResult::NotConnected;
    // Send-queue accounting as in the contract: an entry is in use until a completion of it or
    // of a later request is polled. The lock makes our order the NIC's order (ibv_post_send
    // takes the provider's own lock anyway).
    std::lock_guard<std::mutex> g(send_mu_);
    if (posted_ - retired_.load(std::memory_order_acquire) >= caps_.max_send_wr) return PostResult::QueueFull;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp_, &w, &bad);
    if (rc == 0) {
      ++posted_;
      if (wr.signaled) signaled_.push_back(posted_);
      return PostResult::Ok;
    }
    if (rc == ENOMEM) return PostResult::QueueFull;
    log::debug("verbs: ibv_post_send to rank ", peer_, ": ", std::strerror(rc));
    return PostResult::InvalidArgument;
  }

  // A send completion of this QP was polled: the oldest signaled request (and everything
  // before it) is done. In the error state every request completes, signaled or not.
  void on_send_completion(bool error) {
    std::lock_guard<std::mutex> g(send_mu_);
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
    a.timeout = 14;
    a.retry_cnt = 7;
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

// ---------------------------------------------------------------------------------------------
VerbsProvider::VerbsProvider(const ProviderContext& ctx) : pctx_(ctx) {
  std::string why;
  auto devices = survey(&why);
  if (devices.empty()) fail("verbs provider: ", why, "; use the shm provider on one host");
  std::string want_dev = settings::get_string(settings::dsm::kVerbsDevice);
  int want_port = static_cast<int>(settings::get_int(settings::dsm::kVerbsPort));
  const DeviceReport* dev = nullptr;
  int port = 0;
  std::string seen;
  for (const auto& d : devices) {
    for (const auto& p : d.ports) seen += " " + d.name + ":" + std::to_string(p.port) + "(" + p.state + ")";
    if (!want_dev.empty() && d.name != want_dev) continue;
    for (const auto& p : d.ports) {
      if ((want_port == 0 || p.port == want_port) && p.active) {
        dev = &d;
        port = p.port;
        break;
      }
    }
    if (dev) break;
  }
  if (dev == nullptr)
    fail("verbs provider: no active port", want_dev.empty() ? "" : " on device " + want_dev,
         want_port ? " port " + std::to_string(want_port) : "", "; found:", seen.empty() ? " no ports" : seen);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; i < n && ctx_ == nullptr; ++i)
    if (dev->name == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  if (ctx_ == nullptr) fail_errno("verbs provider: cannot open device " + dev->name);
  port_ = static_cast<uint8_t>(port);
  ibv_port_attr pa{};
  if (ibv_query_port(ctx_, port_, &pa) != 0) fail_errno("verbs provider: ibv_query_port");
  lid_ = pa.lid;
  mtu_ = pa.active_mtu;
  // GID: LOOM_VERBS_GID_INDEX, else the first RoCE v2 GID on Ethernet, else index 0.
  gid_index_ = static_cast<int>(settings::get_int(settings::dsm::kVerbsGidIndex));
  if (gid_index_ < 0) {
    gid_index_ = 0;
    if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
      for (int g = 0; g < pa.gid_tbl_len; ++g) {
        ibv_gid_entry entry{};
        if (ibv_query_gid_ex(ctx_, port_, static_cast<uint32_t>(g), &entry, 0) != 0 || gid_zero(entry.gid)) continue;
        if (entry.gid_type == IBV_GID_TYPE_ROCE_V2) {
          gid_index_ = g;
          break;
        }
      }
    }
  }
  if (ibv_query_gid(ctx_, port_, gid_index_, &gid_) != 0) fail("verbs provider: no GID at index ", gid_index_);
  pd_ = ibv_alloc_pd(ctx_);
  if (pd_ == nullptr) fail_errno("verbs provider: ibv_alloc_pd");
  ibv_device_attr da{};
  ibv_query_device(ctx_, &da);
  info_.name = "verbs";
  info_.huge_pages = false;
  info_.max_qp_depth = static_cast<uint32_t>(da.max_qp_wr);
  info_.max_inline = 64;
  info_.max_message = pa.max_msg_sz;
  info_.description = dev->name + " port " + std::to_string(port) + " (" +
                      (pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand") + ", gid index " +
                      std::to_string(gid_index_) + " " + gid_string(gid_) + ", lid " + std::to_string(lid_) + ")";
  log::debug("verbs provider: ", info_.description);
}

VerbsProvider::~VerbsProvider() {
  for (auto& [k, mr] : mrs_) ibv_dereg_mr(mr);
  for (auto& [a, c] : chunks_) munmap(c.addr, c.size);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

Chunk VerbsProvider::map_chunk(size_t size, int numa_node) {
  if (size == 0) fail("verbs: cannot map a chunk of 0 bytes");
  Chunk c;
  c.size = size;
  c.numa_node = numa_node;
  void* p = MAP_FAILED;
  if (size % (2u << 20) == 0 && settings::get_bool(settings::dsm::kHugePages))
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (p != MAP_FAILED) {
    c.huge_pages = true;
  } else {
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail_errno("verbs: cannot map a chunk of " + std::to_string(size) + " bytes");
    madvise(p, size, MADV_HUGEPAGE);
  }
  if (numa_node >= 0 && numa_available() >= 0 && numa_node <= numa_max_node()) numa_tonode_memory(p, size, numa_node);
  c.addr = p;
  std::lock_guard<std::mutex> g(mu_);
  chunks_.emplace(reinterpret_cast<uintptr_t>(p), c);
  return c;
}

void VerbsProvider::unmap_chunk(const Chunk& c) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = chunks_.find(reinterpret_cast<uintptr_t>(c.addr));
  if (it == chunks_.end()) fail("verbs: unmap_chunk of an address that is not a mapped chunk");
  // Registrations inside the chunk go first, so the NIC never reaches unmapped memory.
  auto* base = static_cast<uint8_t*>(c.addr);
  for (auto m = mrs_.begin(); m != mrs_.end();) {
    auto* a = static_cast<uint8_t*>(m->second->addr);
    if (a >= base && a < base + it->second.size) {
      ibv_dereg_mr(m->second);
      m = mrs_.erase(m);
    } else {
      ++m;
    }
  }
  munmap(c.addr, it->second.size);
  chunks_.erase(it);
}

MemoryRegion VerbsProvider::register_memory(void* addr, size_t len, uint32_t access) {
  std::lock_guard<std::mutex> g(mu_);
  auto a = reinterpret_cast<uintptr_t>(addr);
  auto it = chunks_.upper_bound(a);
  if (it == chunks_.begin() || len == 0) fail("verbs: register_memory(", addr, ", ", len, "): not inside a chunk from map_chunk");
  --it;
  if (a + len > it->first + it->second.size) fail("verbs: register_memory(", addr, ", ", len, "): range is not inside one chunk");
  ibv_mr* mr = ibv_reg_mr(pd_, addr, len, access_flags(access));
  if (mr == nullptr) fail_errno("verbs: ibv_reg_mr of " + std::to_string(len) + " bytes");
  mrs_[mr->lkey] = mr;
  return MemoryRegion{addr, len, mr->lkey, mr->rkey, access};
}

void VerbsProvider::deregister(const MemoryRegion& m) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = mrs_.find(m.lkey);
  if (it == mrs_.end()) fail("verbs: deregister of key ", m.lkey, " that is not registered");
  ibv_dereg_mr(it->second);
  mrs_.erase(it);
}

std::unique_ptr<CompletionQueue> VerbsProvider::create_cq(uint32_t depth) {
  if (depth == 0) fail("verbs: completion queue depth 0");
  return std::make_unique<VerbsCq>(*this, depth);
}

std::unique_ptr<QueuePair> VerbsProvider::create_qp(int peer_rank, CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                                    const QpCaps& caps) {
  if (peer_rank < 0 || peer_rank >= pctx_.size) fail("verbs: create_qp to rank ", peer_rank, ", but the job has ", pctx_.size, " ranks");
  auto* s = dynamic_cast<VerbsCq*>(&send_cq);
  auto* r = dynamic_cast<VerbsCq*>(&recv_cq);
  if (s == nullptr || r == nullptr) fail("verbs: completion queues belong to another provider");
  if (caps.max_send_wr == 0 || caps.max_send_wr > info_.max_qp_depth || caps.max_recv_wr == 0 || caps.max_recv_wr > info_.max_qp_depth)
    fail("verbs: queue depths must be 1..", info_.max_qp_depth);
  auto qp = std::make_unique<VerbsQp>(*this, peer_rank, *s, *r, caps);
  std::lock_guard<std::mutex> g(mu_);
  qps_[qp->qp_num()] = qp.get();
  return qp;
}

int VerbsProvider::peer_of_qp(uint32_t qpn) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = qp_peers_.find(qpn);
  return it == qp_peers_.end() ? -1 : it->second;
}

void VerbsProvider::set_qp_peer(uint32_t qpn, int rank) {
  std::lock_guard<std::mutex> g(mu_);
  qp_peers_[qpn] = rank;
}

void VerbsProvider::forget_qp(uint32_t qpn) {
  std::lock_guard<std::mutex> g(mu_);
  qp_peers_.erase(qpn);
  qps_.erase(qpn);
}

void VerbsProvider::account(uint32_t qpn, const void* cq, bool error, bool recv_opcode) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return;
  VerbsQp* qp = it->second;
  bool send = qp->is_send_cq(cq), recv = qp->is_recv_cq(cq);
  // A CQ serving both queues of a QP: the opcode tells, except on errors (then undefined; the
  // QP is in the error state and reset() clears its accounting).
  if (send && recv) {
    if (error) return;
    send = !recv_opcode;
    recv = recv_opcode;
  }
  if (send) qp->on_send_completion(error);
  if (recv) qp->on_recv_completion();
}

void VerbsProvider::mark_qp_error(uint32_t qpn) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = qps_.find(qpn);
  if (it != qps_.end()) it->second->mark_error();
}

bool VerbsProvider::peer_alive(int rank) const {
  if (rank < 0 || rank >= pctx_.size) return false;
  if (rank == pctx_.rank) return true;
  // Only a process on this host can be checked directly; elsewhere the transport's retry
  // limit (PeerUnreachable completions) is the signal.
  if (static_cast<size_t>(rank) < pctx_.pids.size() && pctx_.hosts.size() == pctx_.pids.size() &&
      pctx_.hosts[static_cast<size_t>(rank)] == pctx_.hosts[static_cast<size_t>(pctx_.rank)])
    return ::kill(pctx_.pids[static_cast<size_t>(rank)], 0) == 0 || errno != ESRCH;
  return true;
}

}  // namespace loom::fabric::verbs
