// The fabric suite: the provider contract, exercised between processes. Run by ctest under
// loomrun with 2, 4 and 8 processes; every provider must pass it unchanged.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "tests/test_settings_table.hpp"
#include "dsm/fabric/shm/shm_provider.hpp"
#include "dsm/signal/backoff.hpp"
#include "dsm/signal/notified_flag.hpp"
#include "tests/mp_test.hpp"

using namespace loom;
using namespace loom::test;
using fabric::Opcode;
using fabric::Status;

namespace {

// Waits for one completion; a request that never completes (an unsignaled one that should have
// failed) is a test failure after 20 s, not a hang.
fabric::Completion wait_one(fabric::CompletionQueue& cq) {
  fabric::Completion c;
  signal::Backoff b;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (cq.poll(std::span(&c, 1)) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "no completion within 20 s";
      c.status = Status::Success;
      c.wr_id = 0;
      return c;
    }
    b.pause();
  }
  return c;
}

// Posts one request on a raw QP and returns its completion. Unsignaled: only for requests that
// fail, which report anyway (and on shm take the path of unsignaled WRITEs).
fabric::Completion run(fabric::QueuePair& qp, fabric::CompletionQueue& cq, fabric::SendWr wr, bool signaled = true) {
  wr.signaled = signaled;
  wr.wr_id = 0xC0FFEE;
  EXPECT_EQ(qp.post_send(wr), fabric::PostResult::Ok);
  auto c = wait_one(cq);
  EXPECT_EQ(c.wr_id, 0xC0FFEEu);
  return c;
}

fabric::SendWr rdma(Opcode op, const memory::RDMAMemory& local, size_t off, uint32_t len, const Remote& r, uint64_t roff) {
  fabric::SendWr wr;
  wr.opcode = op;
  wr.local = {local.address() + off, len, local.lkey};
  wr.remote_addr = r.addr + roff;
  wr.rkey = r.rkey;
  return wr;
}

// LOOM_TEST_QP_SINGLE_THREAD=1 runs the suite on thread-domain QPs (QpCaps::single_thread);
// tests whose threads share a QP keep thread-safe ones.
bool single_thread_qps() { return settings::get_bool(test_settings::kQpSingleThread); }

fabric::QpCaps small_caps() {
  fabric::QpCaps c;
  c.max_send_wr = 64;
  c.max_recv_wr = 64;
  c.single_thread = single_thread_qps();
  return c;
}

}  // namespace

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

