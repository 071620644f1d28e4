// The fabric suite: the provider contract, exercised between processes. Run by ctest under
// loomrun with 2, 4 and 8 processes; every provider must pass it unchanged. The operations
// here; errors, limits and untrusted peer state in test_fabric_errors.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "tests/test_settings_table.hpp"
#include "loom/dsm/fabric/shm/shm_provider.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/signal/notified_flag.hpp"
#include "tests/fabric_test_util.hpp"
#include "tests/mp_test.hpp"

using namespace loom;
using namespace loom::test;

// One-sided WRITE/READ/atomics complete while the target process computes and never calls
// into Loom: the target learns it may stop only from a flag the initiator WRITEs.
TEST(Fabric, OneSidedNeedsNoTargetCpu) {
  SharedBuffers buf(1 << 20);
  auto mesh = rt().make_mesh(small_caps());
  const int dst = right();
  auto& qp = mesh->qp(dst);
  auto& cq = *mesh->send_cqs[static_cast<size_t>(dst)];
  uint8_t* mem = buf.local.bytes();
  rt().barrier();

  std::thread busy;
  std::atomic<uint64_t> spins{0};
  // The target part: compute until our own memory says stop (written remotely by the left rank).
  auto* stop = reinterpret_cast<uint64_t*>(mem + 4096);
  busy = std::thread([&] {
    uint64_t x = 1;
    do {
      for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
      spins.fetch_add(1, std::memory_order_relaxed);
    } while (std::atomic_ref<uint64_t>(*stop).load(std::memory_order_acquire) != 0xD0Eu);
    EXPECT_NE(x, 0u);
  });

  // The initiator part, against the right neighbour.
  const Remote& r = buf.remote[static_cast<size_t>(dst)];
  uint8_t* src = mem + 65536;
  for (int i = 0; i < 1000; ++i) src[i] = static_cast<uint8_t>(i * 7 + rt().rank());
  EXPECT_EQ(run(qp, cq, rdma(Opcode::Write, buf.local, 65536, 1000, r, 8192)).status, Status::Success);
  uint8_t* back = mem + 131072;
  auto c = run(qp, cq, rdma(Opcode::Read, buf.local, 131072, 1000, r, 8192));
  EXPECT_EQ(c.status, Status::Success);
  EXPECT_EQ(c.byte_len, 1000u);
  EXPECT_EQ(std::memcmp(src, back, 1000), 0);

  // CMP_SWAP: hit, then miss; FETCH_ADD.
  auto* result = reinterpret_cast<uint64_t*>(mem + 196608);
  auto cas = rdma(Opcode::CompareSwap, buf.local, 196608, 8, r, 16384);
  cas.compare_add = 0;
  cas.swap = 42;
  EXPECT_EQ(run(qp, cq, cas).status, Status::Success);
  EXPECT_EQ(*result, 0u);
  cas.compare_add = 7;
  cas.swap = 99;
  EXPECT_EQ(run(qp, cq, cas).status, Status::Success);
  EXPECT_EQ(*result, 42u);  // miss: returns the current value, leaves it
  auto faa = rdma(Opcode::FetchAdd, buf.local, 196608, 8, r, 16384);
  faa.compare_add = 8;
  EXPECT_EQ(run(qp, cq, faa).status, Status::Success);
  EXPECT_EQ(*result, 42u);

  // Release the target.
  auto* flag = reinterpret_cast<uint64_t*>(mem + 200000 - 200000 % 8);
  *flag = 0xD0E;
  EXPECT_EQ(run(qp, cq, rdma(Opcode::Write, buf.local, 200000 - 200000 % 8, 8, r, 4096)).status, Status::Success);
  busy.join();
  rt().barrier();
  // What the left neighbour did to us, checked locally.
  const int from = left();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(mem[8192 + i], static_cast<uint8_t>(i * 7 + from));
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(mem + 16384), 50u);
  EXPECT_GT(spins.load(), 0u);
}

