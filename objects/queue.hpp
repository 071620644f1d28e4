#pragma once
// A bounded distributed queue at one host process under a policy chosen per object (seed 001
// section III; docs/objects.md, "Queue"). The operations (objects/queue_ops.hpp) are written once
// and reach the slots as the policy says: fabric operations (OneSided), shipped to the host
// (OwnerInvoked), or on the local copy of a region (Cached); Auto picks by the cost model.
// Levels: Atomic (pushes and pops at once), PhasalPush (only pushes until a barrier),
// PhasalPop (only pops until a barrier), Local (only the host's threads until a barrier: the
// fully atomic algorithm on the host's own memory, whatever the policy). Layouts: Sequence (a
// sequence word per slot, published by an atomic) and Checksum (seed 001's checksum queue,
// objects/queue_checksum.hpp: fully atomic only, the queue at its host).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "loom/objects/router.hpp"
#include "loom/objects/queue_checksum.hpp"
#include "loom/objects/queue_ops.hpp"
#include "loom/objects/slot_array.hpp"

namespace loom::objects {

// How a Queue's slots say they hold a value (objects/queue_ops.hpp, queue_checksum.hpp).
enum class QueueLayout : uint8_t { Sequence, Checksum };

template <typename T>
class Queue {
  static_assert(kSlotPayload<T>, "Queue: values travel as bytes (trivially copyable, standard layout, alignment <= 8)");
  using Status = queue::Status;
  using Popped = queue::Popped<T>;

 public:
  // The host's side of the batches (queue_batches.hpp): what a call from another process runs,
  // every argument from the wire. Public for the fuzz target (tests/fuzz).
  static void on_push_many(uint32_t id, Level level, GlobalPtr<uint64_t> done, std::span<std::byte> bytes) noexcept;
  static void on_pop_many(uint32_t id, Level level, uint64_t n, GlobalPtr<uint64_t> count, GlobalPtr<T> out) noexcept;

