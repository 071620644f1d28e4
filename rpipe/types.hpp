#pragma once
// rpipe's vocabulary (seed 002, docs/rpipe.md): pipe modes and ends, the heaps' fit heuristics and
// synchronization, network addresses in a pipe's heap, and the messages a reader takes.
#include <cstddef>
#include <cstdint>

namespace loom::rpipe {

// Half duplex: one end writes, the other reads. Full duplex: both do, each direction with its
// own heap, ring and credits.
enum class Mode : uint8_t { HalfDuplex = 1, FullDuplex = 2 };
// Which end of a half-duplex pipe this is (ignored for a full-duplex pipe: both ends are both).
enum class End : uint8_t { Writer = 1, Reader = 2 };

// How rmalloc picks space in a heap: the next free range from where the last allocation ended,
// the smallest that fits, or the largest.
enum class Fit : uint8_t { Next = 1, Best = 2, Worst = 3 };
// Who keeps a heap's state and when it is brought up to date (seed 002 "rfree()/rmalloc()
// synchronization"):
//  Deferred: the writer keeps it; the reader's rfree records the range in a sorted, coalesced
//            free list of its own, and the writer's rmalloc brings its view up to date with one
//            RDMA READ of that list when it runs out of space (throughput).
//  Immediate: the reader keeps it; every rmalloc asks the reader through the service (the seed's
//            bootstrap pipe) and every rfree there is seen by the next one at once (latency).
enum class Sync : uint8_t { Deferred = 1, Immediate = 2 };
// The seed's pairing: next fit with deferred synchronization, best and worst fit with immediate.
constexpr Sync paired_sync(Fit f) { return f == Fit::Next ? Sync::Deferred : Sync::Immediate; }

const char* to_string(Mode m);
const char* to_string(Fit f);
const char* to_string(Sync s);

struct Options {
  Fit fit = Fit::Next;
  Sync sync = paired_sync(Fit::Next);
  // A heap grows by segments of this size (registered at the reader, mirrored at the writer) up
  // to max_segments of them; the first is made at the first rmalloc.
  size_t segment_bytes = 4u << 20;
  uint32_t max_segments = 64;
  // Published ranges the reader's free list carries per version (deferred synchronization).
  uint32_t free_list_capacity = 256;
  int zone = -1;  // NUMA zone of the pipe's memory (-1: the process's)
};
// The seed's pairing of fit and synchronization.
inline Options options_for(Fit f) {
  Options o;
  o.fit = f;
  o.sync = paired_sync(f);
  return o;
}

// A network address in a pipe's heap: `size` bytes at `offset` of segment `segment` of the heap
// rank `writer` allocates in. Both ends name the same bytes with it (rmem gives each its copy).
// `serial` tells allocations apart (0: no address).
struct RAddr {
  uint64_t serial = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t segment = 0;
  uint32_t pipe = 0;   // the pipe's id in this process (rfree(RAddr) finds the pipe with it)
  int32_t writer = -1;
  explicit operator bool() const { return serial != 0; }
  bool operator==(const RAddr&) const = default;
};

// What a reader takes from its pipe: pushed by rwrite (its bytes are there), or offered by
// roffer (rread brings them).
enum class Kind : uint8_t { Written = 1, Offered = 2 };
struct Message {
  RAddr addr;
  Kind kind = Kind::Written;
};

}  // namespace loom::rpipe
