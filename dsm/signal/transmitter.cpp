#include "loom/dsm/signal/transmitter.hpp"

#include <algorithm>
#include <unordered_map>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/signal/offload/channel.hpp"

namespace loom::signal {

namespace {
constexpr uint64_t kMark = 1ull << 63;
constexpr int kIssueBits = 40;
constexpr uint64_t kIssueMask = (1ull << kIssueBits) - 1;
constexpr uint64_t kBatchMask = (1ull << 23) - 1;

inline uint64_t make_word(uint64_t since, uint64_t credits) { return (since << 32) | credits; }
inline uint64_t word_credits(uint64_t w) { return w & 0xffffffffu; }
inline uint64_t word_since(uint64_t w) { return w >> 32; }

// Live transmitters, so that a thread leaving (or evicting a lane) hands its lane back only to
// a transmitter that still exists.
std::mutex g_registry_mu;
std::unordered_map<uint64_t, Transmitter*>& registry() {
  static auto* r = new std::unordered_map<uint64_t, Transmitter*>();
  return *r;
}
std::atomic<uint64_t> g_next_id{1};

void hand_back(uint64_t id, Transmitter::Lane& lane) {
  std::lock_guard<std::mutex> g(g_registry_mu);
  auto it = registry().find(id);
  if (it != registry().end()) it->second->return_lane(lane);
}

}  // namespace

constinit thread_local Transmitter::LaneCache Transmitter::t_lanes_{};

namespace {
// Hands a thread's lanes back when it exits; touched when the thread takes its first lane.
struct LaneReaper {
  bool armed = false;
  ~LaneReaper() {
    Transmitter::LaneCache& c = Transmitter::lane_cache_of_this_thread();
    for (int i = 0; i < Transmitter::LaneCache::kSlots; ++i)
      if (c.ids[i] != 0) {
        hand_back(c.ids[i], c.lanes[i]);
        c.ids[i] = 0;
      }
  }
};
thread_local LaneReaper t_reaper;
}  // namespace

void Transmitter::prepare_this_thread() { t_reaper.armed = true; }

Transmitter::Transmitter(fabric::QueuePair& qp, fabric::CompletionQueue& send_cq, Config cfg)
    : qp_(qp), cq_(send_cq), id_(g_next_id.fetch_add(1)), depth_(qp.caps().max_send_wr) {
  if (depth_ < 2) fail("Transmitter: send queue depth ", depth_, " is too small (need at least 2)");
  if (depth_ > kBatchMask) fail("Transmitter: send queue depth ", depth_, " is too large");
  interval_ = cfg.signal_interval != 0 ? cfg.signal_interval : std::max<uint32_t>(1, depth_ / 4);
  if (interval_ > depth_ / 2) fail("Transmitter: signal interval ", interval_, " must be at most half the depth ", depth_);
  // Credits at or below the reserve go to signaled posts only, so one can always be made.
  reserve_ = std::max<uint32_t>(1, depth_ / 8);
  // Lanes may hold (cached + unpublished) at most half of the queue between them.
  // A lane takes the slow path (a CAS) once per block: larger blocks mean fewer slow paths but
  // fewer lanes; D/8, at most 64, measured best (bench/README.md, "lane block").
  block_ = cfg.lane_block ? *cfg.lane_block : std::clamp<uint32_t>(depth_ / 8, 1, 64);
  max_lanes_ = block_ == 0 ? 0 : (depth_ / 2) / (2 * block_);
  single_thread_ = qp.caps().single_thread;
  if (single_thread_) {
    // The only lane: it may take a signal interval's worth at once (cached plus unpublished then
    // stay within half the queue).
    block_ = std::max<uint32_t>(block_, std::min(interval_, depth_ / 4));
    max_lanes_ = 1;
    own_lane_.batching = block_ != 0;
    lanes_.store(own_lane_.batching ? 1 : 0);
  }
  word_.store(make_word(0, depth_));
  inline_limit_ = cfg.auto_inline && qp.inline_helps() ? qp.caps().max_inline : 0;
  if (cfg.offloader != nullptr) {
    inline_limit_ = std::min<uint32_t>(inline_limit_, offload::Command::kInlineBytes);
    channel_ = std::make_unique<offload::Channel>(*this, *cfg.offloader, depth_, interval_);
  }
  std::lock_guard<std::mutex> g(g_registry_mu);
  registry().emplace(id_, this);
}

Transmitter::~Transmitter() {
  if (channel_) {
    // Everything submitted completes before the queues go: the executor may still be posting.
    if (channel_->claimed() != 0) channel_->wait(channel_->claimed() - 1);
    channel_.reset();
  }
  std::lock_guard<std::mutex> g(g_registry_mu);
  registry().erase(id_);
}

void Transmitter::set_error_handler(std::function<void(const fabric::Completion&)> h) {
  std::lock_guard<std::mutex> g(handler_mu_);
  on_error_ = std::move(h);
}

Transmitter::Lane& Transmitter::lane_slow() {
  LaneCache& c = t_lanes_;
  t_reaper.armed = true;  // registers the reaper's destructor for this thread
  int free_slot = -1;
  for (int i = 0; i < LaneCache::kSlots; ++i) {
    if (c.ids[i] == id_) {
      c.hint = i;
      return c.lanes[i];
    }
    if (c.ids[i] == 0 && free_slot < 0) free_slot = i;
  }
  if (free_slot < 0) {
    free_slot = c.evict;
    c.evict = (c.evict + 1) % LaneCache::kSlots;
    hand_back(c.ids[free_slot], c.lanes[free_slot]);
  }
  c.ids[free_slot] = id_;
  c.lanes[free_slot] = Lane{};
  uint32_t used = lanes_.fetch_add(1, std::memory_order_acq_rel);
  if (used < max_lanes_) c.lanes[free_slot].batching = true;
  else lanes_.fetch_sub(1, std::memory_order_acq_rel);
  c.hint = free_slot;
  return c.lanes[free_slot];
}

void Transmitter::return_lane(Lane& l) {
  settle(l);
  // Both halves only grow here, and neither carries into the other (credits <= depth < 2^32):
  // one fetch-and-add, finished in one step whatever other threads do.
  word_.fetch_add(make_word(l.unpublished, l.credits), std::memory_order_acq_rel);
  posts_.fetch_add(l.posts + l.unpublished, std::memory_order_relaxed);
  if (l.batching) lanes_.fetch_sub(1, std::memory_order_acq_rel);
  l = Lane{};
}

Posted Transmitter::post_slow(fabric::SendWr& wr, Lane& l, bool force) {
  wait::Backoff backoff;
  bool signaled = false;
  uint64_t batch = 0;
  bool used_own = false;
  settle(l);
  // Reap completions before the pool runs dry, so lanes keep refilling instead of every post
  // taking this path.
  if (word_credits(word_.load(std::memory_order_relaxed)) < depth_ / 2 &&
      issued_.load(std::memory_order_relaxed) > completed_flush())
    progress();
  for (;;) {
    uint64_t w = word_.load(std::memory_order_acquire);
    uint64_t credits = word_credits(w);
    uint64_t since = word_since(w) + l.unpublished;  // our own returned posts are published here
    bool own = l.credits > 0;
    // At the reserve, a post is signaled only when no signaled post is in flight: one in flight
    // returns credits when it completes, and signaling every post there (as over a slow link,
    // where the pool stays near the reserve) would make most posts signaled.
    bool want = force || since + 1 >= interval_ ||
                (credits <= reserve_ && issued_.load(std::memory_order_acquire) <= completed_flush());
    uint64_t take = own ? 0 : 1;
    uint64_t floor = want ? 0 : reserve_;
    if (!own && credits <= floor) {
      if (progress() == 0) {
        // The queue is full until the peer takes our sends; it may wait for buffers only this
        // thread frees (the service thread's fabric::PostWaitHook).
        if (fabric::t_post_wait_hook.fn != nullptr) fabric::t_post_wait_hook.fn(fabric::t_post_wait_hook.arg);
        if (backoff.should_sleep()) cq_.wait(std::chrono::milliseconds(1));
        else backoff.spin_or_yield();
      }
      continue;
    }
    // A post signaled because the interval is up refills as well, so a lane takes the slow path
    // once per refill rather than twice; a forced one does not (flush()'s marker must leave the
    // lane it just returned empty).
    uint64_t refill = 0;
    if (l.batching && !own && !force && credits - take > reserve_ + block_) refill = block_;
    uint64_t nw = make_word(want ? 0 : since, credits - take - refill);
    if (single_thread_ ? (word_.store(nw, std::memory_order_release), true)
                       : word_.compare_exchange_weak(w, nw, std::memory_order_acq_rel)) {
      l.posts += l.unpublished;
      l.unpublished = 0;
      if (own) --l.credits;
      l.credits += static_cast<uint32_t>(refill);
      l.settled = l.credits;
      used_own = own;
      signaled = want;
      batch = want ? since : 0;
      break;
    }
  }
  if (signaled) {
    uint64_t issue = add(issued_, 1) + 1;
    wr.wr_id = kMark | ((batch + 1) << kIssueBits) | (issue & kIssueMask);
    wr.signaled = true;
  } else {
    wr.wr_id = 0;
    wr.signaled = false;
  }
  fabric::PostResult r = qp_.post_send(wr);
  if (r != fabric::PostResult::Ok) {
    // Give back the credit and re-publish the batch we took, so nothing is lost.
    if (used_own) ++l.credits;
    l.settled = l.credits;
    if (signaled) add(unposted_issues_, 1);
    word_.fetch_add(make_word(batch, used_own ? 0 : 1), std::memory_order_acq_rel);
    return Posted{r, 0};
  }
  // Posts are counted into posts_ when the lane is returned (flush, thread exit): no shared
  // counter is touched here.
  if (signaled) ++l.posts;
  else ++l.unpublished;
  return Posted{r, issued_.load(std::memory_order_acquire)};
}

void Transmitter::report_error(const fabric::Completion& c, const char* refused) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  last_error_.store(static_cast<uint8_t>(c.status), std::memory_order_relaxed);
  std::lock_guard<std::mutex> g(handler_mu_);
  if (on_error_) on_error_(c);
  else if (refused != nullptr)
    log::warn("transmitter: ", fabric::to_string(c.opcode), " to rank ", qp_.peer_rank(), " refused by the queue pair: ", refused);
  else if (c.status != fabric::Status::WorkRequestFlushed)
    log::warn("transmitter: ", fabric::to_string(c.opcode), " to rank ", qp_.peer_rank(), " failed: ", fabric::to_string(c.status));
}

