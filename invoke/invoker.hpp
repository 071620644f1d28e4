#pragma once
// The remote invocation subsystem (seed 000 §4.4): Messengers (one-sided channels from a sender
// thread to a destination thread, with sender-controlled chunks in the receiver's memory),
// Inboxes (the receiving side of one destination thread), Synchronizers and return slots.
// The primitives (call, call_buffer, call_return, broadcast) are in invoke/calls.hpp; the
// Aggregator in invoke/aggregator.hpp; docs/invocation.md is the user guide and
// docs/invocation-protocol.md the wire protocol.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <tbb/concurrent_queue.h>

#include "dsm/common/error.hpp"
#include "dsm/memory/circular_allocator.hpp"
#include "dsm/runtime/runtime.hpp"
#include "dsm/signal/backoff.hpp"
#include "invoke/registry.hpp"
#include "invoke/wire.hpp"

namespace loom::invoke {

// A destination: thread `index` (0 .. threads per process - 1) of process `rank`.
struct Thread {
  int rank = -1;
  int index = 0;
  bool operator==(const Thread&) const = default;
};

// When a Synchronizer is decremented for a call.
enum class Notify {
  Transmitted,  // the call has left the sender (its record was posted to the fabric)
  Executed,     // the destination has run it (fabric FETCH_ADD on the Synchronizer's word)
};

// What a one-sided call does when the Messenger is at its chunk limit and the receiver is behind.
enum class OnFull {
  Fail,        // return false
  Retry,       // block until space frees (running this thread's own incoming calls meanwhile)
  RetryAsync,  // queue it; helper threads (or this thread's later calls) finish it, in FIFO order
};

struct Config {
  size_t chunk_size = size_t{256} << 10;  // bytes per chunk in the receiver
  uint32_t chunks_per_request = 2;        // chunks obtained per service call (initial and growth)
  uint32_t max_chunks = 16;               // per Messenger
  uint32_t helpers = 0;                   // process-level helper threads
  uint32_t send_queue_depth = 256;
  // Where the provider can map the receiver's chunks (shm; QueuePair::remote_pointer), calls
  // are serialized straight into them and published with a release store of the record's
  // tail, instead of staged and sent with RDMA WRITE. Off: every provider takes the WRITE path.
  bool direct = true;
  // Reads LOOM_INVOKE_CHUNK_SIZE, LOOM_INVOKE_CHUNKS, LOOM_INVOKE_MAX_CHUNKS, LOOM_INVOKE_HELPERS,
  // LOOM_INVOKE_DIRECT.
  static Config from_env();
};

class Invoker;
class Messenger;
class MessengerGlobal;

// A counter decremented by calls (seed 000's Synchronizer). It lives in registered memory so
// that an Executed-mode notification is one fabric FETCH_ADD from the destination.
class Synchronizer {
 public:
  explicit Synchronizer(int64_t count = 1);
  ~Synchronizer();
  Synchronizer(const Synchronizer&) = delete;
  Synchronizer& operator=(const Synchronizer&) = delete;

  int64_t count() const { return static_cast<int64_t>(std::atomic_ref<uint64_t>(*word_).load(std::memory_order_acquire)); }
  bool done() const { return count() <= 0; }
  // Raises the count (before new calls); never while calls that notify it are in flight.
  void add(int64_t n) { std::atomic_ref<uint64_t>(*word_).fetch_add(static_cast<uint64_t>(n), std::memory_order_acq_rel); }
  // Returns once the count reaches zero. Meanwhile flushes this thread's aggregated calls and
  // runs the calls addressed to this thread, so two threads waiting on each other progress.
  void wait();

  // Internal: local decrement (Transmitted) and the descriptor for remote ones (Executed).
  void transmitted() { std::atomic_ref<uint64_t>(*word_).fetch_sub(1, std::memory_order_acq_rel); }
  wire::NotifyDesc notify_desc() const;

 private:
  memory::RDMAMemory mem_;
  uint64_t* word_;
};

namespace detail {
// A registered slot the destination writes a result into with one RDMA WRITE: the value, then
// an 8-byte stamp placed last (a notified flag, seed 002).
class ReturnSlotBase {
 public:
  explicit ReturnSlotBase(size_t value_size);
  ~ReturnSlotBase();
  ReturnSlotBase(const ReturnSlotBase&) = delete;
  ReturnSlotBase& operator=(const ReturnSlotBase&) = delete;
  // Prepares for one call: returns the descriptor it carries.
  wire::ReturnDesc arm();
  bool ready() const;
  void wait() const;  // drives this thread's progress meanwhile
  const void* value() const { return mem_.addr; }