// N processes x M FETCH_ADDs on one word give exactly N*M (fabric atomics are atomic among
// themselves), issued through Transmitters with selective signaling.
TEST(Fabric, FetchAddCountsExactly) {
  SharedBuffers buf(1 << 21);
  auto mesh = rt().make_mesh(small_caps());
  const int M = 2000;
  auto& tx = mesh->tx(0);
  for (int i = 0; i < M; ++i) {
    auto wr = rdma(Opcode::FetchAdd, buf.local, 1024 + 8 * (i % 64), 8, buf.remote[0], 0);
    wr.compare_add = 1;
    ASSERT_TRUE(tx.post(wr).ok());
  }
  tx.flush();
  EXPECT_EQ(tx.errors(), 0u);
  rt().barrier();
  if (rt().rank() == 0) {
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(buf.local.bytes()), static_cast<uint64_t>(M) * rt().size());
  }
}

// SENDs on one queue pair arrive in order, each in its own posted receive.
TEST(Fabric, SendRecvInOrderPerQueuePair) {
  const int K = 48;
  auto mesh = rt().make_mesh(small_caps());
  const int n = rt().size();
  memory::RDMAMemory rbuf = rt().allocator().allocate_chunk(static_cast<size_t>(n) * K * 64);
  for (int p = 0; p < n; ++p)
    for (int k = 0; k < K; ++k) {
      fabric::RecvWr wr;
      wr.wr_id = static_cast<uint64_t>(p * K + k);
      wr.local = {rbuf.address() + static_cast<uint64_t>(p * K + k) * 64, 64, rbuf.lkey};
      ASSERT_EQ(mesh->qp(p).post_recv(wr), fabric::PostResult::Ok);
    }
  rt().barrier();
  memory::RDMAMemory sbuf = rt().allocator().allocate_chunk(1 << 16);
  for (int d = 0; d < n; ++d) {
    for (int k = 0; k < K; ++k) {
      uint32_t* m = reinterpret_cast<uint32_t*>(sbuf.bytes() + (d * K + k) * 16);
      m[0] = static_cast<uint32_t>(rt().rank());
      m[1] = static_cast<uint32_t>(k);
      fabric::SendWr wr;
      wr.opcode = Opcode::Send;
      wr.local = {reinterpret_cast<uint64_t>(m), 8, sbuf.lkey};
      ASSERT_TRUE(mesh->tx(d).post(wr).ok());
    }
  }
  std::vector<int> next(static_cast<size_t>(n), 0);
  int got = 0;
  while (got < n * K) {
    auto c = wait_one(*mesh->recv_cq);
    ASSERT_EQ(c.status, Status::Success);
    ASSERT_EQ(c.opcode, Opcode::Recv);
    ASSERT_EQ(c.byte_len, 8u);
    const uint32_t* m = reinterpret_cast<const uint32_t*>(rbuf.bytes() + c.wr_id * 64);
    ASSERT_EQ(static_cast<int>(m[0]), c.src_rank);
    ASSERT_EQ(static_cast<int>(c.wr_id) / K, c.src_rank) << "landed in a receive posted on another QP";
    ASSERT_EQ(static_cast<int>(m[1]), next[static_cast<size_t>(c.src_rank)]++) << "out of order from rank " << c.src_rank;
    ++got;
  }
  for (int d = 0; d < n; ++d) mesh->tx(d).flush();
  rt().barrier();
  rt().allocator().free_chunk(sbuf);
  rt().allocator().free_chunk(rbuf);
}