int Transmitter::progress() {
  if (channel_) {
    const int n = channel_->complete();
    if (n == 0) channel_->yield_if_behind();
    return n;
  }
  // Few at a time: signals are a quarter of the queue apart, and each entry here is
  // initialized on every call.
  fabric::Completion cs[8];
  int n = cq_.poll(cs);
  for (int i = 0; i < n; ++i) {
    const fabric::Completion& c = cs[i];
    if (c.wr_id & kMark) {
      uint64_t batch = (c.wr_id >> kIssueBits) & kBatchMask;
      uint64_t issue = c.wr_id & kIssueMask;
      add(word_, batch);  // credits are the low half
      if (single_thread_) advance_flush_single_writer(issue);
      else advance_flush(issue);
    }
    if (c.status != fabric::Status::Success) report_error(c, nullptr);
  }
  return n;
}

void Transmitter::post_marker() {
  // A zero-length signaled WRITE: it touches no memory and needs no key, but its completion
  // proves everything posted before it complete.
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::Write;
  Posted p = post(wr, true);
  if (!p.ok()) fail("Transmitter: cannot post a flush marker to rank ", qp_.peer_rank(), ": ", fabric::to_string(p.result));
}

void Transmitter::wait(uint64_t tag) {
  if (channel_) return channel_->wait(tag);
  wait::Backoff backoff;
  while (completed_flush() <= tag) {
    if (issued_.load(std::memory_order_acquire) <= tag) post_marker();
    if (progress() == 0) {
      if (backoff.should_sleep()) cq_.wait(std::chrono::milliseconds(1));
      else backoff.spin_or_yield();
    }
  }
}

