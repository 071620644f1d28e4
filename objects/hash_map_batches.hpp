#pragma once
// HashMap's owner-invoked batches (docs/objects.md, "Batches"). Included by hash_map.hpp.
#include <algorithm>
#include <cstring>

#include "loom/objects/hash_map.hpp"

namespace loom::objects {

// The owner inserts a piece of entries in order and puts the first failure (Ok if none) into
// the caller's registered word before the call counts as executed.
template <typename K, typename V, typename H>
void HashMap<K, V, H>::on_insert_batch(uint32_t id, GlobalPtr<uint64_t> status, std::span<std::byte> bytes) noexcept {
  try {
    const auto pin = at_owner(id);
    HashMap* m = pin.get();
    if (m == nullptr || bytes.size() % sizeof(E) != 0) return;
    Status first = Status::Ok;
    for (size_t k = 0; k < bytes.size() / sizeof(E); ++k) {
      E e;
      std::memcpy(&e, bytes.data() + k * sizeof(E), sizeof(E));
      const hash::Home h = m->home_of(e.key);
      const Status st = mine(m, h) ? m->local_insert(h, e.key, e.value) : Status::NoObject;
      if (first == Status::Ok) first = st;
    }
    m->ctx_.endpoint().rput(status, static_cast<uint64_t>(first));
  } catch (...) {
    // The caller reads NoObject.
  }
}

// One call per owner and piece carries the entries (the owner runs them in order); all pieces
// are in flight together and one Synchronizer counts them executed.
template <typename K, typename V, typename H>
hash::Status HashMap<K, V, H>::invoked_insert_many(std::span<const hash::Home> homes, std::span<const E> entries) {
  constexpr size_t kPiece = std::max<size_t>(1, 16384 / sizeof(E));
  const int me = ctx_.rank();
  std::vector<std::vector<E>> by_owner(static_cast<size_t>(ctx_.size()));
  Status first = Status::Ok;
  for (size_t k = 0; k < homes.size(); ++k) {
    const int o = owner(homes[k]);
    if (o != me) {
      by_owner[static_cast<size_t>(o)].push_back(entries[k]);
      continue;
    }
    const Status st = local_insert(homes[k], entries[k].key, entries[k].value);
    if (first == Status::Ok) first = st;
  }
  size_t calls = 0;
  for (const auto& v : by_owner) calls += (v.size() + kPiece - 1) / kPiece;
  if (calls == 0) return first;
  GlobalPtr<uint64_t> status = slots_.template scratch<uint64_t>(calls);
  std::fill_n(status.local(), calls, static_cast<uint64_t>(Status::NoObject));
  {
    invoke::Synchronizer& sync = slots_.synchronizer(static_cast<int64_t>(calls));
    size_t call = 0;
    for (int o = 0; o < ctx_.size(); ++o) {
      const auto& v = by_owner[static_cast<size_t>(o)];
      for (size_t at = 0; at < v.size(); at += kPiece, ++call) {
        const auto bytes = std::as_bytes(std::span<const E>(v.data() + at, std::min(kPiece, v.size() - at)));
        invoke::call_buffer<invoke::Notify::Executed>(
            invoke::Thread{o, 0}, [id = id_, st = status + static_cast<std::ptrdiff_t>(call)](std::span<std::byte> b) { on_insert_batch(id, st, b); },
            bytes, &sync);
      }
    }
    sync.wait();
  }
  for (size_t call = 0; call < calls; ++call)
    if (first == Status::Ok) first = static_cast<Status>(std::atomic_ref<uint64_t>(status.local()[call]).load(std::memory_order_acquire));
  return first;
}

// The owner runs a piece of keys and puts the results into the caller's registered memory
// before the call counts as executed; results it could not write stay NoObject.
template <typename K, typename V, typename H>
void HashMap<K, V, H>::on_find_batch(uint32_t id, Level level, GlobalPtr<Found> out, std::span<std::byte> bytes) noexcept {
  try {
    const auto pin = at_owner(id);
    HashMap* m = pin.get();
    if (m == nullptr || bytes.size() % sizeof(K) != 0) return;
    const size_t n = bytes.size() / sizeof(K);
    std::vector<Found> results(n);
    for (size_t k = 0; k < n; ++k) {
      K key;
      std::memcpy(&key, bytes.data() + k * sizeof(K), sizeof(K));
      const hash::Home h = m->home_of(key);
      results[k] = mine(m, h) ? m->local_find(h, key, level) : Found{Status::NoObject, false, V{}};
    }
    if (n != 0) m->ctx_.endpoint().rput(out, results.data(), n);
  } catch (...) {
    // The caller sees NoObject in every result not written.
  }
}

template <typename K, typename V, typename H>
hash::Status HashMap<K, V, H>::invoked_find_many(std::span<const hash::Home> homes, std::span<const K> keys, Level level,
                                                 std::span<Found> out) {
  constexpr size_t kPiece = std::max<size_t>(1, std::min<size_t>(2048, 16384 / sizeof(K)));
  const int me = ctx_.rank();
  // Keys grouped by owner, remembering where each came from.
  std::vector<std::vector<size_t>> by_owner(static_cast<size_t>(ctx_.size()));
  for (size_t k = 0; k < keys.size(); ++k) {
    const int o = owner(homes[k]);
    if (o == me) out[k] = local_find(homes[k], keys[k], level);
    else by_owner[static_cast<size_t>(o)].push_back(k);
  }
  size_t remote = 0, calls = 0;
  for (const auto& v : by_owner) remote += v.size(), calls += (v.size() + kPiece - 1) / kPiece;
  if (remote == 0) return Status::Ok;
  GlobalPtr<Found> results = slots_.template scratch<Found>(remote);
  std::fill_n(results.local(), remote, Found{Status::NoObject, false, V{}});
  std::vector<K> sent;
  sent.reserve(remote);
  {
    invoke::Synchronizer& sync = slots_.synchronizer(static_cast<int64_t>(calls));
    for (int o = 0; o < ctx_.size(); ++o)
      for (size_t first = 0; first < by_owner[static_cast<size_t>(o)].size(); first += kPiece) {
        const auto& idx = by_owner[static_cast<size_t>(o)];
        const size_t n = std::min(kPiece, idx.size() - first), at = sent.size();
        for (size_t j = 0; j < n; ++j) sent.push_back(keys[idx[first + j]]);
        const auto bytes = std::as_bytes(std::span<const K>(sent.data() + at, n));
        invoke::call_buffer<invoke::Notify::Executed>(
            invoke::Thread{o, 0}, [id = id_, level, dst = results + static_cast<std::ptrdiff_t>(at)](std::span<std::byte> b) { on_find_batch(id, level, dst, b); },
            bytes, &sync);
      }
    sync.wait();
  }
  size_t at = 0;
  for (const auto& idx : by_owner)
    for (size_t k : idx) out[k] = results.local()[at++];
  for (const Found& f : out)
    if (f.status != Status::Ok) return f.status;
  return Status::Ok;
}

}  // namespace loom::objects
