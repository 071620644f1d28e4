#pragma once
// Helpers of the fabric suite (test_fabric.cpp, test_fabric_errors.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <span>

#include "loom/dsm/fabric/fabric.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "tests/mp_test.hpp"
#include "tests/test_settings_table.hpp"

namespace loom::test {

using fabric::Opcode;
using fabric::Status;

// Waits for one completion; a request that never completes (an unsignaled one that should have
// failed) is a test failure after 20 s, not a hang.
inline fabric::Completion wait_one(fabric::CompletionQueue& cq) {
  fabric::Completion c;
  wait::Backoff b;
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
inline fabric::Completion run(fabric::QueuePair& qp, fabric::CompletionQueue& cq, fabric::SendWr wr, bool signaled = true) {
  wr.signaled = signaled;
  wr.wr_id = 0xC0FFEE;
  EXPECT_EQ(qp.post_send(wr), fabric::PostResult::Ok);
  auto c = wait_one(cq);
  EXPECT_EQ(c.wr_id, 0xC0FFEEu);
  return c;
}

inline fabric::SendWr rdma(Opcode op, const memory::RDMAMemory& local, size_t off, uint32_t len, const Remote& r, uint64_t roff) {
  fabric::SendWr wr;
  wr.opcode = op;
  wr.local = {local.address() + off, len, local.lkey};
  wr.remote_addr = r.addr + roff;
  wr.rkey = r.rkey;
  return wr;
}

// LOOM_TEST_QP_SINGLE_THREAD=1 runs the suite on thread-domain QPs (QpCaps::single_thread);
// tests whose threads share a QP keep thread-safe ones.
inline bool single_thread_qps() { return settings::get_bool(test_settings::kQpSingleThread); }

inline fabric::QpCaps small_caps() {
  fabric::QpCaps c;
  c.max_send_wr = 64;
  c.max_recv_wr = 64;
  c.single_thread = single_thread_qps();
  return c;
}

}  // namespace loom::test
