// The Inbox: announced channels, polling them in order, records, the function cache,
// notifications and results written back.
#include "loom/invoke/inbox.hpp"

#include <algorithm>

#include "loom/dsm/signal/notified_flag.hpp"
#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

Inbox::Inbox(Invoker& inv, int index) : inv_(inv), index_(index) {
  scratch_ = inv_.heap().allocate(64);
  return_staging_.resize(static_cast<size_t>(inv_.runtime().size()));
}

Inbox::~Inbox() {
  auto& heap = inv_.heap();
  auto& chunks = chunk_heap();
  Announcement a;
  while (announced_.try_pop(a))
    for (auto& c : a.chunks) chunks.free(c.addr);
  for (auto& ch : channels_) {
    for (auto& c : ch->ring) chunks.free(c.addr);
    for (auto& c : ch->pending) chunks.free(c.addr);
  }
  for (auto& p : pulls_) heap.free(p.pulled.addr);  // none left after discard_unrun, which waits for their READs
  heap.free(scratch_.addr);
}

memory::RegisteredHeap& Inbox::chunk_heap() { return inv_.runtime().heap(inv_.runtime().thread_zone(index_)); }

void Inbox::announce(Announcement a) {
  announced_.push(std::move(a));
  announced_n_.fetch_add(1, std::memory_order_seq_cst);  // before the bell is read (doorbell.hpp)
  inv_.bells().ring(Thread{inv_.runtime().rank(), index_});
}

void Inbox::deliver_send(int src_rank, std::vector<std::byte> frame) {
  sends_.push(std::make_pair(src_rank, std::move(frame)));
  sends_n_.fetch_add(1, std::memory_order_seq_cst);
  inv_.bells().ring(Thread{inv_.runtime().rank(), index_});
}

// Whether poll() would find something: a call sent or announced, a record (or a rotation) at a
// channel's position, or a call whose READ is in flight (its thread keeps polling, not asleep). Looks only when no other thread polls this inbox (else: yes).
bool Inbox::has_incoming() {
  if (busy_.test_and_set(std::memory_order_acquire)) return true;
  bool found = !pulls_.empty() || announced_n_.load(std::memory_order_acquire) != announced_seen_ ||
               sends_n_.load(std::memory_order_acquire) != sends_seen_;
  for (const auto& c : channels_) {
    if (found) break;
    if (c->broken) continue;
    const uint8_t* base = c->ring[c->cur].bytes();
    if (c->pos + wire::kRecordOverhead <= c->chunk_size && wire::record_stamp_matches(wire::load_word(base + c->pos), c->g)) found = true;
    if (wire::rotation_offset(wire::load_word(base + wire::kProducerOffset)) == c->g) found = true;
    if (found) break;
  }
  busy_.clear(std::memory_order_release);
  return found;
}

void Inbox::take_announcements() {
  Announcement a;
  while (announced_.try_pop(a)) {
    ++announced_seen_;
    if (a.first) {
      auto ch = std::make_unique<Channel>();
      ch->src_rank = static_cast<int>(a.sender >> 32);
      ch->sender = a.sender;
      ch->control_addr = a.control_addr;
      ch->control_rkey = a.control_rkey;
      ch->chunk_size = a.chunk_size;
      ch->ring = std::move(a.chunks);
      by_sender_[a.sender] = ch.get();
      channels_.push_back(std::move(ch));
      continue;
    }
    auto it = by_sender_.find(a.sender);
    if (it == by_sender_.end()) {
      inv_.report("chunks announced for an unknown sender " + std::to_string(a.sender >> 32) + "/" +
                  std::to_string(a.sender & 0xffffffffu));
      for (auto& c : a.chunks) chunk_heap().free(c.addr);
      continue;
    }
    for (auto& c : a.chunks) it->second->pending.push_back(c);
  }
}

