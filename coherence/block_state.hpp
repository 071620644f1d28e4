#pragma once
// What one process knows of each block of a region it holds (its cache), and where the
// region's registered protocol memory lies.
#include <atomic>
#include <boost/intrusive/list.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "loom/coherence/dir_word.hpp"
#include "loom/dsm/memory/rdma_allocator.hpp"
#include "loom/dsm/region/region.hpp"
#include "loom/dsm/runtime/remote_memory.hpp"

namespace loom::coherence {

// Invalid: no access (the next touch fetches). Clean: readable, equal to a version. Dirty:
// writable, with a twin; published at the next release. Exclusive: writable in place, no twin,
// nothing to publish: the directory names this process as the block's exclusive owner, so no
// other process holds a copy and any that wants one asks this process to downgrade it first.
// Atomic: the block holds atomic words (operated on at its manager only); no access here.
enum class State : uint8_t { Invalid, Clean, Dirty, Exclusive, Atomic };

struct BlockMeta : boost::intrusive::list_base_hook<> {
  std::mutex mu;
  std::atomic<State> state{State::Clean};  // written under mu; peeked without it
  int hint_home = 0;       // where the newest version we know of is (home or last releaser)
  uint64_t hint_wts = 0;   // ... and its write timestamp
  uint64_t data_wts = 0;   // version of the bytes in the private copy
  uint64_t rts = 0;        // lease: the copy is valid while the acquire time (Space::Impl::Fence) <= rts
  std::atomic<uint64_t> known_wts{0};  // newest notice applied; written under mu, peeked without it
  DirWord word0;           // last word0 seen unlocked (the releaser's CAS guess)
  bool whole = false;      // Dirty by an overwrite: no twin; the release publishes the copy whole
  // The intervals (Space::Impl::interval) in which the block was last published from a dirty
  // copy, and last fetched by a read fault: a fault run's keys (fault_run.cpp); 0: never.
  uint32_t written_in = 0, read_in = 0;
  bool by_run = false;     // Dirty because a write fault's run opened it (not its own fault)
  // Acquires in a row that refreshed this copy in place since its last read fault (read_refresh.cpp).
  uint8_t refreshes = 0;
  uint64_t atomic_clock = 0;  // Atomic: the entry's release clock (wts) as last seen here (fence.mu)
  uint32_t region_slot = 0;
  uint32_t block = 0;
};
using DirtyList = boost::intrusive::list<BlockMeta>;

inline RemoteMemoryLocator locator_of(const memory::RDMAMemory& m, int rank) {
  return RemoteMemoryLocator{rank, m.zone, m.address(), m.size, m.rkey};
}

// A region's protocol state at this process. Its registered memory, the same layout at every
// process: [header: invalidation counter][public copies][directory entries][invalidation flags].
struct RegionState {
  static constexpr size_t kHeader = 4096;

  region::Region* r = nullptr;
  uint32_t slot = 0;
  memory::RDMAMemory mem;
  size_t pub_off = 0, dir_off = 0, flag_off = 0, dir_stride = 0;
  std::vector<RemoteMemoryLocator> remote;
  std::unique_ptr<BlockMeta[]> meta;
  uint8_t* twins = nullptr;
  uint64_t inval_seen = 0;
  // Per chunk of kChunkBlocks blocks, the newest chunk notice applied here (written under
  // fence.mu, read relaxed by the read and release paths): the chunk's lease floor. Every lease
  // this process takes in the chunk, and every version it publishes there, ends at or after it,
  // so a version written later has a larger wts and no notice at or below it is news
  // (docs/coherence.md, "Chunk notices").
  std::unique_ptr<std::atomic<uint64_t>[]> chunk_known;
  // The region's claim window (exclusive.cpp, claims_pay): claims made, claims that ended in a
  // downgrade, blocks released since the last halving.
  std::atomic<uint64_t> win_claims{0}, win_downgrades{0}, win_released{0};
  bool claims_now = true;  // the current release's verdict (fence.mu)

  uint64_t pub_addr(int rank, size_t b) const { return base(rank) + pub_off + (b << r->block_shift()); }
  uint64_t dir_addr(int rank, size_t b) const { return base(rank) + dir_off + b * dir_stride; }
  uint64_t flag_addr(int rank, size_t b) const { return base(rank) + flag_off + b; }
  uint64_t base(int rank) const { return remote[static_cast<size_t>(rank)].addr; }
  uint32_t rkey(int rank) const { return remote[static_cast<size_t>(rank)].rkey; }
  size_t pub_offset(size_t b) const { return pub_off + (b << r->block_shift()); }
  uint8_t* pub_local(size_t b) const { return mem.bytes() + pub_offset(b); }
  uint8_t* dir_local(size_t b) const { return mem.bytes() + dir_off + b * dir_stride; }
  uint8_t* twin(size_t b) const { return twins + (b << r->block_shift()); }
  // Raised by other releasers (FETCH_ADD) whenever they set an invalidation flag here.
  std::atomic_ref<uint64_t> inval_counter() const { return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(mem.bytes())); }
};

}  // namespace loom::coherence
