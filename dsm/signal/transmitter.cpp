#include "dsm/signal/transmitter.hpp"

#include "dsm/common/error.hpp"
#include "dsm/common/log.hpp"
#include "dsm/signal/backoff.hpp"

namespace loom::signal {

namespace {
constexpr uint64_t kMark = 1ull << 63;
constexpr int kIssueBits = 40;
constexpr uint64_t kIssueMask = (1ull << kIssueBits) - 1;
constexpr uint64_t kBatchMask = (1ull << 23) - 1;
}  // namespace

Transmitter::Transmitter(fabric::QueuePair& qp, fabric::CompletionQueue& send_cq, Config cfg)
    : qp_(qp), cq_(send_cq), depth_(qp.caps().max_send_wr) {
  if (depth_ < 2) fail("Transmitter: send queue depth ", depth_, " is too small (need at least 2)");
  if (depth_ > kBatchMask) fail("Transmitter: send queue depth ", depth_, " is too large");
  interval_ = cfg.signal_interval != 0 ? cfg.signal_interval : std::max<uint32_t>(1, depth_ / 4);
  if (interval_ > depth_ / 2) fail("Transmitter: signal interval ", interval_, " must be at most half the depth ", depth_);
  // Credits below the reserve are for signaled posts only, so one can always be made.
  reserve_ = std::max<int64_t>(1, depth_ / 8);
  credits_.store(depth_);
}

void Transmitter::set_error_handler(std::function<void(const fabric::Completion&)> h) {
  std::lock_guard<std::mutex> g(handler_mu_);
  on_error_ = std::move(h);
}

Posted Transmitter::post(fabric::SendWr wr, bool force_signal) {
  Backoff backoff;
  bool signaled = false;
  for (;;) {
    int64_t c = credits_.load(std::memory_order_acquire);
    bool want = force_signal || since_signal_.load(std::memory_order_relaxed) + 1 >= interval_ || c <= reserve_;
    int64_t floor = want ? 0 : reserve_;
    if (c > floor) {
      if (credits_.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel)) {
        signaled = want;
        break;
      }
      continue;
    }
    if (progress() == 0) {
      if (backoff.should_sleep()) cq_.wait(std::chrono::milliseconds(1));
      else backoff.spin_or_yield();
    }
  }
  uint64_t batch = 0;
  if (signaled) {
    batch = since_signal_.exchange(0, std::memory_order_acq_rel);
    uint64_t issue = issued_.fetch_add(1, std::memory_order_acq_rel) + 1;
    wr.wr_id = kMark | ((batch + 1) << kIssueBits) | (issue & kIssueMask);
    wr.signaled = true;
  } else {
    wr.wr_id = 0;
    wr.signaled = false;
  }
  fabric::PostResult r = qp_.post_send(wr);
  if (r != fabric::PostResult::Ok) {
    credits_.fetch_add(1, std::memory_order_acq_rel);
    if (batch != 0) since_signal_.fetch_add(batch, std::memory_order_acq_rel);
    return Posted{r, 0};
  }
  if (!signaled) since_signal_.fetch_add(1, std::memory_order_acq_rel);
  posts_.fetch_add(1, std::memory_order_relaxed);
  if (signaled) signaled_.fetch_add(1, std::memory_order_relaxed);
  return Posted{r, issued_.load(std::memory_order_acquire)};
}

int Transmitter::progress() {
  fabric::Completion cs[32];
  int n = cq_.poll(cs);
  for (int i = 0; i < n; ++i) {
    const fabric::Completion& c = cs[i];
    if (c.wr_id & kMark) {
      uint64_t batch = (c.wr_id >> kIssueBits) & kBatchMask;
      uint64_t issue = c.wr_id & kIssueMask;
      credits_.fetch_add(static_cast<int64_t>(batch), std::memory_order_acq_rel);
      uint64_t cur = completed_.load(std::memory_order_relaxed);
      while (cur < issue && !completed_.compare_exchange_weak(cur, issue, std::memory_order_acq_rel)) {
      }
    }
    if (c.status != fabric::Status::Success) {
      errors_.fetch_add(1, std::memory_order_relaxed);
      last_error_.store(static_cast<uint8_t>(c.status), std::memory_order_relaxed);
      std::lock_guard<std::mutex> g(handler_mu_);
      if (on_error_) on_error_(c);
      else if (c.status != fabric::Status::WorkRequestFlushed)
        log::warn("transmitter: ", fabric::to_string(c.opcode), " to rank ", qp_.peer_rank(), " failed: ", fabric::to_string(c.status));
    }
  }
  return n;
}

void Transmitter::post_marker() {
  // A zero-length signaled WRITE: it touches no memory and needs no key, but its completion
  // proves everything posted before it complete.
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::Write;
  Posted p = post(wr, true);
  if (!p.ok()) fail("Transmitter: cannot post a flush marker to rank ", qp_.peer_rank(), ": ", fabric::to_string(p.result));
}

void Transmitter::wait(uint64_t tag) {
  Backoff backoff;
  while (completed_flush() <= tag) {
    if (issued_.load(std::memory_order_acquire) <= tag) post_marker();
    if (progress() == 0) {
      if (backoff.should_sleep()) cq_.wait(std::chrono::milliseconds(1));
      else backoff.spin_or_yield();
    }
  }
}

void Transmitter::flush() { wait(issued_.load(std::memory_order_acquire)); }

}  // namespace loom::signal
