#pragma once
// A distributed hash map under a policy chosen per object (seed 001 section III; docs/objects.md,
// "HashMap"): open addressing with linear probing over a fixed number of buckets, split into one
// part per process; a key's hash picks its part (its owner) and its first bucket there, and
// probing wraps inside the part. The operations (objects/hash_map_ops.hpp) are written once and
// reach the buckets as the policy says: fabric operations (OneSided), shipped to the owner
// (OwnerInvoked), or on the local copy of a region (Cached); Auto picks by the cost model.
// Keys and values are trivially copyable, standard-layout types compared with ==.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "loom/objects/router.hpp"
#include "loom/objects/hash_map_ops.hpp"
#include "loom/objects/slot_array.hpp"

namespace loom::objects {

template <typename K, typename V, typename Hash = std::hash<K>>
class HashMap {
  using E = hash::Entry<K, V>;
  using Status = hash::Status;
  using Found = hash::Found<V>;

 public:
  // Collective: every process passes the same capacity (buckets, split evenly) and policy.
  // `workload` tells an Auto object what to expect (its reads' share and level), which decides
  // whether its buckets live in a region (Cached) or at their owners.
  HashMap(Context& ctx, size_t capacity, Policy policy = Policy::OneSided, Workload workload = {})
      : ctx_(ctx),
        router_(ctx, policy, Op::HashInsert, Op::HashFind, workload),
        slots_(ctx, all_ranks(ctx), (capacity + static_cast<size_t>(ctx.size()) - 1) / static_cast<size_t>(ctx.size()),
               router_.placement() == Policy::Cached, [](size_t) { return hash::kEmpty; }) {
    if (capacity == 0) fail("objects: HashMap of capacity 0");
    for (size_t p = 0; p < slots_.parts(); ++p) {
      if (router_.placement() == Policy::Cached) regions_.push_back(slots_.region(p));
      else remotes_.push_back(slots_.remote(p));
    }
    id_ = ctx.attach(this, typeid(HashMap));
  }
  // Collective.
  ~HashMap() {
    ctx_.process_barrier();
    ctx_.detach(id_);
  }
  HashMap(const HashMap&) = delete;
  HashMap& operator=(const HashMap&) = delete;

  // The owner's side of the batches (hash_map_batches.hpp): what a call from another process
  // runs, every argument from the wire. Public for the fuzz target (tests/fuzz).
  static void on_insert_batch(uint32_t id, GlobalPtr<uint64_t> status, std::span<std::byte> bytes) noexcept;
  static void on_find_batch(uint32_t id, Level level, GlobalPtr<Found> out, std::span<std::byte> bytes) noexcept;

  size_t capacity() const { return slots_.per() * slots_.parts(); }
  Policy policy() const { return router_.policy(); }
  // Where the buckets are: Cached (a region) or OneSided (at their owners).
  Policy placement() const { return router_.placement(); }
  // The policy an operation at a level takes now (Auto: the current choice).
  Policy current(Op op, Level l) const { return router_.current(op, l); }
  const Chooser* chooser() const { return router_.chooser(); }
  // The process that owns key's part (where an owner-invoked operation on it runs).
  int owner_of(const K& key) const { return owner(home_of(key)); }
  // The bucket of its owner's part where key's probe sequence starts: keys whose starts differ
  // never meet in an empty map (each lands in its first bucket).
  size_t first_bucket_of(const K& key) const { return home_of(key).start; }

  // Inserts or replaces key's value. A full part is an error (nothing is changed).
  void insert(const K& key, const V& value, Level level = Level::Atomic) {
    if (level == Level::PhasalFind) fail("objects: HashMap insert during a find phase");
    check_level(level);
    const hash::Home h = home_of(key);
    bool timed = false;
    const Policy p = router_.route(Op::HashInsert, level, timed);
    OpTimer t(timed);
    Status st;
    if (p == Policy::OwnerInvoked) {
      if (owner(h) == ctx_.rank()) ctx_.attend();
      st = owner(h) == ctx_.rank()
               ? local_insert(h, key, value, level)
               : slots_.template call<Status>(owner(h), [id = id_, h, key, value, level] { return on_insert(id, h, key, value, level); });
    } else if (p == Policy::Cached) {
      st = hash::insert(regions_[h.part], h.start, slots_.per(), key, value, level);
    } else {
      st = hash::insert(remotes_[h.part], h.start, slots_.per(), key, value, level);
    }
    router_.record(Op::HashInsert, level, p, t);
    check(st, h);
  }

