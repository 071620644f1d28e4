#pragma once
// Transmitter: a queue pair shared by many threads, with automatic selective signaling and
// flush numbers (seed 000 §4.1). docs/selective-signaling.md gives the argument in full.
//
//  * Credits are tickets (ticket_pool.hpp): the send queue's `depth` entries are a main pool of
//    depth - R tickets for any post and a reserve of R for signaled posts made while the main
//    pool is spent. A post holds a ticket from before it touches the QP until a signaled
//    completion that is provably later in the QP's order is polled, so the send queue never
//    overflows. Drawing and giving back tickets are one fetch-and-add each.
//  * Batches: a post that returned is counted into `since` (posts not yet covered by a signal);
//    a signaled post takes that count with one exchange and carries it in its wr_id, returning
//    exactly those tickets when polled. A post is counted only after it returned, so it is before
//    the signaled WR in the QP's order and done when it is.
//  * Flush numbers: signaled posts draw issue numbers; completed_flush() is the largest issue
//    number seen completed. A post's tag is the issue count read after it returned; any larger
//    issue number was drawn later, so its WR was posted later, so its completion proves the
//    tagged post done: the buffer is reusable once completed_flush() > tag.
//  * Lanes: each thread keeps a few tickets and its own not-yet-published count, so an
//    unsignaled post costs no atomic read-modify-write at all; a lane refills (and publishes
//    its count) with one fetch-and-add per block. Lanes hold at most half the queue between them.
//  * Progress: a thread whose ticket is not yet valid polls the shared CQ itself and, when no
//    signaled post is in flight, posts a signaled marker from the reserve that covers what is
//    published. Every post, lane return and poll finishes in a bounded number of its own steps
//    (wait-free); the one wait is for the fabric to complete posts (docs/selective-signaling.md).
//  * Offloading (Config::offloader): posts go to a command queue instead (docs/offloading.md).
//  * Single-thread QPs (QpCaps::single_thread): the QP's promise of one poster at a time binds
//    the whole transmitter: post, progress, wait and flush come from one thread at a time (the
//    QP's owner). It then keeps one lane of its own instead of one per thread and updates its
//    counters without locked instructions. completed_flush() may still be read anywhere.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/memory/circular_allocator.hpp"
#include "loom/dsm/signal/ticket_pool.hpp"

namespace loom::signal {

namespace offload {
class Channel;
class Offloader;
}  // namespace offload

struct Posted {
  fabric::PostResult result = fabric::PostResult::Ok;
  uint64_t tag = 0;  // flush tag: complete once completed_flush() > tag
  bool ok() const { return result == fabric::PostResult::Ok; }
};

class Transmitter : public memory::FlushSource {
 public:
  struct Config {
    uint32_t signal_interval = 0;  // 0: a quarter of the send-queue depth
    // Credits a thread takes at once; 0 disables lanes. Unset: D/8 up to 64, which gives two
    // batching threads up to D = 512 and D/256 beyond (lanes hold at most D/2 between them).
    std::optional<uint32_t> lane_block;
    bool auto_inline = true;        // small WRITE/SEND payloads go inline where the QP says it helps
    // Offloading (docs/offloading.md): posts go to a command queue that the offloader's executor
    // thread posts from, and its completer polls the send CQ. nullptr: direct injection, each
    // thread posting itself. The offloader must outlive the Transmitter.
    offload::Offloader* offloader = nullptr;
    // The mesh way this Transmitter belongs to (Mesh, LOOM_QPS_PER_PEER): offloaded, the
    // offloader's executor-completer pair way % workers serves it.
    uint32_t way = 0;
  };
  // The transmitter owns the QP's send completions: every post on `qp` must go through it, and
  // `send_cq` must serve this QP alone.
  Transmitter(fabric::QueuePair& qp, fabric::CompletionQueue& send_cq, Config cfg);
  Transmitter(fabric::QueuePair& qp, fabric::CompletionQueue& send_cq) : Transmitter(qp, send_cq, Config{}) {}
  ~Transmitter();
  Transmitter(const Transmitter&) = delete;
  using FlushSource::completed_flush;
  Transmitter& operator=(const Transmitter&) = delete;

