#include "loom/objects/endpoint.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "loom/coherence/lane.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/fabric/ordered_copy.hpp"
#include "loom/dsm/runtime/connect.hpp"
#include "loom/objects/settings.hpp"

namespace loom::objects {

namespace {
// Each lane stages gets and puts in this much registered memory; one more word for atomics.
constexpr size_t kStaging = size_t{4} << 20;
constexpr size_t kAtomicWord = kStaging;
constexpr size_t kScratchBytes = kStaging + 64;
}  // namespace

// A set of queue pairs (coherence::Lane) with its staging area: the gets waiting to be copied
// out, and how many of the thread's requests were started and completed.
struct Endpoint::Lane {
  std::mutex mu;
  std::unique_ptr<coherence::Lane> fabric;
  memory::RDMAMemory scratch;
  size_t used = 0;
  std::vector<Copy> copies;
  uint64_t issued = 0, completed = 0;
};

Endpoint::Endpoint(Runtime& rt)
    : rt_(rt), direct_(rt.provider().info().cpu_atomics && loom::settings::get_bool(settings::kDirect)), keys_(static_cast<size_t>(rt.size())) {
  const int nlanes = rt.threads_per_process() + 1;
  for (int i = 0; i < nlanes; ++i) {
    auto l = std::make_unique<Lane>();
    l->scratch = rt.allocator().allocate_chunk(kScratchBytes);
    l->fabric = std::make_unique<coherence::Lane>(rt.provider(), rt.size(), l->scratch);
    // connect_all pairs the i-th queue pair list of every rank: every rank makes its lanes in
    // the same order.
    runtime::connect_all(rt.bootstrap(), l->fabric->queue_pairs());
    lanes_.push_back(std::move(l));
  }
}

Endpoint::~Endpoint() {
  try {
    for (auto& l : lanes_) {
      std::lock_guard<std::mutex> g(l->mu);
      complete(*l);
    }
    rt_.bootstrap().barrier();  // peers' requests on our queue pairs are done
  } catch (const std::exception& e) {
    log::error("objects: Endpoint teardown: ", e.what());
  }
  for (auto& l : lanes_) {
    l->fabric.reset();
    rt_.allocator().free_chunk(l->scratch);
  }
}

// A runtime worker thread (index below threads_per_process) has a lane of its own, which only it
// uses: no lock. Any other thread shares the spare, under its mutex.
Endpoint::Lane& Endpoint::my_lane(size_t& index, std::unique_lock<std::mutex>& hold) {
  const ThreadName& n = loom::this_thread_name();
  const int t = n.thread;
  if (!n.label.empty() && t >= 0 && static_cast<size_t>(t) + 1 < lanes_.size()) {
    index = static_cast<size_t>(t);
    return *lanes_[index];
  }
  index = lanes_.size() - 1;
  hold = std::unique_lock<std::mutex>(lanes_[index]->mu);
  return *lanes_[index];
}

namespace {
// The registration this thread used last, per thread: the common case (an object's operations
// on one owner's memory) takes no lock. Registrations live as long as the Runtime, so a hit is
// never stale for its Endpoint.
struct LastKey {
  const void* ep = nullptr;
  RemoteMemoryLocator reg;
  uint8_t* mapped = nullptr;
};
thread_local LastKey t_last_key;
}  // namespace

// The mapping of a whole registration, checked by the provider (key, bounds, access) once.
uint8_t* Endpoint::map(const RemoteMemoryLocator& reg) {
  if (!direct_) return nullptr;
  fabric::QueuePair* qp = lanes_.front()->fabric->queue_pairs()[static_cast<size_t>(reg.rank)];
  return qp->remote_pointer(reg.addr, reg.rkey, reg.size, fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic);
}

void Endpoint::bad_access(int rank, uint64_t addr, size_t len) const {
  if (rank < 0 || rank >= rt_.size()) fail("objects: rank ", rank, " is not in 0..", rt_.size() - 1);
  if (len == 0) fail("objects: an access of 0 bytes at rank ", rank);
  fail("objects: [0x", std::hex, addr, ", +0x", len, ") wraps around");
}

// Every operation passes here: the checks and the cache hit stay small enough to inline into
// it; the rest is out of line.
inline Endpoint::Known Endpoint::known_for(int rank, uint64_t addr, size_t len) {
  if (rank < 0 || rank >= rt_.size() || len == 0 || addr + len < addr) [[unlikely]]
    bad_access(rank, addr, len);
  const LastKey& last = t_last_key;
  if (last.ep == this && last.reg.rank == rank && last.reg.holds(addr, len)) [[likely]]
    return Known{last.reg, last.mapped};
  return learn(rank, addr, len);
}

Endpoint::Known Endpoint::learn(int rank, uint64_t addr, size_t len) {
  key_scans_.fetch_add(1, std::memory_order_relaxed);
  std::optional<Known> found;
  {
    std::shared_lock<std::shared_mutex> g(keys_mu_);
    for (const Known& k : keys_[static_cast<size_t>(rank)])
      if (k.reg.holds(addr, len)) found = k;
  }
  if (!found) {
    const RemoteMemoryLocator reg = registration_at(rt_, rank, addr, len);
    found = Known{reg, map(reg)};
    std::unique_lock<std::shared_mutex> g(keys_mu_);
    keys_[static_cast<size_t>(rank)].push_back(*found);
    ++lookups_;
  }
  t_last_key = LastKey{this, found->reg, found->mapped};
  return *found;
}

uint64_t Endpoint::registration_lookups() const {
  std::shared_lock<std::shared_mutex> g(keys_mu_);
  return lookups_;
}

// Every request of the lane done; the gets' bytes copied out. A failed request leaves the
// staging empty (its error propagates).
void Endpoint::complete(Lane& l) {
  try {
    l.fabric->wait();
  } catch (...) {
    l.copies.clear();
    l.used = 0;
    l.completed = l.issued;
    throw;
  }
  for (const Copy& c : l.copies) std::memcpy(c.out, l.scratch.bytes() + c.off, c.len);
  l.copies.clear();
  l.used = 0;
  l.completed = l.issued;
}

void Endpoint::complete_up_to(size_t lane, uint64_t ticket) {
  Lane& l = *lanes_.at(lane);
  std::unique_lock<std::mutex> g;
  if (lane + 1 == lanes_.size()) g = std::unique_lock<std::mutex>(l.mu);
  if (l.completed < ticket) complete(l);
}

void Request::wait() {
  if (ep_ != nullptr) ep_->complete_up_to(lane_, ticket_);
}

void Endpoint::flush() {
  size_t index;
  std::unique_lock<std::mutex> hold;
  Lane& l = my_lane(index, hold);
  if (l.completed != l.issued) complete(l);
}

namespace {
bool whole_words(const void* a, const void* b, size_t len) {
  return (reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | len) % 8 == 0;
}
}  // namespace

// Whole aligned words move as relaxed atomic words: peers' atomics on the same words (a state
// word beside the bytes of a slot) race with the copy by design, and then it is no data race.
// A put's last word is a release store, placed last (the provider's WRITE order).
void Endpoint::direct_get(void* out, const uint8_t* src, size_t len) {
  if (!whole_words(out, src, len)) {
    std::memcpy(out, src, len);
    return;
  }
  auto* o = static_cast<uint64_t*>(out);
  const auto* w = reinterpret_cast<const uint64_t*>(src);
  for (size_t k = 0; k < len / 8; ++k) o[k] = std::atomic_ref<const uint64_t>(w[k]).load(std::memory_order_relaxed);
}

void Endpoint::direct_put(uint8_t* dst, const void* in, size_t len) {
  if (!whole_words(dst, in, len)) {
    fabric::place(dst, static_cast<const uint8_t*>(in), len);
    return;
  }
  const auto* i = static_cast<const uint64_t*>(in);
  auto* w = reinterpret_cast<uint64_t*>(dst);
  const size_t n = len / 8;
  for (size_t k = 0; k + 1 < n; ++k) std::atomic_ref<uint64_t>(w[k]).store(i[k], std::memory_order_relaxed);
  // The last word last, releasing the words before it: pairs with a reader's acquire of that
  // word (a notified flag), as fabric::place does for a WRITE (ordered_copy.hpp).
  std::atomic_ref<uint64_t>(w[n - 1]).store(i[n - 1], std::memory_order_release);
}

Request Endpoint::post_bytes(bool get, int rank, uint64_t addr, void* out, const void* in, size_t len, bool wait) {
  const Known k = known_for(rank, addr, len);
  if (k.mapped != nullptr) {  // done at once: the bytes move as the provider would move them
    uint8_t* p = k.mapped + (addr - k.reg.addr);
    if (get) direct_get(out, p, len);
    else direct_put(p, in, len);
    return Request{};
  }
  return post_fabric(get, rank, addr, k.reg.rkey, out, in, len, wait);
}

Request Endpoint::post_fabric(bool get, int rank, uint64_t addr, uint32_t rkey, void* out, const void* in, size_t len, bool wait) {
  size_t index;
  std::unique_lock<std::mutex> hold;
  Lane& l = my_lane(index, hold);
  for (size_t done = 0; done < len;) {
    const size_t piece = std::min(len - done, kStaging);
    if (l.used + piece > kStaging) complete(l);
    if (get) {
      l.copies.push_back(Copy{l.used, static_cast<uint8_t*>(out) + done, piece});
    } else {
      std::memcpy(l.scratch.bytes() + l.used, static_cast<const uint8_t*>(in) + done, piece);
    }
    l.fabric->post_mem(rank, get ? fabric::Opcode::Read : fabric::Opcode::Write, l.scratch, l.used,
                       static_cast<uint32_t>(piece), addr + done, rkey);
    l.used += (piece + 7) & ~size_t{7};
    done += piece;
  }
  Request r;
  r.ep_ = this;
  r.lane_ = index;
  r.ticket_ = ++l.issued;
  if (wait) complete(l);
  return r;
}

Request Endpoint::get_bytes_async(int rank, uint64_t addr, void* out, size_t len) {
  if (out == nullptr) fail("objects: get into a null buffer");
  return post_bytes(true, rank, addr, out, nullptr, len, false);
}

Request Endpoint::put_bytes_async(int rank, uint64_t addr, const void* in, size_t len) {
  if (in == nullptr) fail("objects: put from a null buffer");
  return post_bytes(false, rank, addr, nullptr, in, len, false);
}

// Blocking: posted and completed under one hold of the lane.
void Endpoint::get_bytes(int rank, uint64_t addr, void* out, size_t len) {
  if (out == nullptr) fail("objects: get into a null buffer");
  post_bytes(true, rank, addr, out, nullptr, len, true);
}
void Endpoint::put_bytes(int rank, uint64_t addr, const void* in, size_t len) {
  if (in == nullptr) fail("objects: put from a null buffer");
  post_bytes(false, rank, addr, nullptr, in, len, true);
}

void Endpoint::misaligned(GlobalPtr<uint64_t> p) {
  fail("objects: atomic on 0x", std::hex, p.address(), " at rank ", std::dec, p.rank(), ": not 8-byte aligned");
}

// The provider's own atomic on a mapped word (sequentially consistent, as it runs them).
uint64_t Endpoint::cpu_atomic(fabric::Opcode op, uint8_t* word, uint64_t a, uint64_t b) {
  std::atomic_ref<uint64_t> w(*reinterpret_cast<uint64_t*>(word));
  if (op == fabric::Opcode::FetchAdd) return w.fetch_add(a, std::memory_order_seq_cst);
  w.compare_exchange_strong(a, b, std::memory_order_seq_cst);
  return a;  // the old value either way
}

uint64_t Endpoint::atomic_load(GlobalPtr<uint64_t> p) {
  if (p.address() % 8 != 0) [[unlikely]] misaligned(p);
  const Known k = known_for(p.rank(), p.address(), 8);
  if (k.mapped != nullptr)
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(k.mapped + (p.address() - k.reg.addr))).load(std::memory_order_seq_cst);
  return atomic_fabric(fabric::Opcode::FetchAdd, p, k.reg.rkey, 0, 0);
}