// WRITE_WITH_IMM: when the receive completion is seen, all the data is there.
TEST(Fabric, WriteWithImmDataBeforeCompletion) {
  SharedBuffers buf(1 << 21);
  auto mesh = rt().make_mesh(small_caps());
  fabric::RecvWr rw;
  rw.wr_id = 77;
  ASSERT_EQ(mesh->qp(left()).post_recv(rw), fabric::PostResult::Ok);
  rt().barrier();
  const uint32_t len = 256 * 1024;
  for (uint32_t i = 0; i < len; ++i) buf.local.bytes()[len + i] = static_cast<uint8_t>(i ^ (i >> 8) ^ rt().rank());
  auto wr = rdma(Opcode::WriteWithImm, buf.local, len, len, buf.remote[static_cast<size_t>(right())], 0);
  wr.imm = 0xABCD0000u + static_cast<uint32_t>(rt().rank());
  ASSERT_TRUE(mesh->tx(right()).post(wr).ok());
  auto c = wait_one(*mesh->recv_cq);
  EXPECT_EQ(c.status, Status::Success);
  EXPECT_EQ(c.opcode, Opcode::RecvWriteWithImm);
  EXPECT_TRUE(c.with_imm);
  EXPECT_EQ(c.wr_id, 77u);
  EXPECT_EQ(c.imm, 0xABCD0000u + static_cast<uint32_t>(left()));
  EXPECT_EQ(c.byte_len, len);
  for (uint32_t i = 0; i < len; ++i) ASSERT_EQ(buf.local.bytes()[i], static_cast<uint8_t>(i ^ (i >> 8) ^ left()));
  mesh->tx(right()).flush();
}

// Seed 002's notified flags: data and a trailing flag in one WRITE; the target polls the flag.
TEST(Fabric, NotifiedFlagMeansDataComplete) {
  const size_t cap = 100000;
  SharedBuffers buf(1 << 21);
  auto mesh = rt().make_mesh(small_caps());
  auto& tx = mesh->tx(right());
  uint8_t* staging = buf.local.bytes() + (1 << 20);
  std::vector<uint8_t> data(cap);
  for (int round = 1; round <= 20; ++round) {
    for (size_t i = 0; i < cap; ++i) data[i] = static_cast<uint8_t>(i * round + rt().rank());
    signal::stage_notified(staging, cap, data.data(), cap, static_cast<uint64_t>(round));
    auto wr = rdma(Opcode::Write, buf.local, 1 << 20, static_cast<uint32_t>(signal::NotifiedLayout::bytes(cap)),
                   buf.remote[static_cast<size_t>(right())], 0);
    auto p = tx.post(wr);
    ASSERT_TRUE(p.ok());
    signal::wait_notified(buf.local.bytes(), cap, static_cast<uint64_t>(round));
    for (size_t i = 0; i < cap; ++i) ASSERT_EQ(buf.local.bytes()[i], static_cast<uint8_t>(i * round + left()));
    tx.wait(p.tag);  // the staging area may be rewritten now
    rt().barrier();
  }
}