  // Posts `wr` (its wr_id and signaled fields are the Transmitter's). Thread-safe; never waits
  // for another thread to act. `force_signal` makes this post signaled.
  Posted post(const fabric::SendWr& wr, bool force_signal = false) {
    if (channel_) return post_offloaded(wr, force_signal);
    if (goes_inline(wr)) {
      // Small payloads travel inside the request: no DMA read of the source on a NIC, no local
      // key check on shm.
      fabric::SendWr in;
      copy_fields(in, wr);
      in.inline_data = true;
      return post_lane(in, force_signal);
    }
    return post_lane(wr, force_signal);
  }

  struct Lane;  // a thread's credits and counts, below

  // A one-sided WRITE, as post() of SendWr{Write, local, remote_addr, rkey} posts it, without a
  // work request to build: on the common path the arguments go to the QP in registers
  // (QueuePair::post_write). A request is a dozen stores, and from 64-byte WRITEs up stores are
  // what a post runs short of.
  Posted write(fabric::Sge local, uint64_t remote_addr, uint32_t rkey) {
    const bool inline_data = local.length != 0 && local.length <= inline_limit_;
    if (channel_) return post_offloaded(fabric::write_request(local, remote_addr, rkey, inline_data), false);
    Lane& l = lane();
    if (l.credits > 0) return on_credit(l, qp_.post_write(local, remote_addr, rkey, inline_data));
    fabric::SendWr wr = fabric::write_request(local, remote_addr, rkey, inline_data);
    return post_slow(wr, l, false);
  }

 private:
  // Small WRITE/SEND payloads travel inside the request where the QP says it helps.
  bool goes_inline(const fabric::SendWr& wr) const {
    return inline_limit_ != 0 && !wr.inline_data && wr.local.length != 0 && wr.local.length <= inline_limit_ &&
           (wr.opcode == fabric::Opcode::Write || wr.opcode == fabric::Opcode::Send || wr.opcode == fabric::Opcode::WriteWithImm);
  }
  // Field by field, each at its own width: callers build the request just before posting it, and
  // a wide copy reading across their narrow stores stalls on store forwarding (a few ns a post).
  [[gnu::always_inline]] static void copy_fields(fabric::SendWr& to, const fabric::SendWr& from) {
    to.wr_id = from.wr_id;
    to.opcode = from.opcode;
    to.signaled = from.signaled;
    to.inline_data = from.inline_data;
    to.local.addr = from.local.addr;
    to.local.length = from.local.length;
    to.local.lkey = from.local.lkey;
    to.remote_addr = from.remote_addr;
    to.rkey = from.rkey;
    to.imm = from.imm;
    to.compare_add = from.compare_add;
    to.swap = from.swap;
  }
  // The fast path's bookkeeping after an unsignaled post made on one of the lane's credits
  // (`r` is its result; the credit is spent only if the QP accepted it): no shared writes. The
  // credit spent is the count too: settle() turns the credits used since the lane last settled
  // into `unpublished`, so this path writes one counter, not two.
  [[gnu::always_inline]] Posted on_credit(Lane& l, fabric::PostResult r) {
    if (r != fabric::PostResult::Ok) return Posted{r, 0};
    --l.credits;
    return Posted{r, issued_.load(std::memory_order_acquire)};
  }
  Posted post_lane(const fabric::SendWr& wr, bool force_signal) {
    Lane& l = lane();
    if (!force_signal && l.credits > 0 && wr.wr_id == 0 && !wr.signaled) return on_credit(l, qp_.post_send(wr));
    fabric::SendWr copy;
    copy_fields(copy, wr);
    return post_slow(copy, l, force_signal);
  }

 public:

