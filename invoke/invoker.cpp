#include "invoke/invoker.hpp"

#include <algorithm>
#include <shared_mutex>

#include "invoke/settings.hpp"
#include "dsm/common/log.hpp"
#include "dsm/signal/notified_flag.hpp"

namespace loom::invoke {

namespace detail {
extern thread_local int t_caller;
}

namespace {

std::atomic<Invoker*> g_current{nullptr};
std::atomic<bool> g_exists{false};
// Service handlers run on the service thread and may see a request for an Invoker that is being
// built or torn down: they hold this shared while they use it; construction and destruction
// publish and retract the Invoker under it exclusively.
std::shared_mutex g_life;
std::atomic<uint64_t> g_invoker_serial{1};


constexpr size_t kMaxReadBytes = size_t{1} << 30;  // call_buffer (READ form): larger pulls are refused
constexpr size_t kInlineLimit = 64;                // QpCaps::max_inline of the invocation mesh

// No-setup service call that allocates chunks in the destination's zone (seed 000 §4.4.1).
struct ChunkRequest {
  uint32_t thread;
  uint32_t count;
  uint64_t serial;
  uint64_t chunk_size;
  uint64_t control_addr;
  uint32_t control_rkey;
  uint32_t first;
};
struct ChunkReply {
  uint64_t addr;
  uint32_t rkey;
  uint32_t pad;
};
struct SendHeader {
  uint32_t thread;
  uint32_t zero;
};

template <typename T>
T decode(std::span<const std::byte> b, const char* what) {
  if (b.size() < sizeof(T)) fail(what, ": malformed message of ", b.size(), " bytes");
  T v;
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}

}  // namespace

Config Config::from_env() {
  Config c;
  c.chunk_size = loom::settings::get_size(settings::kChunkSize);
  c.chunks_per_request = static_cast<uint32_t>(loom::settings::get_int(settings::kChunks));
  c.max_chunks = static_cast<uint32_t>(loom::settings::get_int(settings::kMaxChunks));
  c.helpers = static_cast<uint32_t>(loom::settings::get_int(settings::kHelpers));
  c.direct = loom::settings::get_bool(settings::kDirect);
  return c;
}

// ---------------------------------------------------------------- Synchronizer, return slots

Synchronizer::Synchronizer(int64_t count) {
  mem_ = Runtime::current().heap().allocate(64);
  word_ = static_cast<uint64_t*>(mem_.addr);
  std::atomic_ref<uint64_t>(*word_).store(static_cast<uint64_t>(count), std::memory_order_release);
}

Synchronizer::~Synchronizer() { Runtime::current().heap().free(mem_.addr); }

void Synchronizer::wait() {
  Invoker::current().wait_until([this] { return done(); });
}

wire::NotifyDesc Synchronizer::notify_desc() const {
  return wire::NotifyDesc{mem_.address(), mem_.rkey, static_cast<uint32_t>(Invoker::current().runtime().rank())};
}

namespace detail {

ReturnSlotBase::ReturnSlotBase(size_t value_size) : size_(value_size) {
  mem_ = Runtime::current().heap().allocate(signal::NotifiedLayout::bytes(value_size));
  std::memset(mem_.addr, 0, signal::NotifiedLayout::bytes(value_size));
}

ReturnSlotBase::~ReturnSlotBase() { Runtime::current().heap().free(mem_.addr); }

wire::ReturnDesc ReturnSlotBase::arm() {
  ++stamp_;
  return wire::ReturnDesc{mem_.address(), mem_.rkey, static_cast<uint32_t>(size_), stamp_};
}

bool ReturnSlotBase::ready() const { return signal::test_notified(mem_.bytes(), size_, stamp_); }

void ReturnSlotBase::wait() const {
  if (stamp_ == 0) fail("ReturnSlot: waited for a result without a call_return into it");
  // A result usually comes back within a round trip: watch the flag alone for that long (as a
  // ping-pong does) before the full progress loop, which also runs this thread's calls.
  for (int i = 0; i < 256; ++i) {
    if (ready()) return;
    signal::cpu_relax();
  }
  Invoker::current().wait_until([this] { return ready(); });
}

void write_return(const Incoming& in, const void* value, size_t size) {
  if (in.ret == nullptr || in.inbox == nullptr) fail("call_return: no return descriptor");
  in.inbox->write_return(in.src_rank, *in.ret, value, size);
}

}  // namespace detail

// ---------------------------------------------------------------- Messenger (sender)

Messenger::Messenger(Invoker& inv, Thread dest, uint64_t serial)
    : inv_(inv),
      dest_(dest),
      serial_(serial),
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
    uint8_t* direct = inv_.config().direct ? tx_.qp().remote_pointer(r.addr, r.rkey, chunk_size_, fabric::kRemoteWrite)
                                           : nullptr;
    out.push_back(Slot{r.addr, r.rkey, 0, direct});
  }
  return out;
}

