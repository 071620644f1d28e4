// The Messenger's ring of chunks in the receiver and the records written into it
// (docs/invocation.md, "Protocol (Messenger)").
#include "loom/invoke/messenger.hpp"

#include "loom/invoke/checks.hpp"

#include <algorithm>

#include "loom/invoke/chunk_service.hpp"
#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

Messenger::Messenger(Invoker& inv, Thread dest, uint64_t serial, MessengerGlobal* owner)
    : inv_(inv),
      dest_(dest),
      serial_(serial),
      owner_(owner),
      tx_(inv.tx(dest.rank)),
      chunk_size_(inv.config().chunk_size),
      staging_(inv.runtime().allocator(), std::max<size_t>(size_t{64} << 10, inv.config().chunk_size), 1, 64) {
  control_ = inv_.heap().allocate(64);
  std::memset(control_.addr, 0, 64);
}

Messenger::~Messenger() {
  // The mesh is gone (collective teardown) before Messengers are: nothing is in flight.
  for (auto& q : async_) inv_.heap().free(q.rec.addr);
  for (auto& r : retired_) inv_.heap().free(r.second.addr);
  inv_.heap().free(control_.addr);
}

uint64_t Messenger::consumed() const {
  return std::atomic_ref<uint64_t>(*static_cast<uint64_t*>(control_.addr)).load(std::memory_order_acquire);
}

size_t Messenger::max_frame() const { return chunk_size_ - wire::kChunkHeader - wire::kRecordOverhead; }

std::vector<Messenger::Slot> Messenger::allocate_chunks(uint32_t count, bool first) {
  ChunkRequest req{static_cast<uint32_t>(dest_.index), count, serial_, chunk_size_, control_.address(), control_.rkey,
                   first ? 1u : 0u};
  auto reply = inv_.runtime().service().call_sync(dest_.rank, inv_.chunks_function(),
                                                  std::as_bytes(std::span(&req, 1)));
  if (reply.size() != count * sizeof(ChunkReply))
    fail("Messenger: rank ", dest_.rank, " answered a request for ", count, " chunks with ", reply.size(), " bytes");
  std::vector<Slot> out;
  for (uint32_t i = 0; i < count; ++i) {
    ChunkReply r;
    std::memcpy(&r, reply.data() + i * sizeof r, sizeof r);
    uint8_t* direct = inv_.config().direct ? tx_.remote_pointer(r.addr, r.rkey, chunk_size_, fabric::kRemoteWrite)
                                           : nullptr;
    out.push_back(Slot{r.addr, r.rkey, 0, direct});
  }
  return out;
}

void Messenger::setup() {
  // A ring needs two chunks so that the chunk being left is never the one being entered.
  uint32_t n = std::max<uint32_t>(2, std::min(inv_.config().chunks_per_request, inv_.config().max_chunks));
  ring_ = allocate_chunks(n, true);
  cur_ = 0;
  pos_ = wire::kChunkHeader;
}

bool Messenger::rotate(size_t need) {
  if (need > chunk_size_ - wire::kChunkHeader)
    fail("Messenger: a record of ", need, " bytes does not fit a chunk of ", chunk_size_, " bytes");
  size_t next = (cur_ + 1) % ring_.size();
  uint32_t inserted = 0;
  if (!chunk_free(next)) {
    const Config& c = inv_.config();
    if (ring_.size() >= c.max_chunks) return false;
    uint32_t k = std::min<uint32_t>({std::max<uint32_t>(1, c.chunks_per_request),
                                     static_cast<uint32_t>(c.max_chunks - ring_.size()), wire::kMaxInsertPerRotation});
    auto fresh = allocate_chunks(k, false);
    ring_.insert(ring_.begin() + static_cast<std::ptrdiff_t>(cur_ + 1), fresh.begin(), fresh.end());
    inserted = k;
    next = cur_ + 1;
    ++growths_;
  }
  // Close the current chunk: the rotation marker tells the receiver where we went on and how
  // many new chunks to take into its ring right after this one, keeping both rings symmetric.
  uint64_t word = wire::rotation_word(g_, inserted);
  place(wire::kProducerOffset, reinterpret_cast<const uint8_t*>(&word), 8, nullptr);
  ring_[cur_].closed_at = g_;
  cur_ = next;
  pos_ = wire::kChunkHeader;
  return true;
}

