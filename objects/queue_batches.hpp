#pragma once
// Queue's batched operations (docs/objects.md, "Batches"). Included by queue.hpp.
#include <algorithm>
#include <cstring>

#include "loom/objects/queue.hpp"

namespace loom::objects {

namespace detail {
// Values per owner-invoked piece: a call carries at most this many bytes of them.
template <typename T>
constexpr size_t queue_piece() {
  return std::max<size_t>(1, 16384 / sizeof(T));
}
}  // namespace detail

// The host pushes a piece and puts how many it took into the caller's word before the call
// counts as executed.
template <typename T>
void Queue<T>::on_push_many(uint32_t id, Level level, GlobalPtr<uint64_t> done, std::span<std::byte> bytes) noexcept {
  try {
    const auto pin = at_host(id);
    Queue* q = pin.get();
    if (q == nullptr || !q->local_ || bytes.size() % sizeof(T) != 0 || !q->shippable(level, Level::PhasalPush)) return;
    const size_t n = bytes.size() / sizeof(T);
    std::vector<T> values(n);
    if (n != 0) std::memcpy(values.data(), bytes.data(), bytes.size());
    uint64_t pushed = 0;
    LocalSlots<T>& s = *q->local_;
    if (level == Level::Atomic) {
      uint64_t hint = q->tail_hint_.load(std::memory_order_relaxed);
      while (pushed < n && q->push_atomic_on(s, values[pushed], hint) == Status::Ok) ++pushed;
      q->tail_hint_.store(hint, std::memory_order_relaxed);
    } else {
      uint64_t seen = q->head_seen_.load(std::memory_order_relaxed);
      pushed = queue::push_many_phasal(s, q->capacity(), std::span<const T>(values), seen);
      q->head_seen_.store(seen, std::memory_order_relaxed);
    }
    q->ctx_.endpoint().rput(done, pushed);
  } catch (...) {
    // The caller reads "none pushed".
  }
}

template <typename T>
void Queue<T>::on_pop_many(uint32_t id, Level level, uint64_t n, GlobalPtr<uint64_t> count, GlobalPtr<T> out) noexcept {
  try {
    const auto pin = at_host(id);
    Queue* q = pin.get();
    if (q == nullptr || !q->local_ || !q->shippable(level, Level::PhasalPop)) return;
    std::vector<T> values;
    LocalSlots<T>& s = *q->local_;
    if (level == Level::Atomic) {
      uint64_t hint = q->head_hint_.load(std::memory_order_relaxed);
      for (uint64_t k = 0; k < n; ++k) {
        const Popped r = q->pop_atomic_on(s, hint);
        if (r.status != Status::Ok) break;
        values.push_back(r.value);
      }
      q->head_hint_.store(hint, std::memory_order_relaxed);
    } else {
      uint64_t seen = q->tail_seen_.load(std::memory_order_relaxed);
      if (queue::pop_many_phasal(s, q->capacity(), n, values, seen) != Status::Ok) values.clear();
      q->tail_seen_.store(seen, std::memory_order_relaxed);
    }
    if (!values.empty()) q->ctx_.endpoint().rput(out, values.data(), values.size());
    q->ctx_.endpoint().rput(count, static_cast<uint64_t>(values.size()));
  } catch (...) {
    // The caller reads "none popped".
  }
}

template <typename T>
size_t Queue<T>::push_many(std::span<const T> values, Level level) {
  if (level == Level::PhasalPop) fail("objects: Queue push during a pop phase");
  check_level(level);
  if (level == Level::Local) {  // the host's own memory: one at a time, nothing to amortize
    size_t k = 0;
    while (k < values.size() && try_push(values[k], level)) ++k;
    return k;
  }
  const Policy p = router_.route_batch(Op::QueuePush, level, values.size());
  if (p != Policy::OwnerInvoked || host() == ctx_.rank()) {
    if (level == Level::Atomic || p == Policy::OwnerInvoked) {
      size_t k = 0;
      while (k < values.size() && try_push(values[k], level)) ++k;
      return k;
    }
    uint64_t seen = head_seen_.load(std::memory_order_relaxed);
    const size_t k = p == Policy::Cached ? queue::push_many_phasal(*region_, capacity(), values, seen)
                                         : queue::push_many_phasal(*remote_, capacity(), values, seen);
    head_seen_.store(seen, std::memory_order_relaxed);
    return k;
  }
  // Pieces one after another: a piece the host could not take whole ends the batch (a prefix).
  const GlobalPtr<uint64_t> done = slots_.template scratch<uint64_t>(1);
  size_t pushed = 0;
  for (size_t first = 0; first < values.size();) {
    const size_t n = std::min(detail::queue_piece<T>(), values.size() - first);
    *done.local() = 0;
    invoke::Synchronizer& sync = slots_.synchronizer(1);
    invoke::call_buffer<invoke::Notify::Executed>(
        invoke::Thread{host(), 0}, [id = id_, level, done](std::span<std::byte> b) { on_push_many(id, level, done, b); },
        std::as_bytes(values.subspan(first, n)), &sync);
    sync.wait();
    const uint64_t got = std::atomic_ref<uint64_t>(*done.local()).load(std::memory_order_acquire);
    pushed += static_cast<size_t>(got);
    first += n;
    if (got < n) break;
  }
  return pushed;
}

template <typename T>
std::vector<T> Queue<T>::pop_many(size_t n, Level level) {
  if (level == Level::PhasalPush) fail("objects: Queue pop during a push phase");
  check_level(level);
  const Policy p = level == Level::Local ? Policy::OneSided : router_.route_batch(Op::QueuePop, level, n);
  std::vector<T> out;
  if (p != Policy::OwnerInvoked || host() == ctx_.rank()) {
    if (level == Level::Atomic || level == Level::Local || p == Policy::OwnerInvoked) {
      while (out.size() < n) {
        std::optional<T> v = try_pop(level);
        if (!v) break;
        out.push_back(*v);
      }
      return out;
    }
    uint64_t seen = tail_seen_.load(std::memory_order_relaxed);
    const Status st = p == Policy::Cached ? queue::pop_many_phasal(*region_, capacity(), n, out, seen)
                                          : queue::pop_many_phasal(*remote_, capacity(), n, out, seen);
    tail_seen_.store(seen, std::memory_order_relaxed);
    check(st);
    return out;
  }
  const size_t piece = detail::queue_piece<T>();
  // The host puts the count into the first word of this thread's scratch, the values after it.
  const GlobalPtr<std::byte> area = slots_.template scratch<std::byte>(8 + std::min(n, piece) * sizeof(T));
  const GlobalPtr<uint64_t> count = area.template as<uint64_t>();
  const GlobalPtr<T> buf = (area + 8).template as<T>();
  while (out.size() < n) {
    const size_t want = std::min(piece, n - out.size());
    *count.local() = 0;
    invoke::Synchronizer& sync = slots_.synchronizer(1);
    invoke::call<invoke::Notify::Executed>(invoke::Thread{host(), 0},
                                           [id = id_, level, want = static_cast<uint64_t>(want), count, buf] { on_pop_many(id, level, want, count, buf); }, &sync);
    sync.wait();
    const uint64_t got = std::min<uint64_t>(want, std::atomic_ref<uint64_t>(*count.local()).load(std::memory_order_acquire));
    out.insert(out.end(), buf.local(), buf.local() + got);
    if (got < want) break;
  }
  return out;
}

}  // namespace loom::objects