bool Messenger::setup() {
  // A ring needs two chunks so that the chunk being left is never the one being entered.
  uint32_t n = std::max<uint32_t>(2, std::min(inv_.config().chunks_per_request, inv_.config().max_chunks));
  ring_ = allocate_chunks(n, true);
  cur_ = 0;
  pos_ = wire::kChunkHeader;
  return true;
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
  if (ring_.empty() && !setup()) return false;
  size_t need = wire::round_record(n + wire::kRecordOverhead);
  // A call sent on its own that fits a cache line gets a whole line: while the receiver
  // watches the line being written, every record sharing it costs another transfer of the
  // line each way (measured: 10 M -> 15 M 8-byte calls/s on 2 processes).
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
    if (on_full == OnFull::RetryAsync) return enqueue_async(f, n, transmitted);
    {
      std::lock_guard<std::mutex> g(mu_);
      blocked_ = true;
    }
    signal::Backoff b;
    // Run our own incoming calls while we wait, so that two threads filling each other's rings
    // both progress; calls they make to this destination meanwhile queue behind ours.
    while ((p = reserve(n, flush_at)) == nullptr) {
      if (inv_.progress() > 0) b.reset();
      else b.pause();
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

bool Messenger::enqueue_async(const FrameSpec& f, size_t n, Synchronizer* transmitted) {
  size_t len = wire::round_record(n + wire::kRecordOverhead);
  memory::RDMAMemory rec = inv_.heap().allocate(len);
  f.fill(rec.bytes() + 8, n);
  if (len != n + wire::kRecordOverhead) {
    uint64_t pad = wire::pad_frame_word();
    std::memcpy(rec.bytes() + 8 + n, &pad, 8);
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!async_pending_.load(std::memory_order_relaxed)) flush();  // our ring state is still ours alone here
    async_.push_back(Queued{rec, len, transmitted});
    async_pending_.store(true, std::memory_order_release);
  }
  inv_.note_async(this);
  return true;
}

bool Messenger::send_record(const memory::RDMAMemory& rec, size_t len) {
  if (ring_.empty() && !setup()) return false;
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
  return true;
}

void Messenger::reclaim() {
  while (!retired_.empty() && tx_.complete(retired_.front().first)) {
    inv_.heap().free(retired_.front().second.addr);
    retired_.pop_front();
  }
}

bool Messenger::drain_async() {
  std::lock_guard<std::mutex> g(mu_);
  if (blocked_) return false;  // the owner's blocked call goes first
  while (!async_.empty()) {
    Queued& q = async_.front();
    if (!send_record(q.rec, q.len)) break;
    if (q.transmitted) q.transmitted->transmitted();
    async_.pop_front();
  }
  reclaim();
  bool empty = async_.empty();
  if (empty) async_pending_.store(false, std::memory_order_release);
  return empty;
}

// ---------------------------------------------------------------- MessengerGlobal

Messenger& MessengerGlobal::create(Thread dest) {
  inv_.check(dest);
  size_t g = static_cast<size_t>(inv_.gid(dest));
  if (messengers_.size() <= g) messengers_.resize(static_cast<size_t>(inv_.total_threads()));
  auto& m = messengers_[g];
  if (!m) m = std::make_unique<Messenger>(inv_, dest, inv_.next_messenger_serial());
  return *m;
}

void MessengerGlobal::flush() {
  for (auto& m : messengers_)
    if (m && m->has_open_record()) m->flush();
}

bool MessengerGlobal::drain_async() {
  bool all = true;
  for (auto& m : messengers_)
    if (m && m->async_pending()) all = m->drain_async() && all;
  return all;
}

bool MessengerGlobal::quiet() const {
  for (auto& m : messengers_)
    if (m && (m->has_open_record() || m->async_pending())) return false;
  return true;
}

// ---------------------------------------------------------------- Inbox (receiver)

Inbox::Inbox(Invoker& inv, int index) : inv_(inv), index_(index) {
  scratch_ = inv_.heap().allocate(64);
  return_staging_.resize(static_cast<size_t>(inv_.runtime().size()));
}

Inbox::~Inbox() {
  auto& heap = inv_.heap();
  Announcement a;
  while (announced_.try_pop(a))
    for (auto& c : a.chunks) heap.free(c.addr);
  for (auto& ch : channels_) {
    for (auto& c : ch->ring) heap.free(c.addr);
    for (auto& c : ch->pending) heap.free(c.addr);
  }
  heap.free(scratch_.addr);
}

void Inbox::announce(Announcement a) {
  announced_.push(std::move(a));
  announced_n_.fetch_add(1, std::memory_order_release);
}

void Inbox::deliver_send(int src_rank, std::vector<std::byte> frame) {
  sends_.push(std::make_pair(src_rank, std::move(frame)));
  sends_n_.fetch_add(1, std::memory_order_release);
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
      for (auto& c : a.chunks) inv_.heap().free(c.addr);
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
  int n = 0;
  if (announced_n_.load(std::memory_order_acquire) != announced_seen_) take_announcements();
  for (size_t i = 0; i < channels_.size(); ++i) {
    Channel& c = *channels_[i];
    if (!c.broken) n += poll_channel(c, budget);
  }
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
      run_frame(f, s.second.size(), s.first, false);
      ++n;
    }
  }
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
    signal::Posted p = inv_.tx(c.src_rank).post(wr);
    if (!p.ok()) inv_.report(std::string("pushing the consumed offset failed: ") + fabric::to_string(p.result));
    c.cur = (c.cur + 1) % c.ring.size();
    c.pos = wire::kChunkHeader;
  }
  return n;
}

