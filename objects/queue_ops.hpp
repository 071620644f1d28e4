#pragma once
// The Queue's operations, written once for every policy (docs/objects.md, "Queue"): a bounded
// multi-producer, multi-consumer array queue with a sequence word per slot, over a slot store
// (objects/slots.hpp) and its two counters, head and tail. Slot i starts with sequence i.
//
// Fully atomic: a push at position p claims it when the slot's sequence is p (CAS of the tail
// p -> p+1), writes the value, then publishes sequence p+1 by a releasing CAS; a pop at position
// p takes it when the sequence is p+1 (CAS of the head), reads the value, then gives the slot to
// the next lap with sequence p+capacity. The value's transfer and the CAS behind it travel
// together (requests to one owner execute in order); every other step completes before the next.
//
// Phasal (only pushes, or only pops, until a barrier): the other counter cannot move, so a push
// claims a position with one fetch-and-add of the tail and writes the slot — value and sequence —
// at once; a pop claims with one fetch-and-add of the head and reads the slot. A claim past the
// end (full, or empty) is given back with a fetch-and-add of -1: every claim past the end is, so
// the counter comes back. A pop that finds a sequence not yet published has met a push inside a
// pop phase: reported, not waited for.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <optional>
#include <span>
#include <vector>

#include "loom/objects/policy.hpp"
#include "loom/objects/slots.hpp"

