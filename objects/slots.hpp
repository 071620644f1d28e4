#pragma once
// Where a container's slots are, and how an operation reaches them: the one thing a policy
// changes (docs/objects.md, "Policies"). A container (HashMap, Queue) is an array of slots
// [control word | payload] plus a few counter words; its algorithms (hash_map_ops.hpp,
// queue_ops.hpp) are written once against the interface below, and each policy supplies a store:
//
//   RemoteSlots  (OneSided)      fabric operations on the owner's registered memory
//   LocalSlots   (OwnerInvoked)  the owner's own memory, run where the operation was shipped
//   RegionSlots  (Cached)        a shared region: control words are region atomic words, payloads
//                                plain region memory read and written on the local copy
//
// A store offers: load / cas / fetch_add of a control word or counter with an Order (what the
// coherence layer means by it; RemoteSlots completes each operation before the next, which
// orders them all); read of a whole slot (its control word and payload as one snapshot only
// where no writer can run: a phasal read); read and write of a payload; publish (payload and
// control word by a writer that holds the slot exclusively under a phase); and asynchronous
// forms that RemoteSlots keeps in flight together and the others run at once.
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "loom/coherence/space.hpp"
#include "loom/objects/endpoint.hpp"

namespace loom::objects {

using coherence::Order;

// One slot: the control word first, then the payload, padded to whole words.
template <typename P>
struct alignas(8) Slot {
  uint64_t word;
  P payload;
};

template <typename P>
inline constexpr bool kSlotPayload = std::is_trivially_copyable_v<P> && std::is_standard_layout_v<P> && alignof(P) <= 8;

// ---------------------------------------------------------------- OneSided
template <typename P>
class RemoteSlots {
  static_assert(kSlotPayload<P>);

 public:
  // Whether publish_word may follow write_payload_async as a plain put (seed 001's phasal
  // publication): they land in that order (this thread's lane: one queue pair), but only where
  // the word's loads are the CPU's (a mapping) is a put safe beside them — elsewhere an atomic
  // load is a FETCH_ADD of 0, which could write the old word back over the put.
  bool ordered_publish() const { return ep_->direct(); }
  RemoteSlots(Endpoint& ep, GlobalPtr<Slot<P>> slots, GlobalPtr<uint64_t> counters)
      : ep_(&ep), slots_(slots), counters_(counters) {}

  uint64_t load(size_t i, Order) { return ep_->atomic_load(word(i)); }
  uint64_t cas(size_t i, uint64_t e, uint64_t d, Order) { return ep_->compare_swap(word(i), e, d); }
  Slot<P> read(size_t i) { return ep_->rget(slots_ + static_cast<std::ptrdiff_t>(i)); }
  P read_payload(size_t i) { return ep_->rget(payload(i)); }
  void write_payload(size_t i, const P& p, uint64_t) { ep_->rput(payload(i), p); }
  // The payload, then a CAS of the word, in one round trip: requests to one owner execute in
  // order, so the CAS acts after the WRITE has landed.
  uint64_t write_then_cas(size_t i, const P& p, uint64_t, uint64_t e, uint64_t d, Order) {
    uint64_t old = 0;
    ep_->rput_async(payload(i), &p, 1);
    ep_->compare_swap_async(word(i), e, d, &old);
    ep_->flush();
    return old;
  }
  // The payload, then a CAS of the word, in one round trip (the READ executes first).
  P read_then_cas(size_t i, uint64_t e, uint64_t d, Order, uint64_t& old) {
    P p;
    ep_->rget_async(payload(i), &p, 1);
    ep_->compare_swap_async(word(i), e, d, &old);
    ep_->flush();
    return p;
  }
  // The slot's word and payload in one WRITE (the holder alone touches the slot in this phase).
  void publish(size_t i, uint64_t w, const P& p) { ep_->rput(slots_ + static_cast<std::ptrdiff_t>(i), Slot<P>{w, p}); }
  void publish_word(size_t i, uint64_t w) { ep_->rput(word(i), w); }

  uint64_t counter_load(int c, Order) { return ep_->atomic_load(counters_ + c); }
  uint64_t counter_cas(int c, uint64_t e, uint64_t d, Order) { return ep_->compare_swap(counters_ + c, e, d); }
  uint64_t counter_add(int c, uint64_t v, Order) { return ep_->fetch_add(counters_ + c, v); }