int Inbox::poll(int budget) {
  if (busy_.test_and_set(std::memory_order_acquire)) return 0;
  struct Release {
    std::atomic_flag& f;
    ~Release() { f.clear(std::memory_order_release); }
  } release{busy_};
  int n = pulls_.empty() ? 0 : finish_pulls();
  if (announced_n_.load(std::memory_order_acquire) != announced_seen_) take_announcements();
  for (size_t i = 0; i < channels_.size(); ++i) {
    Channel& c = *channels_[i];
    if (!c.broken) n += poll_channel(c, budget);
  }
  const int by_channels = n;
  if (sends_n_.load(std::memory_order_acquire) != sends_seen_) {
    std::pair<int, std::vector<std::byte>> s;
    while (n < budget && sends_.try_pop(s)) {
      ++sends_seen_;
      const auto* f = reinterpret_cast<const uint8_t*>(s.second.data());
      uint64_t w;
      std::memcpy(&w, f, 8);
      if (wire::frame_len(w) != s.second.size()) {
        inv_.report("malformed send-based call from rank " + std::to_string(s.first) + ": frame length " +
                    std::to_string(wire::frame_len(w)) + " != message length " + std::to_string(s.second.size()));
        continue;
      }
      if (run_frame(f, s.second.size(), s.first, false)) count_executed(1);
      ++n;
    }
  }
  if (n > 0) took_sends_.store(n > by_channels, std::memory_order_relaxed);
  return n;
}

int Inbox::poll_channel(Channel& c, int budget) {
  int n = 0;
  while (n < budget) {
    uint8_t* base = c.ring[c.cur].bytes();
    if (c.pos + wire::kRecordOverhead <= c.chunk_size) {
      uint64_t w = wire::load_word(base + c.pos);
      if (wire::record_stamp_matches(w, c.g)) {
        size_t len = wire::record_len(w);
        if (len < wire::kRecordOverhead || len > c.chunk_size - c.pos) {
          c.broken = true;
          inv_.report("channel from rank " + std::to_string(c.src_rank) + " is corrupt: record of " +
                      std::to_string(len) + " bytes at offset " + std::to_string(c.pos) + "; channel closed");
          return n;
        }
        // The tail is placed last: until it shows the record word the record is incomplete.
        if (wire::load_word(base + c.pos + len - 8) != w) return n;
        run_record(c, base + c.pos, len);
        c.pos += len;
        c.g += len;
        ++n;
        continue;
      }
    }
    uint64_t r = wire::load_word(base + wire::kProducerOffset);
    if (wire::rotation_offset(r) != c.g) return n;
    uint32_t k = wire::rotation_inserted(r);
    if (k > 0) {
      if (c.pending.size() < k) take_announcements();
      if (c.pending.size() < k) return n;  // announced before the marker was written; not seen yet
      auto at = c.ring.begin() + static_cast<std::ptrdiff_t>(c.cur + 1);
      c.ring.insert(at, c.pending.begin(), c.pending.begin() + k);
      c.pending.erase(c.pending.begin(), c.pending.begin() + k);
    }
    // Fully consumed: record it in the Consumer header and push it to the sender.
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base + wire::kConsumerOffset))
        .store(c.g, std::memory_order_relaxed);
    uint64_t consumed = c.g;
    fabric::SendWr wr;
    wr.opcode = fabric::Opcode::Write;
    wr.inline_data = true;
    wr.local = fabric::Sge{reinterpret_cast<uint64_t>(&consumed), 8, 0};
    wr.remote_addr = c.control_addr;
    wr.rkey = c.control_rkey;
    signal::Transmitter& tx = inv_.tx(c.src_rank);
    signal::Posted p = tx.post(wr);
    if (!p.ok()) inv_.report(std::string("pushing the consumed offset failed: ") + fabric::to_string(p.result));
    inv_.bells().ring_process(c.src_rank, tx);  // a sender may wait for room
    c.cur = (c.cur + 1) % c.ring.size();
    c.pos = wire::kChunkHeader;
  }
  return n;
}

