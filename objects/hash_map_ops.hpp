#pragma once
// The HashMap's operations, written once for every policy (docs/objects.md, "HashMap"): they
// run on a slot store (objects/slots.hpp) — fabric operations at the owner (OneSided), the
// owner's own memory where the operation was shipped (OwnerInvoked), or the local copy of a
// region (Cached). A bucket is a slot [state word | key, value]; the state word is
// (version << 2 | state), state Empty, Busy (a writer holds the bucket) or Ready.
//
// insert: claim the bucket by CAS (Empty -> Busy, or Ready -> Busy when it holds the key), write
// key and value and publish Ready with the next version by a releasing CAS behind the write (only
// the holder changes a Busy word). insert, phasal (no find until a barrier; inserts may run):
// seed 001's one atomic and a put — the claim, then key and value and the Ready word as writes
// in order behind it, where the store can (`ordered_publish`: OneSided on a mapping,
// OwnerInvoked); elsewhere, and for a Cached region (its writes are seen at a release), the
// releasing CAS still. find, fully atomic: a seqlock — the state word (acquire), the entry, the state
// word again; the same Ready or Empty word both times means the entry is whole. find, phasal
// (no writer until a barrier): the slot as one snapshot. A Busy bucket seen in a find phase is a
// writer breaking the phase: reported, not waited for.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "loom/objects/policy.hpp"
#include "loom/objects/slots.hpp"

