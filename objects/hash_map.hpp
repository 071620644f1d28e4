#pragma once
// A distributed hash map, one-sided (seed 001 section III; docs/objects.md, "HashMap"): open
// addressing with linear probing over a fixed number of buckets spread in blocks over the
// processes. Every operation is fabric operations on the buckets' owners (no owner CPU).
//
// A bucket is [state word | key | value]. The state word is (version << 2 | state), state one of
// Empty, Busy (a writer holds it), Ready. Insert claims an Empty bucket, or takes a Ready bucket
// holding its key, by CAS to Busy; writes key and value; then publishes Ready with the next
// version. A find reads the whole bucket; unless the phase promises no writer
// (Level::PhasalFind) it reads the state word before and after (a seqlock: one READ has no order
// among its bytes, so the words around it must be separate operations): the same Ready or Empty
// word both times means no writer touched the bucket between, so the key and value are whole.
// Keys and values are trivially copyable, standard-layout types compared with ==.
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "dsm/common/error.hpp"
#include "objects/distributed_array.hpp"
#include "objects/endpoint.hpp"

namespace loom::objects {

// Seed 001's concurrency levels: inserts and finds at once; only inserts until a barrier; only
// finds until a barrier. A phasal level is the caller's promise (not checked: it would cost the
// round trips it saves).
enum class Level : uint8_t { Atomic, PhasalInsert, PhasalFind };

template <typename K, typename V, typename Hash = std::hash<K>>
class HashMap {
  static_assert(std::is_trivially_copyable_v<K> && std::is_trivially_copyable_v<V>, "HashMap: keys and values travel as bytes");

 public:
  // Collective: every process passes the same capacity (buckets).
  HashMap(Endpoint& ep, size_t capacity) : ep_(ep), buckets_(ep, capacity) {
    for (Bucket& b : buckets_.local()) b.state = kEmpty;
    ep.runtime().barrier();
  }

  size_t capacity() const { return buckets_.size(); }

  // Inserts or replaces key's value. A full table is an error (nothing is changed).
  void insert(const K& key, const V& value, Level level = Level::Atomic) {
    if (level == Level::PhasalFind) fail("objects: HashMap insert during a find phase");
    const size_t start = slot_of(key);
    for (size_t probe = 0; probe < capacity(); ++probe) {
      const size_t i = (start + probe) % capacity();
      if (try_insert_at(i, key, value)) return;
    }
    fail("objects: HashMap full (", capacity(), " buckets): insert refused");
  }

  std::optional<V> find(const K& key, Level level = Level::Atomic) {
    if (level == Level::PhasalInsert) fail("objects: HashMap find during an insert phase");
    const size_t start = slot_of(key);
    for (size_t probe = 0; probe < capacity(); ++probe) {
      Bucket b = read_bucket((start + probe) % capacity(), level);
      if (state_of(b.state) == kEmpty) return std::nullopt;
      if (b.key == key) return b.value;
    }
    return std::nullopt;
  }

  // Many finds with their first probes in flight at once (the rest one at a time).
  // Under Level::Atomic each find needs its seqlock's three round trips in order: they run one
  // key at a time.
  std::vector<std::optional<V>> find_many(std::span<const K> keys, Level level = Level::Atomic) {
    std::vector<std::optional<V>> out(keys.size());
    if (level != Level::PhasalFind) {
      for (size_t k = 0; k < keys.size(); ++k) out[k] = find(keys[k], level);
      return out;
    }
    std::vector<Bucket> first(keys.size());
    for (size_t k = 0; k < keys.size(); ++k) ep_.rget_async(buckets_.ptr(slot_of(keys[k])), &first[k], 1);
    ep_.flush();
    for (size_t k = 0; k < keys.size(); ++k) {
      const Bucket& b = first[k];
      if (state_of(b.state) == kEmpty) continue;
      if (b.key == keys[k]) out[k] = b.value;
      else out[k] = find(keys[k], level);
    }
    return out;
  }

 private:
  static constexpr uint64_t kEmpty = 0, kBusy = 1, kReady = 2;
  struct Bucket {
    uint64_t state;
    K key;
    V value;
  };
  static_assert(std::is_standard_layout_v<Bucket>, "HashMap: keys and values must be standard-layout types");
  static constexpr size_t kKeyOffset = offsetof(Bucket, key);
  static uint64_t state_of(uint64_t w) { return w & 3; }
  static uint64_t version_of(uint64_t w) { return w >> 2; }

  size_t slot_of(const K& key) const { return Hash{}(key) % capacity(); }
  GlobalPtr<uint64_t> state_ptr(size_t i) const { return buckets_.ptr(i).template as<uint64_t>(); }

  // Claims bucket i for key (Empty, or Ready with key), writes it and publishes it. False if the
  // bucket holds another key.
  bool try_insert_at(size_t i, const K& key, const V& value) {
    const GlobalPtr<uint64_t> sp = state_ptr(i);
    uint64_t seen = kEmpty;  // the likely state: the claiming CAS doubles as the first read
    for (;;) {
      if (state_of(seen) == kBusy) {  // a writer holds it: its key decides
        seen = ep_.atomic_load(sp);
        continue;
      }
      if (state_of(seen) == kReady && read_bucket(i, Level::Atomic).key != key) return false;
      const uint64_t old = ep_.compare_swap(sp, seen, (version_of(seen) << 2) | kBusy);
      if (old != seen) {
        seen = old;
        continue;
      }
      const Bucket b{0, key, value};
      const GlobalPtr<std::byte> at = buckets_.ptr(i).template as<std::byte>() + kKeyOffset;
      ep_.put_bytes(at.rank(), at.address(), reinterpret_cast<const std::byte*>(&b) + kKeyOffset, sizeof(Bucket) - kKeyOffset);
      // Only the holder changes a Busy word.
      const uint64_t busy = (version_of(seen) << 2) | kBusy;
      if (ep_.compare_swap(sp, busy, ((version_of(seen) + 1) << 2) | kReady) != busy)
        fail("objects: HashMap bucket ", i, " changed while this process held it (corrupt)");
      return true;
    }
  }

  // A whole bucket: under Atomic, read again until its state word is the same (and not Busy)
  // before and after the read.
  Bucket read_bucket(size_t i, Level level) {
    if (level == Level::PhasalFind) return ep_.rget(buckets_.ptr(i));
    for (;;) {
      const uint64_t before = ep_.atomic_load(state_ptr(i));
      if (state_of(before) == kBusy) continue;
      Bucket b = ep_.rget(buckets_.ptr(i));
      if (ep_.atomic_load(state_ptr(i)) != before) continue;
      b.state = before;
      return b;
    }
  }

  Endpoint& ep_;
  DistributedArray<Bucket> buckets_;
};

}  // namespace loom::objects
