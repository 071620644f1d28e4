#include "dsm/fabric/shm/shm_provider.hpp"

#include <fcntl.h>
#include <numa.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "dsm/common/dsm_settings.hpp"
#include "dsm/common/error.hpp"
#include "dsm/common/log.hpp"
#include "dsm/common/system.hpp"
#include "dsm/signal/backoff.hpp"
#include "dsm/signal/futex.hpp"

namespace loom::fabric::shm {

namespace {

constexpr uint32_t kEndpointMagic = 0x4c4d5145;  // "LMQE"
constexpr uint32_t kCqSpare = 64;
constexpr uint32_t kMaxInline = 256;

struct EndpointBlob {
  uint32_t magic;
  int32_t rank;
  uint32_t qp_num;
  uint32_t pad;
};

uint32_t round_pow2(uint32_t x) {
  uint32_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

// True if [addr, addr+len) lies within [base, base+blen), without overflow.
bool covers(uint64_t base, uint64_t blen, uint64_t addr, uint64_t len) {
  if (addr < base) return false;
  uint64_t off = addr - base;
  return off <= blen && len <= blen - off;
}

// Finds a mounted hugetlbfs with enough free 2 MiB pages for at least one chunk.
std::string find_hugetlbfs() {
  std::vector<std::string> mounts = sys::hugetlbfs_mounts();
  if (mounts.empty()) return {};
  std::ifstream f("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  long free_pages = 0;
  f >> free_pages;
  return free_pages > 0 ? mounts.front() : std::string();
}

// Pushes one completion into a CQ ring that may belong to another process. Returns false if
// the ring is full (an overrun).
// `capacity` is the caller's validated copy: the header lives in memory another process can
// write, so its size fields are never used to index.
bool cq_push(CqHeader* h, CqSlot* slots, uint32_t capacity, const Completion& c, uint32_t retire_qp, uint64_t retire_seq) {
  const uint64_t mask = capacity - 1;
  uint64_t t = h->tail.load(std::memory_order_relaxed);
  for (;;) {
    uint64_t pos = t >> 1;
    CqSlot& s = slots[pos & mask];
    uint64_t seq = s.seq.load(std::memory_order_acquire);
    int64_t diff = static_cast<int64_t>(seq) - static_cast<int64_t>(pos);
    if (diff == 0) {
      if (h->tail.compare_exchange_weak(t, ((pos + 1) << 1) | 1u, std::memory_order_acq_rel)) {
        s.completion = c;
        s.retire_qp = retire_qp;
        s.retire_seq = retire_seq;
        s.seq.store(pos + 1, std::memory_order_release);
        if ((t & 1u) == 0) signal::futex_wake_all(signal::low_word(&h->tail));
        return true;
      }
    } else if (diff < 0) {
      // The slot still holds an entry from a lap ago. Either the ring is full, or a consumer
      // has claimed that entry and not yet released the slot (it may be preempted in
      // between): count before concluding, and wait for the release in the second case.
      if (pos - h->head.load(std::memory_order_acquire) >= capacity) return false;
      signal::cpu_relax();
      std::this_thread::yield();
      t = h->tail.load(std::memory_order_relaxed);
    } else {
      t = h->tail.load(std::memory_order_relaxed);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (addr_ != nullptr) munmap(addr_, len_);
    addr_ = o.addr_;
    len_ = o.len_;
    o.addr_ = nullptr;
    o.len_ = 0;
  }
  return *this;
}

Mapping::~Mapping() {
  if (addr_ != nullptr) munmap(addr_, len_);
}

Mapping Mapping::create(const std::string& path, size_t len) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) fail_errno("cannot create shared segment " + path);
  if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
    int e = errno;
    ::close(fd);
    ::unlink(path.c_str());
    throw SystemError("cannot size shared segment " + path, e);
  }
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    ::unlink(path.c_str());
    throw SystemError("cannot map shared segment " + path, e);
  }
  return Mapping(p, len);
}

Mapping Mapping::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail_errno("cannot open shared segment " + path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw SystemError("cannot stat " + path, e);
  }
  size_t len = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw SystemError("cannot map " + path, e);
  return Mapping(p, len);
}

// ---------------------------------------------------------------------------------------------
class ShmCq : public CompletionQueue {
 public:
  ShmCq(ShmProvider& p, uint32_t id, uint32_t depth) : p_(p), id_(id) {
    // Spare entries for error completions of unsignaled requests, which may arrive out of order.
    uint32_t cap = round_pow2((depth < 2 ? 2 : depth) + kCqSpare);
    size_t bytes = sizeof(CqHeader) + sizeof(CqSlot) * cap;
    map_ = Mapping::create(p.path("cq", p.rank(), id), bytes);
    h_ = new (map_.addr()) CqHeader();
    slots_ = reinterpret_cast<CqSlot*>(static_cast<uint8_t*>(map_.addr()) + sizeof(CqHeader));
    for (uint32_t i = 0; i < cap; ++i) new (&slots_[i]) CqSlot{};
    for (uint32_t i = 0; i < cap; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
    h_->capacity = cap;
    h_->mask = cap - 1;
    cap_ = cap;
    h_->head.store(0);
    h_->tail.store(1);  // count 0, awake
    h_->magic = kCqMagic;
  }
  ~ShmCq() override { ::unlink(p_.path("cq", p_.rank(), id_).c_str()); }

  int poll(std::span<Completion> out) override {
    int n = 0;
    while (static_cast<size_t>(n) < out.size()) {
      uint64_t h = h_->head.load(std::memory_order_relaxed);
      CqSlot& s = slots_[h & (cap_ - 1)];
      uint64_t seq = s.seq.load(std::memory_order_acquire);
      int64_t diff = static_cast<int64_t>(seq) - static_cast<int64_t>(h + 1);
      if (diff < 0) break;
      if (diff > 0) continue;  // another consumer took it; reload
      if (!h_->head.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel)) continue;
      out[n] = s.completion;
      uint32_t rq = s.retire_qp;
      uint64_t rs = s.retire_seq;
      s.seq.store(h + cap_, std::memory_order_release);
      if (rq != 0) retire(rq, rs);
      ++n;
    }
    return n;
  }

