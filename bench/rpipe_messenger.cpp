#include "bench/rpipe_messenger.hpp"

#include <atomic>
#include <span>
#include <vector>

#include "bench/bench_common.hpp"
#include "loom/invoke/calls.hpp"

namespace loom::bench {
namespace {

std::atomic<uint64_t> g_arrived{0};

// Runs at the receiver: the payload arrived (its bytes are in the receiver's chunk).
struct Arrive {
  void operator()(std::span<std::byte> payload) const {
    g_arrived.fetch_add(payload.empty() ? 0 : 1, std::memory_order_release);
  }
};

struct Channel {
  invoke::Invoker& inv;
  invoke::Thread peer;
  std::vector<std::byte> payload;
  void send(size_t size) { invoke::call_buffer(peer, Arrive{}, std::span<const std::byte>(payload.data(), size)); }
  // Waits (running calls) until `count` payloads have arrived here.
  void wait(uint64_t count) {
    inv.wait_until([&] { return g_arrived.load(std::memory_order_acquire) >= count; });
  }
};

Channel channel(invoke::Invoker& inv, size_t size) {
  const int rank = inv.runtime().rank();
  return Channel{inv, invoke::Thread{rank ^ 1, 0}, std::vector<std::byte>(size, std::byte{1})};
}

}  // namespace

double messenger_latency_us(invoke::Invoker& inv, size_t size, int n) {
  Runtime& rt = inv.runtime();
  Channel c = channel(inv, size);
  auto rounds = [&](int k) {
    for (int i = 0; i < k; ++i) {
      const uint64_t want = g_arrived.load(std::memory_order_relaxed) + 1;
      if (rt.rank() == 0) {
        c.send(size);
        c.wait(want);
      } else {
        c.wait(want);
        c.send(size);
      }
    }
  };
  rounds(n / 10 + 1);  // warm, as the rwrite rows
  rt.barrier();
  const auto t0 = clk::now();
  rounds(n);
  return seconds_since(t0) * 1e6 / (2.0 * n);
}

double messenger_rate_MBps(invoke::Invoker& inv, size_t size, int n) {
  Runtime& rt = inv.runtime();
  Channel c = channel(inv, size);
  const uint64_t base = g_arrived.load(std::memory_order_relaxed);
  rt.barrier();
  const auto t0 = clk::now();
  if (rt.rank() == 0) {
    for (int i = 0; i < n; ++i) c.send(size);
    c.wait(base + 1);
  } else {
    c.wait(base + static_cast<uint64_t>(n));
    c.send(8);
  }
  const double mbps = static_cast<double>(size) * n / seconds_since(t0) / 1e6;
  rt.barrier();
  return mbps;
}

}  // namespace loom::bench