  // In flight together; requests to one owner execute in order (one queue pair per peer).
  void cas_async(size_t i, uint64_t e, uint64_t d, uint64_t* old) { ep_->compare_swap_async(word(i), e, d, old); }
  void load_async(size_t i, uint64_t* out) { ep_->atomic_load_async(word(i), out); }
  void counter_load_async(int c, uint64_t* out) { ep_->atomic_load_async(counters_ + c, out); }
  void read_async(size_t i, Slot<P>* out) { ep_->rget_async(slots_ + static_cast<std::ptrdiff_t>(i), out, 1); }
  void read_many_async(size_t i, size_t n, Slot<P>* out) { ep_->rget_async(slots_ + static_cast<std::ptrdiff_t>(i), out, n); }
  void write_payload_async(size_t i, const P& p, uint64_t) { ep_->rput_async(payload(i), &p, 1); }
  void publish_many_async(size_t i, size_t n, const Slot<P>* in) { ep_->rput_async(slots_ + static_cast<std::ptrdiff_t>(i), in, n); }
  void flush() { ep_->flush(); }

 private:
  GlobalPtr<uint64_t> word(size_t i) const { return (slots_ + static_cast<std::ptrdiff_t>(i)).template as<uint64_t>(); }
  GlobalPtr<P> payload(size_t i) const {
    return ((slots_ + static_cast<std::ptrdiff_t>(i)).template as<std::byte>() + static_cast<std::ptrdiff_t>(offsetof(Slot<P>, payload))).template as<P>();
  }
  Endpoint* ep_;
  GlobalPtr<Slot<P>> slots_;
  GlobalPtr<uint64_t> counters_;
};

// ---------------------------------------------------------------- OwnerInvoked
namespace detail {
constexpr std::memory_order mo(Order o) {
  switch (o) {
    case Order::Relaxed: return std::memory_order_relaxed;
    case Order::Acquire: return std::memory_order_acquire;
    case Order::Release: return std::memory_order_release;
    default: return std::memory_order_acq_rel;
  }
}
constexpr std::memory_order load_mo(Order o) { return o == Order::Relaxed ? std::memory_order_relaxed : std::memory_order_acquire; }
// Payload bytes copied word by word with atomics: a reader racing a writer (a seqlock that will
// retry) is then no data race. The reader's loads acquire, so the seqlock's second look at the
// control word cannot move before them (the fence a seqlock would take there; ThreadSanitizer
// models no standalone fence); on x86 an acquiring load is a plain load. The words come back
// as a value (bit_cast, in registers), not through a buffer in memory: a wide load of narrower
// stores just made cannot be forwarded from the store buffer and waits for them.
template <typename T, size_t... K>
T load_words(const uint64_t* src, std::index_sequence<K...>) {
  static_assert(std::is_trivially_copyable_v<T>);
  const std::array<uint64_t, sizeof...(K)> w{std::atomic_ref<uint64_t>(const_cast<uint64_t&>(src[K])).load(std::memory_order_acquire)...};
  if constexpr (sizeof(T) == sizeof w) {
    return std::bit_cast<T>(w);
  } else {
    T t;
    std::memcpy(&t, w.data(), sizeof(T));
    return t;
  }
}
template <typename T>
T load_words(const uint64_t* src) {
  return load_words<T>(src, std::make_index_sequence<(sizeof(T) + 7) / 8>());
}
inline void copy_words_out(uint64_t* dst, const void* src, size_t bytes) {
  uint64_t w[8];
  for (size_t off = 0; off < bytes; off += sizeof w) {
    const size_t n = std::min(sizeof w, bytes - off);
    std::memset(w, 0, sizeof w);
    std::memcpy(w, static_cast<const uint8_t*>(src) + off, n);
    for (size_t k = 0; k * 8 < n; ++k) std::atomic_ref<uint64_t>(dst[off / 8 + k]).store(w[k], std::memory_order_relaxed);
  }
}
}  // namespace detail

// The asynchronous forms of a store whose operations complete as they are made (the owner's
// own memory, a region's local copy): each is the synchronous operation.
template <typename Self, typename P>
struct ImmediateForms {
  void cas_async(size_t i, uint64_t e, uint64_t d, uint64_t* old) { *old = self().cas(i, e, d, Order::AcqRel); }
  void load_async(size_t i, uint64_t* out) { *out = self().load(i, Order::Acquire); }
  void counter_load_async(int c, uint64_t* out) { *out = self().counter_load(c, Order::Relaxed); }
  uint64_t write_then_cas(size_t i, const P& p, uint64_t mirror, uint64_t e, uint64_t d, Order o) {
    self().write_payload(i, p, mirror);
    return self().cas(i, e, d, o);
  }
  P read_then_cas(size_t i, uint64_t e, uint64_t d, Order o, uint64_t& old) {
    const P p = self().read_payload(i);
    old = self().cas(i, e, d, o);
    return p;
  }
  void read_async(size_t i, Slot<P>* out) { *out = self().read(i); }
  void write_payload_async(size_t i, const P& p, uint64_t w) { self().write_payload(i, p, w); }
  void flush() {}

