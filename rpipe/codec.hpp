#pragma once
// The bytes rpipe puts on the wire and how a receiver checks them (docs/rpipe.md, "Protocol").
// Nothing read from a peer is trusted: every decoder checks what it reads against the limits its
// own end knows and says what was wrong.
//  * A ring slot (64 bytes): a message's announcement in the reader's ring, written by the writer
//    with one WRITE; its last word is the stamp (the message's sequence number + 1), placed last.
//  * A data flag: the allocation's serial in the 8 bytes after its payload (NotifiedLayout),
//    carried by the same WRITE as the payload (rwrite) or stored by the writer (roffer).
//  * A free list (deferred synchronization): the reader's published ranges, read whole by the
//    writer with one READ; a version and a checksum over everything tell a torn read from a whole one.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loom/dsm/signal/notified_flag.hpp"
#include "loom/rpipe/types.hpp"

namespace loom::rpipe::codec {

constexpr uint64_t kUnit = 64;  // heap allocations are multiples of a cache line
// Heap bytes an allocation of `size` payload bytes takes: payload, flag, rounded to a unit.
constexpr uint64_t extent(uint64_t size) {
  return (signal::NotifiedLayout::bytes(size) + kUnit - 1) / kUnit * kUnit;
}
constexpr uint64_t flag_offset(uint64_t size) { return signal::NotifiedLayout::flag_offset(size); }

// ---- ring slots ----------------------------------------------------------------------------
constexpr size_t kSlotBytes = 64;
constexpr size_t kStampOffset = 56;
struct Slot {
  uint64_t serial;
  uint64_t offset;
  uint64_t size;
  uint32_t segment;
  uint32_t kind;
  uint64_t source;       // offered: the writer's copy, for the reader's READ (the rkey checks it)
  uint32_t source_rkey;
  uint32_t pad;
  uint64_t reserved;
  uint64_t stamp;
};
static_assert(sizeof(Slot) == kSlotBytes && offsetof(Slot, stamp) == kStampOffset);

Slot make_slot(const RAddr& a, Kind k, uint64_t seq, uint64_t source = 0, uint32_t source_rkey = 0);
// What a reader knows to check a slot against: the heap's segments now and their size.
struct SlotLimits {
  uint32_t segments = 0;
  uint64_t segment_bytes = 0;
  uint64_t last_serial = 0;  // serials grow: a slot's must be larger than the last one taken
};
// The message in a slot whose stamp showed it complete, or the reason it cannot be one.
struct SlotResult {
  std::optional<Message> message;
  std::string error;
};
SlotResult decode_slot(const Slot& s, const SlotLimits& lim, int writer, uint32_t pipe);

// ---- free lists ----------------------------------------------------------------------------
struct FreeRange {
  uint64_t pos;  // heap position (FreeRanges)
  uint64_t len;
};
constexpr size_t kFreeHeaderBytes = 32;
struct FreeHeader {
  uint64_t version;  // written last
  uint64_t count;
  uint64_t checksum;
  uint64_t reserved;
};
static_assert(sizeof(FreeHeader) == kFreeHeaderBytes);
constexpr size_t free_list_bytes(uint32_t capacity) { return kFreeHeaderBytes + capacity * sizeof(FreeRange); }
uint64_t checksum(uint64_t version, std::span<const FreeRange> ranges);
// Writes `ranges` (at most `capacity`) as `version` into `block`: ranges, count and checksum with
// plain stores, then the version with a release store (the writer's READ may see any mixture
// until then, which the checksum rejects).
void publish_free_list(uint8_t* block, uint32_t capacity, uint64_t version, std::span<const FreeRange> ranges);
// A free list read from the peer: nullopt when it is not `want` yet or was read while it changed
// (a torn read: read it again later); an Error when it is whole and wrong (ranges outside the
// heap, a count over the capacity): the peer broke the protocol.
std::optional<std::vector<FreeRange>> read_free_list(const uint8_t* copy, uint32_t capacity, uint64_t want,
                                                     uint64_t heap_bytes, int peer);

}  // namespace loom::rpipe::codec
