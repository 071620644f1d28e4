#pragma once
// Lanes: the fabric side of every protocol step. A lane is a set of queue pairs (one per rank)
// with one completion queue and a registered scratch area, used by one thread at a time: every
// request is signaled, and a step waits for all of its requests before it reads their results.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/memory/rdma_allocator.hpp"

namespace loom::coherence {

inline constexpr size_t kMaxBlock = size_t{1} << 20;  // largest block a region may have

// The scratch area of a lane: what each protocol step reads into and writes from.
struct Scratch {
  // 8-byte words.
  static constexpr size_t kResult = 0;       // the result of the step's CAS or FETCH_ADD
  static constexpr size_t kCountSink = 8;    // FETCH_ADD results nobody reads (invalidation counters)
  static constexpr size_t kTicket = 16;      // barrier: our collective call's ticket, written just before
  static constexpr size_t kEpoch = 24;       // barrier: the epoch written to a partner's flag
  static constexpr size_t kQueueNode = 32;   // lock: our queue node's name, written to the predecessor
  static constexpr size_t kGrant = 40;       // lock: the grant word written to the successor
  static constexpr size_t kUnlockSink = 48;  // results of unlocking CASes nobody reads
  static constexpr size_t kOneByte = 64;     // a byte 1 (set once with the lane): a sharer joining, an invalidation flag
  static constexpr size_t kClock = 72;       // an atomic word's entry clock, read behind an acquiring operation on it
  // Areas.
  static constexpr size_t kNoticesOut = 4096;  // serialized notices to write
  static constexpr size_t kNoticesIn = 8192;   // serialized notices read
  static constexpr size_t kSharers = 12288;    // sharer bytes to write (one per process)
  static constexpr size_t kDirectory = 16384;  // a directory entry read (DirEntry::read_bytes)
  static constexpr size_t kWtsRing = 32768;    // 64 write timestamps in flight, 8 bytes each
  static constexpr size_t kWtsSlots = 64;
  static constexpr size_t kBatchCas = 40960;   // results of a batch of CASes (leases, entry locks), 8 bytes each
  static constexpr size_t kBlock = 65536;      // staging for one block
  static constexpr size_t kBytes = kBlock + kMaxBlock;

  static constexpr size_t kAreaBytes = 4096;
  static constexpr size_t kMaxNoticeBytes = kAreaBytes;
  static constexpr int kMaxSharerBytes = 4096;  // the directory policy's process limit
};
static_assert(Scratch::kOneByte + 1 <= Scratch::kClock && Scratch::kClock + 8 <= Scratch::kNoticesOut);
static_assert(Scratch::kDirectory + 16 + Scratch::kMaxSharerBytes <= Scratch::kWtsRing);
static_assert(Scratch::kWtsRing + 8 * Scratch::kWtsSlots <= Scratch::kBatchCas);
static_assert(Scratch::kBatchCas + 8 * 64 <= Scratch::kBlock);

class Lane {
 public:
  static constexpr uint32_t kDepth = 64;  // send queue depth of each queue pair

  Lane(fabric::Provider& provider, int nprocs, memory::RDMAMemory scratch);
  std::vector<fabric::QueuePair*> queue_pairs();
  memory::RDMAMemory release_scratch() { return std::exchange(scratch_, memory::RDMAMemory{}); }

  // Posts one signaled request from the scratch area at off (post) or from other registered
  // memory of this process (post_mem); a full queue is drained first.
  void post(int to, fabric::Opcode op, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t cmp = 0,
            uint64_t swp = 0) {
    post_mem(to, op, scratch_, off, len, raddr, rkey, cmp, swp);
  }
  void post_mem(int to, fabric::Opcode op, const memory::RDMAMemory& m, size_t off, uint32_t len, uint64_t raddr,
                uint32_t rkey, uint64_t cmp = 0, uint64_t swp = 0);
  // Waits for every request posted; a failed one is an error (after resetting the QPs).
  void wait();
  // A fabric CAS, waited for; returns the old value.
  uint64_t cas(int to, uint64_t addr, uint32_t rkey, uint64_t expected, uint64_t desired);

  uint8_t* bytes(size_t off) { return scratch_.bytes() + off; }
  // A word the fabric wrote (acquire: the completion was seen before this load).
  uint64_t word(size_t off) {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(bytes(off))).load(std::memory_order_acquire);
  }
  void set_word(size_t off, uint64_t v) { std::memcpy(bytes(off), &v, 8); }
  uint32_t outstanding() const { return outstanding_; }
  uint64_t posted() const { return next_id_; }

  std::mutex mu;  // held by the thread using the lane (LaneGuard)

 private:
  int nprocs_;
  std::unique_ptr<fabric::CompletionQueue> cq_;
  std::vector<std::unique_ptr<fabric::QueuePair>> qps_;
  memory::RDMAMemory scratch_;
  uint32_t outstanding_ = 0;
  uint64_t next_id_ = 0;
};

// A lane held for one protocol step; requests still outstanding are waited for on release.
class LaneGuard {
 public:
  explicit LaneGuard(std::vector<std::unique_ptr<Lane>>& lanes);
  ~LaneGuard();
  LaneGuard(const LaneGuard&) = delete;
  LaneGuard& operator=(const LaneGuard&) = delete;
  Lane& operator*() { return *l_; }
  Lane* operator->() { return l_; }

 private:
  Lane* l_ = nullptr;
};

}  // namespace loom::coherence