void Transmitter::flush() {
  if (channel_) {
    // Every ticket claimed so far: this thread's posts among them.
    if (const uint64_t n = channel_->claimed(); n != 0) channel_->wait(n - 1);
    return;
  }
  Lane& l = lane();
  bool batching = l.batching;
  return_lane(l);
  if (batching) {
    // Keep the lane's slot: it is still this thread's, and batching again.
    l.batching = true;
    lanes_.fetch_add(1, std::memory_order_acq_rel);
  }
  wait(issued_.load(std::memory_order_acquire));
}

}  // namespace loom::signal

namespace loom::signal {
Posted Transmitter::post_offloaded(const fabric::SendWr& wr, bool force_signal) {
  if (goes_inline(wr)) {
    fabric::SendWr in = wr;
    in.inline_data = true;
    return channel_->submit(in, force_signal);
  }
  return channel_->submit(wr, force_signal);
}

uint64_t Transmitter::posts() const {
  return channel_ ? channel_->posts() : posts_.load(std::memory_order_relaxed);
}

uint64_t Transmitter::signaled_posts() const {
  if (channel_) return channel_->signaled_posts();
  return issued_.load(std::memory_order_relaxed) - unposted_issues_.load(std::memory_order_relaxed);
}

int64_t Transmitter::credits() const {
  if (channel_) return channel_->credits();
  return static_cast<int64_t>(word_.load(std::memory_order_relaxed) & 0xffffffffu);
}

std::string Transmitter::describe() const {
  if (channel_)
    return detail::concat("transmitter to rank ", qp_.peer_rank(), " (offloaded): depth ", depth_, ", credits ",
                          channel_->credits(), ", commands claimed ", channel_->claimed(), ", posts ", channel_->posts(),
                          ", signaled ", channel_->signaled_posts(), ", tags in flight ", channel_->tags_in_flight(),
                          ", completed ", completed_flush());
  uint64_t w = word_.load();
  return detail::concat("transmitter to rank ", qp_.peer_rank(), ": depth ", depth_, ", pool credits ", word_credits(w),
                        ", unsignaled since last signal ", word_since(w), ", issued ", issued_.load(), ", completed ",
                        completed_flush(), ", batching lanes ", lanes_.load(), "/", max_lanes_, ", posts ", posts_.load());
}
}  // namespace loom::signal