// Bad keys, bounds and requests give error completions (never a stray access or a crash); the
// QP then flushes until reset, as an RC QP does.
TEST(Fabric, BadKeysAndBoundsAreErrors) {
  SharedBuffers buf(1 << 21);
  auto mesh = rt().make_mesh(small_caps());
  const int dst = right();
  auto& qp = mesh->qp(dst);
  auto& cq = *mesh->send_cqs[static_cast<size_t>(dst)];
  Remote r = buf.remote[static_cast<size_t>(dst)];

  // Collective. Even and odd ranks take turns causing the error: on an RC transport the
  // responder's QP enters the error state too, and with 2 ranks both directions share one QP.
  // via_write: posted through QueuePair::post_write (unsignaled; its error completion has wr_id 0).
  auto expect_error = [&](fabric::SendWr wr, Status want, int line, bool signaled = true, bool via_write = false) {
    SCOPED_TRACE("case at line " + std::to_string(line) + (via_write ? " (post_write)" : ""));
    for (int turn = 0; turn < 2; ++turn) {
      const bool mine = rt().rank() % 2 == turn;
      // Nobody may still be using the pair when the error is caused: with two ranks both
      // directions share one QP, and the peer's last request would be flushed by our error.
      rt().barrier();
      if (mine) {
        Status got;
        if (via_write) {
          EXPECT_EQ(qp.post_write(wr.local, wr.remote_addr, wr.rkey, wr.inline_data), fabric::PostResult::Ok);
          fabric::Completion c = wait_one(cq);
          EXPECT_EQ(c.wr_id, 0u);
          got = c.status;
        } else {
          got = run(qp, cq, wr, signaled).status;
        }
        // rxe reports local errors as a QP operation error where others are precise.
        if (!(want == Status::LocalProtectionError && got == Status::LocalOperationError)) {
          EXPECT_EQ(got, want);
        }
        EXPECT_EQ(qp.state(), fabric::QpState::Error);
        // Later requests are flushed until the QP is reset.
        EXPECT_EQ(run(qp, cq, rdma(Opcode::Write, buf.local, 0, 8, r, 0)).status, Status::WorkRequestFlushed);
      }
      // Recovery resets both ends of each pair: ours to the right and ours from the left.
      rt().barrier();
      qp.reset();
      mesh->qp(left()).reset();
      rt().barrier();
      EXPECT_EQ(qp.state(), fabric::QpState::Ready);
      if (mine) {
        EXPECT_EQ(run(qp, cq, rdma(Opcode::Write, buf.local, 0, 8, r, 0)).status, Status::Success);
      }
      rt().barrier();
    }
  };
  Remote bad = r;
  bad.rkey ^= 0x5a5a;  // unknown key
  expect_error(rdma(Opcode::Write, buf.local, 0, 8, bad, 0), Status::RemoteAccessError, __LINE__);
  expect_error(rdma(Opcode::Write, buf.local, 0, 8, bad, 0), Status::RemoteAccessError, __LINE__, false, true);
  bad = r;
  bad.rkey = 0;
  expect_error(rdma(Opcode::Read, buf.local, 0, 8, bad, 0), Status::RemoteAccessError, __LINE__);
  expect_error(rdma(Opcode::Read, buf.local, 0, 8, r, ~uint64_t{0} - r.addr - 3), Status::RemoteAccessError, __LINE__);  // wraps
  fabric::SendWr badlocal = rdma(Opcode::Write, buf.local, 0, 8, r, 0);
  badlocal.local.lkey ^= 0x1234;
  expect_error(badlocal, Status::LocalProtectionError, __LINE__);
  // Malformed requests are refused at post time: atomics of 4 bytes or on a misaligned word.
  EXPECT_EQ(qp.post_send(rdma(Opcode::FetchAdd, buf.local, 0, 4, r, 0)), fabric::PostResult::InvalidArgument);
  EXPECT_EQ(qp.post_send(rdma(Opcode::FetchAdd, buf.local, 0, 8, r, 4)), fabric::PostResult::InvalidArgument);
  EXPECT_EQ(qp.post_send(rdma(Opcode::CompareSwap, buf.local, 0, 8, r, 12)), fabric::PostResult::InvalidArgument);
  fabric::SendWr big = rdma(Opcode::Write, buf.local, 0, 4096, r, 0);
  big.inline_data = true;
  EXPECT_EQ(qp.post_send(big), fabric::PostResult::InvalidArgument);
  EXPECT_EQ(qp.post_write(big.local, big.remote_addr, big.rkey, true), fabric::PostResult::InvalidArgument);

  // A revoked registration: deregister, and the peer's next access fails.
  memory::RDMAMemory extra = rt().allocator().allocate_chunk(1 << 21);
  auto mr = rt().provider().register_memory(extra.addr, 4096, fabric::kAllAccess);
  Remote mine{mr.addr ? reinterpret_cast<uint64_t>(mr.addr) : 0, mr.rkey, 0};
  auto all = rt().bootstrap().allgather(std::as_bytes(std::span(&mine, 1)));
  Remote theirs;
  std::memcpy(&theirs, all[static_cast<size_t>(dst)].data(), sizeof theirs);
  // A local registration of our own, used as a source below.
  auto lmr = rt().provider().register_memory(extra.bytes() + 8192, 4096, fabric::kAllAccess);
  fabric::SendWr from_lmr = rdma(Opcode::Write, buf.local, 0, 8, theirs, 0);
  from_lmr.local = {reinterpret_cast<uint64_t>(lmr.addr), 8, lmr.lkey};
  EXPECT_EQ(run(qp, cq, rdma(Opcode::Write, buf.local, 0, 8, theirs, 0)).status, Status::Success);
  EXPECT_EQ(run(qp, cq, rdma(Opcode::Write, buf.local, 0, 64, theirs, 4096 - 64)).status, Status::Success);
  expect_error(rdma(Opcode::Write, buf.local, 0, 64, theirs, 4096 - 32), Status::RemoteAccessError, __LINE__);  // past the end
  expect_error(rdma(Opcode::Write, buf.local, 0, 64, theirs, 4096 - 32), Status::RemoteAccessError, __LINE__, false, true);
  expect_error(rdma(Opcode::Read, buf.local, 0, 8, theirs, static_cast<uint64_t>(-8)), Status::RemoteAccessError, __LINE__);  // before
  // Keys revoked after use: WRITEs with exactly these keys come last before the revocation, so a
  // provider that remembers keys (shm does, per QP and thread) holds them when it happens.
  auto use = [&](const fabric::SendWr& wr) {
    for (int i = 0; i < 4; ++i) ASSERT_EQ(qp.post_send(wr), fabric::PostResult::Ok);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(qp.post_write(wr.local, wr.remote_addr, wr.rkey, false), fabric::PostResult::Ok);
    EXPECT_EQ(run(qp, cq, wr).status, Status::Success);
  };
  rt().barrier();
  use(from_lmr);
  rt().barrier();
  // Our own source key: the next WRITE from it fails, unsignaled (this thread's last post on
  // the QP) as signaled.
  rt().provider().deregister(lmr);
  expect_error(from_lmr, Status::LocalProtectionError, __LINE__, false, true);
  expect_error(from_lmr, Status::LocalProtectionError, __LINE__, false);
  expect_error(from_lmr, Status::LocalProtectionError, __LINE__);
  rt().barrier();
  use(rdma(Opcode::Write, buf.local, 0, 8, theirs, 0));
  rt().barrier();
  rt().provider().deregister(mr);
  rt().barrier();
  expect_error(rdma(Opcode::Write, buf.local, 0, 8, theirs, 0), Status::RemoteAccessError, __LINE__, false, true);
  expect_error(rdma(Opcode::Write, buf.local, 0, 8, theirs, 0), Status::RemoteAccessError, __LINE__, false);
  expect_error(rdma(Opcode::Write, buf.local, 0, 8, theirs, 0), Status::RemoteAccessError, __LINE__);
  rt().barrier();
  rt().allocator().free_chunk(extra);
  // Remote-read-only registration refuses writes and atomics.
  auto ro = rt().provider().register_memory(buf.local.bytes() + 8192, 4096, fabric::kRemoteRead | fabric::kLocalWrite);
  Remote rmine{reinterpret_cast<uint64_t>(ro.addr), ro.rkey, 0};
  all = rt().bootstrap().allgather(std::as_bytes(std::span(&rmine, 1)));
  std::memcpy(&theirs, all[static_cast<size_t>(dst)].data(), sizeof theirs);
  EXPECT_EQ(run(qp, cq, rdma(Opcode::Read, buf.local, 0, 8, theirs, 0)).status, Status::Success);
  expect_error(rdma(Opcode::Write, buf.local, 0, 8, theirs, 0), Status::RemoteAccessError, __LINE__);
  expect_error(rdma(Opcode::Write, buf.local, 0, 8, theirs, 0), Status::RemoteAccessError, __LINE__, false, true);
  rt().barrier();
  rt().provider().deregister(ro);
}

