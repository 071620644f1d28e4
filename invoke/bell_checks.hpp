#pragma once
// Doorbells across the network (seed 004's sleeping bit, read where the ringer cannot map it).
// A worker thread of another node sleeps on its doorbell as one here does; a thread that posted
// a request to it (a record, a result, a notification, a consumed offset) cannot load the bell,
// so it READs the destination process's bells on the queue pair that carried the request, and
// when the READ shows the thread asleep sends it a wake: a one-way service call
// ("loom.invoke.bell"), whose arrival wakes the destination's service thread, which rings the
// bell in place.
//
// Why no wake is lost: requests on one queue pair take effect in order (the provider contract),
// so the READ executes after the request took effect at the destination. The sleeper stores
// "sleeping" (sequentially consistent) before it looks for work a last time. If the READ saw
// "awake", it ran before that store, so the request was visible before the look, which finds
// it; if it saw "sleeping", the wake follows. A sleep lasts kMaxSleep at most in any case.
//
// One check per destination process is in flight per ringing thread; a ring while one is in
// flight asks for another, posted when the first is answered (after the request that rang), so
// checks cost at most one READ a round trip per peer, however many records go out. (Rings of
// one thread to one process on different queue pairs while a check is in flight are checked on
// the last one's: the others' sleepers may then wake by kMaxSleep.)
#include <cstdint>
#include <span>
#include <vector>

#include "loom/dsm/memory/rdma_allocator.hpp"
#include "loom/dsm/signal/transmitter.hpp"

namespace loom::invoke {

class Invoker;

class BellChecks {
 public:
  // A ringing thread's checks (owned by its MessengerGlobal).
  explicit BellChecks(Invoker& inv);
  ~BellChecks();
  BellChecks(const BellChecks&) = delete;
  BellChecks& operator=(const BellChecks&) = delete;

  // Thread `index` of process `rank` (-1: every worker thread of it) may sleep while a request
  // posted to it on `tx` lands: check, and wake it if it sleeps.
  void ring(int rank, int index, signal::Transmitter& tx);
  // Looks at the checks in flight: wakes the threads found asleep, posts the checks asked for
  // meanwhile. Returns whether checks remain in flight.
  bool poll();
  bool pending() const { return in_flight_ != 0; }

 private:
  struct Peer {
    signal::Transmitter* tx = nullptr;        // the check in flight's queue pair
    signal::Transmitter* again_tx = nullptr;  // the last ring's while it was in flight
    uint64_t tag = 0;
    bool in_flight = false;
    bool again = false;
    std::vector<uint8_t> want;        // threads this check is for
    std::vector<uint8_t> want_again;  // threads rung while it was in flight
  };
  void post(int rank, Peer& p);
  void answer(int rank, Peer& p);
  uint8_t* slot(int rank) const;

  Invoker& inv_;
  int threads_;
  memory::RDMAMemory slots_;  // each process's bells as last read, a block per process
  std::vector<Peer> peers_;
  int in_flight_ = 0;
};

}  // namespace loom::invoke
