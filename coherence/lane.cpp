#include "loom/coherence/lane.hpp"

#include <array>
#include <thread>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/common/backoff.hpp"

namespace loom::coherence {

Lane::Lane(fabric::Provider& provider, int nprocs, memory::RDMAMemory scratch) : nprocs_(nprocs), scratch_(scratch) {
  fabric::QpCaps caps;
  caps.max_send_wr = kDepth;
  caps.max_recv_wr = 1;
  caps.max_inline = 0;
  cq_ = provider.create_cq(kDepth * static_cast<uint32_t>(nprocs));
  for (int r = 0; r < nprocs; ++r) qps_.push_back(provider.create_qp(r, *cq_, *cq_, caps));
  // Written once: WRITEs of it may be in flight at any time (rewriting a source in flight is a
  // race with the NIC reading it, which the emulated wire's engine thread made visible).
  bytes(Scratch::kOneByte)[0] = 1;
}

std::vector<fabric::QueuePair*> Lane::queue_pairs() {
  std::vector<fabric::QueuePair*> v;
  for (auto& q : qps_) v.push_back(q.get());
  return v;
}

void Lane::post_mem(int to, fabric::Opcode op, const memory::RDMAMemory& m, size_t off, uint32_t len, uint64_t raddr,
                    uint32_t rkey, uint64_t cmp, uint64_t swp) {
  if (to < 0 || to >= nprocs_) fail("coherence: request to rank ", to, " of ", nprocs_);
  if (outstanding_ + 1 >= kDepth) wait();
  fabric::SendWr wr;
  wr.wr_id = ++next_id_;
  wr.opcode = op;
  wr.signaled = true;
  wr.local = fabric::Sge{m.address() + off, len, m.lkey};
  wr.remote_addr = raddr;
  wr.rkey = rkey;
  wr.compare_add = cmp;
  wr.swap = swp;
  wait::Backoff b;
  for (;;) {
    fabric::PostResult r = qps_[static_cast<size_t>(to)]->post_send(wr);
    if (r == fabric::PostResult::Ok) break;
    if (r != fabric::PostResult::QueueFull) fail("coherence: posting ", fabric::to_string(op), " to rank ", to, ": ", fabric::to_string(r));
    wait();
    b.pause();
  }
  ++outstanding_;
}

void Lane::wait() {
  std::array<fabric::Completion, 16> cs;
  wait::Backoff b;
  std::string err;
  while (outstanding_ != 0) {
    int k = cq_->poll(cs);
    for (int i = 0; i < k; ++i) {
      --outstanding_;
      const auto& c = cs[static_cast<size_t>(i)];
      if (c.status != fabric::Status::Success && err.empty())
        err = detail::concat(fabric::to_string(c.opcode), " failed: ", fabric::to_string(c.status));
    }
    if (k == 0) {
      if (b.should_sleep()) cq_->wait(std::chrono::milliseconds(1));
      else b.spin_or_yield();
    }
  }
  if (!err.empty()) {
    // A queue pair in error stays there until reset; reset every one so the next step can run.
    for (auto& q : qps_)
      if (q->state() == fabric::QpState::Error) q->reset();
    fail("coherence: ", err, " (is a peer gone?)");
  }
}

uint64_t Lane::cas(int to, uint64_t addr, uint32_t rkey, uint64_t expected, uint64_t desired) {
  post(to, fabric::Opcode::CompareSwap, Scratch::kResult, 8, addr, rkey, expected, desired);
  wait();
  return word(Scratch::kResult);
}

LaneGuard::LaneGuard(std::vector<std::unique_ptr<Lane>>& lanes) {
  // A plain thread-local (no destructor to register): the fault handler gets here.
  static std::atomic<uint32_t> next_hint{0};
  thread_local uint32_t hint = next_hint.fetch_add(1, std::memory_order_relaxed);
  Lane& want = *lanes[hint % lanes.size()];
  if (want.mu.try_lock()) {
    l_ = &want;
    return;
  }
  for (;;) {
    for (auto& c : lanes)
      if (c->mu.try_lock()) {
        l_ = c.get();
        return;
      }
    std::this_thread::yield();
  }
}

LaneGuard::~LaneGuard() {
  if (l_->outstanding() != 0) {
    try {
      l_->wait();
    } catch (const std::exception& e) {
      log::error("coherence: ", e.what());
    }
  }
  l_->mu.unlock();
}

}  // namespace loom::coherence