void Messenger::place(size_t offset, const uint8_t* bytes, size_t len, const memory::RDMAMemory* src, uint64_t* tag) {
  const Slot& c = ring_[cur_];
  if (c.direct) {
    std::memcpy(c.direct + offset, bytes, len - 8);
    uint64_t last;
    std::memcpy(&last, bytes + len - 8, 8);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(c.direct + offset + len - 8)).store(last, std::memory_order_release);
    return;
  }
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::Write;
  if (src != nullptr) {
    wr.local = fabric::Sge{reinterpret_cast<uint64_t>(bytes), static_cast<uint32_t>(len), src->lkey};
  } else {
    wr.inline_data = true;  // small control words from the stack: copied at post time
    wr.local = fabric::Sge{reinterpret_cast<uint64_t>(bytes), static_cast<uint32_t>(len), 0};
  }
  wr.remote_addr = c.addr + offset;
  wr.rkey = c.rkey;
  signal::Posted p = tx_.post(wr);
  if (!p.ok()) fail("Messenger: writing ", len, " bytes to rank ", dest_.rank, " failed: ", fabric::to_string(p.result));
  if (tag != nullptr) *tag = p.tag;
}

bool Messenger::open_record(size_t n, size_t flush_at) {
  if (ring_.empty()) setup();
  size_t need = wire::round_record(n + wire::kRecordOverhead);
  // A call sent on its own that fits a cache line gets a whole line: while the receiver
  // watches the line being written, every record sharing it costs another transfer of the
  // line each way (bench/README.md, "Measurements behind constants in the code").
  min_record_ = 0;
  if (flush_at == 0 && need < wire::kCacheLine) need = min_record_ = wire::kCacheLine;
  if (pos_ + need > chunk_size_ && !rotate(need)) return false;
  if (flush_at == 0 && need <= wire::kCacheLine && pos_ % wire::kCacheLine + need > wire::kCacheLine) {
    // ... and starts on a line boundary (after records of other sizes): the gap takes an
    // empty record.
    size_t gap = wire::kCacheLine - pos_ % wire::kCacheLine;
    if (pos_ + gap + need > chunk_size_) {
      if (!rotate(need)) return false;
    } else {
      uint8_t pad[wire::kCacheLine];
      for (size_t i = 8; i + 8 < gap; i += 8) {
        uint64_t f = wire::pad_frame_word();
        std::memcpy(pad + i, &f, 8);
      }
      uint64_t w = wire::record_word(g_, gap);
      std::memcpy(pad, &w, 8);
      std::memcpy(pad + gap - 8, &w, 8);
      place(pos_, pad, gap, nullptr);
      pos_ += gap;
      g_ += gap;
    }
  }
  size_t room = chunk_size_ - pos_;
  size_t cap = flush_at == 0 ? need : std::min(room, std::max(need, flush_at)) & ~(wire::kRecordGranule - 1);
  if (uint8_t* d = ring_[cur_].direct) {
    rec_ = d + pos_;
    used_ = 8;
    cap_ = cap;
    open_ = true;
    return true;
  }
  auto s = staging_.allocate(cap, 64);
  if (!s) {
    // Every staging unit is still in flight: wait for the fabric (never for the receiver).
    tx_.flush();
    s = staging_.allocate(cap, 64);
    if (!s) fail("Messenger: no staging memory for a record of ", cap, " bytes");
  }
  seg_ = *s;
  rec_ = seg_.mem.bytes();
  used_ = 8;
  cap_ = cap;
  open_ = true;
  return true;
}

uint8_t* Messenger::reserve(size_t n, size_t flush_at) {
  if (open_) {
    if (used_ + n + 8 <= cap_) return rec_ + used_;
    flush();
  }
  if (!open_record(n, flush_at)) return nullptr;
  return rec_ + used_;
}