  void wait(std::chrono::nanoseconds timeout) override {
    uint64_t t = h_->tail.load(std::memory_order_acquire);
    if ((t >> 1) != h_->head.load(std::memory_order_acquire)) return;  // not empty
    if (t & 1u) {
      if (!h_->tail.compare_exchange_strong(t, t & ~uint64_t{1}, std::memory_order_acq_rel)) return;
      t &= ~uint64_t{1};
    }
    signal::futex_wait(signal::low_word(&h_->tail), static_cast<uint32_t>(t), timeout);
    h_->tail.fetch_or(1u, std::memory_order_acq_rel);  // awake again: producers skip the wake
  }

  void interrupt() override {
    h_->tail.fetch_or(1u, std::memory_order_acq_rel);
    signal::futex_wake_all(signal::low_word(&h_->tail));
  }

  uint32_t capacity() const override { return cap_; }
  bool overrun() const override { return h_->overrun.load(std::memory_order_acquire) != 0; }

  bool push_local(const Completion& c, uint32_t retire_qp, uint64_t retire_seq) {
    return cq_push(h_, slots_, cap_, c, retire_qp, retire_seq);
  }
  uint32_t id() const { return id_; }
  std::string describe() const {
    return detail::concat("cq head ", h_->head.load(), ", tail ", h_->tail.load() >> 1, ", capacity ", h_->capacity);
  }

  // Capacity bookkeeping: a CQ never overruns from its own QPs' send completions.
  std::atomic<uint64_t> reserved_send{0};
  std::atomic<uint64_t> reserved_recv{0};

 private:
  void retire(uint32_t qpn, uint64_t seq);

  ShmProvider& p_;
  uint32_t id_;
  Mapping map_;
  CqHeader* h_ = nullptr;
  CqSlot* slots_ = nullptr;
  uint32_t cap_ = 0;  // ours: the header's copy is writable by peers
};

namespace {
// Placement of a WRITE in address order, the last 8 bytes last: a trailing notification flag is
// seen only after the data before it (see docs/provider-contract.md).
//
// Up to 64 bytes are copied here with overlapping moves of a fixed width (as a library memcpy
// does inside), without the call: the library call (a PLT jump, a size dispatch) showed as a
// fifth of a 32-byte WRITE's profile.
template <typename T>
[[gnu::always_inline]] inline void move_pair(uint8_t* dst, const uint8_t* src, uint64_t n) {
  // sizeof(T) <= n <= 2 sizeof(T): [0, W) and [n - W, n) cover [0, n).
  constexpr size_t W = sizeof(T);
  T a, b;
  __builtin_memcpy(&a, src, W);
  __builtin_memcpy(&b, src + n - W, W);
  __builtin_memcpy(dst, &a, W);
  __builtin_memcpy(dst + n - W, &b, W);
}
using Bytes16 = uint64_t __attribute__((vector_size(16)));
[[gnu::always_inline]] inline void copy_small(uint8_t* dst, const uint8_t* src, uint64_t n) {  // n <= 64
  if (n >= 32) {
    move_pair<Bytes16>(dst, src, 32);
    move_pair<Bytes16>(dst + n - 32, src + n - 32, 32);
  } else if (n >= 16) {
    move_pair<Bytes16>(dst, src, n);
  } else if (n >= 8) {
    move_pair<uint64_t>(dst, src, n);
  } else if (n >= 4) {
    move_pair<uint32_t>(dst, src, n);
  } else if (n >= 2) {
    move_pair<uint16_t>(dst, src, n);
  } else if (n == 1) {
    *dst = *src;
  }
}
[[gnu::always_inline]] inline void place(uint8_t* dst, const uint8_t* src, uint64_t len) {
  if (len == 8) {
    std::memcpy(dst, src, 8);  // one 8-byte store
  } else if (len > 8) {
    if (len <= 72) copy_small(dst, src, len - 8);
    else std::memcpy(dst, src, len - 8);
    signal::store_fence();
    std::memcpy(dst + len - 8, src + len - 8, 8);
  } else {
    copy_small(dst, src, len);
  }
}
// place() out of line, for the fast path's large WRITEs: its library call, inline, made the path
// of every WRITE save registers and build a frame. Returns Ok so that the call is a jump.
[[gnu::noinline]] PostResult place_large(uint8_t* dst, const uint8_t* src, uint64_t len) {
  place(dst, src, len);
  return PostResult::Ok;
}

// The caches of a thread posting on thread-safe QPs: the QP it last posted on (by uid, which is
// never reused, so a QP created where a destroyed one lived cannot inherit its views).
struct ThreadKeyCache {
  uint64_t qp_uid = 0;
  KeyView remote;
  KeyView local;
};
thread_local ThreadKeyCache t_key_cache;
std::atomic<uint64_t> g_next_qp_uid{1};
}  // namespace

// ---------------------------------------------------------------------------------------------
class ShmQp : public QueuePair {
 public:
  ShmQp(ShmProvider& p, uint32_t qpn, int peer, ShmCq& scq, ShmCq& rcq, const QpCaps& caps)
      : p_(p), qpn_(qpn), peer_(peer), scq_(scq), rcq_(rcq), caps_(caps), single_thread_(caps.single_thread) {
    uint32_t cap = round_pow2(caps.max_recv_wr < 1 ? 1 : caps.max_recv_wr);
    size_t bytes = sizeof(RqHeader) + sizeof(RqEntry) * cap;
    rq_map_ = Mapping::create(p.path("rq", p.rank(), qpn), bytes);
    rq_ = new (rq_map_.addr()) RqHeader();
    rq_entries_ = reinterpret_cast<RqEntry*>(static_cast<uint8_t*>(rq_map_.addr()) + sizeof(RqHeader));
    rq_->capacity = cap;
    rq_->mask = cap - 1;
    rq_cap_ = cap;
    rq_->qp_num = qpn;
    rq_->recv_cq = rcq.id();
    rq_->owner_rank = p.rank();
    rq_->head.store(0);
    rq_->tail.store(0);
    rq_->magic = kRqMagic;
  }

  ~ShmQp() override {
    p_.forget_qp(qpn_);
    scq_.reserved_send.fetch_sub(caps_.max_send_wr);
    rcq_.reserved_recv.fetch_sub(caps_.max_recv_wr);
    ::unlink(p_.path("rq", p_.rank(), qpn_).c_str());
  }

  std::vector<std::byte> endpoint() const override {
    return encode_endpoint(EndpointBlob{kEndpointMagic, p_.rank(), qpn_, 0});
  }

