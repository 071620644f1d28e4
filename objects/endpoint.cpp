#include "objects/endpoint.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "coherence/lane.hpp"
#include "dsm/common/error.hpp"
#include "dsm/common/log.hpp"
#include "dsm/runtime/connect.hpp"

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

Endpoint::Endpoint(Runtime& rt) : rt_(rt), keys_(static_cast<size_t>(rt.size())) {
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
    rt_.barrier();  // peers' requests on our queue pairs are done
  } catch (const std::exception& e) {
    log::error("objects: Endpoint teardown: ", e.what());
  }
  for (auto& l : lanes_) {
    l->fabric.reset();
    rt_.allocator().free_chunk(l->scratch);
  }
}

// A worker thread has a lane of its own; any other thread shares the spare (under its mutex).
Endpoint::Lane& Endpoint::my_lane(size_t& index) {
  const int t = loom::this_thread_name().thread;
  index = t >= 0 && static_cast<size_t>(t) + 1 < lanes_.size() ? static_cast<size_t>(t) : lanes_.size() - 1;
  return *lanes_[index];
}

namespace {
// The registration this thread used last, per thread: the common case (an object's operations
// on one owner's memory) takes no lock. Registrations live as long as the Runtime, so a hit is
// never stale for its Endpoint.
struct LastKey {
  const Endpoint* ep = nullptr;
  RemoteMemoryLocator reg;
};
thread_local LastKey t_last_key;
}  // namespace

uint32_t Endpoint::rkey_for(int rank, uint64_t addr, size_t len) {
  if (rank < 0 || rank >= rt_.size()) fail("objects: rank ", rank, " is not in 0..", rt_.size() - 1);
  if (len == 0) fail("objects: an access of 0 bytes at rank ", rank);
  if (addr + len < addr) fail("objects: [0x", std::hex, addr, ", +0x", len, ") wraps around");
  if (t_last_key.ep == this && t_last_key.reg.rank == rank && t_last_key.reg.holds(addr, len)) return t_last_key.reg.rkey;
  std::optional<RemoteMemoryLocator> found;
  {
    std::shared_lock<std::shared_mutex> g(keys_mu_);
    for (const RemoteMemoryLocator& r : keys_[static_cast<size_t>(rank)])
      if (r.holds(addr, len)) found = r;
  }
  if (!found) {
    found = registration_at(rt_, rank, addr, len);
    std::unique_lock<std::shared_mutex> g(keys_mu_);
    keys_[static_cast<size_t>(rank)].push_back(*found);
    ++lookups_;
  }
  t_last_key = LastKey{this, *found};
  return found->rkey;
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
  std::lock_guard<std::mutex> g(l.mu);
  if (l.completed < ticket) complete(l);
}

void Request::wait() {
  if (ep_ != nullptr) ep_->complete_up_to(lane_, ticket_);
}

void Endpoint::flush() {
  size_t index;
  Lane& l = my_lane(index);
  std::lock_guard<std::mutex> g(l.mu);
  complete(l);
}

Request Endpoint::post_bytes(bool get, int rank, uint64_t addr, void* out, const void* in, size_t len, bool wait) {
  const uint32_t rkey = rkey_for(rank, addr, len);
  size_t index;
  Lane& l = my_lane(index);
  std::lock_guard<std::mutex> g(l.mu);
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

uint64_t Endpoint::atomic(fabric::Opcode op, GlobalPtr<uint64_t> p, uint64_t a, uint64_t b) {
  if (p.address() % 8 != 0) fail("objects: atomic on 0x", std::hex, p.address(), " at rank ", std::dec, p.rank(), ": not 8-byte aligned");
  const uint32_t rkey = rkey_for(p.rank(), p.address(), 8);
  size_t index;
  Lane& l = my_lane(index);
  std::lock_guard<std::mutex> g(l.mu);
  l.fabric->post_mem(p.rank(), op, l.scratch, kAtomicWord, 8, p.address(), rkey, a, b);
  ++l.issued;
  complete(l);
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(l.scratch.bytes() + kAtomicWord)).load(std::memory_order_acquire);
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
  RemoteMemoryLocator loc;
  if (rank == rt_.rank()) {
    const memory::RDMAMemory m = rt_.heap().allocate(bytes);
    loc = RemoteMemoryLocator{rank, m.zone, m.address(), m.size, m.rkey};
  } else {
    loc = remote_allocate(rt_, rank, bytes);
  }
  std::unique_lock<std::shared_mutex> g(keys_mu_);
  keys_[static_cast<size_t>(rank)].push_back(loc);  // its key, without a lookup
  return GlobalPtr<std::byte>(rank, loc.addr);
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
