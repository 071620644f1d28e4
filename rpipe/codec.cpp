#include "loom/rpipe/codec.hpp"

#include <atomic>
#include <cstddef>
#include <cstring>

#include "loom/dsm/common/error.hpp"

namespace loom::rpipe::codec {

Slot make_slot(const RAddr& a, Kind k, uint64_t seq, uint64_t source, uint32_t source_rkey) {
  Slot s{};
  s.serial = a.serial;
  s.offset = a.offset;
  s.size = a.size;
  s.segment = a.segment;
  s.kind = static_cast<uint32_t>(k);
  s.source = source;
  s.source_rkey = source_rkey;
  s.stamp = seq + 1;
  return s;
}

SlotResult decode_slot(const Slot& s, const SlotLimits& lim, int writer, uint32_t pipe) {
  SlotResult r;
  auto bad = [&](const std::string& why) {
    r.error = why;
    return r;
  };
  if (s.kind != static_cast<uint32_t>(Kind::Written) && s.kind != static_cast<uint32_t>(Kind::Offered))
    return bad("a message of unknown kind " + std::to_string(s.kind));
  if (s.serial <= lim.last_serial) return bad("serial " + std::to_string(s.serial) + " is not after the last one taken (" + std::to_string(lim.last_serial) + ")");
  if (s.segment >= lim.segments) return bad("segment " + std::to_string(s.segment) + " is not one of the heap's " + std::to_string(lim.segments));
  if (s.size == 0 || s.size > lim.segment_bytes) return bad("a size of " + std::to_string(s.size) + " bytes");
  const uint64_t ext = extent(s.size);
  if (s.offset % kUnit != 0 || s.offset >= lim.segment_bytes || ext > lim.segment_bytes - s.offset)
    return bad("[" + std::to_string(s.offset) + ", +" + std::to_string(ext) + ") is not inside a segment of " + std::to_string(lim.segment_bytes) + " bytes");
  RAddr a;
  a.serial = s.serial;
  a.offset = s.offset;
  a.size = s.size;
  a.segment = s.segment;
  a.pipe = pipe;
  a.writer = writer;
  r.message = Message{a, static_cast<Kind>(s.kind)};
  return r;
}

uint64_t checksum(uint64_t version, std::span<const FreeRange> ranges) {
  // FNV-1a over 64-bit words with a final mix: a torn read changes some word, and so the sum.
  uint64_t h = 0xcbf29ce484222325ull ^ version;
  auto mix = [&h](uint64_t w) {
    h ^= w;
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  };
  mix(ranges.size());
  for (const FreeRange& f : ranges) {
    mix(f.pos);
    mix(f.len);
  }
  return h;
}

void publish_free_list(uint8_t* block, uint32_t capacity, uint64_t version, std::span<const FreeRange> ranges) {
  if (ranges.size() > capacity) fail("rpipe: ", ranges.size(), " ranges in a free list of capacity ", capacity);
  auto* h = reinterpret_cast<FreeHeader*>(block);
  // The peer READs this block at any time: every word is stored atomically (relaxed; the
  // version's release orders them), so that a race between our stores and its read is a torn
  // read the checksum rejects, not a data race in this process.
  auto* words = reinterpret_cast<uint64_t*>(block + kFreeHeaderBytes);
  for (size_t i = 0; i < ranges.size(); ++i) {
    std::atomic_ref<uint64_t>(words[2 * i]).store(ranges[i].pos, std::memory_order_relaxed);
    std::atomic_ref<uint64_t>(words[2 * i + 1]).store(ranges[i].len, std::memory_order_relaxed);
  }
  std::atomic_ref<uint64_t>(h->count).store(ranges.size(), std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(h->checksum).store(checksum(version, ranges), std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(h->version).store(version, std::memory_order_release);
}

std::optional<std::vector<FreeRange>> read_free_list(const uint8_t* copy, uint32_t capacity, uint64_t want,
                                                     uint64_t heap_bytes, int peer) {
  FreeHeader h;
  std::memcpy(&h, copy, sizeof h);
  if (h.version != want) return std::nullopt;
  if (h.count > capacity) return std::nullopt;  // torn (a whole list checks below)
  std::vector<FreeRange> ranges(h.count);
  if (h.count != 0) std::memcpy(ranges.data(), copy + kFreeHeaderBytes, h.count * sizeof(FreeRange));
  if (checksum(h.version, ranges) != h.checksum) return std::nullopt;
  for (const FreeRange& f : ranges)
    if (f.len == 0 || f.pos >= heap_bytes || f.len > heap_bytes - f.pos || f.pos % kUnit != 0 || f.len % kUnit != 0)
      fail("rpipe: rank ", peer, "'s free list (version ", want, ") holds [", f.pos, ", +", f.len,
           ") outside the heap of ", heap_bytes, " bytes");
  return ranges;
}

}  // namespace loom::rpipe::codec