  void connect(std::span<const std::byte> peer_endpoint) override {
    auto b = decode_endpoint<EndpointBlob>(peer_endpoint, kEndpointMagic, peer_, "shm");
    std::lock_guard<std::mutex> g(post_mu_);
    peer_rq_map_ = Mapping::open(p_.path("rq", peer_, b.qp_num));
    if (peer_rq_map_.size() < sizeof(RqHeader)) fail("shm: peer receive queue file is truncated");
    peer_rq_ = peer_rq_map_.as<RqHeader>();
    if (peer_rq_->magic != kRqMagic || peer_rq_->owner_rank != peer_ || peer_rq_->qp_num != b.qp_num)
      fail("shm: peer receive queue of rank ", peer_, " QP ", b.qp_num, " is not valid");
    uint64_t need = sizeof(RqHeader) + uint64_t{sizeof(RqEntry)} * peer_rq_->capacity;
    if (peer_rq_->capacity == 0 || (peer_rq_->capacity & (peer_rq_->capacity - 1)) != 0 || peer_rq_map_.size() < need)
      fail("shm: peer receive queue of rank ", peer_, " has a bad capacity");
    peer_rq_entries_ = reinterpret_cast<RqEntry*>(static_cast<uint8_t*>(peer_rq_map_.addr()) + sizeof(RqHeader));
    peer_rq_cap_ = peer_rq_->capacity;
    peer_cq_map_ = Mapping::open(p_.path("cq", peer_, peer_rq_->recv_cq));
    peer_cq_ = peer_cq_map_.as<CqHeader>();
    if (peer_cq_map_.size() < sizeof(CqHeader) || peer_cq_->magic != kCqMagic ||
        peer_cq_map_.size() < sizeof(CqHeader) + uint64_t{sizeof(CqSlot)} * peer_cq_->capacity)
      fail("shm: peer completion queue of rank ", peer_, " is not valid");
    peer_cq_cap_ = peer_cq_->capacity;
    if (peer_cq_cap_ == 0 || (peer_cq_cap_ & (peer_cq_cap_ - 1)) != 0)
      fail("shm: peer completion queue of rank ", peer_, " has a bad capacity");
    peer_cq_slots_ = reinterpret_cast<CqSlot*>(static_cast<uint8_t*>(peer_cq_map_.addr()) + sizeof(CqHeader));
    peer_qpn_ = b.qp_num;
    peer_keys_ = p_.key_table(peer_);
    if (peer_keys_ == nullptr) fail("shm: cannot map the key table of rank ", peer_);
    state_.store(QpState::Ready);
  }

  PostResult post_send(const SendWr& wr) override;
  PostResult post_write(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data) override;
  // The path of unsignaled WRITEs whose keys this QP has seen, compiled once per thread mode;
  // anything else (first use of a key, an error, a QP not ready) goes on to the general path:
  // post_general(*wr), or the WRITE's own when wr is null.
  // The local buffer comes as its three fields: an Sge in one piece went through the stack.
  template <bool kSingle>
  [[gnu::always_inline]] PostResult fast_write(uint64_t addr, uint32_t len, uint32_t lkey, uint64_t remote_addr,
                                               uint32_t rkey, bool inline_data, const SendWr* wr);
  PostResult post_general(const SendWr& wr);
  [[gnu::noinline]] PostResult post_write_general(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data);
  PostResult post_recv(const RecvWr& wr) override;
  QpState state() const override { return state_.load(std::memory_order_acquire); }
  void reset() override {
    std::lock_guard<std::mutex> g(post_mu_);
    if (peer_rq_ != nullptr) state_.store(QpState::Ready);
  }
  uint32_t qp_num() const override { return qpn_; }
  int peer_rank() const override { return peer_; }
  const QpCaps& caps() const override { return caps_; }
  // An inline WRITE is copied from the caller's buffer without the local key check.
  bool inline_helps() const override { return true; }
  uint8_t* remote_pointer(uint64_t remote_addr, uint32_t rkey, uint64_t len, uint32_t access) override {
    if (state() != QpState::Ready) return nullptr;
    // A view of its own: this is no post, so on a single-thread QP it may come from any thread
    // and must not touch the poster's remembered views.
    KeyView v;
    if (!view_key(peer_keys_, peer_, rkey, v) || !allows(v, remote_addr, len, access)) return nullptr;
    return v.mapped + (remote_addr - v.base);
  }

  void retire(uint64_t seq) {
    uint64_t cur = retired_.load(std::memory_order_relaxed);
    while (cur < seq && !retired_.compare_exchange_weak(cur, seq, std::memory_order_acq_rel)) {
    }
  }

 private:
  // Returns the status in a register (a returned struct of a byte and a word cost a store-
  // forwarding stall on every post).
  Status execute(const SendWr& wr, const uint8_t* inline_src, uint32_t& byte_len);
  template <bool kSingle>
  [[gnu::always_inline]] bool reserve(uint64_t* seq);
  bool reserve(uint64_t* seq) { return single_thread_ ? reserve<true>(seq) : reserve<false>(seq); }
  // Reports a request's completion (signaled, or failed); a failure moves the QP to Error.
  [[gnu::noinline]] void complete(const SendWr& wr, uint64_t seq, Status status, uint32_t byte_len,
                                  std::unique_lock<std::mutex>& g);
  // Translates (rkey, addr, len) at the peer into a pointer in this process.
  uint8_t* resolve(uint32_t key, uint64_t addr, uint64_t len, uint32_t need, Status* why);
  // Views of registrations, cached per QP (single-thread) or per posting thread.
  struct KeyViews {
    KeyView* remote;
    KeyView* local;
  };
  template <bool kSingle>
  [[gnu::always_inline]] KeyViews views();
  KeyViews views() { return single_thread_ ? views<true>() : views<false>(); }
  // rank < 0: a local key, used at its own addresses (nothing to map).
  bool view_key(const KeyTable* t, int rank, uint32_t key, KeyView& v);
  bool current(const KeyTable* t, int rank, uint32_t key, KeyView& v);
  static bool cached(const KeyView& v, uint32_t key, uint64_t addr, uint64_t len, uint32_t need);
  // The view was taken of `key` and its generation still stands.
  static bool stands(const KeyView& v, uint32_t key);
  // The viewed registration grants `need` on [addr, addr+len).
  static bool allows(const KeyView& v, uint64_t addr, uint64_t len, uint32_t need) {
    return (v.access & need) == need && covers(v.base, v.length, addr, len);
  }
  const uint8_t* local(const Sge& sge, uint32_t need, Status* why);
  bool take_recv(RqEntry* out, Status* why);
  // The completion a request raises at the peer when it consumes the receive `e`.
  Completion receive_completion(const RqEntry& e, Opcode op, uint64_t len) const {
    Completion c;
    c.wr_id = e.wr_id;
    c.opcode = op;
    c.byte_len = static_cast<uint32_t>(len);
    c.qp_num = peer_qpn_;
    c.src_rank = p_.rank();
    return c;
  }
  void push_remote(const Completion& c, Status* sender_status);

