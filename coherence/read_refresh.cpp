// Refresh at acquire (docs/coherence.md, "Refresh at acquire"): a copy that a write notice (or an
// invalidation flag) drops while its application view is open for plain reads — the program read
// it through a fault since it last changed — is fetched anew in the same acquire, in pipelined
// batches, through the runtime view, and stays open: its next read costs no trap and no
// protection change. The fetch is the one a read fault would make (prefetch.cpp: the data, then
// the entry that validates it, a lease); a block whose entry does not validate at once (locked,
// exclusive, atomic) closes as before and its fault fetches it. While the acquire holds the
// block's mutex its bytes change under the open view: only a thread that has not acquired since
// the write could read them then, and under release consistency that read races with the write
// anyway (words nobody wrote are rewritten with the same bytes). A copy refreshed kMaxRefreshes
// acquires in a row closes instead, so one the program stopped reading costs at most that many
// fetches; its next read fault, if any, starts a new streak.
#include "loom/coherence/space_impl.hpp"

namespace loom::coherence {

void Space::Impl::InvalidationRun::refresh() {
  if (!s_.cfg.refresh || lane_ == nullptr) return;
  const size_t cap = s_.prefetch_cap(*rs_);
  PrefetchBatch batch;
  for (size_t i = 0; i < held_.size(); ++i) {
    BlockMeta& m = rs_->meta[first_ + i];
    if (!open_[i] || m.state != State::Invalid) continue;
    if (m.refreshes >= kMaxRefreshes) {
      m.refreshes = 0;
      continue;
    }
    batch.push_back(s_.aim(*rs_, m));
    if (batch.size() == cap) fetch(batch);
  }
  if (!batch.empty()) fetch(batch);
}

// One batch of the run's open copies fetched; those now Clean stay open.
void Space::Impl::InvalidationRun::fetch(PrefetchBatch& batch) {
  std::optional<LaneGuard>& lane = *lane_;
  if (!lane) lane.emplace(s_.lanes);
  s_.prefetch_batch(**lane, *rs_, batch);
  for (const Prefetch& p : batch) {
    if (p.m->state != State::Clean) continue;
    ++p.m->refreshes;
    s_.stats.refreshes.fetch_add(1, std::memory_order_relaxed);
  }
  batch.clear();
}

}  // namespace loom::coherence
