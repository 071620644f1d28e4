// Selective-signaling stress: T threads share one queue pair (one Transmitter) for 10^6 posts
// (every third through write(), the others through post()).
// No post may overflow the send queue, and every buffer must be recycled exactly once, only
// after the flush number proves its operation complete.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <unordered_map>

#include "tests/test_settings_table.hpp"
#include "loom/dsm/memory/circular_allocator.hpp"
#include "loom/dsm/signal/offload/offloader.hpp"
#include "tests/mp_test.hpp"

using namespace loom;
using namespace loom::test;

namespace {

// T threads post through one Transmitter; with single_thread, T is 1 and the QP is a thread
// domain (the Transmitter then keeps its own lane and uses no locked instructions).
void stress(int T, bool single_thread) {
  const uint64_t total = static_cast<uint64_t>(settings::get_int(test_settings::kStressPosts));
  const uint64_t per_thread = total / static_cast<uint64_t>(T);
  const size_t slots = 256;  // per thread, at the target
  SharedBuffers buf(static_cast<size_t>(T) * slots * 64 + 4096);
  fabric::QpCaps caps;
  caps.max_send_wr = 128;  // small, so that credits run out often
  caps.single_thread = single_thread;
  auto mesh = rt().make_mesh(caps);
  const int dst = right();
  signal::Transmitter& tx = mesh->tx(dst);
  const Remote r = buf.remote[static_cast<size_t>(dst)];
  std::atomic<uint64_t> overflow{0}, early_reuse{0}, handed{0}, recycled{0};

  auto worker = [&](int t) {
    memory::CircularAllocator units(rt().allocator(), 64, 8, 64);
    std::unordered_map<memory::Unit*, std::pair<uint64_t, bool>> outstanding;  // tag, live
    for (uint64_t i = 0; i < per_thread; ++i) {
      memory::Unit* u;
      while ((u = units.next()) == nullptr) tx.progress();
      handed.fetch_add(1, std::memory_order_relaxed);
      auto it = outstanding.find(u);
      if (it != outstanding.end() && it->second.second) {
        // Reused: its previous operation must be proven complete by the flush number.
        if (!tx.complete(it->second.first)) early_reuse.fetch_add(1);
        recycled.fetch_add(1, std::memory_order_relaxed);
        it->second.second = false;
      }
      auto* m = reinterpret_cast<uint64_t*>(u->bytes());
      m[0] = (static_cast<uint64_t>(t) << 48) | i;
      fabric::SendWr wr;
      wr.opcode = fabric::Opcode::Write;
      wr.local = {u->address(), 8, u->lkey};
      wr.remote_addr = r.addr + (static_cast<uint64_t>(t) * slots + i % slots) * 64;
      wr.rkey = r.rkey;
      // Both entries, interleaved: a work request, and write() with the request's fields.
      auto p = i % 3 == 0 ? tx.write(wr.local, wr.remote_addr, wr.rkey) : tx.post(wr);
      if (p.result == fabric::PostResult::QueueFull) overflow.fetch_add(1);
      ASSERT_TRUE(p.ok()) << fabric::to_string(p.result) << "; " << tx.describe();
      units.tag(u, tx, p.tag);
      outstanding[u] = {p.tag, true};
    }
    tx.flush();
    for (auto& [u, st] : outstanding) {
      if (st.second) {
        EXPECT_TRUE(tx.complete(st.first));
        recycled.fetch_add(1, std::memory_order_relaxed);
        st.second = false;
      }
      EXPECT_TRUE(units.reusable(u));
    }
    EXPECT_LE(units.units(), 64u);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < T; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  tx.flush();

  EXPECT_EQ(overflow.load(), 0u);
  EXPECT_EQ(early_reuse.load(), 0u);
  EXPECT_EQ(tx.errors(), 0u);
  EXPECT_EQ(handed.load(), per_thread * static_cast<uint64_t>(T));
  EXPECT_EQ(recycled.load(), handed.load()) << "every buffer handed out is recycled exactly once";
  EXPECT_GE(tx.posts(), per_thread * static_cast<uint64_t>(T));  // plus the flush markers
  EXPECT_LT(tx.signaled_posts(), tx.posts() / 8 + 64) << "most posts must be unsignaled";
  EXPECT_EQ(tx.credits(), static_cast<int64_t>(tx.depth())) << "all credits return once everything completed";
  rt().barrier();
  // The target holds the last value each thread wrote into each slot.
  for (int t = 0; t < T; ++t) {
    for (uint64_t s = 0; s < slots && s < per_thread; ++s) {
      uint64_t last = per_thread - 1 - ((per_thread - 1 - s) % slots);
      uint64_t want = (static_cast<uint64_t>(t) << 48) | last;
      ASSERT_EQ(*reinterpret_cast<uint64_t*>(buf.local.bytes() + (static_cast<uint64_t>(t) * slots + s) * 64), want)
          << "thread " << t << " slot " << s;
    }
  }
}

}  // namespace

TEST(Transmitter, ManyThreadsOneQueuePairNoOverflowExactRecycling) {
  stress(static_cast<int>(settings::get_int(test_settings::kStressThreads)), false);
}

TEST(Transmitter, SingleThreadQueuePairNoOverflowExactRecycling) { stress(1, true); }

// The flush tag of a post is complete only once a later signaled completion arrived.
TEST(Transmitter, WaitAndFlushCompleteEverything) {
  SharedBuffers buf(1 << 21);
  auto mesh = rt().make_mesh(fabric::QpCaps{});
  auto& tx = mesh->tx(right());
  const Remote r = buf.remote[static_cast<size_t>(right())];
  const fabric::SendWr wr = fabric::write_request({buf.local.address(), 8, buf.local.lkey}, r.addr, r.rkey, false);
  auto p = tx.post(wr);
  ASSERT_TRUE(p.ok());
  // Offloaded, the executor signals the last command it finds (the queue ran dry).
  if (!tx.offloaded()) {
    EXPECT_FALSE(tx.complete(p.tag)) << "an unsignaled post alone proves nothing";
  }
  tx.wait(p.tag);
  EXPECT_TRUE(tx.complete(p.tag));
  tx.flush();  // also hands this thread's cached lane credits back
  EXPECT_EQ(tx.credits(), static_cast<int64_t>(tx.depth()));
  rt().barrier();
}

// Posts on a queue pair that is not connected are refused (fabric::PostResult::NotConnected).
// Directly, post() returns the refusal and flush() (which needs a marker posted) raises an error
// that says so. Offloaded, post() has queued the request when the executor finds it refused:
// each refusal reaches the error handler once, the refused signaled posts' tags are settled
// without a completion, flush() returns, and every credit comes back.
TEST(Transmitter, RefusedPostsAreReportedAndLoseNoCredit) {
  fabric::Provider& prov = rt().provider();
  fabric::QpCaps caps;
  caps.max_send_wr = 32;  // several signaled batches in 100 posts
  SharedBuffers buf(4096);
  const Remote r = buf.remote[static_cast<size_t>(right())];
  const fabric::SendWr wr = fabric::write_request({buf.local.address(), 8, buf.local.lkey}, r.addr, r.rkey, false);
  constexpr int kPosts = 100;
  for (const bool offloaded : {false, true}) {
    SCOPED_TRACE(offloaded ? "offloaded" : "direct");
    auto send_cq = prov.create_cq(caps.max_send_wr);
    auto recv_cq = prov.create_cq(caps.max_send_wr);
    auto qp = prov.create_qp(right(), *send_cq, *recv_cq, caps);  // never connected
    signal::offload::Offloader off(signal::offload::Offloader::Config{});
    signal::Transmitter::Config cfg;
    if (offloaded) cfg.offloader = &off;
    signal::Transmitter tx(*qp, *send_cq, cfg);
    std::atomic<int> reported{0};
    tx.set_error_handler([&](const fabric::Completion& c) {
      EXPECT_EQ(c.status, fabric::Status::WorkRequestFlushed);
      reported.fetch_add(1);
    });
    for (int i = 0; i < kPosts; ++i) {
      const signal::Posted p = tx.post(wr, i % 40 == 39);  // some forced signals among them
      if (offloaded) ASSERT_TRUE(p.ok()) << fabric::to_string(p.result);
      else ASSERT_EQ(p.result, fabric::PostResult::NotConnected);
    }
    if (!offloaded) {
      try {
        tx.flush();
        ADD_FAILURE() << "flush() on a queue pair that is not connected returned";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("not connected"), std::string::npos) << e.what();
      }
      EXPECT_EQ(reported.load(), 0);
      continue;
    }
    tx.flush();
    EXPECT_EQ(reported.load(), kPosts);
    EXPECT_EQ(tx.errors(), static_cast<uint64_t>(kPosts));
    EXPECT_EQ(tx.credits(), static_cast<int64_t>(tx.depth())) << tx.describe();
  }
}