  bool complete(uint64_t tag) const { return completed_flush() > tag; }
  // complete(tag) without waiting: polls once and, when no signaled post after the tagged one
  // has been issued, posts a flush marker (as wait() does), so that a later test finds it done.
  bool test(uint64_t tag);
  // Whether posts go through an offloader's command queue (Config::offloader).
  bool offloaded() const { return channel_ != nullptr; }
  // Polls the send CQ once; returns the number of completions handled.
  int progress();
  // Returns once the post tagged `tag` has completed.
  void wait(uint64_t tag);
  // Returns once every post of this thread so far has completed (and returns its lane's credits).
  void flush();

  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  fabric::Status last_error() const { return static_cast<fabric::Status>(last_error_.load(std::memory_order_relaxed)); }
  // Called (on the polling thread) for every error completion.
  void set_error_handler(std::function<void(const fabric::Completion&)> h);

  fabric::QueuePair& qp() { return qp_; }
  // The QP's remote_pointer, except when offloaded: stores through a mapping would overtake
  // requests still in the command queue (on shared memory a request is otherwise done when its
  // post returns, and callers that mix the two rely on that), so offloaded, every request goes
  // through the queue.
  uint8_t* remote_pointer(uint64_t remote_addr, uint32_t rkey, uint64_t len, uint32_t access) {
    return channel_ ? nullptr : qp_.remote_pointer(remote_addr, rkey, len, access);
  }
  fabric::CompletionQueue& cq() { return cq_; }
  uint32_t depth() const { return depth_; }
  uint32_t signal_interval() const { return interval_; }
  // Counters; posts() is exact once the posting threads have flushed or exited.
  uint64_t posts() const;
  // Every issue number belongs to a signaled post, except those of posts the QP refused.
  uint64_t signaled_posts() const;
  // One line of state for diagnostics.
  std::string describe() const;
  int64_t credits() const;

  // Per-thread state; public only for the thread-local cache that holds it.
  struct Lane {
    uint32_t credits = 0;      // valid tickets drawn from the main pool, not yet spent
    uint32_t settled = 0;      // `credits` when `unpublished` was last brought up to date
    uint32_t unpublished = 0;  // posts returned, not yet counted into `since` (after settle())
    uint32_t pending = 0;      // tickets drawn, not yet known valid: the last `pending` below pending_end
    uint64_t pending_end = 0;
    uint64_t posts = 0;        // published, not yet added to posts_
    bool batching = false;
  };
  // Counts the fast path's posts (credits spent since the last settle) into `unpublished`.
  static void settle(Lane& l) {
    l.unpublished += l.settled - l.credits;
    l.settled = l.credits;
  }
  // Gives a lane's credits, counts and statistics back (thread exit, cache eviction, flush).
  void return_lane(Lane& lane);
  uint64_t id() const { return id_; }

  // The most shared read-modify-writes (compare-and-swap failures included) one operation of
  // this thread took: a post's slow path (its waits for a valid ticket excluded: those are
  // polls, counted in `waiting_polls`), one progress() call, one lane return. The bound each
  // stays under is the wait-freedom argument (docs/selective-signaling.md); tests read them.
  struct Steps {
    uint64_t post = 0;
    uint64_t progress = 0;
    uint64_t lane_return = 0;
    uint64_t waiting_polls = 0;  // polls made while a drawn ticket was not yet valid (the fabric's time)
    uint64_t slow_posts = 0;
  };
  static Steps& steps_of_this_thread();

  // A thread's lanes, one per transmitter it posts on. Trivially destructible, so that access is
  // a plain thread-local load; a separate guard object hands lanes back when the thread exits.
  struct LaneCache {
    static constexpr int kSlots = 16;
    uint64_t ids[kSlots];
    Lane lanes[kSlots];
    int hint;
    int evict;
  };

 private:
  static constinit thread_local LaneCache t_lanes_;

 public:
  static LaneCache& lane_cache_of_this_thread() { return t_lanes_; }
  // Registers this thread's lane reaper now (registering it allocates): a thread whose first
  // post may come from a signal handler (a region fault asking for a downgrade) calls this
  // beforehand. The runtime does it for its main thread and the threads it spawns.
  static void prepare_this_thread();

