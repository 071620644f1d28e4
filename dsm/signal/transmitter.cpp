#include "loom/dsm/signal/transmitter.hpp"

#include <algorithm>
#include <unordered_map>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/signal/offload/channel.hpp"

namespace loom::signal {

namespace {
// A signaled post's wr_id: [mark][from the reserve][tickets it returns to the main pool: 22 bits][issue: 40 bits].
constexpr uint64_t kMark = 1ull << 63;
constexpr uint64_t kFromReserve = 1ull << 62;
constexpr int kIssueBits = 40;
constexpr uint64_t kIssueMask = (1ull << kIssueBits) - 1;
constexpr uint64_t kBatchMask = (1ull << 22) - 1;

// This thread's steps (Transmitter::Steps): the operation under way counts its shared
// read-modify-writes in t_op; an operation started inside another (a poll inside a post's wait)
// counts apart and the outer one's count resumes after it.
thread_local Transmitter::Steps t_steps;
thread_local uint64_t t_op = 0;
inline void step(uint64_t n = 1) { t_op += n; }
struct OpCount {
  uint64_t& most;
  uint64_t outer;
  explicit OpCount(uint64_t& slot) : most(slot), outer(t_op) { t_op = 0; }
  ~OpCount() {
    most = std::max(most, t_op);
    t_op = outer;
  }
};

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
  // The reserve's tickets go to signaled posts made while the main pool is spent, so one can
  // always be made.
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
  pool_.init(depth_ - reserve_, single_thread_);
  reserve_pool_.init(reserve_, single_thread_);
  inline_limit_ = cfg.auto_inline && qp.inline_helps() ? qp.caps().max_inline : 0;
  if (cfg.offloader != nullptr) {
    inline_limit_ = std::min<uint32_t>(inline_limit_, offload::Command::kInlineBytes);
    channel_ = std::make_unique<offload::Channel>(*this, *cfg.offloader, depth_, interval_, cfg.way);
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

Transmitter::Steps& Transmitter::steps_of_this_thread() { return t_steps; }

void Transmitter::return_lane(Lane& l) {
  OpCount op(t_steps.lane_return);
  settle(l);
  if (l.pending != 0) {
    // Tickets drawn beyond what was valid are given back only once valid (a ticket given back
    // counts as finished; one above valid_until() would let others' tickets overfill the queue).
    wait_for_ticket(l.pending_end - 1, l);
    l.credits += l.pending;
    l.pending = 0;
  }
  if (l.credits != 0) {
    step();
    pool_.give(l.credits);
  }
  if (l.unpublished != 0) {
    step();
    add(since_, l.unpublished);
  }
  step();
  posts_.fetch_add(l.posts + l.unpublished, std::memory_order_relaxed);
  if (l.batching) {
    step();
    lanes_.fetch_sub(1, std::memory_order_acq_rel);
  }
  l = Lane{};
}

// The lane's pending tickets that are valid now become credits.
void Transmitter::use_valid_pending(Lane& l) {
  const uint64_t first = l.pending_end - l.pending;
  const uint64_t until = pool_.valid_until();
  if (until <= first) return;
  const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(l.pending, until - first));
  l.credits += n;
  l.pending -= n;
}

// The lane's returned posts into `since`, where a signal (anyone's) covers them.
void Transmitter::publish(Lane& l) {
  if (l.unpublished == 0) return;
  step();
  add(since_, l.unpublished);
  l.posts += l.unpublished;
  l.unpublished = 0;
}

// Until `ticket` is valid: polls, and while no signaled post is in flight posts a marker from the
// reserve that covers what is published (this lane's count among it). Waits for the fabric only.
void Transmitter::wait_for_ticket(uint64_t ticket, Lane& l) {
  if (pool_.valid(ticket)) return;
  publish(l);
  wait::Backoff backoff;
  while (!pool_.valid(ticket)) {
    ++t_steps.waiting_polls;
    if (progress() > 0) continue;
    if (!signal_in_flight() && since_.load(std::memory_order_relaxed) != 0 && post_reserve_marker()) continue;
    // The queue is full until the peer takes our sends; it may wait for buffers only this thread
    // frees (the service thread's fabric::PostWaitHook).
    if (fabric::t_post_wait_hook.fn != nullptr) fabric::t_post_wait_hook.fn(fabric::t_post_wait_hook.arg);
    if (backoff.should_sleep()) cq_.wait(std::chrono::milliseconds(1));
    else backoff.spin_or_yield();
  }
}

// Reserve tickets are held by signaled posts only, each of which returns its own when polled.
void Transmitter::wait_for_reserve(uint64_t ticket) {
  wait::Backoff backoff;
  while (!reserve_pool_.valid(ticket)) {
    ++t_steps.waiting_polls;
    if (progress() > 0) continue;
    if (backoff.should_sleep()) cq_.wait(std::chrono::milliseconds(1));
    else backoff.spin_or_yield();
  }
}

uint64_t Transmitter::make_signaled(Lane& l, Source src, uint64_t& batch) {
  step();
  uint64_t published;
  if (single_thread_) {
    published = since_.load(std::memory_order_relaxed);
    since_.store(0, std::memory_order_relaxed);
  } else {
    published = since_.exchange(0, std::memory_order_acq_rel);
  }
  batch = published + l.unpublished;
  l.posts += l.unpublished;
  l.unpublished = 0;
  step(2);
  add(signals_out_, 1);
  const uint64_t issue = add(issued_, 1) + 1;
  const uint64_t returns = batch + (src == Source::Reserve ? 0 : 1);
  return kMark | (src == Source::Reserve ? kFromReserve : 0) | (returns << kIssueBits) | (issue & kIssueMask);
}

Posted Transmitter::refused(Lane& l, Source src, bool signaled, uint64_t batch, fabric::PostResult r) {
  if (src == Source::Lane) {
    ++l.credits;
    l.settled = l.credits;
  } else {
    step();
    (src == Source::Pool ? pool_ : reserve_pool_).give(1);
  }
  if (signaled) {
    step(2);
    add(unposted_issues_, 1);
    signals_out_.fetch_sub(1, std::memory_order_acq_rel);
    if (batch != 0) {
      step();
      add(since_, batch);  // the posts it would have covered wait for the next signal
    }
  }
  return Posted{r, 0};
}

bool Transmitter::post_reserve_marker() {
  OpCount op(t_steps.post);
  step();
  wait_for_reserve(reserve_pool_.draw(1));
  fabric::SendWr wr;  // a zero-length signaled WRITE, as post_marker's
  wr.opcode = fabric::Opcode::Write;
  wr.signaled = true;
  Lane none;
  uint64_t batch = 0;
  wr.wr_id = make_signaled(none, Source::Reserve, batch);
  const fabric::PostResult r = qp_.post_send(wr);
  if (r == fabric::PostResult::Ok) return true;
  refused(none, Source::Reserve, true, batch, r);
  return false;
}

Posted Transmitter::post_slow(fabric::SendWr& wr, Lane& l, bool force) {
  ++t_steps.slow_posts;
  OpCount op(t_steps.post);
  settle(l);
  // Reap completions before the pool runs dry, so lanes keep refilling instead of every post
  // taking this path.
  if (pool_.free() < static_cast<int64_t>(depth_ / 2) && signal_in_flight()) progress();
  if (l.credits == 0 && l.pending != 0) {
    use_valid_pending(l);
    if (l.credits == 0) {
      wait_for_ticket(l.pending_end - l.pending, l);
      use_valid_pending(l);
    }
  }
  Source src = Source::Lane;
  if (l.credits > 0) {
    --l.credits;
  } else if ((force || wants_signal(l)) && pool_.free() <= 0) {
    src = Source::Reserve;  // the main pool is spent and this post is signaled anyway
    step();
    wait_for_reserve(reserve_pool_.draw(1));
  } else {
    src = Source::Pool;
    // A lane takes a block with its post; a forced post does not (flush()'s marker must leave the
    // lane it just returned empty).
    uint64_t refill = 0;
    if (l.batching && !force && pool_.free() > static_cast<int64_t>(block_) + 1) refill = block_;
    step();
    const uint64_t t = pool_.draw(1 + refill);
    if (refill != 0) {
      l.pending = static_cast<uint32_t>(refill);
      l.pending_end = t + 1 + refill;
    }
    wait_for_ticket(t, l);
    if (l.pending != 0) use_valid_pending(l);
  }
  l.settled = l.credits;
  // Signaled when asked, every interval, from the reserve, and when the pool is spent with no
  // signal in flight (so that one is).
  const bool signaled = force || src == Source::Reserve || wants_signal(l) || (pool_.free() <= 0 && !signal_in_flight());
  uint64_t batch = 0;
  if (signaled) {
    wr.wr_id = make_signaled(l, src, batch);
    wr.signaled = true;
  } else {
    publish(l);
    wr.wr_id = 0;
    wr.signaled = false;
  }
  const fabric::PostResult r = qp_.post_send(wr);
  if (r != fabric::PostResult::Ok) return refused(l, src, signaled, batch, r);
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
  OpCount op(t_steps.progress);
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
      const uint64_t returns = (c.wr_id >> kIssueBits) & kBatchMask;
      const uint64_t issue = c.wr_id & kIssueMask;
      // The tickets first, then the signal's end (a waiter that reads no signal in flight finds
      // them: the release pairs with signal_in_flight()'s acquire), then the flush number.
      step(2);
      if (returns != 0) pool_.give(returns);
      if (c.wr_id & kFromReserve) {
        step();
        reserve_pool_.give(1);
      }
      add(signals_out_, ~uint64_t{0});
      if (single_thread_) advance_flush_single_writer(issue);
      else step(1 + advance_flush(issue));
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

bool Transmitter::test(uint64_t tag) {
  if (complete(tag)) return true;
  if (!channel_ && issued_.load(std::memory_order_acquire) <= tag) post_marker();
  progress();
  return complete(tag);
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
  return pool_.free() + reserve_pool_.free();
}

std::string Transmitter::describe() const {
  if (channel_)
    return detail::concat("transmitter to rank ", qp_.peer_rank(), " (offloaded): depth ", depth_, ", credits ",
                          channel_->credits(), ", commands claimed ", channel_->claimed(), ", posts ", channel_->posts(),
                          ", signaled ", channel_->signaled_posts(), ", tags in flight ", channel_->tags_in_flight(),
                          ", completed ", completed_flush());
  return detail::concat("transmitter to rank ", qp_.peer_rank(), ": depth ", depth_, ", free tickets ", pool_.free(),
                        " + reserve ", reserve_pool_.free(), ", signals in flight ", signals_out_.load(),
                        ", unsignaled since last signal ", since_.load(), ", issued ", issued_.load(), ", completed ",
                        completed_flush(), ", batching lanes ", lanes_.load(), "/", max_lanes_, ", posts ", posts_.load());
}
}  // namespace loom::signal