void Inbox::run_record(Channel& c, const uint8_t* rec, size_t len) {
  const uint8_t* p = rec + 8;
  const uint8_t* end = rec + len - 8;
  while (p < end) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    size_t flen = wire::frame_len(w);
    if (flen < wire::kFrameHeader || flen > static_cast<size_t>(end - p)) {
      inv_.report("malformed call from rank " + std::to_string(c.src_rank) + ": frame of " + std::to_string(flen) +
                  " bytes in a record with " + std::to_string(end - p) + " bytes left; rest of the record skipped");
      return;
    }
    if (w != wire::pad_frame_word()) run_frame(p, flen, c.src_rank, false);
    p += flen;
  }
}

bool Inbox::lookup(uint32_t id, const Entry** e) {
  // Calls come in runs of one function (a loop at the sender): remember the last one.
  if (id == last_id_ && last_entry_ != nullptr) {
    *e = last_entry_;
    return true;
  }
  auto it = cache_.find(id);
  if (it == cache_.end()) {
    Entry found;
    if (!Registry::instance().lookup(id, &found)) return false;
    it = cache_.emplace(id, std::move(found)).first;
  }
  *e = &it->second;  // unordered_map nodes do not move
  last_id_ = id;
  last_entry_ = *e;
  return true;
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
  signal::Posted p = inv_.tx(static_cast<int>(d.rank)).post(wr);
  if (!p.ok()) inv_.report(std::string("Synchronizer notification failed: ") + fabric::to_string(p.result));
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
    if (uint8_t* p = tx.qp().remote_pointer(d.addr, d.rkey, total, fabric::kRemoteWrite)) {
      // The caller's slot is mapped here: the value, then the stamp with release.
      std::memcpy(p, value, size);
      std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p + signal::NotifiedLayout::flag_offset(size)))
          .store(d.stamp, std::memory_order_release);
      return;
    }
  }
  if (total <= kInlineLimit) {
    uint8_t buf[kInlineLimit] = {};
    signal::stage_notified(buf, size, value, size, d.stamp);
    wr.inline_data = true;
    wr.local = fabric::Sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(total), 0};
    signal::Posted p = tx.post(wr);
    if (!p.ok()) fail("call_return: writing the result failed: ", fabric::to_string(p.result));
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

