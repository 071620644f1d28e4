#pragma once
// Invoker::barrier (docs/invocation.md, "Barriers"): every worker thread of every process
// arrives; it returns once every call made anywhere before its callers arrived — and every call
// those calls made in turn — has run. Waiting threads keep running the calls addressed to them.
//
// Termination is detected with Mattern's four counters: each process counts the calls its
// threads made (sent) and ran (executed); waves gather every process's counts by dissemination;
// the barrier ends at wave k when the executed total of wave k-1 equals the sent total of wave
// k (then at the end of wave k-1 every call ever made had run, and no thread makes calls in the
// barrier but the calls it runs).
#include <atomic>
#include <cstdint>
#include <source_location>
#include <vector>

#include "loom/dsm/memory/rdma_allocator.hpp"
#include "loom/dsm/runtime/remote_memory.hpp"

namespace loom::invoke {

class Invoker;

class CallBarrier {
 public:
  // Collective, inside the Invoker's construction (its mesh exists).
  explicit CallBarrier(Invoker& inv);
  ~CallBarrier();
  CallBarrier(const CallBarrier&) = delete;
  CallBarrier& operator=(const CallBarrier&) = delete;

  // Called by every worker thread (0 .. threads per process - 1) of every process.
  void arrive(const std::source_location& where);

  struct Counts {
    uint64_t sent = 0;
    uint64_t executed = 0;
    uint64_t ticket = 0;  // the process's collective call (runtime::Collectives::ticket_of)
  };

 private:
  void lead(const std::source_location& where);  // the last thread of this process to arrive: the waves
  std::vector<Counts> wave(Counts mine);
  void exchange(int round, uint64_t epoch, std::vector<Counts>& all, std::vector<uint8_t>& known);
  size_t slot_bytes() const;
  uint64_t slot_offset(int round, int parity) const;
  // Waits until *flag (written by `peer`) is `want`, running this thread's calls meanwhile.
  void wait_for_flag(int peer, uint64_t* flag, uint64_t want);

  Invoker& inv_;
  int ranks_;
  int rounds_;
  memory::RDMAMemory mail_;  // rounds x 2 parities of slots: [counts x ranks][known x ranks][flag]
  memory::RDMAMemory out_;   // what this process writes into a partner's slot
  std::vector<RemoteMemoryLocator> peers_;  // every process's mail_
  uint64_t epoch_ = 0;                      // waves so far (the leader's)
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> generation_{0};  // barriers completed in this process
};

}  // namespace loom::invoke