// Every length a small WRITE can have lands exactly, at every alignment and on every path a
// provider may give it (unsignaled, signaled, inline; on shm the first and last are copied with
// overlapping moves up to 72 bytes and by memcpy beyond): the bytes written are the source's,
// and not one byte on either side is touched.
// Modes: 0 unsignaled post_send, 1 signaled, 2 inline, 3 post_write, 4 post_write inline.
TEST(Fabric, WritesOfEveryLengthLandExactly) {
  constexpr uint32_t kMaxLen = 80, kOffsets = 8, kModes = 5, kSlot = 128, kPad = 16;
  constexpr size_t kSlots = size_t{kMaxLen} * kOffsets * kModes;
  SharedBuffers buf(1 << 20);
  auto mesh = rt().make_mesh(small_caps());
  auto& qp = mesh->qp(right());
  auto& cq = *mesh->send_cqs[static_cast<size_t>(right())];
  const Remote& r = buf.remote[static_cast<size_t>(right())];
  uint8_t* mem = buf.local.bytes();
  const size_t src_base = kSlots * kSlot;  // sources after the target slots
  auto pattern = [](int from, size_t slot, uint32_t i) { return static_cast<uint8_t>(slot * 31 + i * 7 + from * 101 + 1); };
  std::memset(mem, 0xEE, kSlots * kSlot);  // the sentinel a stray byte would overwrite
  rt().barrier();

  const uint32_t max_inline = qp.caps().max_inline;
  uint64_t unsignaled = 0;
  size_t slot = 0;
  for (uint32_t mode = 0; mode < kModes; ++mode)
    for (uint32_t len = 1; len <= kMaxLen; ++len)
      for (uint32_t off = 0; off < kOffsets; ++off, ++slot) {
        size_t at = slot * kSlot + kPad + off;
        for (uint32_t i = 0; i < len; ++i) mem[src_base + at + i] = pattern(rt().rank(), slot, i);
        auto wr = rdma(Opcode::Write, buf.local, src_base + at, len, r, at);
        wr.inline_data = (mode == 2 || mode == 4) && len <= max_inline;
        // Unsignaled requests are retired by a signaled one every 16, within the queue's depth.
        bool signaled = mode == 1 || ++unsignaled % 16 == 0;
        wr.signaled = signaled;
        wr.wr_id = slot;
        if (mode >= 3 && !signaled) {
          ASSERT_EQ(qp.post_write(wr.local, wr.remote_addr, wr.rkey, wr.inline_data), fabric::PostResult::Ok)
              << "length " << len << " offset " << off;
          continue;
        }
        ASSERT_EQ(qp.post_send(wr), fabric::PostResult::Ok) << "length " << len << " offset " << off;
        if (signaled) {
          ASSERT_EQ(wait_one(cq).status, Status::Success) << "length " << len << " offset " << off;
        }
      }
  fabric::SendWr last = rdma(Opcode::Write, buf.local, 0, 0, r, 0);  // completes after all before it
  ASSERT_EQ(run(qp, cq, last).status, Status::Success);
  rt().barrier();

  const int from = left();
  slot = 0;
  for (uint32_t mode = 0; mode < kModes; ++mode)
    for (uint32_t len = 1; len <= kMaxLen; ++len)
      for (uint32_t off = 0; off < kOffsets; ++off, ++slot) {
        const uint8_t* s = mem + slot * kSlot;
        for (uint32_t b = 0; b < kSlot; ++b) {
          bool inside = b >= kPad + off && b < kPad + off + len;
          uint8_t want = inside ? pattern(from, slot, b - kPad - off) : 0xEE;
          ASSERT_EQ(s[b], want) << "mode " << mode << " length " << len << " offset " << off << " byte " << b;
        }
      }
}

// Regression: several threads post signaled requests on one QP and poll its CQ at once. A
// consumer preempted between claiming a CQ entry and releasing its slot once made a producer a
// lap later report an overrun; completions must all arrive, none lost or duplicated.
TEST(Fabric, CompletionQueueSharedByPollingThreads) {
  SharedBuffers buf(1 << 21);
  fabric::QpCaps caps;
  caps.max_send_wr = 16;  // small: the CQ ring laps often
  auto mesh = rt().make_mesh(caps);
  auto& qp = mesh->qp(right());
  auto& cq = *mesh->send_cqs[static_cast<size_t>(right())];
  const Remote r = buf.remote[static_cast<size_t>(right())];
  const int T = 4, per_thread = 20000;
  std::atomic<uint64_t> seen_sum{0}, seen{0};
  auto worker = [&](int t) {
    fabric::Completion cs[4];
    for (int i = 0; i < per_thread; ++i) {
      fabric::SendWr wr = rdma(Opcode::Write, buf.local, static_cast<size_t>(t) * 64, 8, r, static_cast<uint64_t>(t) * 64);
      wr.signaled = true;
      wr.wr_id = static_cast<uint64_t>(t) * per_thread + static_cast<uint64_t>(i) + 1;
      wait::Backoff b;
      fabric::PostResult pr;
      while ((pr = qp.post_send(wr)) == fabric::PostResult::QueueFull) {
        int n = cq.poll(cs);
        for (int k = 0; k < n; ++k) { seen_sum.fetch_add(cs[k].wr_id); seen.fetch_add(1); }
        if (n == 0) b.pause();
      }
      ASSERT_EQ(pr, fabric::PostResult::Ok);
      int n = cq.poll(cs);
      for (int k = 0; k < n; ++k) { seen_sum.fetch_add(cs[k].wr_id); seen.fetch_add(1); }
    }
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < T; ++t) ts.emplace_back(worker, t);
  for (auto& th : ts) th.join();
  fabric::Completion c[8];
  wait::Backoff b;
  while (seen.load() < static_cast<uint64_t>(T) * per_thread) {
    int n = cq.poll(c);
    for (int k = 0; k < n; ++k) { seen_sum.fetch_add(c[k].wr_id); seen.fetch_add(1); }
    if (n == 0) b.pause();
  }
  const uint64_t total = static_cast<uint64_t>(T) * per_thread;
  EXPECT_EQ(seen.load(), total);
  EXPECT_EQ(seen_sum.load(), total * (total + 1) / 2) << "a completion was lost or seen twice";
  EXPECT_FALSE(cq.overrun());
  rt().barrier();
}