Request Endpoint::atomic_load_async(GlobalPtr<uint64_t> p, uint64_t* out) {
  if (out == nullptr) fail("objects: an asynchronous atomic without a place for its result");
  if (p.address() % 8 != 0) [[unlikely]] misaligned(p);
  const Known k = known_for(p.rank(), p.address(), 8);
  if (k.mapped != nullptr) {
    *out = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(k.mapped + (p.address() - k.reg.addr))).load(std::memory_order_seq_cst);
    return Request{};
  }
  return atomic_fabric_async(fabric::Opcode::FetchAdd, p, k.reg.rkey, 0, 0, out);
}

uint64_t Endpoint::atomic(fabric::Opcode op, GlobalPtr<uint64_t> p, uint64_t a, uint64_t b) {
  if (p.address() % 8 != 0) [[unlikely]] misaligned(p);
  const Known k = known_for(p.rank(), p.address(), 8);
  if (k.mapped != nullptr) return cpu_atomic(op, k.mapped + (p.address() - k.reg.addr), a, b);
  return atomic_fabric(op, p, k.reg.rkey, a, b);
}

uint64_t Endpoint::atomic_fabric(fabric::Opcode op, GlobalPtr<uint64_t> p, uint32_t rkey, uint64_t a, uint64_t b) {
  size_t index;
  std::unique_lock<std::mutex> hold;
  Lane& l = my_lane(index, hold);
  l.fabric->post_mem(p.rank(), op, l.scratch, kAtomicWord, 8, p.address(), rkey, a, b);
  ++l.issued;
  complete(l);
  // The old value the provider placed in the scratch word before the completion that
  // complete() consumed (the completion queue's acquire orders it); acquire for a thread that
  // reads the word without having polled.
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(l.scratch.bytes() + kAtomicWord)).load(std::memory_order_acquire);
}

