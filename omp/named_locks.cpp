#include "loom/omp/named_locks.hpp"

#include "loom/dsm/common/error.hpp"

namespace loom::omp {

NamedLocks::NamedLocks(coherence::Space& space, region::Region& control) : space_(space) {
  keys_ = space.new_atomic_words(control, kEntries);
  locks_.reserve(kEntries);
  for (size_t i = 0; i < kEntries; ++i) locks_.push_back(space.make_lock());
}

coherence::Lock& NamedLocks::of(const void* name) {
  const auto key = reinterpret_cast<uint64_t>(name);
  std::lock_guard<std::mutex> g(mu_);
  auto it = known_.find(key);
  if (it == known_.end()) it = known_.emplace(key, claim(key)).first;
  return locks_[it->second];
}

// Linear probing from the key's hash: an entry holding the key is its own; an empty one is
// claimed by CAS (a process that loses the race to the same key finds it there). Relaxed: the
// table only names entries; the locks order what they guard.
uint32_t NamedLocks::claim(uint64_t key) {
  const size_t home = (key * 0x9e3779b97f4a7c15ULL) >> 55;  // 9 bits: kEntries
  for (size_t i = 0; i < kEntries; ++i) {
    const size_t at = (home + i) % kEntries;
    coherence::AtomicRef w = space_.atomic_ref(&keys_[at]);
    uint64_t cur = w.load(coherence::Order::Relaxed);
    if (cur == 0) cur = w.compare_swap(0, key, coherence::Order::Relaxed);
    if (cur == 0 || cur == key) return static_cast<uint32_t>(at);
  }
  fail("omp: more than ", kEntries, " distinct OpenMP locks and critical-section names in one program (the layer keeps a "
       "DSM lock for each)");
}

}  // namespace loom::omp