  ShmProvider& p_;
  uint32_t qpn_;
  int peer_;
  ShmCq& scq_;
  ShmCq& rcq_;
  QpCaps caps_;
  const bool single_thread_;
  const uint64_t uid_ = g_next_qp_uid.fetch_add(1, std::memory_order_relaxed);
  KeyView remote_view_;  // single-thread QPs only
  KeyView local_view_;
  std::atomic<QpState> state_{QpState::Init};

  std::mutex post_mu_;  // two-sided requests and (re)connection
  std::atomic<uint64_t> posted_{0};
  std::atomic<uint64_t> retired_{0};

  std::mutex recv_mu_;
  Mapping rq_map_;
  RqHeader* rq_ = nullptr;
  RqEntry* rq_entries_ = nullptr;

  Mapping peer_rq_map_;
  RqHeader* peer_rq_ = nullptr;
  RqEntry* peer_rq_entries_ = nullptr;
  Mapping peer_cq_map_;
  CqHeader* peer_cq_ = nullptr;
  CqSlot* peer_cq_slots_ = nullptr;
  uint32_t peer_qpn_ = 0;
  const KeyTable* peer_keys_ = nullptr;
  // Sizes as validated at creation / connect; the shared headers' copies are never trusted.
  uint32_t rq_cap_ = 0;
  uint32_t peer_rq_cap_ = 0;
  uint32_t peer_cq_cap_ = 0;
};

void ShmCq::retire(uint32_t qpn, uint64_t seq) {
  if (ShmQp* qp = p_.qp_by_num(qpn)) qp->retire(seq);
}

template <bool kSingle>
[[gnu::always_inline]] inline ShmQp::KeyViews ShmQp::views() {
  if (kSingle) return KeyViews{&remote_view_, &local_view_};
  ThreadKeyCache& c = t_key_cache;
  if (c.qp_uid != uid_) {
    c.qp_uid = uid_;
    c.remote.key = 0;
    c.local.key = 0;
  }
  return KeyViews{&c.remote, &c.local};
}

bool ShmQp::view_key(const KeyTable* t, int rank, uint32_t key, KeyView& v) {
  v.key = 0;
  uint32_t idx = key_index(key);
  if (t == nullptr || idx == 0 || idx >= kKeyCapacity) return false;
  const KeyEntry& e = t->entries[idx];
  // A seqlock read: generation, fields, generation again. Acquire loads keep the second read
  // of the generation after the fields (free on x86, where every load is an acquire).
  uint32_t gen = e.generation.load(std::memory_order_acquire);
  uint64_t base = e.base.load(std::memory_order_acquire);
  uint64_t length = e.length.load(std::memory_order_acquire);
  uint64_t seg = e.segment.load(std::memory_order_acquire);
  uint64_t segoff = e.seg_offset.load(std::memory_order_acquire);
  uint32_t access = e.access.load(std::memory_order_acquire);
  // Re-read the generation: a registration replaced while we read it is rejected, not mixed.
  if (gen == 0 || gen != key_generation(key) || e.generation.load(std::memory_order_relaxed) != gen) return false;
  if (base + length < base) return false;
  uint8_t* mapped = nullptr;
  if (rank >= 0) {
    ShmProvider::SegmentView sv = p_.segment(rank, seg);
    // The offset and length came from the peer's key table: the whole registration must lie
    // inside what we mapped, so that every range inside it is too (segments are never unmapped).
    if (sv.base == nullptr || segoff > sv.size || length > sv.size - segoff) return false;
    mapped = sv.base + segoff;
  }
  v.entry = &e;
  v.base = base;
  v.length = length;
  v.access = access;
  v.mapped = mapped;
  v.key = key;
  return true;
}

// The registration behind `key` as last viewed, if its generation still stands: fields of one
// generation never change, so one load revalidates the whole view.
[[gnu::always_inline]] inline bool ShmQp::stands(const KeyView& v, uint32_t key) {
  return v.key == key && key != 0 && v.entry->generation.load(std::memory_order_acquire) == key_generation(key);
}

[[gnu::always_inline]] inline bool ShmQp::current(const KeyTable* t, int rank, uint32_t key, KeyView& v) {
  return stands(v, key) || view_key(t, rank, key, v);
}

// The view already cached for `key` stands and allows [addr, addr+len) with `need`.
[[gnu::always_inline]] inline bool ShmQp::cached(const KeyView& v, uint32_t key, uint64_t addr, uint64_t len,
                                                 uint32_t need) {
  return stands(v, key) && allows(v, addr, len, need);
}

[[gnu::always_inline]] inline const uint8_t* ShmQp::local(const Sge& sge, uint32_t need, Status* why) {
  if (sge.length == 0) return reinterpret_cast<const uint8_t*>(sge.addr);
  KeyView& v = *views().local;
  if (!current(p_.own_keys(), -1, sge.lkey, v) || !allows(v, sge.addr, sge.length, need)) {
    *why = Status::LocalProtectionError;
    return nullptr;
  }
  return reinterpret_cast<const uint8_t*>(sge.addr);
}

[[gnu::always_inline]] inline uint8_t* ShmQp::resolve(uint32_t key, uint64_t addr, uint64_t len, uint32_t need, Status* why) {
  KeyView& v = *views().remote;
  if (!current(peer_keys_, peer_, key, v) || !allows(v, addr, len, need)) {
    *why = Status::RemoteAccessError;
    return nullptr;
  }
  return v.mapped + (addr - v.base);
}