void Inbox::run_frame(const uint8_t* f, size_t flen, int src_rank, bool nested) {
  uint64_t w;
  std::memcpy(&w, f, 8);
  const uint32_t fid = wire::frame_fid(w);
  const uint8_t kind = wire::frame_kind(w);
  const uint8_t* p = f + wire::kFrameHeader;
  size_t left = flen - wire::kFrameHeader;
  auto bad = [&](const std::string& why) {
    inv_.report("bad call from rank " + std::to_string(src_rank) + " (function id 0x" + [&] {
      char b[16];
      std::snprintf(b, sizeof b, "%08x", fid);
      return std::string(b);
    }() + "): " + why);
  };
  wire::NotifyDesc nd{};
  bool notify = wire::frame_notify(w);
  if (notify) {
    if (left < sizeof nd) return bad("truncated notification descriptor");
    std::memcpy(&nd, p, sizeof nd);
    p += sizeof nd;
    left -= sizeof nd;
  }
  if (kind == static_cast<uint8_t>(wire::Kind::Broadcast)) {
    wire::BroadcastDesc bd;
    if (nested) return bad("broadcast inside a broadcast");
    if (left < sizeof bd + wire::kFrameHeader) return bad("truncated broadcast");
    std::memcpy(&bd, p, sizeof bd);
    if (bd.root >= static_cast<uint32_t>(inv_.total_threads())) return bad("broadcast root out of range");
    const uint8_t* inner = p + sizeof bd;
    size_t inner_len = left - sizeof bd;
    uint64_t iw;
    std::memcpy(&iw, inner, 8);
    if (wire::frame_len(iw) != inner_len) return bad("broadcast frame length mismatch");
    forward_broadcast(f, flen, bd.root);
    run_frame(inner, inner_len, src_rank, true);
    return;
  }
  const Entry* e = nullptr;
  if (kind == 0 || kind > wire::kMaxKind) return bad("unknown call kind " + std::to_string(kind));
  if (!lookup(fid, &e)) return bad("unknown function id (not registered in this program)");
  if (static_cast<uint8_t>(e->kind) != kind)
    return bad("function '" + e->name + "' is registered for call kind " + std::to_string(static_cast<int>(e->kind)) +
               ", the call is kind " + std::to_string(kind));
  const size_t cap = wire::pad8(e->capture_size);
  Incoming in;
  in.src_rank = src_rank;
  in.inbox = this;
  in.capture_len = e->capture_size;
  memory::RDMAMemory pulled;
  wire::ReturnDesc rd;
  try {
    switch (static_cast<wire::Kind>(kind)) {
      case wire::Kind::Call:
        if (left != cap) return bad("call of " + std::to_string(left) + " bytes, expected " + std::to_string(cap));
        in.captures = p;
        break;
      case wire::Kind::Buffer: {
        wire::BufferDesc d;
        if (left < sizeof d + cap) return bad("truncated call_buffer");
        std::memcpy(&d, p, sizeof d);
        if (d.len > left || wire::pad8(d.len) != left - sizeof d - cap)
          return bad("call_buffer claims " + std::to_string(d.len) + " bytes; the call carries " +
                     std::to_string(left - sizeof d - cap));
        in.captures = p + sizeof d;
        in.buffer = std::span(reinterpret_cast<std::byte*>(const_cast<uint8_t*>(p + sizeof d + cap)), d.len);
        break;
      }
      case wire::Kind::Written: {
        wire::WrittenDesc d;
        if (left != sizeof d + cap) return bad("malformed call_buffer (written form)");
        std::memcpy(&d, p, sizeof d);
        if (!inv_.runtime().is_registered(reinterpret_cast<void*>(d.addr), d.len))
          return bad("call_buffer destination is not registered memory of this process");
        in.captures = p + sizeof d;
        in.buffer = std::span(reinterpret_cast<std::byte*>(d.addr), d.len);
        break;
      }
      case wire::Kind::Read: {
        wire::ReadDesc d;
        if (left != sizeof d + cap) return bad("malformed call_buffer (read form)");
        std::memcpy(&d, p, sizeof d);
        if (d.len == 0 || d.len > kMaxReadBytes) return bad("call_buffer (read form) of " + std::to_string(d.len) + " bytes");
        in.captures = p + sizeof d;
        pulled = inv_.heap().allocate(d.len);
        auto& tx = inv_.tx(src_rank);
        uint64_t errors = tx.errors();
        fabric::SendWr wr;
        wr.opcode = fabric::Opcode::Read;
        wr.local = fabric::Sge{pulled.address(), static_cast<uint32_t>(d.len), pulled.lkey};
        wr.remote_addr = d.addr;
        wr.rkey = d.rkey;
        signal::Posted r = tx.post(wr, true);
        if (!r.ok()) {
          inv_.heap().free(pulled.addr);
          return bad(std::string("posting the READ failed: ") + fabric::to_string(r.result));
        }
        tx.wait(r.tag);
        if (tx.errors() != errors) {
          inv_.heap().free(pulled.addr);
          return bad(std::string("the READ of the caller's buffer failed: ") + fabric::to_string(tx.last_error()));
        }
        in.buffer = std::span(static_cast<std::byte*>(pulled.addr), d.len);
        break;
      }
      case wire::Kind::Return:
        if (left != sizeof rd + cap) return bad("malformed call_return");
        std::memcpy(&rd, p, sizeof rd);
        in.ret = &rd;
        in.captures = p + sizeof rd;
        break;
      case wire::Kind::Named: {
        wire::NamedDesc d;
        if (left < sizeof d) return bad("truncated named call");
        std::memcpy(&d, p, sizeof d);
        if (d.len > left || wire::pad8(d.len) != left - sizeof d) return bad("named call length mismatch");
        detail::t_caller = src_rank;
        e->named(src_rank, std::span(reinterpret_cast<const std::byte*>(p + sizeof d), d.len));
        if (notify) this->notify(nd);
        return;
      }
      default:
        return bad("unknown call kind");
    }
    struct Caller {
      int saved;
      explicit Caller(int r) : saved(detail::t_caller) { detail::t_caller = r; }
      ~Caller() { detail::t_caller = saved; }
    } caller(src_rank);
    e->fn(in);
  } catch (const Error& err) {
    if (pulled.addr) inv_.heap().free(pulled.addr);
    return bad(err.what());
  }
  if (pulled.addr) inv_.heap().free(pulled.addr);
  if (notify) this->notify(nd);
}