  // Collective: every process passes the same host, capacity and policy (checked).
  Queue(Context& ctx, int host, size_t capacity, Policy policy = Policy::OneSided, Workload workload = {})
      : Queue(ctx, host, capacity, QueueLayout::Sequence, policy, workload) {}
  // A checksum queue lives at its host: OneSided or OwnerInvoked.
  Queue(Context& ctx, int host, size_t capacity, QueueLayout layout, Policy policy = Policy::OneSided, Workload workload = {})
      : ctx_(ctx),
        layout_(checked_layout(layout, policy)),
        router_(ctx, policy, Op::QueuePush, Op::QueuePop, workload),
        slots_(ctx, {host}, capacity, router_.placement() == Policy::Cached, first_words(layout)) {
    if (router_.placement() == Policy::Cached) region_.emplace(slots_.region(0));
    else remote_.emplace(slots_.remote(0));
    if (!slots_.in_region() && host == ctx.rank()) local_.emplace(slots_.local(0));
    id_ = ctx.attach(this, typeid(Queue));
  }
  // Collective.
  ~Queue() {
    ctx_.process_barrier();
    ctx_.detach(id_);
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  size_t capacity() const { return slots_.per(); }
  int host() const { return slots_.owner(0); }
  Policy policy() const { return router_.policy(); }
  QueueLayout layout() const { return layout_; }
  Policy placement() const { return router_.placement(); }
  Policy current(Op op, Level l) const { return router_.current(op, l); }
  const Chooser* chooser() const { return router_.chooser(); }

  // False when the queue is full (nothing is changed).
  bool try_push(const T& v, Level level = Level::Atomic) {
    if (level == Level::PhasalPop) fail("objects: Queue push during a pop phase");
    check_level(level);
    if (level == Level::Local) {
      const Status st = local_push(v, level);
      check(st);
      return st == Status::Ok;
    }
    bool timed = false;
    const Policy p = router_.route(Op::QueuePush, level, timed);
    OpTimer t(timed);
    Status st;
    if (p == Policy::OwnerInvoked) {
      if (host() == ctx_.rank()) ctx_.attend();
      st = host() == ctx_.rank() ? local_push(v, level) : slots_.template call<Status>(host(), [id = id_, v, level] { return on_push(id, v, level); });
    } else if (p == Policy::Cached) {
      st = push_on(*region_, v, level);
    } else {
      st = push_on(*remote_, v, level);
    }
    router_.record(Op::QueuePush, level, p, t);
    check(st);
    return st == Status::Ok;
  }

  // Empty: nullopt.
  std::optional<T> try_pop(Level level = Level::Atomic) {
    if (level == Level::PhasalPush) fail("objects: Queue pop during a push phase");
    check_level(level);
    if (level == Level::Local) {
      const Popped r = local_pop(level);
      check(r.status);
      return r.status == Status::Ok ? std::optional<T>(r.value) : std::nullopt;
    }
    bool timed = false;
    const Policy p = router_.route(Op::QueuePop, level, timed);
    OpTimer t(timed);
    Popped r;
    if (p == Policy::OwnerInvoked) {
      if (host() == ctx_.rank()) ctx_.attend();
      r = host() == ctx_.rank() ? local_pop(level) : slots_.template call<Popped>(host(), [id = id_, level] { return on_pop(id, level); });
    } else if (p == Policy::Cached) {
      r = pop_on(*region_, level);
    } else {
      r = pop_on(*remote_, level);
    }
    router_.record(Op::QueuePop, level, p, t);
    check(r.status);
    return r.status == Status::Ok ? std::optional<T>(r.value) : std::nullopt;
  }

  // Pushes a prefix of `values` (all of them unless the queue fills); returns how many.
  // Phasal: one claim for the run and one or two transfers (OneSided, Cached); OwnerInvoked: the
  // values travel to the host in one call per piece. Atomic: one at a time, in order.
  size_t push_many(std::span<const T> values, Level level = Level::Atomic);
  // Pops up to n values (fewer when the queue empties), in queue order.
  std::vector<T> pop_many(size_t n, Level level = Level::Atomic);

 private:

  // Slot i's word when made: sequence i, or free for position i.
  static typename SlotArray<T>::Init first_words(QueueLayout layout) {
    if (layout == QueueLayout::Checksum) return [](size_t i) { return queue::free_word(i); };
    return [](size_t i) { return static_cast<uint64_t>(i); };
  }
  static QueueLayout checked_layout(QueueLayout layout, Policy policy) {
    if (layout != QueueLayout::Sequence && layout != QueueLayout::Checksum) fail("objects: Queue layout ", static_cast<int>(layout), " is not a layout");
    if (layout == QueueLayout::Checksum && policy != Policy::OneSided && policy != Policy::OwnerInvoked)
      fail("objects: a checksum Queue lives at its host (OneSided or OwnerInvoked), not ", name(policy));
    return layout;
  }
  void check_level(Level level) const {
    if (level > Level::Local) fail("objects: Queue level ", static_cast<int>(level), " is not a level");
    if (level == Level::PhasalPush || level == Level::PhasalPop) {
      if (layout_ == QueueLayout::Checksum) fail("objects: a checksum Queue is fully atomic (Level::Atomic or Level::Local), not phasal");
    } else if (level == Level::Local) {
      if (host() != ctx_.rank()) fail("objects: Queue Level::Local is the host's: rank ", ctx_.rank(), " called it on a queue hosted by rank ", host());
      if (slots_.in_region()) fail("objects: Queue Level::Local needs the queue at its host; a Cached queue's words are region atomic words");
    }
  }

  // The fully atomic algorithm of the queue's layout (Level::Atomic and Level::Local).
  template <typename S>
  Status push_atomic_on(S& s, const T& v, uint64_t& hint) {
    return layout_ == QueueLayout::Checksum ? queue::push_checksum(s, capacity(), v, hint) : queue::push_atomic(s, capacity(), v, hint);
  }
  template <typename S>
  Popped pop_atomic_on(S& s, uint64_t& hint) {
    return layout_ == QueueLayout::Checksum ? queue::pop_checksum<S, T>(s, capacity(), hint) : queue::pop_atomic<S, T>(s, capacity(), hint);
  }

  template <typename S>
  Status push_on(S& s, const T& v, Level level) {
    if (level == Level::Atomic || level == Level::Local) {
      uint64_t hint = tail_hint_.load(std::memory_order_relaxed);
      const Status st = push_atomic_on(s, v, hint);
      tail_hint_.store(hint, std::memory_order_relaxed);
      return st;
    }
    uint64_t seen = head_seen_.load(std::memory_order_relaxed);
    const Status st = queue::push_phasal(s, capacity(), v, seen);
    head_seen_.store(seen, std::memory_order_relaxed);  // a lower bound of the head: any value is safe
    return st;
  }
  template <typename S>
  Popped pop_on(S& s, Level level) {
    if (level == Level::Atomic || level == Level::Local) {
      uint64_t hint = head_hint_.load(std::memory_order_relaxed);
      const Popped r = pop_atomic_on(s, hint);
      head_hint_.store(hint, std::memory_order_relaxed);
      return r;
    }
    uint64_t seen = tail_seen_.load(std::memory_order_relaxed);
    const Popped r = queue::pop_phasal<S, T>(s, capacity(), seen);
    tail_seen_.store(seen, std::memory_order_relaxed);
    return r;
  }


  // ---- the host's side of shipped operations (never throw: the caller waits for a reply)
  // On the host's slot store, kept from construction; a queue not at its host (Cached) has none.
  Status local_push(const T& v, Level level) { return local_ ? push_on(*local_, v, level) : Status::BadRequest; }
  Popped local_pop(Level level) { return local_ ? pop_on(*local_, level) : Popped{Status::BadRequest, T{}}; }
  // The queue a shipped operation names, pinned while the operation runs, if it is hosted here.
  static Context::Pinned<Queue> at_host(uint32_t id) noexcept {
    Context::Pinned<Queue> q = Context::try_pin<Queue>(id);
    if (q.get() != nullptr && q.get()->host() == q.get()->ctx_.rank()) return q;
    return {};
  }
  // What a caller may ship at its layout: the fully atomic level, or the phase of this
  // operation on a sequence queue (Level::Local never travels).
  bool shippable(Level level, Level phase) const {
    return level == Level::Atomic || (level == phase && layout_ == QueueLayout::Sequence);
  }
  static Status on_push(uint32_t id, const T& v, Level level) noexcept {
    const auto pin = at_host(id);
    Queue* q = pin.get();
    if (q == nullptr) return Status::NoObject;
    return q->shippable(level, Level::PhasalPush) ? q->local_push(v, level) : Status::BadRequest;
  }
  static Popped on_pop(uint32_t id, Level level) noexcept {
    const auto pin = at_host(id);
    Queue* q = pin.get();
    if (q == nullptr) return Popped{Status::NoObject, T{}};
    return q->shippable(level, Level::PhasalPop) ? q->local_pop(level) : Popped{Status::BadRequest, T{}};
  }

  void check(Status st) const {
    switch (st) {
      case Status::Ok: case Status::Full: case Status::Empty: return;
      case Status::WrongPhase: fail("objects: Queue pop in a pop phase met a slot not yet published (a push ran during the phase)");
      case Status::Corrupt: fail("objects: Queue slot changed while held, or a cached copy older than its sequence (corrupt memory, or a coherence fault)");
      case Status::NoObject: fail("objects: rank ", host(), " has no such Queue (was it made by every process?)");
      case Status::BadRequest: fail("objects: rank ", host(), " refused a Queue request at a level its queue does not run");
    }
  }

  Context& ctx_;
  QueueLayout layout_;
  Router router_;
  SlotArray<T> slots_;
  std::optional<RemoteSlots<T>> remote_;
  std::optional<RegionSlots<T>> region_;
  std::optional<LocalSlots<T>> local_;  // the host's, of a queue at its host (shipped operations, Level::Local)
  std::atomic<uint64_t> head_seen_{0}, tail_seen_{0};  // lower bounds, for the phasal levels
  std::atomic<uint64_t> head_hint_{0}, tail_hint_{0};  // where the counters last were (atomic level)
  uint32_t id_ = 0;
};

}  // namespace loom::objects

#include "loom/objects/queue_batches.hpp"