bool ShmQp::take_recv(RqEntry* out, Status* why) {
  // The RNR retry of a NIC, done on the posting thread: wait (spin, yield, sleep) until the
  // target posts a receive, the peer dies, or LOOM_SHM_RNR_TIMEOUT_MS passes.
  signal::Backoff backoff;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    uint64_t h = peer_rq_->head.load(std::memory_order_relaxed);
    uint64_t tl = peer_rq_->tail.load(std::memory_order_acquire);
    if (tl != h) {
      if (tl - h > peer_rq_cap_) { *why = Status::RemoteOperationalError; return false; }
      *out = peer_rq_entries_[h & (peer_rq_cap_ - 1)];
      peer_rq_->head.store(h + 1, std::memory_order_release);
      return true;
    }
    if (backoff.should_sleep()) {
      if (!p_.peer_alive(peer_)) { *why = Status::PeerUnreachable; return false; }
      uint64_t limit = p_.rnr_timeout_ns();
      if (limit != 0 && static_cast<uint64_t>((std::chrono::steady_clock::now() - start).count()) > limit) {
        *why = Status::ReceiverNotReady;
        return false;
      }
    }
    backoff.pause();
  }
}

void ShmQp::push_remote(const Completion& c, Status* sender_status) {
  if (!cq_push(peer_cq_, peer_cq_slots_, peer_cq_cap_, c, 0, 0)) {
    peer_cq_->overrun.store(1, std::memory_order_release);
    signal::futex_wake_all(signal::low_word(&peer_cq_->tail));
    *sender_status = Status::RemoteOperationalError;
  }
}

Status ShmQp::execute(const SendWr& wr, const uint8_t* inline_src, uint32_t& byte_len) {
  Status status = Status::Success;
  Status why = Status::Success;
  const uint64_t len = wr.local.length;
  auto src_of = [&]() -> const uint8_t* {
    return inline_src != nullptr ? inline_src : local(wr.local, 0, &why);
  };
  switch (wr.opcode) {
    case Opcode::Write:
    case Opcode::WriteWithImm: {
      const uint8_t* src = src_of();
      if (src == nullptr && len != 0) return why;
      if (len != 0) {
        uint8_t* dst = resolve(wr.rkey, wr.remote_addr, len, kRemoteWrite, &why);
        if (dst == nullptr) return why;
        place(dst, src, len);
      }
      byte_len = static_cast<uint32_t>(len);
      if (wr.opcode == Opcode::WriteWithImm) {
        RqEntry e;
        if (!take_recv(&e, &why)) return why;
        Completion c = receive_completion(e, Opcode::RecvWriteWithImm, len);
        c.with_imm = true;
        c.imm = wr.imm;
        signal::store_fence();
        push_remote(c, &status);
      }
      return status;
    }
    case Opcode::Read: {
      uint8_t* dst = const_cast<uint8_t*>(local(wr.local, kLocalWrite, &why));
      if (dst == nullptr && len != 0) return why;
      if (len != 0) {
        uint8_t* src = resolve(wr.rkey, wr.remote_addr, len, kRemoteRead, &why);
        if (src == nullptr) return why;
        std::memcpy(dst, src, len);
      }
      byte_len = static_cast<uint32_t>(len);
      return status;
    }
    case Opcode::CompareSwap:
    case Opcode::FetchAdd: {
      uint8_t* dst = const_cast<uint8_t*>(local(wr.local, kLocalWrite, &why));
      if (dst == nullptr) return why;
      uint8_t* target = resolve(wr.rkey, wr.remote_addr, 8, kRemoteAtomic, &why);
      if (target == nullptr) return why;
      std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(target));
      uint64_t old;
      if (wr.opcode == Opcode::FetchAdd) {
        old = word.fetch_add(wr.compare_add, std::memory_order_seq_cst);
      } else {
        old = wr.compare_add;
        word.compare_exchange_strong(old, wr.swap, std::memory_order_seq_cst);
      }
      std::memcpy(dst, &old, 8);
      byte_len = 8;
      return status;
    }
    case Opcode::Send: {
      const uint8_t* src = src_of();
      if (src == nullptr && len != 0) return why;
      RqEntry e;
      if (!take_recv(&e, &why)) return why;
      Completion c = receive_completion(e, Opcode::Recv, len);
      if (len > e.length) {
        c.status = Status::LocalLengthError;
        status = Status::RemoteInvalidRequest;
      } else if (len != 0) {
        Status rs = Status::Success;
        uint8_t* dst = resolve(e.lkey, e.addr, len, kLocalWrite, &rs);
        if (dst == nullptr) {
          c.status = Status::LocalProtectionError;
          status = Status::RemoteOperationalError;
        } else {
          std::memcpy(dst, src, len);
        }
      }
      signal::store_fence();
      push_remote(c, &status);
      byte_len = static_cast<uint32_t>(len);
      return status;
    }
    default:
      status = Status::RemoteInvalidRequest;
      return status;
  }
}