// ---------------------------------------------------------------- Invoker

Invoker& Invoker::current() {
  Invoker* i = g_current.load(std::memory_order_acquire);
  if (i == nullptr) fail("invoke: no Invoker (construct loom::invoke::Invoker collectively first)");
  return *i;
}

Invoker::Invoker(Runtime& rt, Config cfg)
    : rt_(rt), cfg_(cfg), ranks_(rt.size()), threads_(rt.threads_per_process()), serial_(g_invoker_serial.fetch_add(1)) {
  if (cfg_.chunk_size < 4096 || cfg_.chunk_size % 64 != 0 || cfg_.chunk_size > wire::kMaxRecord)
    fail("invoke: chunk size ", cfg_.chunk_size, " must be a multiple of 64 in 4 KiB..", wire::kMaxRecord);
  if (cfg_.max_chunks < 2 || cfg_.max_chunks > 4096) fail("invoke: max_chunks ", cfg_.max_chunks, " must be 2..4096");
  bool expected = false;
  if (!g_exists.compare_exchange_strong(expected, true)) fail("invoke: one Invoker per process at a time");
  fabric::QpCaps caps;
  caps.max_send_wr = cfg_.send_queue_depth;
  caps.max_recv_wr = 4;
  caps.max_inline = kInlineLimit;
  mesh_ = rt_.make_mesh(caps);
  for (int i = 0; i < threads_; ++i) inboxes_.push_back(std::make_unique<Inbox>(*this, i));

  // The service handlers find the current Invoker; they are registered once per Service.
  static std::mutex reg_mu;
  static std::vector<runtime::Service*> registered;
  chunks_fn_ = runtime::Service::id_of("loom.invoke.chunks");
  send_fn_ = runtime::Service::id_of("loom.invoke.send");
  {
    std::lock_guard<std::mutex> g(reg_mu);
    if (std::find(registered.begin(), registered.end(), &rt_.service()) == registered.end()) {
      registered.push_back(&rt_.service());
      rt_.service().register_handler("loom.invoke.chunks", [](const runtime::ServiceRequest& req) {
        std::shared_lock<std::shared_mutex> life(g_life);
        Invoker& inv = Invoker::current();
        auto r = decode<ChunkRequest>(req.payload, "chunk request");
        if (req.payload.size() != sizeof r) fail("chunk request: ", req.payload.size(), " bytes");
        if (r.thread >= static_cast<uint32_t>(inv.threads()))
          fail("chunk request for thread ", r.thread, "; this process has threads 0..", inv.threads() - 1);
        if (r.count == 0 || r.count > wire::kMaxInsertPerRotation) fail("chunk request for ", r.count, " chunks");
        if (r.chunk_size < 4096 || r.chunk_size % 64 != 0 || r.chunk_size > wire::kMaxRecord)
          fail("chunk request with chunk size ", r.chunk_size);
        Inbox::Announcement a;
        a.sender = (static_cast<uint64_t>(req.src_rank) << 32) | (r.serial & 0xffffffffu);
        a.control_addr = r.control_addr;
        a.control_rkey = r.control_rkey;
        a.first = r.first != 0;
        a.chunk_size = r.chunk_size;
        std::vector<std::byte> reply(r.count * sizeof(ChunkReply));
        for (uint32_t i = 0; i < r.count; ++i) {
          memory::RDMAMemory m = inv.heap().allocate(r.chunk_size);
          // All of it: heap memory is reused, and a stale record of an earlier channel whose
          // stamp happened to match this channel's offsets would run again.
          std::memset(m.addr, 0, r.chunk_size);
          std::memcpy(m.bytes() + wire::kProducerOffset + 8, &a.sender, 8);
          a.chunks.push_back(m);
          ChunkReply cr{m.address(), m.rkey, 0};
          std::memcpy(reply.data() + i * sizeof cr, &cr, sizeof cr);
        }
        inv.inbox(static_cast<int>(r.thread)).announce(std::move(a));
        return reply;
      });
      rt_.service().register_handler("loom.invoke.send", [](const runtime::ServiceRequest& req) {
        std::shared_lock<std::shared_mutex> life(g_life);
        Invoker& inv = Invoker::current();
        auto h = decode<SendHeader>(req.payload, "send-based call");
        if (h.thread >= static_cast<uint32_t>(inv.threads()))
          fail("send-based call for thread ", h.thread, "; this process has threads 0..", inv.threads() - 1);
        size_t flen = req.payload.size() - sizeof h;
        if (flen < wire::kFrameHeader || flen % 8 != 0) fail("send-based call of ", flen, " bytes is malformed");
        std::vector<std::byte> frame(req.payload.begin() + sizeof h, req.payload.end());
        inv.inbox(static_cast<int>(h.thread)).deliver_send(req.src_rank, std::move(frame));
        return std::vector<std::byte>{};
      });
    }
  }
  {
    std::unique_lock<std::shared_mutex> g(g_life);
    g_current.store(this, std::memory_order_release);
  }
  for (uint32_t i = 0; i < cfg_.helpers; ++i)
    helpers_.push_back(rt_.spawn_at(threads_ + static_cast<int>(i), "invoke-helper-" + std::to_string(i), [this, i] { helper_loop(static_cast<int>(i)); }));
  rt_.barrier();
}