// The old value lands in the staging area and is copied out at completion, like a get's bytes.
Request Endpoint::atomic_async(fabric::Opcode op, GlobalPtr<uint64_t> p, uint64_t a, uint64_t b, uint64_t* old) {
  if (old == nullptr) fail("objects: an asynchronous atomic without a place for its result");
  if (p.address() % 8 != 0) [[unlikely]] misaligned(p);
  const Known k = known_for(p.rank(), p.address(), 8);
  if (k.mapped != nullptr) {
    *old = cpu_atomic(op, k.mapped + (p.address() - k.reg.addr), a, b);
    return Request{};
  }
  return atomic_fabric_async(op, p, k.reg.rkey, a, b, old);
}

Request Endpoint::atomic_fabric_async(fabric::Opcode op, GlobalPtr<uint64_t> p, uint32_t rkey, uint64_t a, uint64_t b, uint64_t* old) {
  size_t index;
  std::unique_lock<std::mutex> hold;
  Lane& l = my_lane(index, hold);
  if (l.used + 8 > kStaging) complete(l);
  l.copies.push_back(Copy{l.used, old, 8});
  l.fabric->post_mem(p.rank(), op, l.scratch, l.used, 8, p.address(), rkey, a, b);
  l.used += 8;
  Request r;
  r.ep_ = this;
  r.lane_ = index;
  r.ticket_ = ++l.issued;
  return r;
}

