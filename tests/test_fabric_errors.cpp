// The fabric suite, part two: bad keys and bounds, queue depths, oversized SENDs and a peer
// whose shared state is corrupt give errors, never a stray access, a crash or a hang.
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
using fabric::Opcode;
using fabric::Status;

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