namespace loom::objects::queue {

constexpr int kHead = 0, kTail = 1;

enum class Status : uint8_t { Ok, Full, Empty, WrongPhase, Corrupt, NoObject, BadRequest };

template <typename T>
struct Popped {
  Status status = Status::Empty;
  T value{};
};

// A slot's sequence ahead of a counter that has not moved (the counter is claimed before the
// sequence changes, and read before it) can be seen once, by a read that raced the claim; seen
// this many times in a row, the queue's words disagree (an out-of-phase batch from another
// process, a corrupt word) and the operation ends Corrupt instead of spinning for ever.
inline constexpr int kAheadLimit = 4;

// Claims position pos on counter c by CAS (pos -> pos + 1); otherwise pos becomes the counter's
// value, where the caller looks next.
template <typename S>
bool claim(S& s, int c, uint64_t& pos) {
  const uint64_t old = s.counter_cas(c, pos, pos + 1, Order::Relaxed);
  if (old == pos) return true;
  pos = old;
  return false;
}

// The counter and the sequence of the slot it last pointed at (`hint`, a lower bound) are read
// together; with a right hint a push is three round trips: those reads, the claim, and the value
// with its publication behind it.
template <typename S, typename T>
Status push_atomic(S& s, size_t cap, const T& v, uint64_t& hint) {
  uint64_t pos = hint;
  for (int ahead = 0;;) {
    uint64_t tail = 0, seq = 0;
    s.counter_load_async(kTail, &tail);
    s.load_async(pos % cap, &seq);
    s.flush();
    if (tail != pos) {  // the hint was behind: read the slot the counter names
      pos = tail, ahead = 0;
      continue;
    }
    if (seq < pos) return Status::Full;  // the slot still holds the value of the lap before
    if (seq > pos) {                     // pushed meanwhile: the counter has moved on
      if (++ahead == kAheadLimit) return Status::Corrupt;
      continue;
    }
    if (!claim(s, kTail, pos)) {
      ahead = 0;
      continue;
    }
    hint = pos + 1;
    return s.write_then_cas(pos % cap, v, pos + 1, pos, pos + 1, Order::Release) == pos ? Status::Ok : Status::Corrupt;
  }
}

template <typename S, typename T>
Popped<T> pop_atomic(S& s, size_t cap, uint64_t& hint) {
  uint64_t pos = hint;
  for (int ahead = 0;;) {
    uint64_t head = 0, seq = 0;
    s.counter_load_async(kHead, &head);
    s.load_async(pos % cap, &seq);
    s.flush();
    if (head != pos) {
      pos = head, ahead = 0;
      continue;
    }
    if (seq < pos + 1) return Popped<T>{};  // not yet pushed: empty
    if (seq > pos + 1) {                    // popped meanwhile: the counter has moved on
      if (++ahead == kAheadLimit) return Popped<T>{Status::Corrupt, T{}};
      continue;
    }
    if (!claim(s, kHead, pos)) {
      ahead = 0;
      continue;
    }
    hint = pos + 1;
    uint64_t freed = 0;
    Popped<T> out{Status::Ok, s.read_then_cas(pos % cap, pos + 1, pos + cap, Order::Release, freed)};
    if (freed != pos + 1) out.status = Status::Corrupt;
    return out;
  }
}

// `limit` is the other counter as last seen (head for a push, tail for a pop); it is reread only
// when the claim looks past the end.
template <typename S, typename T>
Status push_phasal(S& s, size_t cap, const T& v, uint64_t& head_seen) {
  const uint64_t pos = s.counter_add(kTail, 1, Order::Relaxed);
  if (pos >= head_seen + cap) {
    head_seen = s.counter_load(kHead, Order::Relaxed);
    if (pos >= head_seen + cap) {
      s.counter_add(kTail, uint64_t{0} - 1, Order::Relaxed);
      return Status::Full;
    }
  }
  s.publish(pos % cap, pos + 1, v);
  return Status::Ok;
}

template <typename S, typename T>
Popped<T> pop_phasal(S& s, size_t cap, uint64_t& tail_seen) {
  const uint64_t pos = s.counter_add(kHead, 1, Order::Relaxed);
  if (pos >= tail_seen) {
    tail_seen = s.counter_load(kTail, Order::Relaxed);
    if (pos >= tail_seen) {
      s.counter_add(kHead, uint64_t{0} - 1, Order::Relaxed);
      return Popped<T>{};
    }
  }
  const Slot<T> slot = s.read(pos % cap);
  if (slot.word != pos + 1) return Popped<T>{Status::WrongPhase, T{}};
  s.publish_word(pos % cap, pos + cap);
  return Popped<T>{Status::Ok, slot.payload};
}

// ---------------------------------------------------------------- phasal batches
// One fetch-and-add claims a run of positions; the slots go out (or come in) as one or two
// contiguous transfers (two where the run wraps). Returns how many were pushed (a prefix).
template <typename S, typename T>
size_t push_many_phasal(S& s, size_t cap, std::span<const T> values, uint64_t& head_seen) {
  const size_t k = values.size();
  if (k == 0) return 0;
  const uint64_t pos = s.counter_add(kTail, k, Order::Relaxed);
  size_t fit = k;
  if (pos + k > head_seen + cap) {
    head_seen = s.counter_load(kHead, Order::Relaxed);
    const uint64_t end = head_seen + cap;
    fit = pos >= end ? 0 : static_cast<size_t>(std::min<uint64_t>(k, end - pos));
    if (fit < k) s.counter_add(kTail, uint64_t{0} - (k - fit), Order::Relaxed);  // gives back the claims past the end
  }
  std::vector<Slot<T>> out(fit);
  for (size_t j = 0; j < fit; ++j) out[j] = Slot<T>{pos + j + 1, values[j]};
  for (size_t done = 0; done < fit;) {
    const size_t i = (pos + done) % cap, run = std::min(fit - done, cap - i);
    s.publish_many_async(i, run, out.data() + done);
    done += run;
  }
  s.flush();
  return fit;
}

template <typename S, typename T>
Status pop_many_phasal(S& s, size_t cap, size_t k, std::vector<T>& out, uint64_t& tail_seen) {
  out.clear();
  if (k == 0) return Status::Ok;
  const uint64_t pos = s.counter_add(kHead, k, Order::Relaxed);
  size_t fit = k;
  if (pos + k > tail_seen) {
    tail_seen = s.counter_load(kTail, Order::Relaxed);
    fit = pos >= tail_seen ? 0 : static_cast<size_t>(std::min<uint64_t>(k, tail_seen - pos));
    if (fit < k) s.counter_add(kHead, uint64_t{0} - (k - fit), Order::Relaxed);
  }
  std::vector<Slot<T>> in(fit);
  for (size_t done = 0; done < fit;) {
    const size_t i = (pos + done) % cap, run = std::min(fit - done, cap - i);
    s.read_many_async(i, run, in.data() + done);
    done += run;
  }
  s.flush();
  for (size_t j = 0; j < fit; ++j) {
    if (in[j].word != pos + j + 1) return Status::WrongPhase;
    out.push_back(in[j].payload);
    in[j].word = pos + j + cap;  // the slot's next lap
  }
  for (size_t done = 0; done < fit;) {
    const size_t i = (pos + done) % cap, run = std::min(fit - done, cap - i);
    s.publish_many_async(i, run, in.data() + done);
    done += run;
  }
  s.flush();
  return Status::Ok;
}

}  // namespace loom::objects::queue
