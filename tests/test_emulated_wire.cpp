// The emulated wire between processes (LOOM_WIRE, loomrun --emulate-nodes): which pairs it
// stands between, that nothing reaches memory across it but requests, and that a request takes
// effect and completes no earlier than the wire allows while its post returns at once, in order
// and pipelined. ctest runs it with a slow wire (100 ms one way) so that the bounds hold on a
// loaded machine; without a wire it checks that every pair is plain shm.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "loom/dsm/fabric/shm/shm_provider.hpp"
#include "loom/dsm/fabric/shm/wire_engine.hpp"
#include "tests/fabric_test_util.hpp"

using namespace loom;
using namespace loom::test;
using fabric::shm::wire_now;

namespace {

fabric::shm::ShmProvider* shm() { return dynamic_cast<fabric::shm::ShmProvider*>(&rt().provider()); }
bool wired() { return shm() != nullptr && !shm()->wire().name.empty(); }
uint64_t latency_ns() { return static_cast<uint64_t>(shm()->wire().latency_ns); }

// The first rank to the right of `r` on another emulated node than r's (-1: none).
int partner_of(int r) {
  const int n = rt().size();
  for (int step = 1; step < n; ++step)
    if (shm()->wire_node((r + step) % n) != shm()->wire_node(r)) return (r + step) % n;
  return -1;
}

// Waits until the word is non-zero (a WRITE across the wire lands in it); 0 after 30 s.
uint64_t wait_nonzero(const uint64_t* word) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  wait::Backoff b;
  for (;;) {
    const uint64_t v = std::atomic_ref<const uint64_t>(*word).load(std::memory_order_acquire);
    if (v != 0 || std::chrono::steady_clock::now() > deadline) return v;
    b.pause();
  }
}

TEST(EmulatedWire, StandsBetweenNodesOnlyAndHidesTheirMemory) {
  if (shm() == nullptr) GTEST_SKIP() << "not the shm provider";
  SharedBuffers buf(1 << 16);
  auto mesh = rt().make_mesh(small_caps());
  for (int r = 0; r < rt().size(); ++r) {
    if (r == rt().rank()) continue;
    const bool far = shm()->across_wire(r);
    EXPECT_EQ(rt().provider().transport(r), far ? "wire:" + shm()->wire().name : "shm") << "to rank " << r;
    const Remote& rem = buf.remote[static_cast<size_t>(r)];
    uint8_t* p = mesh->qp(r).remote_pointer(rem.addr, rem.rkey, 64, fabric::kRemoteWrite);
    EXPECT_EQ(p == nullptr, far) << "remote_pointer to rank " << r;
  }
  if (wired()) {
    EXPECT_GE(partner_of(rt().rank()), 0) << "LOOM_WIRE is set, yet every rank is on this one's node";
  }
}

// Every rank WRITEs the time of its post to its partner across the wire. The post returns with
// the request still on the wire; the partner sees the WRITE land no earlier than one latency
// after it was posted.
TEST(EmulatedWire, APostReturnsAtOnceAndItsWriteLandsALatencyLater) {
  if (!wired()) GTEST_SKIP() << "no LOOM_WIRE";
  SharedBuffers buf(1 << 16);
  auto mesh = rt().make_mesh(small_caps());
  const int n = rt().size(), me = rt().rank(), dst = partner_of(me);
  auto* stamp = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(buf.local.addr) + 8192);
  rt().barrier();
  *stamp = wire_now();
  ASSERT_EQ(mesh->qp(dst).post_send(rdma(Opcode::Write, buf.local, 8192, 8, buf.remote[static_cast<size_t>(dst)],
                                         16 * static_cast<uint64_t>(me))),
            fabric::PostResult::Ok);
  EXPECT_GE(shm()->wire_in_flight(), 1u) << "the post waited for its request to be carried out";
  const auto* slots = static_cast<const uint64_t*>(buf.local.addr);
  for (int w = 0; w < n; ++w) {
    if (partner_of(w) != me) continue;
    const uint64_t posted = wait_nonzero(&slots[2 * w]);
    const uint64_t seen = wire_now();
    ASSERT_NE(posted, 0u) << "rank " << w << "'s WRITE never landed";
    EXPECT_GE(seen - posted, latency_ns()) << "rank " << w << "'s WRITE landed before the wire allows";
  }
  rt().barrier();
}

