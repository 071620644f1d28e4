// Posting on a shm queue pair: the fast path of unsignaled WRITEs with keys seen before (no
// call, no frame), the general path, and one function per opcode. One translation unit: what
// is inlined here decides the cost of a small post (bench/README.md).
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstring>

#include "loom/dsm/fabric/ordered_copy.hpp"
#include "loom/dsm/fabric/shm/shm_qp.hpp"

namespace loom::fabric::shm {

namespace {
// A result the fabric writes into the initiator's memory (a READ's data, an atomic's old value).
// Requests in flight may name one word nobody reads (a sink), and with the emulated wire two
// threads carry them out (the poster, and the wire's engine): an aligned word is stored
// atomically, as a NIC's DMA writes race with nothing.
inline void put_result(uint8_t* dst, const uint8_t* src, uint64_t len) {
  if (len == 8 && reinterpret_cast<uintptr_t>(dst) % 8 == 0) {
    uint64_t v;
    std::memcpy(&v, src, 8);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(dst)).store(v, std::memory_order_relaxed);
  } else {
    std::memcpy(dst, src, len);
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
}  // namespace

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

// The registration behind `key` as last viewed, if its generation still stands: fields of one
// generation never change, so one load revalidates the whole view.
[[gnu::always_inline]] inline bool ShmQp::stands(const KeyView& v, uint32_t key) {
  // Pairs with the registration's release of its generation (KeyTable: the fields are written
  // before it, and a deregistration's store of 0 retires them).
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

// The local source of a WRITE or SEND: the captured inline bytes, or the checked local buffer.
[[gnu::always_inline]] inline const uint8_t* ShmQp::source(const SendWr& wr, const uint8_t* inline_src, Status* why) {
  return inline_src != nullptr ? inline_src : local(wr.local, 0, why);
}

Status ShmQp::execute(const SendWr& wr, const uint8_t* inline_src, uint32_t& byte_len) {
  switch (wr.opcode) {
    case Opcode::Write:
    case Opcode::WriteWithImm:
      return execute_write(wr, inline_src, byte_len);
    case Opcode::Read:
      return execute_read(wr, byte_len);
    case Opcode::CompareSwap:
    case Opcode::FetchAdd:
      return execute_atomic(wr, byte_len);
    case Opcode::Send:
      return execute_send(wr, inline_src, byte_len);
    default:
      return Status::RemoteInvalidRequest;
  }
}

// WRITE and WRITE_WITH_IMM: the ordered copy; the immediate consumes a receive at the peer and
// raises its completion there after the data.
Status ShmQp::execute_write(const SendWr& wr, const uint8_t* inline_src, uint32_t& byte_len) {
  Status status = Status::Success, why = Status::Success;
  const uint64_t len = wr.local.length;
  const uint8_t* src = source(wr, inline_src, &why);
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
    wait::store_fence();
    push_remote(c, &status);
  }
  return status;
}

Status ShmQp::execute_read(const SendWr& wr, uint32_t& byte_len) {
  Status why = Status::Success;
  const uint64_t len = wr.local.length;
  uint8_t* dst = const_cast<uint8_t*>(local(wr.local, kLocalWrite, &why));
  if (dst == nullptr && len != 0) return why;
  if (len != 0) {
    uint8_t* src = resolve(wr.rkey, wr.remote_addr, len, kRemoteRead, &why);
    if (src == nullptr) return why;
    put_result(dst, src, len);
  }
  byte_len = static_cast<uint32_t>(len);
  return Status::Success;
}

// CMP_SWAP and FETCH_ADD: one sequentially consistent atomic on the target word (atomic among
// fabric atomics, as the contract asks); the old value lands in the local buffer.
Status ShmQp::execute_atomic(const SendWr& wr, uint32_t& byte_len) {
  Status why = Status::Success;
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
  put_result(dst, reinterpret_cast<const uint8_t*>(&old), 8);
  byte_len = 8;
  return Status::Success;
}

// SEND: consumes the peer's next receive; a receive too small or not writable fails both sides.
Status ShmQp::execute_send(const SendWr& wr, const uint8_t* inline_src, uint32_t& byte_len) {
  Status status = Status::Success, why = Status::Success;
  const uint64_t len = wr.local.length;
  const uint8_t* src = source(wr, inline_src, &why);
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
  wait::store_fence();
  push_remote(c, &status);
  byte_len = static_cast<uint32_t>(len);
  return status;
}

template <bool kSingle>
[[gnu::always_inline]] inline bool ShmQp::reserve(uint64_t* seq) {
  // Reserve a send-queue entry: refused at the depth, as ibv_post_send refuses with ENOMEM.
  uint64_t p = posted_.load(std::memory_order_relaxed);
  if (kSingle) {
    // One poster: nobody else moves `posted_`, so a plain store reserves the entry. The load of
    // `retired_` pairs with ShmQp::retire's acq_rel CAS (the completer's poll): an entry counted
    // retired has been read out of the send queue before it is reused.
    if (p - retired_.load(std::memory_order_acquire) >= caps_.max_send_wr) return false;
    posted_.store(p + 1, std::memory_order_relaxed);
  } else {
    do {
      // `p` may be older than `retired` (other threads posted and were retired since we read
      // it): then the queue is not full, and the CAS below fails and refreshes `p`.
      uint64_t r = retired_.load(std::memory_order_acquire);  // pairs with ShmQp::retire, as above
      if (p > r && p - r >= caps_.max_send_wr) return false;
    } while (!posted_.compare_exchange_weak(p, p + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
  }
  *seq = p + 1;
  return true;
}

template <bool kSingle>
[[gnu::always_inline]] inline PostResult ShmQp::fast_write(uint64_t addr, uint32_t len, uint32_t lkey,
                                                            uint64_t remote_addr, uint32_t rkey, bool inline_data,
                                                            const SendWr* wr) {
  KeyViews kv = views<kSingle>();
  // Inline data is copied straight from the caller's buffer: the WRITE is carried out before
  // the post returns, which is all "captured at post time" asks, and no local key is checked.
  // The state's acquire pairs with the release that moved the QP to Error (shm_qp.cpp, shm_qp_wire.cpp).
  if (len == 0 || state_.load(std::memory_order_acquire) != QpState::Ready || wire_ != nullptr ||
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

// The two fast paths start on a cache line: where they fell within one decided a small post's
// cost, by where unrelated code happened to end (bench/README.md, "Code position").
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
  if (wire_ != nullptr) return post_wired(wr, inline_src);
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

PostResult ShmQp::post_foreign(const SendWr& wr, const std::function<Status(uint32_t& byte_len)>& execute) {
  if (PostResult bad = check_send(wr, caps_); bad != PostResult::Ok) return bad;
  if (state_.load(std::memory_order_acquire) == QpState::Init) return PostResult::NotConnected;
  std::unique_lock<std::mutex> g(post_mu_, std::defer_lock);
  if (wr.signaled && !single_thread_) g.lock();
  uint64_t seq;
  if (!reserve(&seq)) return PostResult::QueueFull;
  uint32_t byte_len = 0;
  const Status status = state_.load(std::memory_order_acquire) == QpState::Error ? Status::WorkRequestFlushed : execute(byte_len);
  if (wr.signaled || status != Status::Success) complete(wr, seq, status, byte_len, g);
  return PostResult::Ok;
}

// reserve() for the files that cannot inline it (shm_qp_wire.cpp), last in this unit so that
// nothing before it moves.
bool ShmQp::reserve_entry(uint64_t* seq) { return reserve(seq); }

}  // namespace loom::fabric::shm
