// RetryAsync: calls queued while a channel is full, finished in FIFO order by the owner's
// later calls or by helper threads; retired records; and MessengerGlobal.
#include <algorithm>

#include "loom/invoke/invoker.hpp"
#include "loom/invoke/messenger.hpp"

namespace loom::invoke {

bool Messenger::enqueue_async(const FrameSpec& f, size_t n, Synchronizer* transmitted) {
  size_t len = wire::round_record(n + wire::kRecordOverhead);
  memory::RDMAMemory rec = inv_.heap().allocate(len);
  f.fill(rec.bytes() + 8, n);
  if (len != n + wire::kRecordOverhead) {
    uint64_t pad = wire::pad_frame_word();
    std::memcpy(rec.bytes() + 8 + n, &pad, 8);
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!async_pending_.load(std::memory_order_relaxed)) flush();  // our ring state is still ours alone here
    async_.push_back(Queued{rec, len, transmitted});
    async_pending_.store(true, std::memory_order_release);
  }
  inv_.note_async(this);  // for the helpers
  owner_->note_async();   // for the owner's own progress
  return true;
}

void Messenger::reclaim() {
  while (!retired_.empty() && tx_.complete(retired_.front().first)) {
    inv_.heap().free(retired_.front().second.addr);
    retired_.pop_front();
  }
}

bool Messenger::drain_async() {
  std::lock_guard<std::mutex> g(mu_);
  if (blocked_) return false;  // the owner's blocked call goes first
  while (!async_.empty()) {
    Queued& q = async_.front();
    if (!send_record(q.rec, q.len)) break;
    if (q.transmitted) q.transmitted->transmitted();
    async_.pop_front();
  }
  reclaim();
  bool empty = async_.empty();
  if (empty) async_pending_.store(false, std::memory_order_release);
  return empty;
}

Messenger& MessengerGlobal::create(Thread dest) {
  inv_.check(dest);
  size_t g = static_cast<size_t>(inv_.gid(dest));
  if (messengers_.size() <= g) messengers_.resize(static_cast<size_t>(inv_.total_threads()));
  auto& m = messengers_[g];
  if (!m) m = std::make_unique<Messenger>(inv_, dest, inv_.next_messenger_serial(), this);
  return *m;
}

BellChecks& MessengerGlobal::bell_checks() {
  if (!checks_) checks_ = std::make_unique<BellChecks>(inv_);
  return *checks_;
}

void MessengerGlobal::flush() {
  for (auto& m : messengers_)
    if (m && m->has_open_record()) m->flush();
}

bool MessengerGlobal::drain_async() {
  bool all = true;
  for (auto& m : messengers_)
    if (m && m->async_pending()) all = m->drain_async() && all;
  if (all) maybe_async_ = false;
  return all;
}

bool MessengerGlobal::quiet() const {
  for (auto& m : messengers_)
    if (m && (m->has_open_record() || m->async_pending())) return false;
  return true;
}

}  // namespace loom::invoke