// Posting beyond the send-queue depth is refused, as on a NIC; an entry stays in use until a
// signaled completion of it or of a later request is polled. Receive queues likewise.
// (Every provider enforces the depth asked for, whatever the device rounds it up to.)
TEST(Fabric, QueueDepthsAreEnforced) {
  SharedBuffers buf(1 << 21);
  fabric::QpCaps want;
  want.max_send_wr = 4;
  want.max_recv_wr = 4;
  want.single_thread = single_thread_qps();
  auto mesh = rt().make_mesh(want);
  auto& qp = mesh->qp(right());
  auto& cq = *mesh->send_cqs[static_cast<size_t>(right())];
  ASSERT_EQ(qp.caps().max_send_wr, 4u);
  Remote r = buf.remote[static_cast<size_t>(right())];
  for (int i = 0; i < 3; ++i) ASSERT_EQ(qp.post_send(rdma(Opcode::Write, buf.local, 0, 8, r, 0)), fabric::PostResult::Ok);
  auto wr = rdma(Opcode::Write, buf.local, 0, 8, r, 0);
  wr.signaled = true;
  wr.wr_id = 5;
  ASSERT_EQ(qp.post_send(wr), fabric::PostResult::Ok);
  EXPECT_EQ(qp.post_send(rdma(Opcode::Write, buf.local, 0, 8, r, 0)), fabric::PostResult::QueueFull);
  EXPECT_EQ(qp.post_send(rdma(Opcode::Write, buf.local, 0, 8, r, 0)), fabric::PostResult::QueueFull);
  const fabric::SendWr w = rdma(Opcode::Write, buf.local, 0, 8, r, 0);
  EXPECT_EQ(qp.post_write(w.local, w.remote_addr, w.rkey, false), fabric::PostResult::QueueFull);
  EXPECT_EQ(wait_one(cq).wr_id, 5u);
  EXPECT_EQ(qp.post_send(rdma(Opcode::Write, buf.local, 0, 8, r, 0)), fabric::PostResult::Ok);
  wr.wr_id = 6;
  ASSERT_EQ(qp.post_send(wr), fabric::PostResult::Ok);
  EXPECT_EQ(wait_one(cq).wr_id, 6u);
  rt().barrier();
  // Receive queue: nobody sends now, so the receives stay posted.
  auto& rq = mesh->qp(left());
  fabric::RecvWr rw;
  rw.local = {buf.local.address() + 8192, 64, buf.local.lkey};
  for (int i = 0; i < 4; ++i) ASSERT_EQ(rq.post_recv(rw), fabric::PostResult::Ok);
  EXPECT_EQ(rq.post_recv(rw), fabric::PostResult::QueueFull);
  rt().barrier();
}

