// The transport of every pair of ranks (LOOM_PROVIDER=auto): shared memory within a host, the
// device between hosts, and requests between two ranks of one host never reach the device
// (counted per peer by the provider), while every rank of another host is reached through it.
// Runs on one host (every pair is shm) and across the two guests of scripts/vm (2 x 2 ranks).
#include <gtest/gtest.h>

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/runtime/transports.hpp"
#include "tests/fabric_test_util.hpp"

using namespace loom;
using namespace loom::test;

namespace {

bool auto_provider() { return settings::get_choice(settings::dsm::kProvider) == "auto"; }

TEST(Transports, EachPairTakesTheTransportOfItsHosts) {
  if (!auto_provider()) GTEST_SKIP() << "LOOM_PROVIDER forces one transport for every pair";
  const auto& layout = rt().layout();
  const bool one_host = layout.hosts() == 1;
  EXPECT_EQ(rt().provider().info().name, one_host ? "shm" : "shm+verbs");
  for (int r = 0; r < rt().size(); ++r) {
    const std::string want = layout.same_host(r, rt().rank()) ? "shm" : "verbs";
    EXPECT_EQ(rt().provider().transport(r), want) << "rank " << rt().rank() << " to rank " << r;
  }
  const std::string text = runtime::describe_transports(layout, rt().provider(), rt().rank());
  EXPECT_NE(text.find("within a host: shm"), std::string::npos) << text;
  if (!one_host) {
    EXPECT_NE(text.find("between hosts: verbs"), std::string::npos) << text;
  }
}

// Every rank WRITEs, READs, SENDs to and atomically adds at every other rank, through a mesh as
// the layers above build them. Afterwards the device has seen requests to every rank of another
// host and none to a rank of this one (atomics apart: where the device's atomics are not the
// CPU's, every atomic goes through it, to this host's ranks too).
TEST(Transports, SameHostPairsNeverTouchTheDevice) {
  SharedBuffers buf(1 << 20);
  auto mesh = rt().make_mesh(small_caps());
  std::vector<fabric::PeerTraffic> before;
  for (int r = 0; r < rt().size(); ++r) before.push_back(rt().provider().traffic(r));
  rt().barrier();
  const int n = rt().size(), me = rt().rank();
  for (int step = 1; step < n; ++step) {
    const int dst = (me + step) % n, src = (me - step + n) % n;
    auto& qp = mesh->qp(dst);
    auto& cq = *mesh->send_cqs[static_cast<size_t>(dst)];
    const Remote& r = buf.remote[static_cast<size_t>(dst)];
    // A receive for the SEND that `src` makes at this step, before anyone sends.
    fabric::RecvWr rw;
    rw.wr_id = 7;
    rw.local = {buf.local.address() + 8192, 64, buf.local.lkey};
    ASSERT_EQ(mesh->qp(src).post_recv(rw), fabric::PostResult::Ok);
    rt().barrier();
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(run(qp, cq, rdma(Opcode::Write, buf.local, 0, 64, r, 65536 + 64 * static_cast<uint64_t>(me))).status, Status::Success);
      EXPECT_EQ(run(qp, cq, rdma(Opcode::Read, buf.local, 64, 64, r, 0)).status, Status::Success);
      auto faa = rdma(Opcode::FetchAdd, buf.local, 128, 8, r, 4096);
      faa.compare_add = 1;
      EXPECT_EQ(run(qp, cq, faa).status, Status::Success);
    }
    auto send = rdma(Opcode::Send, buf.local, 0, 64, r, 0);
    EXPECT_EQ(run(qp, cq, send).status, Status::Success);
    auto got = wait_one(*mesh->recv_cq);
    EXPECT_EQ(got.status, Status::Success);
    EXPECT_EQ(got.src_rank, src);
    rt().barrier();
  }
  const bool device_atomics = !rt().provider().info().cpu_atomics;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const auto now = rt().provider().traffic(r);
    const uint64_t posts = now.device_posts - before[static_cast<size_t>(r)].device_posts;
    const uint64_t atomics = now.device_atomics - before[static_cast<size_t>(r)].device_atomics;
    if (rt().layout().same_host(r, me)) {
      EXPECT_EQ(posts, 0u) << "rank " << me << " sent " << posts << " requests to rank " << r << " (same host) through the device";
      if (rt().layout().hosts() > 1) {
        EXPECT_EQ(atomics, device_atomics ? 16u : 0u) << "rank " << me << " to rank " << r;
      }
    } else {
      EXPECT_GE(posts, 16u * 2 + 1) << "rank " << me << " to rank " << r << " (another host)";
      EXPECT_EQ(atomics, 16u) << "rank " << me << " to rank " << r;
    }
  }
  // Every rank's counter took one FETCH_ADD of 1 from every other rank, 16 times.
  rt().barrier();
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(buf.local.bytes() + 4096), 16u * static_cast<uint64_t>(n - 1));
}

}  // namespace