template <bool kSingle>
[[gnu::always_inline]] inline bool ShmQp::reserve(uint64_t* seq) {
  // Reserve a send-queue entry: refused at the depth, as ibv_post_send refuses with ENOMEM.
  uint64_t p = posted_.load(std::memory_order_relaxed);
  if (kSingle) {
    // One poster: nobody else moves `posted_`, so a plain store reserves the entry.
    if (p - retired_.load(std::memory_order_acquire) >= caps_.max_send_wr) return false;
    posted_.store(p + 1, std::memory_order_relaxed);
  } else {
    do {
      // `p` may be older than `retired` (other threads posted and were retired since we read
      // it): then the queue is not full, and the CAS below fails and refreshes `p`.
      uint64_t r = retired_.load(std::memory_order_acquire);
      if (p > r && p - r >= caps_.max_send_wr) return false;
    } while (!posted_.compare_exchange_weak(p, p + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
  }
  *seq = p + 1;
  return true;
}

void ShmQp::complete(const SendWr& wr, uint64_t seq, Status status, uint32_t byte_len, std::unique_lock<std::mutex>& g) {
  if (status != Status::Success && status != Status::WorkRequestFlushed) {
    state_.store(QpState::Error, std::memory_order_release);
    log::debug("shm: QP ", qpn_, " to rank ", peer_, " entered the error state: ", to_string(wr.opcode), " ",
               to_string(status));
  }
  // An unsignaled request that failed reports too (as on a NIC); its completion may land after
  // later ones, which the CQ's spare entries absorb.
  if (!g.owns_lock() && !single_thread_) g.lock();
  Completion c;
  c.wr_id = wr.wr_id;
  c.status = status;
  c.opcode = wr.opcode;
  c.byte_len = byte_len;
  c.qp_num = qpn_;
  c.src_rank = p_.rank();
  if (!scq_.push_local(c, qpn_, seq)) {
    // Cannot happen while the send CQ holds max_send_wr of every QP attached (checked at
    // create_qp); kept as a loud failure rather than a lost completion.
    fail("shm: send completion queue overran on QP ", qpn_, " (posted ", posted_.load(), ", retired ", retired_.load(),
         ", seq ", seq, ", ", scq_.describe(), ")");
  }
}

template <bool kSingle>
[[gnu::always_inline]] inline PostResult ShmQp::fast_write(uint64_t addr, uint32_t len, uint32_t lkey,
                                                            uint64_t remote_addr, uint32_t rkey, bool inline_data,
                                                            const SendWr* wr) {
  KeyViews kv = views<kSingle>();
  // Inline data is copied straight from the caller's buffer: the WRITE is carried out before
  // the post returns, which is all "captured at post time" asks, and no local key is checked.
  if (len == 0 || state_.load(std::memory_order_acquire) != QpState::Ready ||
      !(inline_data ? len <= caps_.max_inline : cached(*kv.local, lkey, addr, len, 0)) ||
      !cached(*kv.remote, rkey, remote_addr, len, kRemoteWrite)) [[unlikely]] {
    if (wr != nullptr) return post_general(*wr);
    return post_write_general(Sge{addr, len, lkey}, remote_addr, rkey, inline_data);
  }
  uint64_t seq;
  if (!reserve<kSingle>(&seq)) return PostResult::QueueFull;
  uint8_t* dst = kv.remote->mapped + (remote_addr - kv.remote->base);
  const uint8_t* src = reinterpret_cast<const uint8_t*>(addr);
  // Every exit of this path is a return or a jump: nothing to save, no frame to build.
  if (len > 72) return place_large(dst, src, len);
  place(dst, src, len);
  return PostResult::Ok;
}

// The two fast paths start on a cache line. Where they fell within a line decided a small post's
// cost, by where unrelated code happened to end: the same Transmitter loop ran 16-byte WRITEs at
// 93-97 M/s with post_write 48 bytes into a line and at 110-115 M/s with it at the start (one
// binary each, three runs, same machine hour; the hand-written loop at 110-119 in both). With the
// alignment fixed, moving the caller's code by 16, 32 or 48 bytes changed nothing measurable.
[[gnu::aligned(64)]] PostResult ShmQp::post_send(const SendWr& wr) {
  // The bulk of the traffic, unsignaled one-sided WRITEs whose keys were seen before, on a path
  // of its own that calls nothing: a NIC's doorbell costs a few tens of nanoseconds, and so did
  // this function before it. Everything else, including the first use of a key and every error,
  // takes the general path.
  if (wr.opcode != Opcode::Write || wr.signaled) return post_general(wr);
  const Sge& l = wr.local;
  if (single_thread_) return fast_write<true>(l.addr, l.length, l.lkey, wr.remote_addr, wr.rkey, wr.inline_data, &wr);
  return fast_write<false>(l.addr, l.length, l.lkey, wr.remote_addr, wr.rkey, wr.inline_data, &wr);
}

[[gnu::aligned(64)]] PostResult ShmQp::post_write(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data) {
  // length and lkey arrive packed in one register; taken apart there, not through the stack.
  static_assert(sizeof(Sge) == 16 && offsetof(Sge, length) == 8 && offsetof(Sge, lkey) == 12 &&
                std::endian::native == std::endian::little);
  const auto words = std::bit_cast<std::array<uint64_t, 2>>(local);
  const uint64_t addr = words[0];
  const auto len = static_cast<uint32_t>(words[1]), lkey = static_cast<uint32_t>(words[1] >> 32);
  if (single_thread_) return fast_write<true>(addr, len, lkey, remote_addr, rkey, inline_data, nullptr);
  return fast_write<false>(addr, len, lkey, remote_addr, rkey, inline_data, nullptr);
}

PostResult ShmQp::post_write_general(Sge local, uint64_t remote_addr, uint32_t rkey, bool inline_data) {
  return post_general(write_request(local, remote_addr, rkey, inline_data));
}

PostResult ShmQp::post_general(const SendWr& wr) {
  if (PostResult bad = check_send(wr, caps_); bad != PostResult::Ok) return bad;
  // Inline data is captured now, as a NIC copies it into the WQE at post time.
  uint8_t inline_buf[kMaxInline];  // create_qp caps max_inline at kMaxInline
  const uint8_t* inline_src = nullptr;
  if (wr.inline_data) {
    if (wr.local.length > 0) {
      std::memcpy(inline_buf, reinterpret_cast<const void*>(wr.local.addr), wr.local.length);
      inline_src = inline_buf;
    }
  }
  if (state_.load(std::memory_order_acquire) == QpState::Init) return PostResult::NotConnected;
  // Two-sided requests consume the peer's receive queue, which has one consumer: this QP.
  // Signaled requests reserve their entry and push their completion under the lock, so that
  // completions enter the CQ in WQE order, as on a NIC (the CQ then never holds more entries
  // than the queue is deep). Unsignaled one-sided requests, the bulk, take no lock: the
  // initiating thread carries them out by itself.
  const bool two_sided = wr.opcode == Opcode::Send || wr.opcode == Opcode::WriteWithImm;
  std::unique_lock<std::mutex> g(post_mu_, std::defer_lock);
  if ((two_sided || wr.signaled) && !single_thread_) g.lock();
  uint64_t seq;
  if (!reserve(&seq)) return PostResult::QueueFull;
  Status status = Status::Success;
  uint32_t byte_len = 0;
  if (state_.load(std::memory_order_acquire) == QpState::Error) status = Status::WorkRequestFlushed;
  else status = execute(wr, inline_src, byte_len);
  // An unsignaled success frees its entry once a later signaled completion is polled.
  if (wr.signaled || status != Status::Success) complete(wr, seq, status, byte_len, g);
  return PostResult::Ok;
}

PostResult ShmQp::post_recv(const RecvWr& wr) {
  std::unique_lock<std::mutex> g(recv_mu_, std::defer_lock);
  if (!single_thread_) g.lock();
  uint64_t h = rq_->head.load(std::memory_order_acquire);
  uint64_t t = rq_->tail.load(std::memory_order_relaxed);
  if (t - h >= caps_.max_recv_wr) return PostResult::QueueFull;
  rq_entries_[t & (rq_cap_ - 1)] = RqEntry{wr.wr_id, wr.local.addr, wr.local.length, wr.local.lkey};
  rq_->tail.store(t + 1, std::memory_order_release);
  return PostResult::Ok;
}

// ---------------------------------------------------------------------------------------------
ShmProvider::ShmProvider(const ProviderContext& ctx) : ctx_(ctx), qps_(new std::atomic<ShmQp*>[kMaxQps]) {
  if (ctx.job_dir.empty()) fail("shm provider: no job directory (start the program with loomrun)");
  for (uint32_t i = 0; i < kMaxQps; ++i) qps_[i].store(nullptr);
  keys_ = Mapping::create(path("keys", ctx.rank, 0), sizeof(KeyTable));
  KeyTable* t = keys_.as<KeyTable>();
  t->pid = static_cast<int32_t>(getpid());
  t->capacity = kKeyCapacity;
  t->alive.store(1);
  t->magic = kKeyMagic;
  key_generation_.assign(kKeyCapacity, 0);
  for (uint32_t i = kKeyCapacity - 1; i >= 1; --i) free_key_indices_.push_back(i);
  peers_.resize(static_cast<size_t>(ctx.size));
  for (auto& peer : peers_) {
    peer.fast.reset(new std::atomic<uint8_t*>[kFastSegments]);
    peer.fast_size.reset(new std::atomic<uint64_t>[kFastSegments]);
    for (size_t i = 0; i < kFastSegments; ++i) {
      peer.fast[i].store(nullptr, std::memory_order_relaxed);
      peer.fast_size[i].store(0, std::memory_order_relaxed);
    }
  }
  dead_.reset(new std::atomic<int>[static_cast<size_t>(ctx.size)]);
  for (int i = 0; i < ctx.size; ++i) dead_[static_cast<size_t>(i)].store(0);
  rnr_timeout_ns_ = static_cast<uint64_t>(settings::get_int(settings::dsm::kShmRnrTimeout)) * 1000000ull;

  std::string mount = find_hugetlbfs();
  if (!mount.empty() && settings::get_bool(settings::dsm::kHugePages)) {
    huge_dir_ = mount + "/loom-" + ctx.job_id;
    if (mkdir(huge_dir_.c_str(), 0700) != 0 && errno != EEXIST) huge_dir_.clear();
  }
  info_.name = "shm";
  info_.huge_pages = !huge_dir_.empty();
  info_.max_qp_depth = 1u << 16;
  info_.max_inline = kMaxInline;
  info_.max_message = 1u << 30;
  info_.description = "shared memory between processes on one host (" + ctx.job_dir + ")";
}

ShmProvider::~ShmProvider() {
  keys_.as<KeyTable>()->alive.store(0, std::memory_order_release);
  for (auto& [base, c] : chunks_) ::unlink(c.file.c_str());
  chunks_.clear();
  ::unlink(path("keys", ctx_.rank, 0).c_str());
  if (!huge_dir_.empty()) ::rmdir(huge_dir_.c_str());
}

std::string ShmProvider::path(const std::string& kind, int rank, uint64_t id) const {
  return ctx_.job_dir + "/" + kind + "." + std::to_string(rank) + "." + std::to_string(id);
}

Chunk ShmProvider::map_chunk(size_t size, int numa_node) {
  if (size == 0) fail("shm: cannot map a chunk of 0 bytes");
  std::lock_guard<std::mutex> g(mu_);
  uint64_t seg = next_segment_++;
  Chunk c;
  c.size = size;
  c.numa_node = numa_node;
  c.provider_handle = seg;
  std::string file;
  Mapping m;
  constexpr size_t kHuge = 2u << 20;
  if (!huge_dir_.empty() && size % kHuge == 0) {
    file = huge_dir_ + "/seg." + std::to_string(ctx_.rank) + "." + std::to_string(seg);
    try {
      m = Mapping::create(file, size);
      c.huge_pages = true;
    } catch (const Error& e) {
      log::debug("shm: huge-page segment failed (", e.what(), "); using normal pages");
    }
  }
  if (m.addr() == nullptr) {
    file = path("seg", ctx_.rank, seg);
    m = Mapping::create(file, size);
  }
  if (numa_node >= 0 && numa_available() >= 0 && numa_node <= numa_max_node()) {
    numa_tonode_memory(m.addr(), size, numa_node);
  }
  c.addr = m.addr();
  chunks_.emplace(reinterpret_cast<uintptr_t>(c.addr), LocalChunk{size, seg, std::move(m), file});
  return c;
}

void ShmProvider::unmap_chunk(const Chunk& c) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = chunks_.find(reinterpret_cast<uintptr_t>(c.addr));
  if (it == chunks_.end()) fail("shm: unmap_chunk of an address that is not a mapped chunk");
  // Registrations inside the chunk are revoked first, so peers get an error, not stale memory.
  KeyTable* t = keys_.as<KeyTable>();
  for (uint32_t i = 1; i < kKeyCapacity; ++i) {
    if (t->entries[i].generation.load() != 0 && t->entries[i].segment.load() == it->second.segment) {
      t->entries[i].generation.store(0, std::memory_order_release);
      free_key_indices_.push_back(i);
    }
  }
  ::unlink(it->second.file.c_str());
  chunks_.erase(it);
}

MemoryRegion ShmProvider::register_memory(void* addr, size_t len, uint32_t access) {
  std::lock_guard<std::mutex> g(mu_);
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  auto it = chunks_.upper_bound(a);
  if (it == chunks_.begin()) fail("shm: register_memory(", addr, ", ", len, "): not inside a chunk from map_chunk");
  --it;
  if (!covers(it->first, it->second.size, a, len))
    fail("shm: register_memory(", addr, ", ", len, "): range is not inside one mapped chunk");
  if (free_key_indices_.empty()) fail("shm: too many memory registrations (limit ", kKeyCapacity - 1, ")");
  uint32_t idx = free_key_indices_.back();
  free_key_indices_.pop_back();
  uint16_t gen = static_cast<uint16_t>(key_generation_[idx] + 1);
  if (gen == 0) gen = 1;
  key_generation_[idx] = gen;
  KeyEntry& e = keys_.as<KeyTable>()->entries[idx];
  e.access.store(access, std::memory_order_relaxed);
  e.segment.store(it->second.segment, std::memory_order_relaxed);
  e.seg_offset.store(a - it->first, std::memory_order_relaxed);
  e.base.store(a, std::memory_order_relaxed);
  e.length.store(len, std::memory_order_relaxed);
  e.generation.store(gen, std::memory_order_release);
  MemoryRegion mr;
  mr.addr = addr;
  mr.length = len;
  mr.lkey = mr.rkey = make_key(idx, gen);
  mr.access = access;
  return mr;
}

void ShmProvider::deregister(const MemoryRegion& mr) {
  std::lock_guard<std::mutex> g(mu_);
  uint32_t idx = key_index(mr.lkey);
  if (idx == 0 || idx >= kKeyCapacity) fail("shm: deregister of an invalid key ", mr.lkey);
  KeyEntry& e = keys_.as<KeyTable>()->entries[idx];
  if (e.generation.load() != key_generation(mr.lkey)) fail("shm: deregister of key ", mr.lkey, " that is not registered");
  e.generation.store(0, std::memory_order_release);
  free_key_indices_.push_back(idx);
}

std::unique_ptr<CompletionQueue> ShmProvider::create_cq(uint32_t depth) {
  uint32_t id;
  {
    std::lock_guard<std::mutex> g(mu_);
    id = next_cq_++;
  }
  if (depth == 0 || depth > (1u << 22)) fail("shm: completion queue depth ", depth, " out of range (1..4194304)");
  return std::make_unique<ShmCq>(*this, id, depth);
}

std::unique_ptr<QueuePair> ShmProvider::create_qp(int peer_rank, CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                                  const QpCaps& caps) {
  if (peer_rank < 0 || peer_rank >= ctx_.size) fail("shm: create_qp to rank ", peer_rank, ", but the job has ", ctx_.size, " ranks");
  if (caps.max_send_wr == 0 || caps.max_send_wr > info_.max_qp_depth || caps.max_recv_wr == 0 ||
      caps.max_recv_wr > info_.max_qp_depth)
    fail("shm: queue depths must be 1..", info_.max_qp_depth, " (got send ", caps.max_send_wr, ", recv ", caps.max_recv_wr, ")");
  if (caps.max_inline > info_.max_inline) fail("shm: max_inline ", caps.max_inline, " exceeds ", info_.max_inline);
  auto* scq = dynamic_cast<ShmCq*>(&send_cq);
  auto* rcq = dynamic_cast<ShmCq*>(&recv_cq);
  if (scq == nullptr || rcq == nullptr) fail("shm: completion queues belong to another provider");
  if (scq->reserved_send.load() + caps.max_send_wr + (scq == rcq ? scq->reserved_recv.load() + caps.max_recv_wr : 0) >
      scq->capacity())
    fail("shm: send completion queue (", scq->capacity(), " entries) too small for the send queues attached to it");
  scq->reserved_send.fetch_add(caps.max_send_wr);
  rcq->reserved_recv.fetch_add(caps.max_recv_wr);
  uint32_t qpn = next_qp_.fetch_add(1);
  if (qpn >= kMaxQps) fail("shm: too many queue pairs (limit ", kMaxQps - 1, ")");
  auto qp = std::make_unique<ShmQp>(*this, qpn, peer_rank, *scq, *rcq, caps);
  qps_[qpn].store(qp.get(), std::memory_order_release);
  return qp;
}

ShmQp* ShmProvider::qp_by_num(uint32_t qpn) const {
  return qpn < kMaxQps ? qps_[qpn].load(std::memory_order_acquire) : nullptr;
}

void ShmProvider::forget_qp(uint32_t qpn) {
  if (qpn < kMaxQps) qps_[qpn].store(nullptr, std::memory_order_release);
}

const KeyTable* ShmProvider::key_table(int rank) {
  if (rank < 0 || rank >= ctx_.size) return nullptr;
  if (rank == ctx_.rank) return keys_.as<KeyTable>();
  Peer& p = peers_[static_cast<size_t>(rank)];
  std::lock_guard<std::mutex> g(mu_);
  if (p.keys.addr() == nullptr) {
    try {
      Mapping m = Mapping::open(path("keys", rank, 0));
      if (m.size() < sizeof(KeyTable) || m.as<KeyTable>()->magic != kKeyMagic) return nullptr;
      p.keys = std::move(m);
    } catch (const Error&) {
      return nullptr;
    }
  }
  return p.keys.as<KeyTable>();
}

ShmProvider::SegmentView ShmProvider::segment_slow(int rank, uint64_t segment) {
  if (rank < 0 || rank >= ctx_.size) return {};
  Peer& p = peers_[static_cast<size_t>(rank)];
  // First use: map the segment file. Mappings stay until the provider closes, so a pointer
  // published here never dangles, even for our own segments after unmap_chunk.
  std::lock_guard<std::mutex> g(mu_);
  auto it = p.segments.find(segment);
  if (it != p.segments.end()) return SegmentView{static_cast<uint8_t*>(it->second.addr()), it->second.size()};
  Mapping m;
  try {
    m = Mapping::open(path("seg", rank, segment));
  } catch (const Error&) {
    if (huge_dir_.empty()) return {};
    try {
      m = Mapping::open(huge_dir_ + "/seg." + std::to_string(rank) + "." + std::to_string(segment));
    } catch (const Error&) {
      return {};
    }
  }
  SegmentView v{static_cast<uint8_t*>(m.addr()), m.size()};
  p.segments.emplace(segment, std::move(m));
  if (segment < kFastSegments) {
    p.fast_size[segment].store(v.size, std::memory_order_relaxed);
    p.fast[segment].store(v.base, std::memory_order_release);
  }
  return v;
}

bool ShmProvider::peer_alive(int rank) const {
  if (rank < 0 || rank >= ctx_.size) return false;
  if (rank == ctx_.rank) return true;
  if (dead_[static_cast<size_t>(rank)].load(std::memory_order_relaxed)) return false;
  const KeyTable* t = const_cast<ShmProvider*>(this)->key_table(rank);
  bool alive = t != nullptr && t->alive.load(std::memory_order_acquire) != 0 &&
               (::kill(t->pid, 0) == 0 || errno != ESRCH);
  if (!alive) dead_[static_cast<size_t>(rank)].store(1, std::memory_order_relaxed);
  return alive;
}

}  // namespace loom::fabric::shm