 private:
  Self& self() { return static_cast<Self&>(*this); }
};

// The owner's memory, run by the owner (a shipped operation, or the owner's own). Control words
// take the CPU's atomics, which are atomic with the fabric's on the shm provider; where the
// fabric's atomics are not atomic with the CPU's (verbs NICs), `loopback` sends them through
// the Endpoint to this process itself, so OneSided and OwnerInvoked operations may mix.
template <typename P>
class LocalSlots : public ImmediateForms<LocalSlots<P>, P> {
  static_assert(kSlotPayload<P>);
  static constexpr size_t kPayloadBytes = sizeof(Slot<P>) - 8;

 public:
  // The payload's words, then the word with release (publish_word; through the loopback, an
  // atomic store).
  bool ordered_publish() const { return true; }
  LocalSlots(Slot<P>* slots, uint64_t* counters, Endpoint* loopback = nullptr)
      : slots_(slots), counters_(counters), loop_(loopback) {}

  uint64_t load(size_t i, Order o) { return word_load(&slots_[i].word, o); }
  uint64_t cas(size_t i, uint64_t e, uint64_t d, Order o) { return word_cas(&slots_[i].word, e, d, o); }
  Slot<P> read(size_t i) {
    Slot<P> s;
    s.word = load(i, Order::Acquire);
    s.payload = read_payload(i);
    return s;
  }
  P read_payload(size_t i) {
    return detail::load_words<P>(payload_words(i));
  }
  void write_payload(size_t i, const P& p, uint64_t) { detail::copy_words_out(payload_words(i), &p, sizeof(P)); }
  void publish(size_t i, uint64_t w, const P& p) {
    write_payload(i, p, w);
    publish_word(i, w);
  }
  void publish_word(size_t i, uint64_t w) {
    if (loop_ != nullptr) loop_->atomic_store(remote(&slots_[i].word), w);
    // Release after the payload words: pairs with read()'s acquire load of the word, so a reader
    // that sees w sees the payload written with it (over the fabric, the queue pair's order).
    else std::atomic_ref<uint64_t>(slots_[i].word).store(w, std::memory_order_release);
  }

  uint64_t counter_load(int c, Order o) { return word_load(&counters_[c], o); }
  uint64_t counter_cas(int c, uint64_t e, uint64_t d, Order o) { return word_cas(&counters_[c], e, d, o); }
  uint64_t counter_add(int c, uint64_t v, Order o) {
    if (loop_ != nullptr) return loop_->fetch_add(remote(&counters_[c]), v);
    return std::atomic_ref<uint64_t>(counters_[c]).fetch_add(v, detail::mo(o));
  }

  void read_many_async(size_t i, size_t n, Slot<P>* out) {
    for (size_t k = 0; k < n; ++k) out[k] = read(i + k);
  }
  void publish_many_async(size_t i, size_t n, const Slot<P>* in) {
    for (size_t k = 0; k < n; ++k) publish(i + k, in[k].word, in[k].payload);
  }