  std::optional<V> find(const K& key, Level level = Level::Atomic) {
    if (level == Level::PhasalInsert) fail("objects: HashMap find during an insert phase");
    check_level(level);
    const hash::Home h = home_of(key);
    bool timed = false;
    const Policy p = router_.route(Op::HashFind, level, timed);
    OpTimer t(timed);
    Found f;
    if (p == Policy::OwnerInvoked) {
      if (owner(h) == ctx_.rank()) ctx_.attend();
      f = owner(h) == ctx_.rank() ? local_find(h, key, level)
                                  : slots_.template call<Found>(owner(h), [id = id_, h, key, level] { return on_find(id, h, key, level); });
    } else if (p == Policy::Cached) {
      f = hash::find<RegionSlots<E>, K, V>(regions_[h.part], h.start, slots_.per(), key, level);
    } else {
      f = hash::find<RemoteSlots<E>, K, V>(remotes_[h.part], h.start, slots_.per(), key, level);
    }
    router_.record(Op::HashFind, level, p, t);
    check(f.status, h);
    return f.found ? std::optional<V>(f.value) : std::nullopt;
  }

  // Many inserts at once (docs/objects.md, "Batches"): OneSided keeps their claims and writes in
  // flight together; OwnerInvoked sends each owner one call carrying its entries.
  void insert_many(std::span<const std::pair<K, V>> items, Level level = Level::Atomic) {
    if (level == Level::PhasalFind) fail("objects: HashMap insert during a find phase");
    check_level(level);
    std::vector<hash::Home> homes(items.size());
    std::vector<E> entries(items.size());
    for (size_t k = 0; k < items.size(); ++k) homes[k] = home_of(items[k].first), entries[k] = E{items[k].first, items[k].second};
    const Policy p = router_.route_batch(Op::HashInsert, level, items.size());
    Status st;
    if (p == Policy::OwnerInvoked) st = invoked_insert_many(homes, entries);
    else if (p == Policy::Cached) st = hash::insert_many<decltype(region_of()), K, V>(region_of(), homes, entries, slots_.per());
    else st = hash::insert_many<decltype(remote_of()), K, V>(remote_of(), homes, entries, slots_.per());
    check(st, homes.empty() ? hash::Home{0, 0} : homes[0]);
  }

  // Many finds at once: OneSided and Cached keep every first probe's reads in flight together;
  // OwnerInvoked sends each owner one call with its keys and the results come back by one put.
  std::vector<std::optional<V>> find_many(std::span<const K> keys, Level level = Level::Atomic) {
    if (level == Level::PhasalInsert) fail("objects: HashMap find during an insert phase");
    check_level(level);
    std::vector<hash::Home> homes(keys.size());
    for (size_t k = 0; k < keys.size(); ++k) homes[k] = home_of(keys[k]);
    std::vector<Found> found(keys.size());
    const Policy p = router_.route_batch(Op::HashFind, level, keys.size());
    Status st;
    if (p == Policy::OwnerInvoked) st = invoked_find_many(homes, keys, level, found);
    else if (p == Policy::Cached) st = hash::find_many<decltype(region_of()), K, V>(region_of(), homes, keys, slots_.per(), level, found);
    else st = hash::find_many<decltype(remote_of()), K, V>(remote_of(), homes, keys, slots_.per(), level, found);
    check(st, homes.empty() ? hash::Home{0, 0} : homes[0]);
    std::vector<std::optional<V>> out(keys.size());
    for (size_t k = 0; k < keys.size(); ++k)
      if (found[k].found) out[k] = found[k].value;
    return out;
  }