void Inbox::notify(const wire::NotifyDesc& d) {
  if (d.rank >= static_cast<uint32_t>(inv_.runtime().size())) {
    inv_.report("notification for rank " + std::to_string(d.rank) + ", which does not exist");
    return;
  }
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::FetchAdd;
  wr.local = fabric::Sge{scratch_.address(), 8, scratch_.lkey};
  wr.remote_addr = d.addr;
  wr.rkey = d.rkey;
  wr.compare_add = ~uint64_t{0};  // -1
  signal::Transmitter& tx = inv_.tx(static_cast<int>(d.rank));
  signal::Posted p = tx.post(wr);
  if (!p.ok()) inv_.report(std::string("Synchronizer notification failed: ") + fabric::to_string(p.result));
  inv_.bells().ring_process(static_cast<int>(d.rank), tx);
}

void Inbox::write_return(int src_rank, const wire::ReturnDesc& d, const void* value, size_t size) {
  if (d.size != size)
    fail("call_return: the caller's slot holds ", d.size, " bytes but the function returns ", size);
  size_t total = signal::NotifiedLayout::bytes(size);
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::Write;
  wr.remote_addr = d.addr;
  wr.rkey = d.rkey;
  auto& tx = inv_.tx(src_rank);
  if (inv_.config().direct) {
    if (uint8_t* p = tx.remote_pointer(d.addr, d.rkey, total, fabric::kRemoteWrite)) {
      // The caller's slot is mapped here: the value, then the stamp with release.
      signal::store_notified(p, size, value, size, d.stamp);
      inv_.bells().ring_process(src_rank, tx);
      return;
    }
  }
  if (total <= Invoker::kInlineLimit) {
    uint8_t buf[Invoker::kInlineLimit] = {};
    signal::stage_notified(buf, size, value, size, d.stamp);
    wr.inline_data = true;
    wr.local = fabric::Sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(total), 0};
    signal::Posted p = tx.post(wr);
    if (!p.ok()) fail("call_return: writing the result failed: ", fabric::to_string(p.result));
    inv_.bells().ring_process(src_rank, tx);
    return;
  }
  auto& st = return_staging_.at(static_cast<size_t>(src_rank));
  if (!st) st = std::make_unique<memory::LinearCircularAllocator>(inv_.runtime().allocator(), size_t{1} << 20, 1, 64);
  auto seg = st->allocate(total, 64);
  if (!seg) {
    tx.flush();
    seg = st->allocate(total, 64);
    if (!seg) fail("call_return: a result of ", size, " bytes does not fit the staging memory");
  }
  std::memset(seg->mem.addr, 0, total);
  signal::stage_notified(seg->mem.bytes(), size, value, size, d.stamp);
  wr.local = fabric::Sge{seg->mem.address(), static_cast<uint32_t>(total), seg->mem.lkey};
  signal::Posted p = tx.post(wr);
  if (!p.ok()) fail("call_return: writing the result failed: ", fabric::to_string(p.result));
  st->tag(*seg, tx, p.tag);
  inv_.bells().ring_process(src_rank, tx);
}

void Inbox::forward_broadcast(const uint8_t* f, size_t len, uint32_t root) {
  // A 4-ary tree over the global thread ids, rooted at the caller: each thread reached once.
  const int total = inv_.total_threads();
  const int me = inv_.gid(Thread{inv_.runtime().rank(), index_});
  const int rel = (me - static_cast<int>(root) + total) % total;
  for (int k = 1; k <= 4; ++k) {
    long child = static_cast<long>(rel) * 4 + k;
    if (child >= total) break;
    Thread dest = inv_.thread_of(static_cast<int>((child + root) % static_cast<uint32_t>(total)));
    // Forwarding never blocks a handler: a full ring queues the copy (still FIFO).
    FrameSpec copy;
    copy.raw = f;
    copy.raw_len = len;
    inv_.messengers().to(dest).call(copy, OnFull::RetryAsync);
  }
}

}  // namespace loom::invoke