void Endpoint::atomic_store(GlobalPtr<uint64_t> p, uint64_t v) {
  uint64_t cur = atomic_load(p);
  for (;;) {
    const uint64_t old = compare_swap(p, cur, v);
    if (old == cur) return;
    cur = old;
  }
}

GlobalPtr<std::byte> Endpoint::allocate_bytes(int rank, size_t bytes) {
  if (rank < 0 || rank >= rt_.size()) fail("objects: allocate at rank ", rank, ", not in 0..", rt_.size() - 1);
  if (bytes == 0) fail("objects: allocation of 0 bytes");
  // The key is not cached here: the allocation is part of a registration, and the cache holds
  // whole registrations (a cached part outlived its allocation and split later operations on the
  // same registration between two entries, each a miss of the per-thread last key).
  if (rank == rt_.rank()) return GlobalPtr<std::byte>(rank, rt_.heap().allocate(bytes).address());
  return GlobalPtr<std::byte>(rank, remote_allocate(rt_, rank, bytes).addr);
}

void Endpoint::deallocate_bytes(GlobalPtr<std::byte> p) {
  if (p.null()) return;
  if (p.rank() >= rt_.size()) fail("objects: deallocate at rank ", p.rank(), ", not in 0..", rt_.size() - 1);
  if (p.rank() == rt_.rank()) {
    if (!rt_.heap().find(p.local())) fail("objects: deallocate of 0x", std::hex, p.address(), ": not an allocation of this process");
    rt_.heap().free(p.local());
    return;
  }
  remote_free(rt_, RemoteMemoryLocator{p.rank(), -1, p.address(), 1, 0});
}

}  // namespace loom::objects
