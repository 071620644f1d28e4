#pragma once
// Seed 001's checksum queue (docs/objects.md, "Queue"): the fully atomic queue whose push
// publishes its value with the value itself — one WRITE of the slot, value and a checksum of it
// and of its position — instead of a WRITE and an atomic publication behind it. A pop knows the
// WRITE has landed whole when the checksum it reads matches the value it reads at its position.
//
// A slot's word is either a free tag, kFree | q ("the push at position q may write here"), or a
// stamp, stamp(v, p) with the top bit clear ("holds v, pushed at position p"). Slot i starts as
// free(i). A push at p reads the tail and the slot together (one READ, never an atomic: a
// fabric atomic load is a FETCH_ADD of 0 on some NICs, which could write an old word back over a
// pop's WRITE), claims p by CAS of the tail when the slot is free(p), and writes
// {stamp(v, p), v}. A pop at p reads head, tail and slot together, and claims p by CAS of the
// head only once it has read a slot whose stamp matches; then it writes free(p + capacity), which
// hands the slot to the next lap. The value it returns is the one it read before its claim: no
// one else writes the slot between (pushes of the next lap wait for the free tag).
//
// A push whose WRITE has not landed (or a read that caught it halfway) is not yet in the queue: a
// pop there answers Empty, as the sequence-word queue's does for a push not yet published.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "loom/objects/queue_ops.hpp"

namespace loom::objects::queue {

inline constexpr uint64_t kFree = uint64_t{1} << 63;
constexpr uint64_t free_word(uint64_t pos) { return kFree | pos; }
constexpr bool is_free(uint64_t w) { return (w & kFree) != 0; }
constexpr uint64_t free_pos(uint64_t w) { return w & ~kFree; }

namespace detail {
constexpr uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace detail

// The checksum of v pushed at position pos: every byte of v and the position (so a value of an
// earlier lap in the same slot does not match), top bit clear (never a free tag).
template <typename T>
uint64_t stamp(const T& v, uint64_t pos) {
  uint64_t h = detail::mix(pos ^ 0x9e3779b97f4a7c15ull);
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  for (size_t at = 0; at < sizeof(T); at += 8) {
    uint64_t w = 0;
    std::memcpy(&w, bytes + at, sizeof(T) - at < 8 ? sizeof(T) - at : 8);
    h = detail::mix(h ^ w);
  }
  return h & ~kFree;
}

template <typename S, typename T>
Status push_checksum(S& s, size_t cap, const T& v, uint64_t& hint) {
  uint64_t pos = hint;
  for (int ahead = 0;;) {
    uint64_t tail = 0;
    Slot<T> slot{};
    s.counter_load_async(kTail, &tail);
    s.read_async(pos % cap, &slot);
    s.flush();
    if (tail != pos) {
      pos = tail, ahead = 0;
      continue;
    }
    const uint64_t w = slot.word;
    if (is_free(w) && free_pos(w) < pos) return Status::Full;  // the lap before's push has not landed
    if (!is_free(w)) {
      // A value: of the lap before (full), or pushed here after the tail was read. The tail
      // read after the slot tells: still pos, and the value was there before any claim of pos.
      const uint64_t again = s.counter_load(kTail, Order::Relaxed);
      if (again == pos) return Status::Full;
      pos = again, ahead = 0;
      continue;
    }
    if (free_pos(w) > pos) {  // popped at pos already: the tail has moved on
      if (++ahead == kAheadLimit) return Status::Corrupt;
      continue;
    }
    if (!claim(s, kTail, pos)) {
      ahead = 0;
      continue;
    }
    hint = pos + 1;
    s.publish(pos % cap, stamp(v, pos), v);
    return Status::Ok;
  }
}

template <typename S, typename T>
Popped<T> pop_checksum(S& s, size_t cap, uint64_t& hint) {
  uint64_t pos = hint;
  for (int unmatched = 0;;) {
    uint64_t head = 0, tail = 0;
    Slot<T> slot{};
    s.counter_load_async(kHead, &head);
    s.counter_load_async(kTail, &tail);
    s.read_async(pos % cap, &slot);
    s.flush();
    if (head != pos) {
      pos = head, unmatched = 0;
      continue;
    }
    if (tail <= pos || slot.word == free_word(pos)) return Popped<T>{};  // nothing there yet
    if (slot.word != stamp(slot.payload, pos)) {
      // Halfway landed, or a lap ahead of a head read before it moved: read again; a WRITE that
      // stays halfway this long is a push not yet in the queue.
      if (++unmatched == kAheadLimit) return Popped<T>{};
      continue;
    }
    if (!claim(s, kHead, pos)) {
      unmatched = 0;
      continue;
    }
    hint = pos + 1;
    s.publish_word(pos % cap, free_word(pos + cap));
    return Popped<T>{Status::Ok, slot.payload};
  }
}

}  // namespace loom::objects::queue