 private:
  static std::vector<int> all_ranks(Context& ctx) {
    std::vector<int> r(static_cast<size_t>(ctx.size()));
    for (int i = 0; i < ctx.size(); ++i) r[static_cast<size_t>(i)] = i;
    return r;
  }

  hash::Home home_of(const K& key) const {
    uint64_t h = static_cast<uint64_t>(Hash{}(key));
    // A mixer (splitmix64's finalizer): std::hash of an integer is the integer, and keys that are
    // multiples of the process count would all land in one part. Part and start come from the
    // high halves of two products (no division on the path).
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    h ^= h >> 31;
    auto scale = [](uint64_t x, size_t n) { return static_cast<size_t>((static_cast<unsigned __int128>(x) * n) >> 64); };
    return hash::Home{scale(h, slots_.parts()), scale(h * 0x9e3779b97f4a7c15ULL, slots_.per())};
  }
  int owner(hash::Home h) const { return slots_.owner(h.part); }
  auto remote_of() {
    return [this](size_t part) -> RemoteSlots<E>& { return remotes_[part]; };
  }
  auto region_of() {
    return [this](size_t part) -> RegionSlots<E>& { return regions_[part]; };
  }



  // ---- the owner's side of shipped operations (never throw: the caller waits for a reply)
  static void check_level(Level level) {
    if (level == Level::Local) fail("objects: Level::Local is a Queue's (a HashMap's parts are at every process)");
    if (level > Level::Local) fail("objects: HashMap level ", static_cast<int>(level), " is not a level");
  }
  Status local_insert(hash::Home h, const K& key, const V& value, Level level = Level::Atomic) {
    LocalSlots<E> s = slots_.local(h.part);
    return hash::insert(s, h.start, slots_.per(), key, value, level);
  }
  Found local_find(hash::Home h, const K& key, Level level) {
    LocalSlots<E> s = slots_.local(h.part);
    return hash::find<LocalSlots<E>, K, V>(s, h.start, slots_.per(), key, level);
  }
  // The object a shipped operation names, pinned while the operation runs (null: none).
  static Context::Pinned<HashMap> at_owner(uint32_t id) noexcept { return Context::try_pin<HashMap>(id); }
  static bool mine(HashMap* m, hash::Home h) noexcept { return m != nullptr && h.part < m->slots_.parts() && m->owner(h) == m->ctx_.rank(); }
  static Status on_insert(uint32_t id, hash::Home h, const K& key, const V& value, Level level) noexcept {
    const auto pin = at_owner(id);
    HashMap* m = pin.get();
    return mine(m, h) ? m->local_insert(h, key, value, level) : Status::NoObject;
  }
  static Found on_find(uint32_t id, hash::Home h, const K& key, Level level) noexcept {
    const auto pin = at_owner(id);
    HashMap* m = pin.get();
    return mine(m, h) ? m->local_find(h, key, level) : Found{Status::NoObject, false, V{}};
  }

  Status invoked_insert_many(std::span<const hash::Home> homes, std::span<const E> entries);
  Status invoked_find_many(std::span<const hash::Home> homes, std::span<const K> keys, Level level, std::span<Found> out);

  void check(Status st, hash::Home h) const {
    switch (st) {
      case Status::Ok: return;
      case Status::Full: fail("objects: HashMap full: the part at rank ", owner(h), " (", slots_.per(), " buckets) has no free bucket; insert refused");
      case Status::WrongPhase: fail("objects: HashMap find in a find phase met a bucket being written (an insert ran during the phase)");
      case Status::Corrupt: fail("objects: HashMap bucket changed while this process held it (corrupt memory)");
      case Status::NoObject: fail("objects: rank ", owner(h), " has no such HashMap (was it made by every process?)");
    }
  }

  Context& ctx_;
  Router router_;
  SlotArray<E> slots_;
  std::vector<RemoteSlots<E>> remotes_;
  std::vector<RegionSlots<E>> regions_;
  uint32_t id_ = 0;
};

}  // namespace loom::objects

#include "loom/objects/hash_map_batches.hpp"
