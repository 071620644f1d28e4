#pragma once
// The verbs completion queue: an ibv_cq with a completion channel for sleeping waiters, and
// the accounting of which queue pair's entries each completion frees.
#include "loom/dsm/fabric/verbs/verbs_internal.hpp"

namespace loom::fabric::verbs {

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
      take_events();
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

  // For a waiter that sleeps elsewhere (the shm+verbs provider's completion queues): ask for an
  // event at the next completion, the descriptor the events arrive on, and take the events that
  // arrived (acknowledged here, as wait() does).
  void arm() { ibv_req_notify_cq(cq_, 0); }
  int channel_fd() const { return channel_->fd; }
  void take_events() {
    ibv_cq* cq;
    void* ctx;
    std::lock_guard<std::mutex> g(mu_);
    while (ibv_get_cq_event(channel_, &cq, &ctx) == 0) ++unacked_;
    if (unacked_ >= 64) {
      ibv_ack_cq_events(cq_, unacked_);
      unacked_ = 0;
    }
  }

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

}  // namespace loom::fabric::verbs
