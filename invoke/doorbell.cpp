#include "loom/invoke/doorbell.hpp"

#include <cstring>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/futex.hpp"
#include "loom/dsm/runtime/remote_memory.hpp"
#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

Doorbells::Doorbells(Invoker& inv) : inv_(inv), threads_(inv.threads()) {
  Runtime& rt = inv_.runtime();
  mem_ = rt.heap().allocate(kStride * static_cast<size_t>(threads_));
  std::memset(mem_.addr, 0, mem_.size);
  RemoteMemoryLocator here{rt.rank(), rt.local_zone(), mem_.address(), mem_.size, mem_.rkey};
  const auto all = rt.bootstrap().allgather_value(here);
  peers_.resize(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    uint8_t* base = r == static_cast<size_t>(rt.rank())
                        ? mem_.bytes()
                        : inv_.tx(static_cast<int>(r)).remote_pointer(all[r].addr, all[r].rkey, all[r].size,
                                                                           fabric::kRemoteWrite);
    if (base == nullptr) {
      remote_ = inv_.config().remote_bells;
      continue;
    }
    for (int i = 0; i < threads_; ++i) peers_[r].push_back(reinterpret_cast<uint32_t*>(base + kStride * static_cast<size_t>(i)));
  }
  where_ = all;
  wake_fn_ = runtime::Service::id_of("loom.invoke.bell");
}

Doorbells::~Doorbells() { inv_.runtime().heap().free(mem_.addr); }

void Doorbells::ring_process(int rank) {
  for (int i = 0; i < threads_; ++i) ring(Thread{rank, i});
}

void Doorbells::ring_process(int rank, signal::Transmitter& tx) {
  if (reachable(rank)) return ring_process(rank);
  if (remote_) ring_across(rank, -1, tx);
}

void Doorbells::ring_across(int rank, int index, signal::Transmitter& tx) {
  inv_.messengers().bell_checks().ring(rank, index, tx);
}

void Doorbells::send_wake(int rank, std::span<const uint16_t> indices) {
  wakes_sent_.fetch_add(1, std::memory_order_relaxed);
  inv_.runtime().service().call(rank, wake_fn_, std::as_bytes(indices));
}

void Doorbells::wake_from_wire(int src_rank, std::span<const std::byte> payload) {
  if (payload.empty() || payload.size() % sizeof(uint16_t) != 0 ||
      payload.size() > sizeof(uint16_t) * static_cast<size_t>(threads_))
    fail("invoke: a wake from rank ", src_rank, " of ", payload.size(), " bytes is malformed (2 bytes a thread, ",
         threads_, " threads at most)");
  for (size_t at = 0; at < payload.size(); at += sizeof(uint16_t)) {
    uint16_t index;
    std::memcpy(&index, payload.data() + at, sizeof index);
    if (index >= threads_)
      fail("invoke: a wake from rank ", src_rank, " names thread ", index, "; this process has threads 0..", threads_ - 1);
    uint32_t* w = mine(index);
    if (std::atomic_ref<uint32_t>(*w).load(std::memory_order_acquire) != kSleeping) continue;
    woken_.fetch_add(1, std::memory_order_relaxed);
    wake(w);
  }
}

void Doorbells::sleep_on(int index) {
  wait::futex_wait(reinterpret_cast<const std::atomic<uint32_t>*>(mine(index)), kSleeping, kMaxSleep);
}

void Doorbells::wake(uint32_t* w) {
  std::atomic_ref<uint32_t>(*w).store(kAwake, std::memory_order_relaxed);
  wait::futex_wake_all(reinterpret_cast<const std::atomic<uint32_t>*>(w));
}

}  // namespace loom::invoke