// A signaled READ completes no earlier than a round trip after its post; WRITEs behind each other
// on one queue pair land in order and travel together (the READ behind them sees the last one,
// and the batch takes about one round trip, not one per request).
TEST(EmulatedWire, RequestsCompleteAfterARoundTripInOrderAndPipelined) {
  if (!wired()) GTEST_SKIP() << "no LOOM_WIRE";
  SharedBuffers buf(1 << 16);
  auto mesh = rt().make_mesh(small_caps());
  const int me = rt().rank(), dst = partner_of(me);
  auto& qp = mesh->qp(dst);
  auto& cq = *mesh->send_cqs[static_cast<size_t>(dst)];
  const Remote& r = buf.remote[static_cast<size_t>(dst)];
  const uint64_t slot = 4096 + 8 * static_cast<uint64_t>(me);
  auto* values = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(buf.local.addr) + 16384);
  rt().barrier();

  uint64_t t0 = wire_now();
  EXPECT_EQ(run(qp, cq, rdma(Opcode::Read, buf.local, 32768, 8, r, slot)).status, Status::Success);
  EXPECT_GE(wire_now() - t0, 2 * latency_ns()) << "a READ completed before its round trip";

  constexpr int kWrites = 16;
  t0 = wire_now();
  for (int i = 0; i < kWrites; ++i) {
    values[i] = static_cast<uint64_t>(i + 1);
    ASSERT_EQ(qp.post_send(rdma(Opcode::Write, buf.local, 16384 + 8 * static_cast<size_t>(i), 8, r, slot)),
              fabric::PostResult::Ok);
  }
  auto* back = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(buf.local.addr) + 32768);
  EXPECT_EQ(run(qp, cq, rdma(Opcode::Read, buf.local, 32768, 8, r, slot)).status, Status::Success);
  EXPECT_EQ(*back, static_cast<uint64_t>(kWrites)) << "the READ overtook WRITEs posted before it";
  const uint64_t took = wire_now() - t0;
  EXPECT_GE(took, 2 * latency_ns());
  EXPECT_LT(took, kWrites / 2 * 2 * latency_ns()) << "the WRITEs waited for each other's round trips";
  rt().barrier();
}

// A SEND that arrives before its receive is posted waits at the target, as a NIC's RNR retry
// does, and completes once the receive is there; the sender's other requests are not blocked.
TEST(EmulatedWire, ASendWaitsForTheReceiveAndThenCompletes) {
  if (!wired()) GTEST_SKIP() << "no LOOM_WIRE";
  SharedBuffers buf(1 << 16);
  auto mesh = rt().make_mesh(small_caps());
  const int n = rt().size(), me = rt().rank(), dst = partner_of(me);
  int senders = 0;
  for (int w = 0; w < n; ++w) senders += partner_of(w) == me ? 1 : 0;
  rt().barrier();
  auto send = rdma(Opcode::Send, buf.local, 0, 64, buf.remote[static_cast<size_t>(dst)], 0);
  send.signaled = true;
  send.wr_id = 5;
  ASSERT_EQ(mesh->qp(dst).post_send(send), fabric::PostResult::Ok);
  std::this_thread::sleep_for(std::chrono::nanoseconds(3 * latency_ns()));  // the SENDs have arrived by now
  for (int w = 0; w < n; ++w) {
    if (partner_of(w) != me) continue;
    fabric::RecvWr rw;
    rw.wr_id = 100 + static_cast<uint64_t>(w);
    rw.local = {buf.local.address() + 1024 + 64 * static_cast<uint64_t>(w), 64, buf.local.lkey};
    ASSERT_EQ(mesh->qp(w).post_recv(rw), fabric::PostResult::Ok);
  }
  const auto c = wait_one(*mesh->send_cqs[static_cast<size_t>(dst)]);
  EXPECT_EQ(c.status, Status::Success);
  EXPECT_EQ(c.wr_id, 5u);
  for (int i = 0; i < senders; ++i) {
    const auto got = wait_one(*mesh->recv_cq);
    EXPECT_EQ(got.status, Status::Success);
    EXPECT_EQ(partner_of(got.src_rank), me);
  }
  rt().barrier();
}

}  // namespace