 private:
  Lane& lane() {
    // A single-thread QP has one poster, so its transmitter has one lane and no lookup.
    if (single_thread_) return own_lane_;
    LaneCache& c = t_lanes_;
    if (c.ids[c.hint] == id_) return c.lanes[c.hint];
    return lane_slow();
  }
  Lane& lane_slow();
  // One thread on a single-thread QP: a plain read-modify-write (no lock prefix); else atomic.
  uint64_t add(std::atomic<uint64_t>& a, uint64_t d) {
    if (!single_thread_) return a.fetch_add(d, std::memory_order_acq_rel);
    uint64_t v = a.load(std::memory_order_relaxed);
    a.store(v + d, std::memory_order_release);
    return v;
  }
  Posted post_slow(fabric::SendWr& wr, Lane& lane, bool force);
  // Where a post's ticket came from, and so where its refusal gives it back.
  enum class Source : uint8_t { Lane, Pool, Reserve };
  // The signaled post's wr_id and bookkeeping: takes the published count and the lane's own,
  // draws an issue number; `batch` is what the completion returns to the main pool.
  uint64_t make_signaled(Lane& l, Source src, uint64_t& batch);
  // After the QP refused a post: its ticket and the count it carried go back.
  Posted refused(Lane& l, Source src, bool signaled, uint64_t batch, fabric::PostResult r);
  void use_valid_pending(Lane& l);
  void publish(Lane& l);
  void wait_for_ticket(uint64_t ticket, Lane& l);
  void wait_for_reserve(uint64_t ticket);
  bool post_reserve_marker();  // false: the QP refused it
  bool wants_signal(const Lane& l) const {
    return since_.load(std::memory_order_relaxed) + l.unpublished + 1 >= interval_;
  }
  bool signal_in_flight() const { return signals_out_.load(std::memory_order_acquire) != 0; }
  void post_marker();
  Posted post_offloaded(const fabric::SendWr& wr, bool force_signal);

  // For the offload channel: an error completion (or a post the QP refused, `refused` its
  // reason) to the handler or the log, and the flush number raised.
  friend class offload::Channel;
  void report_error(const fabric::Completion& c, const char* refused);
  void raise_flush(uint64_t to) { advance_flush(to); }

  fabric::QueuePair& qp_;
  fabric::CompletionQueue& cq_;
  uint64_t id_;
  uint32_t depth_;
  uint32_t interval_;
  uint32_t reserve_;  // tickets of the reserve pool; the main pool has depth_ - reserve_
  uint32_t block_;
  uint32_t max_lanes_;
  uint32_t inline_limit_ = 0;
  bool single_thread_ = false;
  Lane own_lane_;  // single_thread_ only

  // The send queue's entries: tickets any post may spend, and the reserve only signaled posts
  // made while the main pool is spent take. Drawn by posts and lane refills, given back by polls
  // (a completion's batch), lane returns (unspent tickets) and refusals.
  TicketPool pool_;
  TicketPool reserve_pool_;
  // Posts returned and not yet covered by a signal: raised by publishing lanes (add), taken
  // whole by a signaled post (exchange). acq_rel both ways; what it orders is the QP's business.
  alignas(64) std::atomic<uint64_t> since_{0};
  // Signaled posts made and not yet polled (or refused): a waiter posts a reserve marker only
  // when it reads 0 (acquire, pairing with the poll's release).
  std::atomic<uint64_t> signals_out_{0};
  // Issue numbers drawn by signaled posts (add, acq_rel) before they are posted. A tag is read
  // (acquire) after this thread's own post returned: it pairs with the draw of every signaled
  // post it counts, so any issue above it was drawn, and posted, after ours.
  alignas(64) std::atomic<uint64_t> issued_{0};
  alignas(64) std::atomic<uint64_t> posts_{0};
  std::atomic<uint64_t> unposted_issues_{0};  // issue numbers drawn by posts the QP refused
  std::atomic<uint32_t> lanes_{0};  // batching lanes: a bound (max_lanes_); publishes nothing else
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint8_t> last_error_{0};
  std::mutex handler_mu_;
  std::function<void(const fabric::Completion&)> on_error_;
  std::unique_ptr<offload::Channel> channel_;  // offloading; last, so that it goes first
};

}  // namespace loom::signal