// post_send_batch posts a list in order as one call; over the send queue's depth it posts what
// fits and reports QueueFull for the rest (verbs: one linked list to the device).
TEST(Fabric, BatchPostsInOrderAndStopsAtTheDepth) {
  SharedBuffers buf(1 << 20);
  auto mesh = rt().make_mesh(small_caps());  // 64 send-queue entries
  const int dst = right();
  auto& qp = mesh->qp(dst);
  auto& cq = *mesh->send_cqs[static_cast<size_t>(dst)];
  const Remote& r = buf.remote[static_cast<size_t>(dst)];
  uint64_t* src = reinterpret_cast<uint64_t*>(buf.local.bytes());
  constexpr size_t kN = 80;  // more than the depth
  std::vector<fabric::SendWr> wrs;
  for (size_t i = 0; i < kN; ++i) {
    src[i] = 0xB000 + i + (static_cast<uint64_t>(rt().rank()) << 32);
    auto wr = rdma(Opcode::Write, buf.local, i * 8, 8, r, 4096 + i * 8);
    wr.signaled = i == 63;  // the last one that fits
    wr.wr_id = 7;
    wrs.push_back(wr);
  }
  rt().barrier();
  const auto res = qp.post_send_batch(wrs);
  EXPECT_EQ(res.accepted, 64u);
  EXPECT_EQ(res.failure, fabric::PostResult::QueueFull);
  fabric::Completion c[4];
  int got = 0;
  for (wait::Backoff b; got == 0; b.pause()) got = cq.poll(c);
  ASSERT_EQ(got, 1);
  EXPECT_EQ(c[0].status, Status::Success);
  EXPECT_EQ(c[0].wr_id, 7u);
  // The rest, now that the queue is free again; a malformed request stops the list there.
  wrs[79].opcode = Opcode::FetchAdd;  // 8 bytes but misaligned remote: refused at post
  wrs[79].remote_addr += 4;
  wrs[78].signaled = true;
  const auto rest = qp.post_send_batch(std::span<const fabric::SendWr>(wrs).subspan(64));
  EXPECT_EQ(rest.accepted, 15u);
  EXPECT_EQ(rest.failure, fabric::PostResult::InvalidArgument);
  got = 0;
  for (wait::Backoff b; got == 0; b.pause()) got = cq.poll(c);
  ASSERT_EQ(got, 1);
  EXPECT_EQ(c[0].status, Status::Success);
  EXPECT_TRUE(qp.post_send_batch({}).accepted == 0);
  rt().barrier();
  const uint64_t from = static_cast<uint64_t>(left()) << 32;
  for (size_t i = 0; i < 79; ++i) ASSERT_EQ(reinterpret_cast<uint64_t*>(buf.local.bytes() + 4096)[i], 0xB000 + i + from) << i;
  rt().barrier();
}
