#pragma once
// The receiving side of remote invocation: one Inbox per destination thread holds its channels
// (the chunks senders announced), the calls that arrived by SEND, and the decoders that run
// frames. inbox.cpp: channels and polling; dispatch.cpp: one decoder per wire kind.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <tbb/concurrent_queue.h>

#include "loom/dsm/memory/circular_allocator.hpp"
#include "loom/invoke/checks.hpp"
#include "loom/invoke/registry.hpp"
#include "loom/invoke/wire.hpp"

namespace loom::invoke {
class Invoker;
}

namespace loom::invoke {

// The receiving side of one destination thread: its channels, announced chunks, and calls that
// arrived by SEND. Polled by the thread itself or by a helper; never by two at once.
class Inbox {
 public:
  Inbox(Invoker& inv, int index);
  ~Inbox();
  // Runs the calls that arrived; returns how many ran. 0 if another thread is polling.
  int poll(int budget = 256);

  struct Announcement {
    uint64_t sender = 0;  // rank << 32 | serial
    uint64_t control_addr = 0;
    uint32_t control_rkey = 0;
    bool first = false;
    size_t chunk_size = 0;
    std::vector<memory::RDMAMemory> chunks;
  };
  void announce(Announcement a);
  // Where this thread's chunks live: the heap of its NUMA zone (seed 000: chunks in the zone of
  // the receiving thread; Runtime::thread_zone).
  memory::RegisteredHeap& chunk_heap();
  void deliver_send(int src_rank, std::vector<std::byte> frame);
  int index() const { return index_; }
  // Calls run so far (and bad calls skipped), for the barrier's counts.
  // Acquire: pairs with count_executed's release.
  uint64_t executed() const { return executed_.load(std::memory_order_acquire); }
  // After the calls ran, and after any calls they made were counted as sent (the barrier's
  // order); only the thread polling this inbox (busy_) writes it.
  void count_executed(uint64_t n) { executed_.store(executed_.load(std::memory_order_relaxed) + n, std::memory_order_release); }
  // Whether poll() would find something (a doorbell's sleeper looks once more before sleeping).
  bool has_incoming();
  // Whether the last poll that ran calls ran send-based ones (the polling thread's own view).
  bool took_sends_lately() const { return took_sends_.load(std::memory_order_relaxed); }
  // Teardown: takes every call that arrived but never ran, without running it (by function).
  Unrun discard_unrun();
  // Internal (call_return): writes a result back to the caller.
  void write_return(int src_rank, const wire::ReturnDesc& d, const void* value, size_t size);

 private:
  struct Channel {
    int src_rank;
    uint64_t sender;
    uint64_t control_addr;
    uint32_t control_rkey;
    size_t chunk_size;
    std::vector<memory::RDMAMemory> ring;
    std::deque<memory::RDMAMemory> pending;  // announced growth chunks, in allocation order
    size_t cur = 0;
    size_t pos = wire::kChunkHeader;
    uint64_t g = wire::kChunkHeader;
    bool broken = false;
  };
  void take_announcements();
  int poll_channel(Channel& c, int budget);
  void run_record(Channel& c, const uint8_t* rec, size_t len);
  struct Dispatch;  // dispatch.cpp: one decoder per wire kind
  friend struct Dispatch;
  // Whether the frame is done with (ran, or skipped as bad); false: its READ is in flight and the
  // call is among the pulls, counted when it runs.
  bool run_frame(const uint8_t* f, size_t len, int src_rank, bool nested);
  void report_bad_call(int src_rank, uint32_t fid, const std::string& why);
  // call_buffer's READ form with Async::Yes (pull.cpp): a call whose READ was posted and not
  // waited for; it runs at a later poll once the READ completed.
  struct Pull {
    const Entry* entry;
    uint32_t fid;
    int src_rank;
    std::vector<uint8_t> captures;
    memory::RDMAMemory pulled;  // this process's heap: the READ's landing buffer
    uint64_t tag;               // the READ's flush tag at the Transmitter to src_rank
    uint64_t errors;            // that Transmitter's error count when the READ was posted
    bool has_notify;
    wire::NotifyDesc nd;
  };
  void defer_pull(Pull p);
  int finish_pulls();
  void run_pull(Pull& p);
  void discard_pulls();
  void discard_frame(const uint8_t* f);
  bool lookup(uint32_t id, const Entry** e);
  void notify(const wire::NotifyDesc& d);
  void forward_broadcast(const uint8_t* f, size_t len, uint32_t root);

  Invoker& inv_;
  int index_;
  // One poller at a time: taken by test_and_set (acquire), let go by clear (release), so the
  // next poller sees the positions and counts (announced_seen_, sends_seen_) the last one left.
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  std::atomic<uint64_t> executed_{0};  // written by the one poller (busy_), read by the barrier
  std::vector<std::unique_ptr<Channel>> channels_;
  std::unordered_map<uint64_t, Channel*> by_sender_;
  tbb::concurrent_queue<Announcement> announced_;
  // Bumped after the push (seq_cst: before the bell is read, doorbell.hpp); the poller's acquire
  // load pairs with it, so the entries it counts are in the queue.
  std::atomic<uint64_t> announced_n_{0};
  uint64_t announced_seen_ = 0;
  // Send-based calls: pushed by the service thread, popped by the poller. A mutex and a deque, not
  // tbb::concurrent_queue: that queue's pages come from tbbmalloc, whose reuse TSan cannot see, and
  // it reported a push racing the pop that freed the page (tests/test_invoke.cpp, the send-based
  // tests after AsyncReadFormCallsInFlightAllRunOnTheirBytes, in the TSan build).
  struct SendQueue {
    std::mutex m;
    std::deque<std::pair<int, std::vector<std::byte>>> q;
    void push(std::pair<int, std::vector<std::byte>> v) {
      std::lock_guard lock(m);
      q.push_back(std::move(v));
    }
    bool try_pop(std::pair<int, std::vector<std::byte>>& out) {
      std::lock_guard lock(m);
      if (q.empty()) return false;
      out = std::move(q.front());
      q.pop_front();
      return true;
    }
  };
  SendQueue sends_;
  std::atomic<uint64_t> sends_n_{0};  // as announced_n_, for sends_
  uint64_t sends_seen_ = 0;
  std::atomic<bool> took_sends_{false};  // written by whichever thread polls (a helper too)
  memory::RDMAMemory scratch_;  // landing word for notification FETCH_ADDs
  std::unordered_map<uint32_t, Entry> cache_;
  uint32_t last_id_ = 0;
  const Entry* last_entry_ = nullptr;
  std::vector<std::unique_ptr<memory::LinearCircularAllocator>> return_staging_;  // per rank
  Unrun* discard_ = nullptr;  // set while discard_unrun runs
  std::deque<Pull> pulls_;    // in arrival order; only the poller (busy_) touches it
  friend class Invoker;
  friend struct InboxWireAccess;  // tests/fuzz/fuzz_invoke_channel.cpp: wire bytes into a channel
};

}  // namespace loom::invoke