Invoker::~Invoker() {
  rt_.barrier();  // every process is done calling
  {
    std::unique_lock<std::shared_mutex> g(g_life);
    g_current.store(nullptr, std::memory_order_release);
  }
  stop_.store(true, std::memory_order_release);
  for (auto& t : helpers_) t.join();
  mesh_.reset();  // collective: waits until nothing is in flight anywhere
  globals_.clear();
  inboxes_.clear();
  g_exists.store(false, std::memory_order_release);
}

Thread Invoker::self() const {
  const ThreadName& n = this_thread_name();
  if (n.label.empty()) fail("invoke: this thread was not started by the Loom runtime (use Runtime::spawn)");
  return Thread{rt_.rank(), n.thread};
}

void Invoker::check_failed(Thread t) const {
  if (t.rank < 0 || t.rank >= ranks_) fail("invoke: rank ", t.rank, " is not in 0..", ranks_ - 1);
  fail("invoke: thread ", t.index, " is not in 0..", threads_ - 1, " (threads per process: loomrun --threads)");
}

MessengerGlobal& Invoker::messengers_slow() {
  std::lock_guard<std::mutex> g(globals_mu_);
  globals_.push_back(std::make_unique<MessengerGlobal>(*this, serial_));
  t_global_ = TlsGlobal{serial_, globals_.back().get()};
  return *t_global_.global;
}

void Invoker::flush() { messengers().flush(); }