void Messenger::flush() {
  if (!open_) return;
  open_ = false;
  while ((used_ + 8) % wire::kRecordGranule != 0 || used_ + 8 < min_record_) {
    uint64_t f = wire::pad_frame_word();
    std::memcpy(rec_ + used_, &f, 8);
    used_ += 8;
  }
  size_t len = used_ + 8;
  uint64_t w = wire::record_word(g_, len);
  std::memcpy(rec_, &w, 8);
  if (ring_[cur_].direct) {
    // In place: the tail, stored last with release, publishes the record.
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(rec_ + used_)).store(w, std::memory_order_release);
  } else {
    std::memcpy(rec_ + used_, &w, 8);
    uint64_t tag = 0;
    place(pos_, rec_, len, &seg_.mem, &tag);
    staging_.tag(seg_, tx_, tag);
  }
  pos_ += len;
  g_ += len;
  ++records_;
  inv_.bells().ring(dest_, tx_);  // after the record is published: a receiver asleep wakes to it
  for (Synchronizer* s : batch_syncs_) s->transmitted();
  batch_syncs_.clear();
}

bool Messenger::call_slow(const FrameSpec& f, OnFull on_full, size_t flush_at, Synchronizer* transmitted) {
  size_t n = f.bytes();
  if (n > max_frame() || n > wire::kMaxFrame)
    fail("invoke: a call of ", n, " bytes exceeds the largest call a Messenger carries (", max_frame(),
         " bytes; raise LOOM_INVOKE_CHUNK_SIZE or pass the buffer by RDMA)");
  if (async_pending_.load(std::memory_order_acquire) || blocked_) {
    // Calls queued earlier go first (per-thread FIFO).
    if (on_full == OnFull::Fail && !blocked_ && !drain_async()) return false;
    if (async_pending_.load(std::memory_order_acquire) || blocked_) return enqueue_async(f, n, transmitted);
  }
  uint8_t* p = reserve(n, flush_at);
  if (p == nullptr) {
    if (on_full == OnFull::Fail) return false;
    // A call made inside a call this thread runs cannot wait for room: this thread's own inbox
    // is busy with that call, so two processes calling back into full rings would wait for each
    // other forever. It queues instead (RetryAsync; still FIFO behind this channel's calls).
    if (on_full == OnFull::RetryAsync || running_call() != nullptr) return enqueue_async(f, n, transmitted);
    {
      std::lock_guard<std::mutex> g(mu_);
      blocked_ = true;
    }
    wait::Backoff b = inv_.idle_backoff();
    // Run our own incoming calls while we wait, so that two threads filling each other's rings
    // both progress; calls they make to this destination meanwhile queue behind ours. The
    // receiver rings this thread's doorbell when it pushes its consumed offset.
    while ((p = reserve(n, flush_at)) == nullptr) {
      if (inv_.progress() > 0) b.reset();
      else inv_.idle(b, [] { return false; });
    }
    std::lock_guard<std::mutex> g(mu_);
    blocked_ = false;
  }
  f.fill(p, n);
  used_ += n;
  if (transmitted) batch_syncs_.push_back(transmitted);
  if (used_ + 8 >= flush_at) flush();
  return true;
}

bool Messenger::send_record(const memory::RDMAMemory& rec, size_t len) {
  if (ring_.empty()) setup();
  if (open_) flush();
  if (pos_ + len > chunk_size_ && !rotate(len)) return false;
  uint64_t w = wire::record_word(g_, len);
  std::memcpy(rec.bytes(), &w, 8);
  std::memcpy(rec.bytes() + len - 8, &w, 8);
  uint64_t tag = 0;
  place(pos_, rec.bytes(), len, &rec, &tag);
  if (ring_[cur_].direct) inv_.heap().free(rec.addr);  // copied
  else retired_.emplace_back(tag, rec);             // until the WRITE completed
  pos_ += len;
  g_ += len;
  ++records_;
  inv_.bells().ring(dest_, tx_);
  return true;
}

}  // namespace loom::invoke