 private:
  memory::RDMAMemory mem_;
  size_t size_;
  uint64_t stamp_ = 0;
};
}  // namespace detail

// Where call_return puts R (trivially copyable).
template <typename R>
class ReturnSlot : public detail::ReturnSlotBase {
  static_assert(std::is_trivially_copyable_v<R>, "call_return results must be trivially copyable");

 public:
  ReturnSlot() : ReturnSlotBase(sizeof(R)) {}
  // Waits for the result of the last call_return into this slot.
  R get() const {
    wait();
    R r;
    std::memcpy(&r, value(), sizeof r);
    return r;
  }
};

// A frame to be written: everything the primitives need to serialize one call. The
// descriptors are held by value, so a FrameSpec can be built by one function and sent by another.
struct FrameSpec {
  uint32_t fid = 0;
  wire::Kind kind = wire::Kind::Call;
  bool has_notify = false;
  wire::NotifyDesc notify{};
  size_t desc_len = 0;
  alignas(8) uint8_t desc[32] = {};  // the kind's descriptor (wire.hpp)
  const void* captures = nullptr;
  size_t capture_len = 0;
  const void* buffer = nullptr;
  size_t buffer_len = 0;
  const uint8_t* raw = nullptr;  // a whole frame already serialized (broadcast forwarding)
  size_t raw_len = 0;

  template <typename D>
  void set_desc(const D& d) {
    static_assert(sizeof(D) <= sizeof(desc) && sizeof(D) % 8 == 0);
    std::memcpy(desc, &d, sizeof d);
    desc_len = sizeof d;
  }
  void set_notify(const wire::NotifyDesc& n) {
    notify = n;
    has_notify = true;
  }

  size_t bytes() const {
    if (raw) return raw_len;
    return wire::kFrameHeader + (has_notify ? sizeof(wire::NotifyDesc) : 0) + desc_len + wire::pad8(capture_len) +
           wire::pad8(buffer_len);
  }
  // Serializes straight into the (registered) destination.
  void fill(uint8_t* p, size_t n) const {
    if (raw) {
      std::memcpy(p, raw, raw_len);
      return;
    }
    uint64_t w = wire::frame_word(fid, kind, has_notify, n);
    std::memcpy(p, &w, 8);
    p += 8;
    if (has_notify) {
      std::memcpy(p, &notify, sizeof notify);
      p += sizeof notify;
    }
    if (desc_len) {
      std::memcpy(p, desc, desc_len);
      p += desc_len;
    }
    put(p, captures, capture_len);
    if (buffer_len) put(p, buffer, buffer_len);
  }

 private:
  static void put(uint8_t*& p, const void* src, size_t len) {
    size_t padded = wire::pad8(len);
    if (padded != len) std::memset(p + padded - 8, 0, 8);
    if (len) std::memcpy(p, src, len);
    p += padded;
  }
};

// The sending side of one channel: this thread to one destination thread (seed 000 §4.4.1).
// Owned by one sender thread; helper threads touch it only to finish RetryAsync calls, under
// its lock and only while the owner is not blocked in it.
class Messenger {
 public:
  Messenger(Invoker& inv, Thread dest, uint64_t serial);
  ~Messenger();
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;

  Thread dest() const { return dest_; }
  // Writes one frame. flush_at = 0 sends it at once (write mode); otherwise frames accumulate in
  // one record until it holds flush_at bytes (trad aggregation) or flush() is called.
  bool call(const FrameSpec& f, OnFull on_full, size_t flush_at = 0, Synchronizer* transmitted = nullptr) {
    // The aggregating fast path: one more frame into the open record.
    if (open_ && transmitted == nullptr && !blocked_ && !async_pending_.load(std::memory_order_acquire)) {
      size_t n = f.bytes();
      if (used_ + n + 8 <= cap_) {
        f.fill(rec_ + used_, n);
        used_ += n;
        if (used_ + 8 >= flush_at) flush();
        return true;
      }
    }
    return call_slow(f, on_full, flush_at, transmitted);
  }
  // Sends the open record, if any.
  void flush();
  bool has_open_record() const { return open_; }
  // A frame prepared elsewhere as a whole record (head, frame, tail) in registered memory:
  // sent in place (head and tail stamped now) if there is room; false otherwise.
  bool send_record(const memory::RDMAMemory& rec, size_t len);
  // Finishes queued RetryAsync calls as far as space allows; returns true if none remain.
  bool drain_async();
  bool async_pending() const { return async_pending_.load(std::memory_order_acquire); }
  // Frees retired records whose writes completed.
  void reclaim();