namespace loom::objects::hash {

constexpr uint64_t kEmpty = 0, kBusy = 1, kReady = 2;
constexpr uint64_t state_of(uint64_t w) { return w & 3; }
constexpr uint64_t version_of(uint64_t w) { return w >> 2; }
constexpr uint64_t word(uint64_t version, uint64_t state) { return version << 2 | state; }

template <typename K, typename V>
struct Entry {
  K key;
  V value;
};

// What an operation came to; carried back from an owner as is (trivially copyable).
enum class Status : uint8_t { Ok, Full, WrongPhase, Corrupt, NoObject };

template <typename V>
struct Found {
  Status status = Status::Ok;
  bool found = false;
  V value{};
};

// The probe sequence of a key: a partition (its owner) and a start inside it; probing wraps
// inside the partition.
struct Home {
  size_t part;
  size_t start;
};

enum class Claim : uint8_t { Inserted, Occupied, Corrupt };

// Claims bucket i for key, writes it and publishes it; Occupied if it holds another key.
template <typename S, typename K, typename V>
Claim try_insert_at(S& s, size_t i, const K& key, const V& value, uint64_t seen = kEmpty, bool phasal = false) {
  for (;;) {
    if (state_of(seen) == kBusy) {  // a writer holds it: its key decides
      seen = s.load(i, Order::Acquire);
      continue;
    }
    if (state_of(seen) == kReady && !(s.read_payload(i).key == key)) {
      // The key read belongs to `seen` only if the word did not move meanwhile.
      const uint64_t again = s.load(i, Order::Acquire);
      if (again == seen) return Claim::Occupied;
      seen = again;
      continue;
    }
    const uint64_t busy = word(version_of(seen), kBusy);
    const uint64_t old = s.cas(i, seen, busy, Order::Acquire);
    if (old != seen) {
      seen = old;
      continue;
    }
    const uint64_t ready = word(version_of(seen) + 1, kReady);
    if (phasal && s.ordered_publish()) {  // an inserter waiting on the Busy word reads the key after Ready
      const Entry<K, V> e{key, value};
      s.write_payload_async(i, e, ready);
      s.publish_word(i, ready);  // completes the payload's write too
      return Claim::Inserted;
    }
    if (s.write_then_cas(i, Entry<K, V>{key, value}, ready, busy, ready, Order::Release) != busy) return Claim::Corrupt;
    return Claim::Inserted;
  }
}

template <typename S, typename K, typename V>
Status insert(S& s, size_t start, size_t per, const K& key, const V& value, Level level = Level::Atomic) {
  for (size_t probe = 0, i = start; probe < per; ++probe, i = i + 1 == per ? 0 : i + 1) {
    const Claim c = try_insert_at(s, i, key, value, kEmpty, level == Level::PhasalInsert);
    if (c == Claim::Inserted) return Status::Ok;
    if (c == Claim::Corrupt) return Status::Corrupt;
  }
  return Status::Full;
}

// One bucket under the seqlock: its state word (never Busy) and the entry that goes with it.
template <typename S, typename K, typename V>
uint64_t read_atomic(S& s, size_t i, Entry<K, V>& e) {
  for (;;) {
    const uint64_t before = s.load(i, Order::Acquire);
    if (state_of(before) == kBusy) continue;
    if (state_of(before) == kEmpty) return before;  // nothing to read
    e = s.read_payload(i);
    if (s.load(i, Order::Relaxed) == before) return before;
  }
}

template <typename S, typename K, typename V>
Found<V> find(S& s, size_t start, size_t per, const K& key, Level level) {
  Found<V> out;
  for (size_t probe = 0, i = start; probe < per; ++probe, i = i + 1 == per ? 0 : i + 1) {
    Entry<K, V> e{};
    uint64_t w;
    if (level == Level::PhasalFind) {
      const Slot<Entry<K, V>> slot = s.read(i);
      w = slot.word;
      e = slot.payload;
      if (state_of(w) == kBusy) {
        out.status = Status::WrongPhase;
        return out;
      }
    } else {
      w = read_atomic(s, i, e);
    }
    if (state_of(w) == kEmpty) return out;
    if (e.key == key) {
      out.found = true;
      out.value = e.value;
      return out;
    }
  }
  return out;
}

// ---------------------------------------------------------------- batches
// Many inserts with their first claims in flight together, then their writes and publications,
// then the rest (claims that met another key, a writer or a replacement) one at a time. Every
// request to one owner executes in order, so a publication follows its write. `store(part)`
// gives the partition's store; all of them flush together (one Endpoint or none).
template <typename StoreOf, typename K, typename V>
Status insert_many(StoreOf&& store, std::span<const Home> homes, std::span<const Entry<K, V>> items, size_t per) {
  const size_t n = items.size();
  std::vector<uint64_t> claimed(n), published(n);
  const uint64_t busy = word(0, kBusy), ready = word(1, kReady);
  for (size_t k = 0; k < n; ++k) store(homes[k].part).cas_async(homes[k].start, kEmpty, busy, &claimed[k]);
  if (n != 0) store(homes[0].part).flush();
  for (size_t k = 0; k < n; ++k) {
    if (claimed[k] != kEmpty) continue;
    auto& s = store(homes[k].part);
    s.write_payload_async(homes[k].start, items[k], ready);
    s.cas_async(homes[k].start, busy, ready, &published[k]);
  }
  if (n != 0) store(homes[0].part).flush();
  for (size_t k = 0; k < n; ++k) {
    if (claimed[k] == kEmpty) {
      if (published[k] != busy) return Status::Corrupt;
      continue;
    }
    const Status st = insert(store(homes[k].part), homes[k].start, per, items[k].key, items[k].value);
    if (st != Status::Ok) return st;
  }
  return Status::Ok;
}

// Many finds: every first probe's state word, entry and state word again in flight together
// (three rounds, not three per key); a key whose first bucket moved, was Busy or held another key
// continues alone.
template <typename StoreOf, typename K, typename V>
Status find_many(StoreOf&& store, std::span<const Home> homes, std::span<const K> keys, size_t per, Level level,
                 std::span<Found<V>> out) {
  using E = Entry<K, V>;
  const size_t n = keys.size();
  std::vector<Slot<E>> slots(n);
  std::vector<uint64_t> before(n), after(n);
  const bool atomic = level != Level::PhasalFind;
  if (atomic)
    for (size_t k = 0; k < n; ++k) store(homes[k].part).load_async(homes[k].start, &before[k]);
  for (size_t k = 0; k < n; ++k) store(homes[k].part).read_async(homes[k].start, &slots[k]);
  if (atomic)
    for (size_t k = 0; k < n; ++k) store(homes[k].part).load_async(homes[k].start, &after[k]);
  if (n != 0) store(homes[0].part).flush();
  for (size_t k = 0; k < n; ++k) {
    const uint64_t w = atomic ? before[k] : slots[k].word;
    const bool settled = state_of(w) != kBusy && (!atomic || after[k] == before[k]);
    if (settled && state_of(w) == kEmpty) {
      out[k] = Found<V>{};
      continue;
    }
    if (settled && slots[k].payload.key == keys[k]) {
      out[k] = Found<V>{Status::Ok, true, slots[k].payload.value};
      continue;
    }
    if (!atomic && state_of(w) == kBusy) return Status::WrongPhase;
    out[k] = find<std::remove_reference_t<decltype(store(0))>, K, V>(store(homes[k].part), homes[k].start, per, keys[k], level);
    if (out[k].status != Status::Ok) return out[k].status;
  }
  return Status::Ok;
}

}  // namespace loom::objects::hash
