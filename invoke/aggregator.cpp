#include "loom/invoke/aggregator.hpp"

#include <algorithm>

namespace loom::invoke {

Aggregator::Aggregator(Config cfg) : inv_(Invoker::current()), cfg_(cfg) {
  if (cfg_.flush_bytes < 64) fail("Aggregator: flush size ", cfg_.flush_bytes, " is below 64 bytes");
  overflow_.resize(static_cast<size_t>(inv_.total_threads()));
  kept_.resize(overflow_.size(), 0);
  peak_kept_.resize(overflow_.size(), 0);
  called_.resize(overflow_.size(), 0);
  messengers_.resize(static_cast<size_t>(inv_.total_threads()), nullptr);
}

Messenger& Aggregator::messenger(Thread dest) {
  inv_.check(dest);
  Messenger*& m = messengers_[static_cast<size_t>(inv_.gid(dest))];
  if (m == nullptr) m = &inv_.messengers().to(dest);
  return *m;
}

Aggregator::~Aggregator() {
  if (cfg_.mode == Mode::Trad) flush();
  else drain();
  if (noted_) inv_.messengers().forget(this);
}

bool Aggregator::submit(Thread dest, const FrameSpec& s, Synchronizer* transmitted) {
  Messenger& m = messenger(dest);
  const size_t gid = static_cast<size_t>(inv_.gid(dest));
  called_[gid] = 1;
  if (cfg_.mode == Mode::Trad) {
    if (!m.has_open_record()) touched_.push_back(&m);
    return m.call(s, OnFull::Retry, cfg_.flush_bytes, transmitted);
  }
  auto& q = overflow_[gid];
  if (!q.empty()) drain_one(gid);
  if (q.empty() && !m.async_pending() && m.call(s, OnFull::Fail, 0, transmitted)) return true;
  // The Messenger cannot make progress: keep the call, serialized as a whole record in
  // registered memory, to be sent in place later.
  size_t n = s.bytes();
  size_t len = wire::round_record(n + wire::kRecordOverhead);
  if (n > m.max_frame()) fail("Aggregator: a call of ", n, " bytes exceeds the largest call (", m.max_frame(), ")");
  if (exceeding_ + len > cfg_.overflow_limit) return false;
  memory::RDMAMemory rec = inv_.heap().allocate(len);
  s.fill(rec.bytes() + 8, n);
  if (len != n + wire::kRecordOverhead) {
    uint64_t pad = wire::pad_frame_word();
    std::memcpy(rec.bytes() + 8 + n, &pad, 8);
  }
  if (q.empty()) touched_.push_back(&m);
  q.push_back(Queued{rec, len, transmitted});
  if (!noted_) inv_.messengers().note_keeping(this);
  exceeding_ += len;
  kept_[gid] += len;
  peak_kept_[gid] = std::max(peak_kept_[gid], kept_[gid]);
  ++exceeded_;
  return true;
}

bool Aggregator::drain_one(size_t gid) {
  auto& q = overflow_[gid];
  if (q.empty()) return true;
  Messenger& m = messenger(inv_.thread_of(static_cast<int>(gid)));
  if (m.async_pending()) return false;
  while (!q.empty()) {
    Queued& c = q.front();
    m.count_sent(1);  // a kept call counts as made once it goes out (before it can run)
    if (!m.send_record(c.rec, c.len)) {
      m.count_sent(-1);
      return false;
    }
    if (c.transmitted) c.transmitted->transmitted();
    exceeding_ -= c.len;
    kept_[gid] -= c.len;
    q.pop_front();
  }
  m.reclaim();
  return true;
}

void Aggregator::reset_peaks() {
  std::fill(peak_kept_.begin(), peak_kept_.end(), 0);
  std::fill(called_.begin(), called_.end(), 0);
}

void Aggregator::flush() {
  std::vector<Messenger*> keep;
  for (Messenger* m : touched_) {
    if (cfg_.mode == Mode::Trad) {
      m->flush();
      continue;
    }
    if (!drain_one(static_cast<size_t>(inv_.gid(m->dest())))) keep.push_back(m);
  }
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  touched_ = std::move(keep);
}

void Aggregator::drain() {
  flush();
  inv_.wait_until([this] {
    flush();
    return touched_.empty();
  });
}

void MessengerGlobal::note_keeping(Aggregator* a) {
  keeping_.push_back(a);
  a->noted_ = true;
}

void MessengerGlobal::forget(Aggregator* a) {
  std::erase(keeping_, a);
  a->noted_ = false;
}

void MessengerGlobal::send_kept() {
  // flush() may leave an Aggregator keeping calls (rings still full); one that kept none is let go.
  for (size_t i = 0; i < keeping_.size();) {
    Aggregator* a = keeping_[i];
    a->flush();
    if (a->exceeding_bytes() != 0) {
      ++i;
      continue;
    }
    a->noted_ = false;
    keeping_[i] = keeping_.back();
    keeping_.pop_back();
  }
}

}  // namespace loom::invoke