// Wait-freedom, counted: 8 and 16 threads share a queue pair of 32 entries (the pool runs dry
// all the time), with forced signals and flushes among the posts. Each operation of each thread
// must take a bounded number of shared read-modify-writes whatever the others do: a post's slow
// path at most 5 (draw, publish, and a signal's exchange, count and issue number; its waits for a
// valid ticket are polls, counted apart), a lane return at most 4, a poll of up to 8 completions
// at most 4 each plus the flush number's failed compare-and-swaps, which other threads' polled
// and not yet recorded completions bound (8 a thread). A compare-and-swap retried because another
// thread took credits in between — what the pool's take did before — has no bound under this load.
TEST(Transmitter, EveryOperationFinishesInABoundedNumberOfItsOwnSteps) {
  SharedBuffers buf(16 * 64 * 8 + 4096);
  fabric::QpCaps caps;
  caps.max_send_wr = 32;
  auto mesh = rt().make_mesh_offloaded(caps, nullptr);  // direct injection whatever LOOM_OFFLOAD says
  signal::Transmitter& tx = mesh->tx(right());
  const Remote r = buf.remote[static_cast<size_t>(right())];
  // Per thread a fiftieth of the stress test's posts: 20000 here, 400 in the Soft-RoCE guest.
  const uint64_t per_thread = std::max<uint64_t>(400, static_cast<uint64_t>(settings::get_int(test_settings::kStressPosts)) / 50);
  for (const int T : {8, 16}) {
    SCOPED_TRACE(T);
    std::vector<signal::Transmitter::Steps> steps(static_cast<size_t>(T));
    auto worker = [&](int t) {
      auto* src = reinterpret_cast<uint64_t*>(buf.local.bytes()) + t * 8;
      for (uint64_t i = 0; i < per_thread; ++i) {
        src[0] = i;
        const fabric::SendWr wr = fabric::write_request({reinterpret_cast<uint64_t>(src), 8, buf.local.lkey},
                                                        r.addr + static_cast<uint64_t>(t) * 64, r.rkey, false);
        const signal::Posted p = tx.post(wr, i % 97 == 96);
        ASSERT_TRUE(p.ok()) << fabric::to_string(p.result) << "; " << tx.describe();
        if (i % 500 == 499) tx.flush();
      }
      tx.flush();
      steps[static_cast<size_t>(t)] = signal::Transmitter::steps_of_this_thread();
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < T; ++t) threads.emplace_back(worker, t);
    for (auto& th : threads) th.join();
    signal::Transmitter::Steps most;
    for (const auto& s : steps) {
      most.post = std::max(most.post, s.post);
      most.lane_return = std::max(most.lane_return, s.lane_return);
      most.progress = std::max(most.progress, s.progress);
      most.waiting_polls += s.waiting_polls;
      most.slow_posts += s.slow_posts;
    }
    EXPECT_GT(most.slow_posts, 0u);
    EXPECT_LE(most.post, 5u) << "a post's slow path retried a shared read-modify-write";
    EXPECT_LE(most.lane_return, 4u);
    EXPECT_LE(most.progress, 4u * 8 + 8u * static_cast<uint64_t>(T));
    EXPECT_EQ(tx.credits(), static_cast<int64_t>(tx.depth())) << tx.describe();
    EXPECT_EQ(tx.errors(), 0u);
    std::printf("[%d] %d threads: slow posts %llu, most steps: post %llu, lane return %llu, poll %llu; polls waiting for a ticket %llu\n",
                rt().rank(), T, static_cast<unsigned long long>(most.slow_posts), static_cast<unsigned long long>(most.post),
                static_cast<unsigned long long>(most.lane_return), static_cast<unsigned long long>(most.progress),
                static_cast<unsigned long long>(most.waiting_polls));
  }
  rt().barrier();
}

