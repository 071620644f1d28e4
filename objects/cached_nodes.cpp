#include "loom/objects/cached_nodes.hpp"

#include <algorithm>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"

namespace loom::objects {

namespace {

void check_options(const CachedNodes::Options& o, Context& ctx) {
  if (o.edges == 0 || o.edges >= (size_t{1} << 32)) fail("objects: CachedNodes of ", o.edges, " edges (1 .. 2^32 - 1)");
  if (o.words == 0 || o.words > 64) fail("objects: CachedNodes with ", o.words, " program words (1 .. 64)");
  if (o.arena_bytes < 2 * o.block_size) fail("objects: a CachedNodes arena of ", o.arena_bytes, " bytes is under two blocks of ", o.block_size);
  const CachedNodes::Options mine = o;
  for (const CachedNodes::Options& s : ctx.runtime().bootstrap().allgather_value(mine))
    if (s.edges != o.edges || s.words != o.words || s.arena_bytes != o.arena_bytes || s.block_size != o.block_size)
      fail("objects: CachedNodes made with different options by different processes");
}

}  // namespace

CachedNodes::CachedNodes(Context& ctx, const Options& o)
    : ctx_(ctx), sp_(ctx.space()), edges_(o.edges), words_(o.words), np_(static_cast<size_t>(ctx.size())) {
  check_options(o, ctx);
  mine_ = static_cast<size_t>(ctx.rank()) * edges_;
  region::RegionOptions ro;
  ro.block_size = o.block_size;
  // The links, the counters, the arenas (one block of each lost to alignment), and room for the
  // words' blocks.
  ro.size = (np_ + 1) * edges_ * 8 + np_ * (o.arena_bytes + o.block_size) + (size_t{4} << 20);
  ro.local_bytes = o.arena_bytes + o.block_size;
  r_ = &sp_.create_region(ro);
  links_ = sp_.new_atomic_words(*r_, edges_);
  words_at_ = sp_.new_atomic_words(*r_, kOwnWords + words_);
  counters_ = r_->new_array<uint64_t>(edges_ * np_);
  arena_ = static_cast<uint8_t*>(r_->allocate_local(o.arena_bytes, 64));
  arena_bytes_ = o.arena_bytes;
  known_ = std::make_unique<std::atomic<uint64_t>[]>(edges_);
  others_ = std::make_unique<std::atomic<uint64_t>[]>(edges_);
  summed_at_ = std::make_unique<std::atomic<uint64_t>[]>(edges_);
  ctx.process_barrier();
}

CachedNodes::~CachedNodes() {
  try {
    ctx_.process_barrier();
    sp_.destroy_region(*r_);
  } catch (const std::exception& e) {
    log::error("objects: teardown of a CachedNodes: ", e.what());
  }
}

// Generation g claims edges from counter g % 3. At g + 1's start (after a barrier: nobody
// claims for g any more, and everyone is done with g's own start) every process reads g's
// counter to learn how far its stripe was written, and rank 0 zeroes counter (g + 2) % 3: the
// one everyone read at g's start, and the one g + 2 claims from, after the barrier that starts
// g + 2, which rank 0 reaches after this store. No process reads a counter while another
// zeroes it, and none claims from it before.
void CachedNodes::reset() {
  ctx_.process_barrier();
  const uint64_t used = std::min<uint64_t>(edges_, edge_counter(generation_).load(coherence::Order::Relaxed));
  std::fill_n(counters_ + mine_, used, uint64_t{0});
  if (ctx_.rank() == 0) edge_counter(generation_ + 2).store(0, coherence::Order::Relaxed);
  ++generation_;
  epoch_.fetch_add(1, std::memory_order_release);  // the sums of the last generation's nodes
  std::lock_guard<std::mutex> g(mu_);
  arena_used_ = 0;
  next_edge_ = limit_edge_ = 0;
}

CachedNodes::Link CachedNodes::look(uint64_t edge) {
  const uint64_t w = sp_.atomic_ref(&links_[edge]).load(coherence::Order::Relaxed);
  const Node n = node_of(w);
  if (n == 0) return {};
  if (!stamped(n)) return Link{0, true};
  // Stored with release after the node was seen stamped: known()'s acquire reads its bytes
  // after.
  known_[edge].store(w, std::memory_order_release);
  return Link{n, true};
}

bool CachedNodes::link(uint64_t edge, Node n) {
  coherence::AtomicRef word = sp_.atomic_ref(&links_[edge]);
  const uint64_t w = word.load(coherence::Order::Relaxed);
  if (node_of(w) != 0) return false;
  const uint64_t mine = (static_cast<uint64_t>(generation_) << kTagShift) | (n + 1);
  if (word.compare_swap(w, mine, coherence::Order::Relaxed) != w) return false;
  known_[edge].store(mine, std::memory_order_release);
  return true;
}

coherence::AtomicRef CachedNodes::word(size_t i) {
  if (i >= words_) fail("objects: CachedNodes word ", i, " of ", words_);
  return sp_.atomic_ref(&words_at_[kOwnWords + i]);
}

coherence::AtomicRef CachedNodes::edge_counter(uint32_t generation) { return sp_.atomic_ref(&words_at_[generation % 3]); }

void CachedNodes::sync() {
  sp_.atomic_ref(&words_at_[3]).fetch_add(1, coherence::Order::AcqRel);
  epoch_.fetch_add(1, std::memory_order_release);
}

void CachedNodes::sync_all() {
  sp_.atomic_ref(&words_at_[3]).fetch_add(1, coherence::Order::Release);
  ctx_.process_barrier();
  sp_.atomic_ref(&words_at_[3]).load(coherence::Order::Acquire);
  epoch_.fetch_add(1, std::memory_order_release);
}

void CachedNodes::refresh(const Head& h) {
  if (np_ == 1) return;  // no others: their sums stay 0
  const uint64_t now = epoch_.load(std::memory_order_acquire);
  std::atomic<uint64_t>& at = summed_at_[h.first];
  uint64_t seen = at.load(std::memory_order_relaxed);
  if (seen == now || !at.compare_exchange_strong(seen, now, std::memory_order_relaxed)) return;  // current, or being summed
  for (uint64_t e = h.first; e < uint64_t{h.first} + h.edges; ++e) {
    uint64_t s = 0;
    for (size_t at_stripe = 0; at_stripe < np_ * edges_; at_stripe += edges_)
      if (at_stripe != mine_) s += std::atomic_ref<uint64_t>(counters_[at_stripe + e]).load(std::memory_order_relaxed);
    others_[e].store(s, std::memory_order_relaxed);
  }
  refreshed_edges_.fetch_add(h.edges, std::memory_order_relaxed);
}

uint64_t CachedNodes::stamp(Node n) const {
  uint64_t h = (static_cast<uint64_t>(generation_) << 40) ^ n ^ 0x6a09e667f3bcc909ULL;
  h = (h ^ (h >> 31)) * 0x7fb5d329728ea185ULL;
  return h ^ (h >> 27);
}

// An acquiring load of the stamp: it pairs with make's releasing store when another thread of
// this process made the node, so the node's other bytes are read after they were written
// (another process's node reaches this process's copy by an acquire already).
bool CachedNodes::stamped(Node n) const {
  auto* s = reinterpret_cast<uint64_t*>(r_->base() + n + offsetof(Head, stamp));
  return std::atomic_ref<uint64_t>(*s).load(std::memory_order_acquire) == stamp(n);
}

// A node lies inside one block: a reader's one fetch of the block that holds the stamp brings
// the rest with it (a node across two blocks could meet a stale copy of the second, which no
// acquire had refreshed: garbage).
CachedNodes::Node CachedNodes::place(uint32_t edges, size_t payload) {
  const size_t bytes = (sizeof(Head) + payload + 7) & ~size_t{7};
  const size_t bs = r_->block_size();
  if (bytes > bs) return 0;
  const size_t arena_at = static_cast<size_t>(arena_ - r_->base());
  size_t at = arena_at + arena_used_;
  if (at / bs != (at + bytes - 1) / bs) at = (at / bs + 1) * bs;
  const size_t used = at - arena_at + bytes;
  if (used > arena_bytes_) return 0;
  if (next_edge_ + edges > limit_edge_) {
    // A claim of kClaim edges, less where all of them are few, and never less than this node's.
    const uint64_t claim = std::max<uint64_t>(edges, std::min<uint64_t>(kClaim, edges_ / (4 * np_) + 1));
    const uint64_t first = edge_counter(generation_).fetch_add(claim, coherence::Order::Relaxed);
    if (first >= edges_ || edges > edges_ - first) return 0;
    next_edge_ = first, limit_edge_ = std::min<uint64_t>(first + claim, edges_);
  }
  arena_used_ = used;
  return at;
}

}  // namespace loom::objects
