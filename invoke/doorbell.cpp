#include "loom/invoke/doorbell.hpp"

#include <cstring>

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
    if (base == nullptr) continue;
    for (int i = 0; i < threads_; ++i) peers_[r].push_back(reinterpret_cast<uint32_t*>(base + kStride * static_cast<size_t>(i)));
  }
}

Doorbells::~Doorbells() { inv_.runtime().heap().free(mem_.addr); }

void Doorbells::ring_process(int rank) {
  for (int i = 0; i < threads_; ++i) ring(Thread{rank, i});
}

void Doorbells::sleep_on(int index) {
  wait::futex_wait(reinterpret_cast<const std::atomic<uint32_t>*>(mine(index)), kSleeping, kMaxSleep);
}

void Doorbells::wake(uint32_t* w) {
  std::atomic_ref<uint32_t>(*w).store(kAwake, std::memory_order_relaxed);
  wait::futex_wake_all(reinterpret_cast<const std::atomic<uint32_t>*>(w));
}

}  // namespace loom::invoke