// LOOM_QPS_PER_PEER: a mesh with three ways to each peer. A thread keeps one way (tx(rank) is
// tx(rank, its way) on every call), threads spread over the ways, each thread's WRITEs to one
// slot arrive in its order (the last one stays), every way's Transmitter gets its credits back,
// and a rank or way out of range is an error naming it.
TEST(Mesh, EachThreadPostsOnOneOfSeveralQueuePairsPerPeer) {
  constexpr int kWays = 3, kThreads = 6;
  constexpr uint64_t kPosts = 2000;
  SharedBuffers buf(kThreads * 64 + 4096);
  auto mesh = rt().make_mesh_offloaded(fabric::QpCaps{}, rt().offloader(), kWays);
  ASSERT_EQ(mesh->ways, kWays);
  const int dst = right();
  const Remote r = buf.remote[static_cast<size_t>(dst)];
  std::vector<int> way_of(kThreads, -1);
  auto worker = [&](int t) {
    const int way = mesh->way_of_this_thread();
    way_of[static_cast<size_t>(t)] = way;
    // The source apart from the slots the left neighbour writes into: a WRITE reads its source
    // when it executes, and a value landing there once went out instead of ours (ASan, np 4).
    auto* src = reinterpret_cast<uint64_t*>(buf.local.bytes() + kThreads * 64 + static_cast<size_t>(t) * 64);
    for (uint64_t i = 1; i <= kPosts; ++i) {
      ASSERT_EQ(&mesh->tx(dst), &mesh->tx(dst, way));
      ASSERT_EQ(mesh->way_of_this_thread(), way);
      src[0] = i;
      const fabric::SendWr wr = fabric::write_request({reinterpret_cast<uint64_t>(src), 8, buf.local.lkey},
                                                      r.addr + static_cast<uint64_t>(t) * 64, r.rkey, false);
      signal::Transmitter& tx = mesh->tx(dst);
      tx.wait(tx.post(wr).tag);  // the source is rewritten next round
    }
    mesh->tx(dst).flush();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  std::set<int> used(way_of.begin(), way_of.end());
  EXPECT_GE(used.size(), 2u) << "six threads on one of three ways";
  for (int w : used) EXPECT_TRUE(w >= 0 && w < kWays) << w;
  for (int w = 0; w < kWays; ++w) EXPECT_EQ(mesh->tx(dst, w).credits(), static_cast<int64_t>(mesh->tx(dst, w).depth()));
  EXPECT_THROW(mesh->tx(dst, kWays), Error);
  EXPECT_THROW(mesh->tx(rt().size(), 0), Error);
  rt().barrier();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(buf.local.bytes() + static_cast<uint64_t>(t) * 64), kPosts) << "thread " << t;
}