 private:
  uint64_t* payload_words(size_t i) { return reinterpret_cast<uint64_t*>(reinterpret_cast<uint8_t*>(&slots_[i]) + 8); }
  GlobalPtr<uint64_t> remote(uint64_t* w) const { return {loop_->runtime().rank(), reinterpret_cast<uint64_t>(w)}; }
  uint64_t word_load(uint64_t* w, Order o) {
    if (loop_ != nullptr) return loop_->atomic_load(remote(w));
    return std::atomic_ref<uint64_t>(*w).load(detail::load_mo(o));
  }
  uint64_t word_cas(uint64_t* w, uint64_t e, uint64_t d, Order o) {
    if (loop_ != nullptr) return loop_->compare_swap(remote(w), e, d);
    std::atomic_ref<uint64_t>(*w).compare_exchange_strong(e, d, detail::mo(o), detail::load_mo(o));
    return e;  // the old value either way
  }
  Slot<P>* slots_;
  uint64_t* counters_;
  Endpoint* loop_;
};

// ---------------------------------------------------------------- Cached
// Control words and counters are region atomic words (Space::new_atomic_words: fabric atomics at
// their block's manager, with the coherence orders); each slot's own word is a plain mirror of
// its control word, written with the payload and published by the release that precedes the
// control word's release operation, so a phasal read of the local copy sees both.
template <typename P>
class RegionSlots : public ImmediateForms<RegionSlots<P>, P> {
  static_assert(kSlotPayload<P>);

 public:
  // Writes to the local copy are seen by others at a release only: the word's CAS is that release.
  bool ordered_publish() const { return false; }
  RegionSlots(coherence::Space& space, Slot<P>* slots, uint64_t* words, uint64_t* counters)
      : space_(&space), slots_(slots), words_(words), counters_(counters) {}

  uint64_t load(size_t i, Order o) { return ref(&words_[i]).load(o); }
  uint64_t cas(size_t i, uint64_t e, uint64_t d, Order o) { return ref(&words_[i]).compare_swap(e, d, o); }
  // Reads of the local copy go word by word (detail::load_words): another thread of this
  // process may be refilling the block from a fetch meanwhile (the same bytes, for a slot whose
  // control word did not move).
  Slot<P> read(size_t i) { return copy(space_->reading(&slots_[i])); }
  P read_payload(size_t i) { return read(i).payload; }
  void write_payload(size_t i, const P& p, uint64_t mirror) { *space_->writing(&slots_[i]) = Slot<P>{mirror, p}; }
  void publish(size_t i, uint64_t w, const P& p) {
    write_payload(i, p, w);
    publish_word(i, w);
  }
  void publish_word(size_t i, uint64_t w) { ref(&words_[i]).store(w, Order::Relaxed); }

  uint64_t counter_load(int c, Order o) { return ref(&counters_[c]).load(o); }
  uint64_t counter_cas(int c, uint64_t e, uint64_t d, Order o) { return ref(&counters_[c]).compare_swap(e, d, o); }
  uint64_t counter_add(int c, uint64_t v, Order o) { return ref(&counters_[c]).fetch_add(v, o); }
  // The payload of a slot whose control word was just acquired as `e`: its mirror, written with
  // it, must say `e` too; otherwise the local copy is older than the word (a coherence fault),
  // and the CAS is not made: `old` reads 0, which the caller takes for corruption.
  P read_then_cas(size_t i, uint64_t e, uint64_t d, Order o, uint64_t& old) {
    const Slot<P> s = read(i);
    old = s.word == e ? cas(i, e, d, o) : 0;
    return s.payload;
  }

  void read_many_async(size_t i, size_t n, Slot<P>* out) {
    const Slot<P>* from = space_->reading(&slots_[i], n);
    for (size_t k = 0; k < n; ++k) out[k] = copy(from + k);
  }
  void publish_many_async(size_t i, size_t n, const Slot<P>* in) {
    std::memcpy(space_->writing(&slots_[i], n), in, n * sizeof(Slot<P>));
    for (size_t k = 0; k < n; ++k) publish_word(i + k, in[k].word);
  }

 private:
  coherence::AtomicRef ref(uint64_t* w) { return space_->atomic_ref(w); }
  static Slot<P> copy(const Slot<P>* from) { return detail::load_words<Slot<P>>(reinterpret_cast<const uint64_t*>(from)); }
  coherence::Space* space_;
  Slot<P>* slots_;
  uint64_t* words_;
  uint64_t* counters_;
};

}  // namespace loom::objects