int Invoker::poll() {
  Thread me = self();
  if (me.index >= threads_) return 0;
  return inboxes_[static_cast<size_t>(me.index)]->poll();
}

int Invoker::poll(int index) {
  if (index < 0 || index >= threads_) fail("invoke: no thread ", index, " to poll");
  return inboxes_[static_cast<size_t>(index)]->poll();
}

int Invoker::progress() {
  MessengerGlobal& m = messengers();
  m.flush();
  if (async_n_.load(std::memory_order_acquire) != 0 && cfg_.helpers == 0) drain_async_all();
  const ThreadName& n = this_thread_name();
  if (!n.label.empty() && n.thread < threads_) return inboxes_[static_cast<size_t>(n.thread)]->poll();
  return 0;
}

void Invoker::note_async(Messenger* m) {
  std::lock_guard<std::mutex> g(async_mu_);
  if (std::find(async_.begin(), async_.end(), m) == async_.end()) {
    async_.push_back(m);
    async_n_.fetch_add(1, std::memory_order_release);
  }
}

void Invoker::drain_async_all() {
  std::vector<Messenger*> list;
  {
    std::lock_guard<std::mutex> g(async_mu_);
    list = async_;
  }
  for (Messenger* m : list) {
    if (m->drain_async()) {
      std::lock_guard<std::mutex> g(async_mu_);
      // Only if nothing was queued since: the owner re-notes it otherwise.
      if (!m->async_pending()) {
        async_.erase(std::remove(async_.begin(), async_.end(), m), async_.end());
        async_n_.fetch_sub(1, std::memory_order_release);
      }
    }
  }
}

void Invoker::helper_loop(int) {
  signal::Backoff b;
  while (!stop_.load(std::memory_order_acquire)) {
    int n = 0;
    for (auto& in : inboxes_) n += in->poll();
    if (async_n_.load(std::memory_order_acquire) != 0) drain_async_all();
    messengers().flush();  // broadcasts forwarded by this helper
    if (n > 0) b.reset();
    else b.pause();
  }
}

std::string Invoker::describe() {
  std::string out;
  char line[256];
  {
    std::lock_guard<std::mutex> g(globals_mu_);
    for (auto& mg : globals_)
      for (auto& m : mg->all()) {
        if (!m) continue;
        std::snprintf(line, sizeof line,
                      "messenger -> %d/%d: chunks %zu cur %zu pos %zu offset %llu consumed %llu open %d async %d records %llu\n",
                      m->dest_.rank, m->dest_.index, m->ring_.size(), m->cur_, m->pos_,
                      static_cast<unsigned long long>(m->g_), static_cast<unsigned long long>(m->consumed()), m->open_ ? 1 : 0,
                      m->async_pending() ? 1 : 0, static_cast<unsigned long long>(m->records_));
        out += line;
      }
  }
  for (auto& in : inboxes_)
    for (auto& c : in->channels_) {
      const uint8_t* base = c->ring[c->cur].bytes();
      uint64_t at = c->pos + 8 <= c->chunk_size ? wire::load_word(base + c->pos) : 0;
      uint64_t rot = wire::load_word(base + wire::kProducerOffset);
      std::snprintf(line, sizeof line,
                    "inbox %d <- rank %d: chunks %zu cur %zu pos %zu offset %llu pending %zu%s; word there: offset %llu len %zu; "
                    "rotation: offset %llu +%u\n",
                    in->index_, c->src_rank, c->ring.size(), c->cur, c->pos, static_cast<unsigned long long>(c->g),
                    c->pending.size(), c->broken ? " BROKEN" : "",
                    static_cast<unsigned long long>((at >> wire::kLenBits) << 3), wire::record_len(at),
                    static_cast<unsigned long long>(wire::rotation_offset(rot)), wire::rotation_inserted(rot));
      out += line;
    }
  return out;
}

void Invoker::report_stall() {
  log::warn("invoke: a wait has made no progress for a long time; channel state:\n", describe());
}

std::string Invoker::last_error() const {
  std::lock_guard<std::mutex> g(err_mu_);
  return last_error_;
}

void Invoker::report(const std::string& what) {
  uint64_t n = bad_calls_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> g(err_mu_);
    last_error_ = what;
  }
  if (n < 10) log::warn("invoke: ", what);
}

}  // namespace loom::invoke