// A receive buffer too small for a SEND: the receiver sees a length error, the sender a remote
// invalid request; nothing is written past the buffer.
TEST(Fabric, SendLargerThanReceiveIsAnError) {
  SharedBuffers buf(1 << 21);
  auto mesh = rt().make_mesh(small_caps());
  // One direction per pair (even -> odd): the error puts both ends of the pair's QPs into the
  // error state on RC transports, and with 2 ranks the two directions share one QP.
  const bool sender = rt().rank() % 2 == 0 && rt().rank() + 1 < rt().size();
  const bool receiver = rt().rank() % 2 == 1;
  std::memset(buf.local.bytes() + 1000, 0xEE, 64);
  if (receiver) {
    fabric::RecvWr rw;
    rw.wr_id = 9;
    rw.local = {buf.local.address() + 1000, 16, buf.local.lkey};
    ASSERT_EQ(mesh->qp(left()).post_recv(rw), fabric::PostResult::Ok);
  }
  rt().barrier();
  if (sender) {
    fabric::SendWr wr;
    wr.opcode = Opcode::Send;
    wr.local = {buf.local.address() + 4096, 32, buf.local.lkey};
    // The sender's status depends on the transport (rxe: remote operational error; shm and
    // mlx5: remote invalid request); the receiver's is a local length (or QP operation) error.
    Status st = run(mesh->qp(right()), *mesh->send_cqs[static_cast<size_t>(right())], wr).status;
    EXPECT_TRUE(st == Status::RemoteInvalidRequest || st == Status::RemoteOperationalError) << fabric::to_string(st);
  }
  if (receiver) {
    auto c = wait_one(*mesh->recv_cq);
    EXPECT_TRUE(c.status == Status::LocalLengthError || c.status == Status::LocalOperationError) << fabric::to_string(c.status);
    EXPECT_EQ(c.wr_id, 9u);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(buf.local.bytes()[1000 + i], 0xEE) << "written past the receive buffer";
  }
  rt().barrier();
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
      signal::Backoff b;
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
  signal::Backoff b;
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

// Nothing another process wrote is trusted (shm: the shared key table, queue and completion
// ring headers). Each rank corrupts its own shared state the way a broken or hostile peer could;
// its left neighbour's requests must fail with an error, never reach outside what it mapped.
TEST(Fabric, CorruptedPeerStateIsNotTrusted) {
  if (rt().provider().info().name != "shm") GTEST_SKIP() << "shm-specific shared state";
  SharedBuffers buf(1 << 21);
  auto mesh = rt().make_mesh(small_caps());
  // A small registration whose key-table entry we then inflate to 1 TiB.
  auto mr = rt().provider().register_memory(buf.local.bytes() + 4096, 4096, fabric::kAllAccess);
  Remote mine{reinterpret_cast<uint64_t>(mr.addr), mr.rkey, 0};
  auto all = rt().bootstrap().allgather(std::as_bytes(std::span(&mine, 1)));
  Remote theirs;
  std::memcpy(&theirs, all[static_cast<size_t>(right())].data(), sizeof theirs);
  fabric::RecvWr rw;  // the left neighbour will SEND to us at the end
  rw.wr_id = 1;
  rw.local = {buf.local.address() + 65536, 64, buf.local.lkey};
  ASSERT_EQ(mesh->qp(left()).post_recv(rw), fabric::PostResult::Ok);
  rt().barrier();
  {
    std::string dir = std::getenv("LOOM_JOB_DIR") ? std::getenv("LOOM_JOB_DIR") : rt().bootstrap().job_dir();
    auto keys = fabric::shm::Mapping::open(dir + "/keys." + std::to_string(rt().rank()) + ".0");
    auto& e = keys.as<fabric::shm::KeyTable>()->entries[fabric::shm::key_index(mr.rkey)];
    e.length.store(1ull << 40);
    e.seg_offset.store(1ull << 39);
  }
  rt().barrier();
  auto& qp = mesh->qp(right());
  auto& cq = *mesh->send_cqs[static_cast<size_t>(right())];
  // Inside the (now lying) registration but outside the segment: refused, no SIGBUS.
  EXPECT_EQ(run(qp, cq, rdma(Opcode::Write, buf.local, 0, 8, theirs, 1ull << 20)).status, Status::RemoteAccessError);
  rt().barrier();
  qp.reset();
  mesh->qp(left()).reset();
  rt().barrier();
  // A completion-ring header with a huge mask: the sender indexes with its own validated size.
  {
    std::string dir = rt().bootstrap().job_dir();
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      std::string name = f.path().filename().string();
      if (name.rfind("cq." + std::to_string(rt().rank()) + ".", 0) != 0) continue;
      auto m = fabric::shm::Mapping::open(f.path().string());
      auto* h = m.as<fabric::shm::CqHeader>();
      h->mask = 0xffffffffu;
      h->capacity = 0x80000000u;
    }
  }
  rt().barrier();
  fabric::SendWr send;
  send.opcode = Opcode::Send;
  send.local = {buf.local.address(), 8, buf.local.lkey};
  EXPECT_EQ(run(qp, cq, send).status, Status::Success);
  auto c = wait_one(*mesh->recv_cq);
  EXPECT_EQ(c.status, Status::Success);
  EXPECT_EQ(c.src_rank, left());
  rt().barrier();
  rt().provider().deregister(mr);
}