  size_t chunks() const { return ring_.size(); }
  size_t max_frame() const;
  uint64_t records() const { return records_; }
  uint64_t growths() const { return growths_; }
  uint64_t consumed() const;
  uint64_t offset() const { return g_; }

 private:
  struct Slot {
    uint64_t addr;
    uint32_t rkey;
    uint64_t closed_at;  // global offset at which this chunk was last closed (0: never)
    uint8_t* direct;     // the chunk mapped here (Config::direct), or nullptr: RDMA WRITE
  };
  bool call_slow(const FrameSpec& f, OnFull on_full, size_t flush_at, Synchronizer* transmitted);
  bool setup();
  bool chunk_free(size_t j) const { return ring_[j].closed_at <= consumed(); }
  std::vector<Slot> allocate_chunks(uint32_t count, bool first);
  uint8_t* reserve(size_t n, size_t flush_at);
  bool open_record(size_t n, size_t flush_at);
  bool rotate(size_t need);
  // Writes len bytes at `offset` of the current chunk, the last 8 last: in place where the
  // chunk is mapped here, else by one RDMA WRITE — from `src` (registered, sets *tag) or inline
  // when src is null (small control words).
  void place(size_t offset, const uint8_t* bytes, size_t len, const memory::RDMAMemory* src, uint64_t* tag = nullptr);
  bool enqueue_async(const FrameSpec& f, size_t n, Synchronizer* transmitted);

  Invoker& inv_;
  Thread dest_;
  uint64_t serial_;
  signal::Transmitter& tx_;
  size_t chunk_size_;
  std::vector<Slot> ring_;
  size_t cur_ = 0;
  size_t pos_ = 0;
  uint64_t g_ = wire::kChunkHeader;  // global offset of the next record (never 0: 0 means "never closed")
  memory::RDMAMemory control_;      // the receiver pushes its consumed offset here
  memory::LinearCircularAllocator staging_;

  // The open record: frames are serialized directly into it — in the receiver's chunk when it
  // is mapped here, else in registered staging memory that one WRITE sends.
  bool open_ = false;
  uint8_t* rec_ = nullptr;
  memory::LinearCircularAllocator::Segment seg_;
  size_t used_ = 0;
  size_t cap_ = 0;
  size_t min_record_ = 0;
  std::vector<Synchronizer*> batch_syncs_;

  // RetryAsync queue (records in registered memory, stamped when sent).
  struct Queued {
    memory::RDMAMemory rec;
    size_t len;
    Synchronizer* transmitted;
  };
  std::mutex mu_;
  std::deque<Queued> async_;
  std::atomic<bool> async_pending_{false};
  bool blocked_ = false;  // owner is inside a Retry wait (helpers keep off)
  std::deque<std::pair<uint64_t, memory::RDMAMemory>> retired_;

  uint64_t records_ = 0;
  uint64_t growths_ = 0;
  friend class Invoker;
};

// One sender thread's Messengers, created on first use of each destination (seed 000's
// RDMAMessengerGlobal).
class MessengerGlobal {
 public:
  MessengerGlobal(Invoker& inv, uint64_t id) : inv_(inv), id_(id) {}
  inline Messenger& to(Thread dest);
  void flush();
  bool drain_async();
  // No open record and nothing queued: everything this thread called has been handed to the fabric.
  bool quiet() const;
  std::vector<std::unique_ptr<Messenger>>& all() { return messengers_; }

 private:
  Invoker& inv_;
  uint64_t id_;
  Messenger& create(Thread dest);
  std::vector<std::unique_ptr<Messenger>> messengers_;  // by global thread id
};

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
  void deliver_send(int src_rank, std::vector<std::byte> frame);
  int index() const { return index_; }
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
  void run_frame(const uint8_t* f, size_t len, int src_rank, bool nested);
  bool lookup(uint32_t id, const Entry** e);
  void notify(const wire::NotifyDesc& d);
  void forward_broadcast(const uint8_t* f, size_t len, uint32_t root);

  Invoker& inv_;
  int index_;
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::unordered_map<uint64_t, Channel*> by_sender_;
  tbb::concurrent_queue<Announcement> announced_;
  std::atomic<uint64_t> announced_n_{0};
  uint64_t announced_seen_ = 0;
  tbb::concurrent_queue<std::pair<int, std::vector<std::byte>>> sends_;
  std::atomic<uint64_t> sends_n_{0};
  uint64_t sends_seen_ = 0;
  memory::RDMAMemory scratch_;  // landing word for notification FETCH_ADDs
  std::unordered_map<uint32_t, Entry> cache_;
  uint32_t last_id_ = 0;
  const Entry* last_entry_ = nullptr;
  std::vector<std::unique_ptr<memory::LinearCircularAllocator>> return_staging_;  // per rank
  friend class Invoker;
};

