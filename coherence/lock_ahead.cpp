// Entries locked ahead (docs/coherence.md, "Release", step 1): a release takes its dirty blocks
// in windows and locks their directory entries with CASes in pipelined rounds, not one waited
// CAS per block. Round 1 guesses the entry word our copy was taken with; a CAS that missed only
// because the entry moved on (a reader extended its lease, or another release published) tries
// again in round 2 with the word it found. The blocks whose entries are held are released
// first: this process waits for no other process's entry while it holds some (the blocks left
// take lock_entry's loop one at a time, as before), so two releases locking ahead cannot wait
// on each other.
#include <algorithm>

#include "loom/coherence/space_impl.hpp"

namespace loom::coherence {

namespace {

// An entry word a lock CAS may expect: held by nobody, shared or released plainly.
bool lockable(DirWord w) { return !w.locked() && !w.exclusive() && !w.atomic(); }

}  // namespace

// Posts round `round`'s CASes for the window's blocks still without their entries; true when any
// was posted. guess[i] is the word each CAS expects.
bool Space::Impl::post_lock_round(Lane& l, std::span<BlockMeta* const> win, std::vector<EntryLock>& got,
                                  std::vector<DirWord>& guess) {
  bool any = false;
  for (size_t i = 0; i < win.size(); ++i) {
    if (got[i].held || !lockable(guess[i])) continue;
    const RegionState& rs = *regions[win[i]->region_slot].load(std::memory_order_acquire);
    const size_t b = win[i]->block;
    const int mgr = rs.r->manager(b);
    l.post(mgr, fabric::Opcode::CompareSwap, Scratch::kBatchCas + 8 * i, 8, rs.dir_addr(mgr, b), rs.rkey(mgr), guess[i].raw,
           guess[i].with_lock().raw);
    any = true;
  }
  return any;
}

std::vector<Space::Impl::EntryLock> Space::Impl::lock_ahead(Lane& l, std::span<BlockMeta* const> win) {
  static_assert(kMaxPrefetch * 8 <= Scratch::kBlock - Scratch::kBatchCas);
  std::vector<EntryLock> got(win.size());
  std::vector<DirWord> guess(win.size());
  for (size_t i = 0; i < win.size(); ++i) {
    std::lock_guard<std::mutex> g(win[i]->mu);
    // Not dirty any more (released meanwhile): no guess, no CAS.
    guess[i] = win[i]->state == State::Dirty ? win[i]->word0.without_lock() : DirWord{}.with_lock();
  }
  for (int round = 0; round < 2 && post_lock_round(l, win, got, guess); ++round) {
    l.wait();
    for (size_t i = 0; i < win.size(); ++i) {
      if (got[i].held || !lockable(guess[i])) continue;
      const DirWord old{l.word(Scratch::kBatchCas + 8 * i)};
      if (old == guess[i]) {
        got[i] = EntryLock{true, round == 0, guess[i]};
      } else {
        guess[i] = old;  // not lockable (held, exclusive, atomic): lock_entry's loop takes it
      }
    }
  }
  return got;
}

// An entry locked ahead for a block that was not dirty when its turn came: unlocked unchanged.
void Space::Impl::unlock_ahead(Lane& l, RegionState& rs, size_t b, DirWord old) {
  const int mgr = rs.r->manager(b);
  l.post(mgr, fabric::Opcode::CompareSwap, Scratch::kUnlockSink, 8, rs.dir_addr(mgr, b), rs.rkey(mgr), old.with_lock().raw, old.raw);
}

}  // namespace loom::coherence