// Offloaded, a post is counted (posts(), signaled_posts()) by the time the flush that covers it
// returns: the executor counted a batch after posting it, so a completer could raise the flush
// number over a completion before the count (flush() returned with posts() short by the batch).
TEST(Transmitter, OffloadedPostsAreCountedWhenTheirFlushReturns) {
  SharedBuffers buf(4096);
  signal::offload::Offloader off(signal::offload::Offloader::Config{});  // dynamic offloading
  fabric::QpCaps caps;
  caps.max_send_wr = 64;
  auto mesh = rt().make_mesh_offloaded(caps, &off, 1);
  signal::Transmitter& tx = mesh->tx(right());
  const Remote r = buf.remote[static_cast<size_t>(right())];
  const fabric::SendWr wr = fabric::write_request({buf.local.address(), 8, buf.local.lkey}, r.addr, r.rkey, false);
  uint64_t short_counts = 0;
  const uint64_t before = tx.posts();
  // A flush a post: a thousandth of the stress test's posts, at least 100 (1000 here, 100 in the Soft-RoCE guest).
  const uint64_t rounds = std::max<uint64_t>(100, static_cast<uint64_t>(settings::get_int(test_settings::kStressPosts)) / 1000);
  for (uint64_t i = 1; i <= rounds; ++i) {
    ASSERT_TRUE(tx.post(wr).ok());
    tx.flush();
    if (tx.posts() - before < i) ++short_counts;
  }
  EXPECT_EQ(short_counts, 0u) << "flush() returned before its posts were counted";
  rt().barrier();
}
