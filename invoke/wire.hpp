#pragma once
// The bytes a Messenger writes into the receiver's chunks (docs/invocation.md, "Protocol (Messenger)").
//
// A chunk starts with a 128-byte header: the Producer half (written only by the sender, with
// RDMA WRITE) and the Consumer half (written only by the receiver, locally). Records follow.
//
// A record is what one RDMA WRITE carries: [head][frame ...][tail]. head = tail = the record
// word: the record's global offset (a per-channel byte count that only grows, so stale bytes
// of an earlier lap never match) and its length. The tail is the last 8 bytes of the WRITE and
// is placed last (provider contract), so a record whose head and tail both show the expected
// word is complete; a partially written record is never executed.
//
// A frame is one call: [frame word][payload]. The frame word holds the function id, the kind
// (which payload layout follows) and the frame length. A trad Aggregator packs many frames into
// one record.
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace loom::invoke::wire {

constexpr size_t kAlign = 8;
constexpr size_t pad8(size_t n) { return (n + 7) & ~size_t{7}; }

// ---- chunk header ----
constexpr size_t kProducerOffset = 0;
constexpr size_t kConsumerOffset = 64;
constexpr size_t kChunkHeader = 128;

struct Producer {
  // Rotation marker: (global offset at which the sender closed this chunk << 8) | number of
  // chunks the sender inserted after this one in its ring at that moment. Written by one 8-byte
  // RDMA WRITE; the receiver acts on it only when the offset equals its own position.
  uint64_t rotation;
  uint64_t sender;  // rank << 32 | sender serial, written at allocation by the service call
  uint64_t reserved[6];
};
static_assert(sizeof(Producer) == 64);

struct Consumer {
  uint64_t consumed;  // global offset consumed so far; local to the receiver
  uint64_t reserved[7];
};
static_assert(sizeof(Consumer) == 64);

constexpr uint64_t rotation_word(uint64_t offset, uint32_t inserted) { return (offset << 8) | (inserted & 0xffu); }
constexpr uint64_t rotation_offset(uint64_t w) { return w >> 8; }
constexpr uint32_t rotation_inserted(uint64_t w) { return static_cast<uint32_t>(w & 0xffu); }
constexpr uint32_t kMaxInsertPerRotation = 255;

// ---- records ----
constexpr unsigned kLenBits = 20;                     // record length in 8-byte words
constexpr unsigned kStampBits = 44;                   // global offset / 8, modulo 2^44 (128 TiB)
constexpr size_t kRecordOverhead = 16;                // head + tail
constexpr size_t kMaxRecord = ((size_t{1} << kLenBits) - 1) * 8;

constexpr uint64_t record_word(uint64_t offset, size_t len) {
  return (((offset >> 3) & ((uint64_t{1} << kStampBits) - 1)) << kLenBits) | (len >> 3);
}
constexpr size_t record_len(uint64_t w) { return static_cast<size_t>(w & ((uint64_t{1} << kLenBits) - 1)) << 3; }
constexpr bool record_stamp_matches(uint64_t w, uint64_t offset) {
  return (w >> kLenBits) == ((offset >> 3) & ((uint64_t{1} << kStampBits) - 1));
}

// ---- frames ----
enum class Kind : uint8_t {
  Pad = 0,        // no payload: fills a record to a multiple of 16 bytes
  Call = 1,       // payload: captures
  Buffer = 2,     // payload: u64 len, captures (padded), buffer bytes
  Written = 3,    // payload: u64 local addr, u64 len, captures — bytes were RDMA-written before
  Read = 4,       // payload: u64 remote addr, u32 rkey, u32 0, u64 len, captures — pull with READ
  Return = 5,     // payload: u64 remote addr, u32 rkey, u32 result size, u64 stamp, captures
  Broadcast = 6,  // payload: u32 root, u32 0, then a whole inner frame
  Named = 7,      // payload: u64 len, argument bytes (explicitly registered functions)
  ReadAsync = 8,  // payload as Read; the destination runs other calls while the READ is in flight
};
constexpr uint8_t kMaxKind = 8;

constexpr size_t kFrameHeader = 8;
constexpr unsigned kFrameLenBits = 24;  // frame length in 8-byte words
constexpr size_t kMaxFrame = ((size_t{1} << kFrameLenBits) - 1) * 8;

constexpr uint64_t frame_word(uint32_t fid, Kind kind, bool notify, size_t len) {
  return (uint64_t{fid} << 32) | (uint64_t{notify} << 31) | (uint64_t{static_cast<uint8_t>(kind) & 0x7fu} << 24) |
         (len >> 3);
}
// Records are multiples of 16 bytes, so any gap left before a cache line can hold an empty
// record (head + tail, pad frames between).
constexpr size_t kRecordGranule = 16;
constexpr size_t round_record(size_t n) { return (n + kRecordGranule - 1) & ~(kRecordGranule - 1); }
constexpr size_t kCacheLine = 64;

constexpr uint32_t frame_fid(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
constexpr uint8_t frame_kind(uint64_t w) { return static_cast<uint8_t>((w >> 24) & 0x7fu); }
constexpr uint64_t pad_frame_word() { return (uint64_t{static_cast<uint8_t>(Kind::Pad)} << 24) | 1; }

constexpr bool frame_notify(uint64_t w) { return ((w >> 31) & 1u) != 0; }
constexpr size_t frame_len(uint64_t w) { return static_cast<size_t>(w & ((uint64_t{1} << kFrameLenBits) - 1)) << 3; }

// Executed-mode Synchronizer: where the receiver sends its fabric FETCH_ADD(-1).
struct NotifyDesc {
  uint64_t addr;
  uint32_t rkey;
  uint32_t rank;
};
static_assert(sizeof(NotifyDesc) == 16);

struct BufferDesc { uint64_t len; };
struct WrittenDesc { uint64_t addr; uint64_t len; };
struct ReadDesc { uint64_t addr; uint32_t rkey; uint32_t zero; uint64_t len; };
struct ReturnDesc { uint64_t addr; uint32_t rkey; uint32_t size; uint64_t stamp; };
// `ranks`: 0, or (broadcast_buffer's WRITE form) the number of u64 addresses after the inner
// frame, one per process: where the root wrote the bytes there.
struct BroadcastDesc { uint32_t root; uint32_t ranks; };
struct NamedDesc { uint64_t len; };

// Words the peer writes while we read them: atomic loads (acquire: what the word announces is
// read after it).
inline uint64_t load_word(const uint8_t* p) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(p))).load(std::memory_order_acquire);
}

}  // namespace loom::invoke::wire
