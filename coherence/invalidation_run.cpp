// Invalidations in runs (docs/coherence.md, "Acquire"): the copies one acquire drops are closed
// with one mprotect per run of adjacent blocks. A call for one page of a large mapping splits
// its area and flushes the TLB; FT moved 16k blocks per step and process and spent most of its
// protocol time there (bench/README.md).
#include "loom/coherence/space_impl.hpp"

namespace loom::coherence {

Space::Impl::InvalidationRun::~InvalidationRun() {
  // Only on the way out of a failed acquire, which ends the process: the mutexes are let go
  // either way.
  try {
    close();
  } catch (...) {
  }
}

void Space::Impl::InvalidationRun::before_lock(const RegionState& rs, size_t b) {
  if (held_.empty()) return;
  if (rs_ != &rs || b != first_ + held_.size() || held_.size() >= kMaxRun) close();
}

void Space::Impl::InvalidationRun::drop(std::optional<LaneGuard>& lane, RegionState& rs, BlockMeta& m, std::unique_lock<std::mutex>& g) {
  if (m.state == State::Dirty) {
    close();  // released now, with no block mutex held but its own
    s_.drop(lane, rs, m);
    return;
  }
  if (m.state != State::Clean) return;  // nothing to drop
  if (!held_.empty() && (rs_ != &rs || m.block != first_ + held_.size())) close();  // no before_lock
  if (held_.empty()) rs_ = &rs, first_ = m.block;
  lane_ = &lane;
  m.state = State::Invalid;
  s_.stats.invalidations.fetch_add(1, std::memory_order_relaxed);
  open_.push_back(rs.r->protection(m.block) == region::Protection::Read);
  held_.push_back(std::move(g));
}

// The run's copies refreshed in place stay open (Clean); the others' pages close, in runs.
void Space::Impl::InvalidationRun::close() {
  if (held_.empty()) return;
  refresh();
  const size_t n = held_.size();
  for (size_t x = 0; x < n;) {
    size_t y = x;
    while (y < n && rs_->meta[first_ + y].state != State::Clean) ++y;
    if (y > x) rs_->r->protect(first_ + x, y - x, region::Protection::None);
    x = y + 1;
  }
  held_.clear();  // unlocks
  open_.clear();
}

}  // namespace loom::coherence