// The process-level invocation runtime. Collective construction and destruction.
class Invoker {
 public:
  explicit Invoker(Runtime& rt, Config cfg = Config::from_env());
  ~Invoker();
  Invoker(const Invoker&) = delete;
  Invoker& operator=(const Invoker&) = delete;

  static Invoker& current();

  Runtime& runtime() { return rt_; }
  const Config& config() const { return cfg_; }
  int threads() const { return threads_; }
  int total_threads() const { return threads_ * ranks_; }
  int gid(Thread t) const { return t.rank * threads_ + t.index; }
  Thread thread_of(int gid) const { return Thread{gid / threads_, gid % threads_}; }
  // The calling thread as a destination (its Runtime thread index must be < threads()).
  Thread self() const;
  void check(Thread t) const {
    if (static_cast<unsigned>(t.rank) >= static_cast<unsigned>(ranks_) ||
        static_cast<unsigned>(t.index) >= static_cast<unsigned>(threads_))
      check_failed(t);
  }

  // Runs the calls addressed to this thread (or to thread `index`, from a helper).
  int poll();
  int poll(int index);
  // Flushes this thread's open records, finishes its queued async calls where possible, runs
  // its incoming calls.
  int progress();
  // Waits (running this thread's calls) until pred() holds.
  template <typename Pred>
  void wait_until(Pred pred) {
    signal::Backoff b;
    uint64_t idle = 0;
    while (!pred()) {
      if (progress() > 0) {
        b.reset();
        idle = 0;
      } else {
        b.pause();
        if (++idle == kStallReport) report_stall();
      }
    }
  }
  // One line per channel of this process: for a stalled wait, and for debugging.
  std::string describe();

  // This thread's (a thread-local pointer, checked against this Invoker's serial).
  MessengerGlobal& messengers() {
    if (t_global_.serial == serial_) return *t_global_.global;
    return messengers_slow();
  }
  void flush();                    // this thread's open records

  signal::Transmitter& tx(int rank) { return mesh_->tx(rank); }
  Inbox& inbox(int index) { return *inboxes_.at(static_cast<size_t>(index)); }
  memory::RegisteredHeap& heap() { return rt_.heap(); }

  // Receiver-side errors (unknown function ids, malformed calls): counted, reported, survived.
  uint64_t bad_calls() const { return bad_calls_.load(std::memory_order_relaxed); }
  std::string last_error() const;
  void report(const std::string& what);

  // Internal: messengers with queued RetryAsync calls, for the helpers.
  void note_async(Messenger* m);
  uint64_t serial() const { return serial_; }
  uint64_t next_messenger_serial() { return next_serial_.fetch_add(1, std::memory_order_relaxed); }
  uint32_t chunks_function() const { return chunks_fn_; }
  uint32_t send_function() const { return send_fn_; }

 private:
  [[noreturn]] void check_failed(Thread t) const;
  MessengerGlobal& messengers_slow();
  struct TlsGlobal {
    uint64_t serial;
    MessengerGlobal* global;
  };
  static inline thread_local TlsGlobal t_global_{0, nullptr};
  static constexpr uint64_t kStallReport = 5000;  // idle rounds (~5 s of 1 ms sleeps)
  void report_stall();
  void helper_loop(int which);
  void drain_async_all();

  Runtime& rt_;
  Config cfg_;
  int ranks_;
  int threads_;
  uint64_t serial_;
  std::unique_ptr<Mesh> mesh_;
  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::mutex globals_mu_;
  std::vector<std::unique_ptr<MessengerGlobal>> globals_;
  std::atomic<uint64_t> next_serial_{1};
  std::mutex async_mu_;
  std::vector<Messenger*> async_;
  std::atomic<uint64_t> async_n_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> helpers_;
  std::atomic<uint64_t> bad_calls_{0};
  mutable std::mutex err_mu_;
  std::string last_error_;
  uint32_t chunks_fn_ = 0;
  uint32_t send_fn_ = 0;
};

inline Messenger& MessengerGlobal::to(Thread dest) {
  inv_.check(dest);
  size_t g = static_cast<size_t>(inv_.gid(dest));
  if (g < messengers_.size() && messengers_[g]) return *messengers_[g];
  return create(dest);
}

}  // namespace loom::invoke
