#pragma once
// Pipe::Impl: the state both ends keep, shared by the files that implement them
// (pipe_setup.cpp: making and closing a pipe; pipe_write.cpp: the writing direction;
// pipe_read.cpp: the reading direction; directory.cpp: the service handlers).
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "loom/dsm/memory/rdma_allocator.hpp"
#include "loom/dsm/signal/transmitter.hpp"
#include "loom/rpipe/codec.hpp"
#include "loom/rpipe/free_ranges.hpp"
#include "loom/rpipe/pipe.hpp"

namespace loom::rpipe {

// Where things are in a pipe's control block: the same at both ends (both compute it from the
// pipe's width and options), so that a peer's address is its block's start plus an offset.
struct ControlLayout {
  size_t ring = 0;          // width slots: announcements of the peer's messages (written by it)
  size_t credit = 0;        // the peer's count of our messages taken (written by it)
  size_t ack = 0;           // the last of our free-list versions the peer collected (written by it)
  size_t free_list = 0;     // our published free list (read by the peer)
  size_t peer_free = 0;     // where a READ of the peer's free list lands
  size_t staging = 0;       // width slots and kWords words this end sends from
  size_t bytes = 0;
  static constexpr size_t kWords = 16;
  ControlLayout(uint32_t width, uint32_t free_capacity);
};

// A segment of a heap: its memory here (the reader's target or the writer's source copy) and,
// for the writer, the reader's copy.
struct Segment {
  memory::RDMAMemory local;
  uint64_t remote_addr = 0;
  uint32_t remote_rkey = 0;
  uint8_t* remote_mapped = nullptr;  // the reader's copy mapped here (shared memory), else WRITEs
};

struct Pipe::Impl {
  static constexpr uint32_t kWaitYields = 1024;
  Impl(Runtime& rt, int peer, End end, uint32_t width, Mode mode, Options o);
  ~Impl();

  Runtime& rt;
  const int peer;
  const int self;
  const Mode mode;
  const uint32_t width;
  const Options o;
  const bool writes;
  const bool reads;
  uint32_t id = 0;    // this process's pipe number
  uint64_t pair = 0;  // the how-many-th pipe between this rank and peer (equal at both ends)
  ControlLayout lay;

  std::unique_ptr<fabric::CompletionQueue> cq;
  std::unique_ptr<fabric::QueuePair> qp;
  std::unique_ptr<signal::Transmitter> tx;
  memory::RDMAMemory ctrl;
  uint64_t peer_ctrl = 0;
  uint32_t peer_ctrl_rkey = 0;
  uint8_t* peer_ctrl_mapped = nullptr;  // the peer's block mapped here (shared memory), else WRITEs
  std::array<uint64_t, ControlLayout::kWords> word_tags{};
  uint32_t next_word = 0;
  std::vector<uint64_t> slot_tags;  // per staging slot: the tag of its last WRITE

  // ---- the writing direction (this end allocates in the peer's heap) ----
  struct OutAlloc {
    RAddr addr;
    bool sent = false;
    uint64_t tag = 0;  // the data WRITE's flush tag (rwrite)
    bool stored = false;  // rwritten by stores through a mapping: complete at once
  };
  struct Out {
    std::vector<Segment> segments;
    std::optional<FreeRanges> view;  // deferred: the heap's state, kept here
    uint64_t next_serial = 1;
    uint64_t sent = 0;       // messages announced
    uint64_t collected = 0;  // the peer's free-list version last collected
    std::optional<uint64_t> last_write;  // the flush tag of the last data WRITE (rwrite)
    std::unordered_map<uint64_t, OutAlloc> live;  // allocated, not handed over yet or still in use
    std::deque<uint64_t> in_flight;               // serials rwritten, in order, until complete
    Stats stats;
  } out;

  // ---- the reading direction (the peer allocates in this end's heap) ----
  struct InEntry {
    RAddr addr;
    Kind kind = Kind::Written;
    bool ready = false;
    uint64_t source = 0;  // offered: the writer's copy
    uint32_t source_rkey = 0;
  };
  struct In {
    std::mutex mu;  // segments' growth and the immediate allocator (the service thread runs both)
    std::vector<memory::RDMAMemory> segments;  // capacity max_segments, filled in order
    std::atomic<uint32_t> count{0};            // segments made (release after the entry is set)
    std::optional<FreeRanges> owned;           // immediate: the heap's state, kept here
    uint64_t owned_peak = 0;
    std::map<uint64_t, uint64_t> pending;      // deferred: freed, not yet published (coalesced)
    uint64_t published = 0;                    // our free list's version
    uint64_t taken = 0;                        // messages taken by next()
    uint64_t reported = 0;                     // ... of which the peer has been told
    uint64_t last_serial = 0;
    std::unordered_map<uint64_t, InEntry> held;
  } in;

  // pipe_setup.cpp
  void connect();
  void close();
  void post_word(size_t remote_offset, uint64_t value);  // an 8-byte WRITE into the peer's block
  // The peer's registered memory mapped here, if the provider maps it (nullptr: not mapped).
  uint8_t* map_peer(uint64_t addr, uint32_t rkey, uint64_t len, uint32_t access = fabric::kRemoteWrite) const;
  uint8_t* at(size_t offset) const { return ctrl.bytes() + offset; }
  uint64_t position(const RAddr& a) const { return a.segment * o.segment_bytes + a.offset; }  // in FreeRanges
  uint64_t load(size_t offset) const;  // an acquire load of a word of our block
  template <typename... What>
  void wait_until(const auto& done, const What&... what);  // spin, yield, sleep; peer checked
  // pipe_write.cpp
  RAddr rmalloc(size_t size);
  uint64_t take_deferred(uint64_t ext);
  uint64_t take_immediate(uint64_t ext);
  bool collect();
  void grow_remote();
  void add_out_segment(uint32_t index, uint64_t addr, uint32_t rkey);
  OutAlloc& outgoing(const RAddr& a, const char* what);
  void announce(const codec::Slot& slot);
  void rwrite(const RAddr& a);
  void roffer(const RAddr& a);
  bool in_use(const RAddr& a);
  void retire_complete();
  void wait_writes_done();  // before freed space is handed out again
  void free_outgoing(const RAddr& a);
  void note_in_use(uint64_t in_use);
  // pipe_read.cpp
  std::optional<Message> try_next();
  InEntry& incoming(const RAddr& a, const char* what);
  uint8_t* target(const RAddr& a);
  void report_taken();
  void rread(const RAddr& a, size_t size);
  void read_offered(const InEntry& e, uint8_t* dst, size_t size, uint64_t flag_at);  // by READs
  void free_incoming(const RAddr& a);
  void publish_frees();
  void serve();  // the reading end's duties, done at every call: frees published
  // directory.cpp (service thread, under in.mu)
  uint32_t grow_local();
};

// A peer's WRITE wakes nobody here, so the wait yields for longer before its timed sleeps (a
// yield costs nothing while the peer has a core of its own; a sleep adds its length to a message).
template <typename... What>
void Pipe::Impl::wait_until(const auto& done, const What&... what) {
  wait::Backoff b(kWaitYields);
  while (!done()) {
    serve();
    if (b.should_sleep()) rt.peers().check(peer, what...);
    b.pause();
  }
}

// The process's pipes, for the service handlers and rfree(RAddr) (directory.cpp).
namespace directory {
// Registers a pipe: its id, and its pair number with `peer`.
void add(Pipe::Impl* p);
void remove(Pipe::Impl* p);
Pipe::Impl* by_id(uint32_t id);
}  // namespace directory

}  // namespace loom::rpipe
