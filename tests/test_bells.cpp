// Doorbells across the network (invoke/bell_checks.hpp): a worker thread of another node that
// sleeps on its doorbell is woken by the call that reaches it — a READ of its bell on the call's
// queue pair, then a wake through the service — not by its sleep running out. Inside a node (and
// without a wire) bells are rung in place and no check is made. Runs under loomrun at 2 and 4
// processes, with and without LOOM_WIRE.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/fabric.hpp"
#include "loom/invoke/calls.hpp"
#include "loom/invoke/invoker.hpp"
#include "tests/mp_test.hpp"

using namespace loom;
using namespace loom::invoke;
using loom::test::rt;

namespace {

// The ranks whose bells rank 0 cannot map (another emulated node): those that cannot map its.
std::vector<int> across_from_zero(Invoker& inv) {
  const auto far = rt().bootstrap().allgather_value(static_cast<uint8_t>(!inv.bells().reachable(0)));
  std::vector<int> out;
  for (int r = 1; r < rt().size(); ++r)
    if (far[static_cast<size_t>(r)] != 0) out.push_back(r);
  return out;
}

// Waits until worker thread 0 of `peer` (across the wire) shows asleep on its doorbell, read as
// the checks read it: a timed wait would depend on how long the peer's back-off takes to reach
// its bell, which a loaded machine stretches from 1.3 ms to tens.
bool wait_until_asleep(Invoker& inv, int peer) {
  memory::RDMAMemory block = inv.heap().allocate(inv.bells().block_bytes());
  const Doorbells::Locator& at = inv.bells().remote(peer);
  signal::Transmitter& tx = inv.tx(peer);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool asleep = false;
  while (!asleep && std::chrono::steady_clock::now() < deadline) {
    const fabric::Sge into{block.address(), static_cast<uint32_t>(inv.bells().block_bytes()), block.lkey};
    const signal::Posted p = tx.post(fabric::read_request(into, at.addr, at.rkey), true);
    if (!p.ok()) break;
    tx.wait(p.tag);
    asleep = Doorbells::asleep_in(block.bytes(), 0);
    if (!asleep) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  inv.heap().free(block.addr);
  return asleep;
}

}  // namespace

TEST(RemoteBells, AThreadAsleepAcrossTheWireIsWokenByTheCallThatReachesIt) {
  if (rt().size() < 2) GTEST_SKIP() << "needs 2 processes";
  Invoker inv(rt());
  const std::vector<int> across = across_from_zero(inv);
  constexpr int kRounds = 12;
  std::vector<double> us;
  if (rt().rank() == 0) {
    for (int i = 0; i < kRounds; ++i) {
      // Idle until the callee went to sleep on its doorbell (it spins, yields and sleeps 1.3 ms
      // in shorter timed sleeps first).
      const int peer = 1 + i % (rt().size() - 1);
      if (std::find(across.begin(), across.end(), peer) != across.end()) ASSERT_TRUE(wait_until_asleep(inv, peer));
      else std::this_thread::sleep_for(std::chrono::milliseconds(8));
      ReturnSlot<int> slot;
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(call_return(Thread{peer, 0}, [] { return 7 + rt().rank(); }, slot));
      EXPECT_EQ(slot.get(), 7 + peer);
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  inv.barrier();  // the others run rank 0's calls in here, asleep in between
  const Doorbells::Counts mine = inv.bells().counts();
  const auto all = rt().bootstrap().allgather_value(mine);
  if (rt().rank() == 0 && !us.empty()) {
    std::sort(us.begin(), us.end());
    std::printf("call_return to a sleeping thread: median %.1f us (%d rounds, %zu peers across the wire)\n",
                us[us.size() / 2], kRounds, across.size());
  }
  if (rt().rank() == 0)
    for (size_t r = 0; r < all.size(); ++r)
      std::printf("rank %zu: checks %lu, wakes sent %lu, woken %lu\n", r, static_cast<unsigned long>(all[r].checks),
                  static_cast<unsigned long>(all[r].wakes_sent), static_cast<unsigned long>(all[r].woken));
  uint64_t woken_across = 0, woken_all = 0, checks = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    woken_all += all[r].woken;
    checks += all[r].checks;
    if (std::find(across.begin(), across.end(), static_cast<int>(r)) != across.end()) woken_across += all[r].woken;
  }
  if (across.empty()) {
    // One node: every bell is rung in place.
    EXPECT_EQ(checks, 0u);
    EXPECT_EQ(woken_all, 0u);
    return;
  }
  // Rank 0's calls to the threads across the wire: most find them asleep (the check says so and
  // a wake goes out), and wakes wake them — not every one: a wake that arrives after the sleep
  // ran out (1 ms; a wake took about that long under ASan) finds the thread awake.
  int calls_across = 0;
  for (int i = 0; i < kRounds; ++i)
    if (std::find(across.begin(), across.end(), 1 + i % (rt().size() - 1)) != across.end()) ++calls_across;
  EXPECT_GE(all[0].wakes_sent, static_cast<uint64_t>(calls_across) / 2);
  EXPECT_GE(woken_across, 1u);
}

TEST(RemoteBells, AMalformedWakeIsRefusedNamingItsSender) {
  Invoker inv(rt());
  const uint16_t good[1] = {0};
  EXPECT_NO_THROW(inv.bells().wake_from_wire(0, std::as_bytes(std::span(good))));
  const uint8_t odd[3] = {0, 0, 0};
  try {
    inv.bells().wake_from_wire(5, std::as_bytes(std::span(odd)));
    ADD_FAILURE() << "a 3-byte wake was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("malformed"), std::string::npos) << e.what();
  }
  const uint16_t out_of_range[1] = {static_cast<uint16_t>(rt().threads_per_process())};
  try {
    inv.bells().wake_from_wire(1, std::as_bytes(std::span(out_of_range)));
    ADD_FAILURE() << "a wake for a thread that does not exist was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("names thread"), std::string::npos) << e.what();
  }
  EXPECT_THROW(inv.bells().wake_from_wire(1, std::span<const std::byte>()), Error);
  inv.barrier();
}
