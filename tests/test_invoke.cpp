// Remote invocation: ordering, exactly-once delivery across chunk rotation and ring growth,
// retry policies, broadcast, every call form, both Synchronizer modes, bad calls.
// Runs under loomrun with 2 threads per process (every thread is a destination).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "loom/invoke/aggregator.hpp"
#include "loom/invoke/calls.hpp"
#include "loom/invoke/future.hpp"
#include "tests/mp_test.hpp"

using namespace loom;
using namespace loom::invoke;
using loom::test::rt;

namespace {

// Small chunks so that every test rotates and grows rings many times.
Config small_rings(uint32_t max_chunks = 8, uint32_t helpers = 0) {
  Config c;
  c.chunk_size = 4096;
  c.chunks_per_request = 2;
  c.max_chunks = max_chunks;
  c.helpers = helpers;
  return c;
}

// Per-thread receive state, indexed by the receiving thread, shared with the called lambdas
// through plain pointers (captures must be trivially copyable).
struct Ledger {
  std::vector<std::atomic<uint64_t>> next;      // by sender gid: next expected sequence number
  std::vector<std::atomic<uint64_t>> received;  // by receiving thread index
  std::atomic<uint64_t> disorder{0};
  explicit Ledger(int senders, int threads) : next(static_cast<size_t>(senders)), received(static_cast<size_t>(threads)) {}
};

// Runs fn(index) on every worker thread of this process (index 0 is the calling thread).
template <typename Fn>
void on_threads(Fn fn) {
  int t = rt().threads_per_process();
  std::vector<std::thread> ts;
  for (int i = 1; i < t; ++i) ts.push_back(rt().spawn_at(i, "worker", [&fn, i] { fn(i); }));
  fn(0);
  for (auto& th : ts) th.join();
}

// Receive state lives in globals: a lambda runs in another process, so it may capture values
// but not pointers to this process's memory.
std::vector<std::unique_ptr<Ledger>> g_ledgers;
void make_ledgers(int senders, int threads) {
  g_ledgers.clear();
  for (int i = 0; i < threads; ++i) g_ledgers.push_back(std::make_unique<Ledger>(senders, threads));
}

void poll_until(const std::atomic<uint64_t>& counter, uint64_t expected) {
  Invoker::current().wait_until([&] { return counter.load() >= expected; });
}

void expect_fifo(int sender, uint64_t seq, int me) {
  Ledger* l = g_ledgers[static_cast<size_t>(me)].get();
  uint64_t want = l->next[static_cast<size_t>(sender)].load(std::memory_order_relaxed);
  if (seq != want) l->disorder.fetch_add(1);
  l->next[static_cast<size_t>(sender)].store(seq + 1, std::memory_order_relaxed);
  l->received[static_cast<size_t>(me)].fetch_add(1);
}

}  // namespace

TEST(Invoke, PerSenderFifoAndExactlyOnceAcrossRotationAndGrowth) {
  Invoker inv(rt(), small_rings(8));
  const int total = inv.total_threads();
  const int T = inv.threads();
  make_ledgers(total, T);
  auto& ledgers = g_ledgers;
  const uint64_t per_pair = 3000;  // 40-byte calls through 4 KiB chunks: ~30 rotations per pair
  on_threads([&](int me) {
    const int my_gid = inv.gid(Thread{rt().rank(), me});
    for (uint64_t s = 0; s < per_pair; ++s) {
      for (int d = 0; d < total; ++d) {
        Thread dest = inv.thread_of((my_gid + d) % total);
        int idx = dest.index;
        ASSERT_TRUE(call(dest, [my_gid, s, idx] { expect_fifo(my_gid, s, idx); }));
      }
    }
    inv.flush();
    poll_until(ledgers[static_cast<size_t>(me)]->received[static_cast<size_t>(me)], per_pair * static_cast<uint64_t>(total));
  });
  for (int i = 0; i < T; ++i) {
    EXPECT_EQ(ledgers[static_cast<size_t>(i)]->disorder.load(), 0u);
    EXPECT_EQ(ledgers[static_cast<size_t>(i)]->received[static_cast<size_t>(i)].load(), per_pair * static_cast<uint64_t>(total));
    for (int s = 0; s < total; ++s) EXPECT_EQ(ledgers[static_cast<size_t>(i)]->next[static_cast<size_t>(s)].load(), per_pair);
  }
  EXPECT_EQ(inv.bad_calls(), 0u);
  rt().barrier();
}

// Seed 000: a receiving thread's chunks are allocated in its NUMA zone. Every thread calls every
// thread once; then each zone that holds a thread of this process but is not the process's own
// holds live allocations (chunks) and a zone holding none of its threads holds none. Trivial on
// a one-zone machine; the suite runs on a synthetic two-zone machine under map-by spread too
// (invoke.zones-spread.np2), where thread 1 is in the other zone.
TEST(Invoke, ChunksLiveInTheZoneOfTheirReceivingThread) {
  static std::atomic<uint64_t> got[64];
  for (auto& g : got) g = 0;
  Invoker inv(rt(), small_rings(8));
  ASSERT_LE(inv.threads(), 64);
  const int total = inv.total_threads();
  on_threads([&](int me) {
    for (int d = 0; d < total; ++d) {
      const Thread dest = inv.thread_of(d);
      ASSERT_TRUE(call(dest, [idx = dest.index] { got[idx].fetch_add(1); }));
    }
    inv.flush();
    poll_until(got[me], static_cast<uint64_t>(total));  // one call from every thread
  });
  rt().barrier();
  std::vector<bool> has_thread(static_cast<size_t>(rt().numa_zones()), false);
  for (int t = 0; t < inv.threads(); ++t) has_thread[static_cast<size_t>(rt().thread_zone(t))] = true;
  for (int z = 0; z < rt().numa_zones(); ++z) {
    if (z == rt().local_zone()) continue;
    if (has_thread[static_cast<size_t>(z)]) EXPECT_GT(rt().heap(z).live_allocations(), 0u) << "zone " << z;
    else EXPECT_EQ(rt().heap(z).live_allocations(), 0u) << "zone " << z;
  }
  EXPECT_EQ(inv.bad_calls(), 0u);
  rt().barrier();
}

TEST(Invoke, SlowReceiverFailsAtTheChunkLimitThenReceivesEverything) {
  const uint32_t kMax = 4;
  // Reset before the Invoker exists: its helper may run calls as soon as it does.
  static std::atomic<uint64_t> got{0}, disorder{0}, expect_next{0};
  got = 0;
  disorder = 0;
  expect_next = 0;
  Invoker inv(rt(), small_rings(kMax));
  const bool sender = rt().rank() % 2 == 0;
  const int peer = rt().rank() ^ 1;
  uint64_t sent = 0;
  if (sender) {
    // The receiver does not poll yet: the ring grows to kMax chunks, then calls fail.
    Messenger& m = inv.messengers().to(Thread{peer, 0});
    for (;;) {
      uint64_t s = sent;
      if (!call<Notify::Transmitted, OnFull::Fail>(Thread{peer, 0}, [s] {
            if (expect_next.load() != s) disorder.fetch_add(1);
            expect_next.store(s + 1);
            got.fetch_add(1);
          }))
        break;
      ++sent;
    }
    EXPECT_EQ(m.chunks(), kMax);
    EXPECT_GT(m.growths(), 0u);
    EXPECT_GT(sent, 100u);
  }
  uint64_t n = sent;
  auto all = rt().bootstrap().allgather(std::as_bytes(std::span(&n, 1)));
  if (!sender) {
    uint64_t expected;
    std::memcpy(&expected, all[static_cast<size_t>(peer)].data(), 8);
    poll_until(got, expected);
    EXPECT_EQ(got.load(), expected);
    EXPECT_EQ(disorder.load(), 0u);
  }
  rt().barrier();
  // Once consumed, the same ring carries more calls: the rotation continues where it was.
  if (sender) {
    for (int i = 0; i < 200; ++i) {
      uint64_t s = sent + static_cast<uint64_t>(i);
      ASSERT_TRUE(call(Thread{peer, 0}, [s] {
        if (expect_next.load() != s) disorder.fetch_add(1);
        expect_next.store(s + 1);
        got.fetch_add(1);
      }));
    }
  } else {
    uint64_t expected;
    std::memcpy(&expected, all[static_cast<size_t>(peer)].data(), 8);
    poll_until(got, expected + 200);
    EXPECT_EQ(disorder.load(), 0u);
  }
  EXPECT_EQ(inv.bad_calls(), 0u);
  rt().barrier();
}

TEST(Invoke, RetryAndRetryAsyncKeepFifoBehindASlowReceiver) {
  for (uint32_t helpers : {0u, 1u}) {
    // Reset before the Invoker exists: its helper may run calls as soon as it does.
    static std::atomic<uint64_t> got{0}, disorder{0}, expect_next{0};
    got = 0;
    disorder = 0;
    expect_next = 0;
    Invoker inv(rt(), small_rings(3, helpers));
    const bool sender = rt().rank() % 2 == 0;
    const int peer = rt().rank() ^ 1;
    const uint64_t kCalls = 4000;
    if (sender) {
      // Alternate policies: RetryAsync calls queue while the ring is full, and the Retry calls
      // after them must not overtake them.
      for (uint64_t s = 0; s < kCalls; ++s) {
        auto f = [s] {
          if (expect_next.load() != s) disorder.fetch_add(1);
          expect_next.store(s + 1);
          got.fetch_add(1);
        };
        bool ok = (s / 500) % 2 == 0 ? call<Notify::Transmitted, OnFull::RetryAsync>(Thread{peer, 0}, f)
                                     : call<Notify::Transmitted, OnFull::Retry>(Thread{peer, 0}, f);
        ASSERT_TRUE(ok);
      }
      Messenger& m = inv.messengers().to(Thread{peer, 0});
      inv.wait_until([&] { return !m.async_pending(); });
    } else {
      // Slow: let the sender run into the chunk limit first.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Invoker::current().wait_until([&] {
        if (got.load() % 700 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        return got.load() >= kCalls;
      });
      EXPECT_EQ(got.load(), kCalls);
      EXPECT_EQ(disorder.load(), 0u);
    }
    EXPECT_EQ(inv.bad_calls(), 0u);
    rt().barrier();
  }
}

TEST(Invoke, BroadcastReachesEveryThreadOnce) {
  // Reset before the Invoker exists: its helper may run calls as soon as it does.
  static std::atomic<uint64_t> runs[64];
  for (auto& r : runs) r = 0;
  Invoker inv(rt(), small_rings(8));
  const int total = inv.total_threads();
  on_threads([&](int me) {
    Synchronizer executed(total);
    broadcast<Notify::Executed>([] { runs[Invoker::current().self().index].fetch_add(1); }, &executed);
    // Keep running calls until ours reached everyone and everyone's reached us; a thread that
    // stopped early could hold forwarded copies of other broadcasts.
    inv.wait_until([&] {
      return executed.done() && runs[me].load() >= static_cast<uint64_t>(total) && inv.messengers().quiet();
    });
  });
  for (int i = 0; i < inv.threads(); ++i) EXPECT_EQ(runs[i].load(), static_cast<uint64_t>(total)) << "thread " << i;
  EXPECT_EQ(inv.bad_calls(), 0u);
  rt().barrier();
}

TEST(Invoke, BroadcastBufferCarriesTheBytes) {
  // Reset before the Invoker exists: its helper may run calls as soon as it does.
  static std::atomic<uint64_t> ok_runs{0}, bad_runs{0};
  ok_runs = 0;
  bad_runs = 0;
  Invoker inv(rt(), small_rings(8));
  on_threads([&](int me) {
    if (rt().rank() == 0 && me == 0) {
      std::vector<std::byte> bytes(1000);
      for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(i * 7 + 3);
      Synchronizer s(inv.total_threads());
      broadcast_buffer<Notify::Executed>(
          [](std::span<std::byte> b) {
            bool good = b.size() == 1000;
            for (size_t i = 0; good && i < b.size(); ++i) good = b[i] == std::byte(i * 7 + 3);
            (good ? ok_runs : bad_runs).fetch_add(1);
          },
          bytes, &s);
      s.wait();  // every thread of every process ran it
    }
    inv.wait_until([] { return ok_runs.load() + bad_runs.load() >= static_cast<uint64_t>(Invoker::current().threads()); });
  });
  EXPECT_EQ(ok_runs.load(), static_cast<uint64_t>(inv.threads()));
  EXPECT_EQ(bad_runs.load(), 0u);
  rt().barrier();
}

// The READ form: every thread pulls the root's bytes, also those reached through a forwarder
// (at 4 processes the tree has a second level; their READs once went to the forwarder).
TEST(Invoke, BroadcastBufferReadFormPullsFromTheRoot) {
  static std::atomic<uint64_t> ok_runs{0}, bad_runs{0};
  ok_runs = 0;
  bad_runs = 0;
  Invoker inv(rt(), small_rings(8));
  const int root = rt().size() - 1;
  static constexpr size_t kBytes = 300000;  // more than a frame of these rings carries
  on_threads([&](int me) {
    if (rt().rank() == root && me == inv.threads() - 1) {  // the tree's second level is then in other processes
      memory::RDMAMemory orig = rt().heap().allocate(kBytes);
      for (size_t i = 0; i < kBytes; ++i) orig.bytes()[i] = static_cast<uint8_t>(i * 13 + 5);
      Synchronizer s(inv.total_threads());
      broadcast_buffer<Notify::Executed>(
          [root](std::span<std::byte> b) {
            bool good = b.size() == kBytes && caller_rank() == root;
            for (size_t i = 0; good && i < b.size(); ++i) good = b[i] == std::byte(static_cast<uint8_t>(i * 13 + 5));
            (good ? ok_runs : bad_runs).fetch_add(1);
          },
          orig.slice(0, kBytes), &s);  // the heap rounds the allocation up
      s.wait();  // every thread of every process ran it: orig may go
      rt().heap().free(orig.addr);
    }
    inv.wait_until([] { return ok_runs.load() + bad_runs.load() >= static_cast<uint64_t>(Invoker::current().threads()); });
  });
  EXPECT_EQ(ok_runs.load(), static_cast<uint64_t>(inv.threads()));
  EXPECT_EQ(bad_runs.load(), 0u);
  EXPECT_EQ(inv.bad_calls(), 0u);
  rt().barrier();
}

// The WRITE form: the root writes the bytes into each process's buffer, every thread there runs
// on that buffer (its own address in each process), also those reached through a forwarder.
TEST(Invoke, BroadcastBufferWriteFormRunsOnEachProcesssBuffer) {
  static std::atomic<uint64_t> ok_runs{0}, bad_runs{0};
  static uint64_t landing_addr = 0;
  ok_runs = 0;
  bad_runs = 0;
  static constexpr size_t kBytes = 200000;
  memory::RDMAMemory landing = rt().heap().allocate(kBytes);
  std::memset(landing.addr, 0, kBytes);
  landing_addr = landing.address();
  RemoteMemoryLocator mine{rt().rank(), 0, landing.address(), kBytes, landing.rkey};
  const std::vector<RemoteMemoryLocator> all = rt().bootstrap().allgather_value(mine);
  Invoker inv(rt(), small_rings(8));
  const int root = rt().size() - 1;
  on_threads([&](int me) {
    if (rt().rank() == root && me == inv.threads() - 1) {
      memory::RDMAMemory orig = rt().heap().allocate(kBytes);
      for (size_t i = 0; i < kBytes; ++i) orig.bytes()[i] = static_cast<uint8_t>(i * 11 + 1);
      Synchronizer s(inv.total_threads());
      broadcast_buffer<Notify::Executed>(
          [root](std::span<std::byte> b) {
            bool good = b.size() == kBytes && caller_rank() == root && reinterpret_cast<uint64_t>(b.data()) == landing_addr;
            for (size_t i = 0; good && i < b.size(); ++i) good = b[i] == std::byte(static_cast<uint8_t>(i * 11 + 1));
            (good ? ok_runs : bad_runs).fetch_add(1);
          },
          orig.slice(0, kBytes), all, &s);
      rt().heap().free(orig.addr);  // written everywhere before the calls went
      s.wait();
    }
    inv.wait_until([] { return ok_runs.load() + bad_runs.load() >= static_cast<uint64_t>(Invoker::current().threads()); });
  });
  EXPECT_EQ(ok_runs.load(), static_cast<uint64_t>(inv.threads()));
  EXPECT_EQ(bad_runs.load(), 0u);
  EXPECT_EQ(inv.bad_calls(), 0u);
  // One buffer short, or one in the wrong rank, is refused before anything is written.
  if (rt().rank() == 0) {
    on_threads([&](int me) {
      if (me != 0) return;
      std::vector<RemoteMemoryLocator> shorter(all.begin(), all.end() - 1), swapped = all;
      std::swap(swapped.front(), swapped.back());
      EXPECT_THROW(broadcast_buffer([](std::span<std::byte>) {}, landing.slice(0, 8), shorter), Error);
      EXPECT_THROW(broadcast_buffer([](std::span<std::byte>) {}, landing.slice(0, 8), swapped), Error);
    });
  }
  rt().barrier();
  rt().heap().free(landing.addr);
}

TEST(Invoke, EveryCallFormMovesTheRightBytes) {
  // Reset before the Invoker exists: its helper may run calls as soon as it does.
  static std::atomic<uint64_t> checks{0}, wrong{0};
  checks = 0;
  wrong = 0;
  // A helper keeps running calls for this process after its own part is done.
  Invoker inv(rt(), small_rings(8, 1));
  const Thread peer{test::right(), 0};
  // The destination buffer of the WRITE form lives in the peer: exchange locators.
  memory::RDMAMemory landing = rt().heap().allocate(5000);
  std::memset(landing.addr, 0, 5000);
  RemoteMemoryLocator mine{rt().rank(), 0, landing.address(), 5000, landing.rkey};
  auto all = rt().bootstrap().allgather(std::as_bytes(std::span(&mine, 1)));
  RemoteMemoryLocator theirs;
  std::memcpy(&theirs, all[static_cast<size_t>(peer.rank)].data(), sizeof theirs);

  memory::RDMAMemory orig = rt().heap().allocate(3000);
  for (size_t i = 0; i < 3000; ++i) orig.bytes()[i] = static_cast<uint8_t>(i * 13 + rt().rank());
  const int me = rt().rank();
  auto check_bytes = [me](std::span<std::byte> b) {
    bool good = b.size() == 3000;
    for (size_t i = 0; good && i < b.size(); ++i) good = b[i] == std::byte(static_cast<uint8_t>(i * 13 + me));
    (good ? checks : wrong).fetch_add(1);
  };
  Synchronizer sync(4);
  // 1. the buffer travels with the call
  ASSERT_TRUE(call_buffer<Notify::Executed>(peer, check_bytes, std::span<const std::byte>(
                                                                   reinterpret_cast<const std::byte*>(orig.addr), 3000),
                                            &sync));
  // 2. RDMA WRITE into the peer's buffer, then the call
  ASSERT_TRUE(call_buffer<Notify::Executed>(peer, check_bytes, orig.slice(0, 3000), theirs, &sync));
  // 3. the peer pulls it with RDMA READ
  ASSERT_TRUE(call_buffer<Notify::Executed>(peer, check_bytes, orig.slice(0, 3000), &sync));
  // 4. call_return: the result comes back by RDMA WRITE
  ReturnSlot<uint64_t> slot;
  const uint64_t x = 0x1234'5678'9abc'def0ull + static_cast<uint64_t>(me);
  ASSERT_TRUE(call_return<Notify::Executed>(peer, [x] { return x * 3 + static_cast<uint64_t>(caller_rank()); }, slot, &sync));
  // A larger result (not inline): 200 bytes.
  struct Big {
    uint64_t v[25];
  };
  ReturnSlot<Big> big;
  ASSERT_TRUE(call_return(peer, [x] {
    Big b;
    for (int i = 0; i < 25; ++i) b.v[i] = x + static_cast<uint64_t>(i);
    return b;
  }, big));
  sync.wait();
  EXPECT_EQ(slot.get(), x * 3 + static_cast<uint64_t>(me));
  Big b = big.get();
  for (int i = 0; i < 25; ++i) EXPECT_EQ(b.v[i], x + static_cast<uint64_t>(i));
  inv.wait_until([] { return checks.load() + wrong.load() >= 3; });
  EXPECT_EQ(checks.load(), 3u);
  EXPECT_EQ(wrong.load(), 0u);
  rt().barrier();
  rt().heap().free(orig.addr);
  rt().heap().free(landing.addr);
  EXPECT_EQ(inv.bad_calls(), 0u);
}

// Seed 000's Async parameter of the READ form. An Aggregator's record carries a READ-form call
// and a plain call behind it: with Async::No the destination waits for the READ and runs them in
// order; with Async::Yes it posts the READ, runs the plain call, and runs the pulled one at a
// later poll, once the READ completed. Either way the pulled bytes are the caller's and the
// Executed notification comes after the call ran.
template <Async A>
void read_form_against_the_call_behind_it(std::vector<int>& expected_order) {
  static std::vector<int> order;  // written by whichever thread polls this process's thread 0
  static std::atomic<int> ran{0};
  static std::atomic<uint64_t> wrong{0};
  order.clear();
  ran = 0;
  wrong = 0;
  Invoker inv(rt(), small_rings(8));
  const Thread peer{test::right(), 0};
  constexpr size_t kBytes = 1000;
  memory::RDMAMemory orig = rt().heap().allocate(kBytes);
  const int me = rt().rank();
  for (size_t i = 0; i < kBytes; ++i) orig.bytes()[i] = static_cast<uint8_t>(i * 7 + me);
  Synchronizer sync(2);
  {
    Aggregator agg;  // Trad: both calls in one record
    ASSERT_TRUE((agg.call_buffer<Notify::Executed, A>(peer, [me](std::span<std::byte> b) {
      bool good = b.size() == kBytes;
      for (size_t i = 0; good && i < b.size(); ++i) good = b[i] == std::byte(static_cast<uint8_t>(i * 7 + me));
      if (!good) wrong.fetch_add(1);
      order.push_back(1);
      ran.fetch_add(1);
    }, orig.slice(0, kBytes), &sync)));
    ASSERT_TRUE(agg.call<Notify::Executed>(peer, [] {
      order.push_back(2);
      ran.fetch_add(1);
    }, &sync));
    agg.flush();
  }
  sync.wait();  // both ran at the peer (this thread runs the calls sent to it meanwhile)
  inv.wait_until([] { return ran.load() == 2; });
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(order, expected_order);
  rt().barrier();
  rt().heap().free(orig.addr);
  EXPECT_EQ(inv.bad_calls(), 0u);
}

TEST(Invoke, TheReadFormWaitsForItsReadBeforeTheCallsBehindIt) {
  std::vector<int> in_order{1, 2};
  read_form_against_the_call_behind_it<Async::No>(in_order);
}

TEST(Invoke, TheAsyncReadFormRunsTheCallsBehindItWhileItsReadIsInFlight) {
  std::vector<int> behind_first{2, 1};
  read_form_against_the_call_behind_it<Async::Yes>(behind_first);
}

// One-sided and send-based, many in flight at once: every pulled call runs once, on the right
// bytes, and the Executed Synchronizer counts each.
TEST(Invoke, AsyncReadFormCallsInFlightAllRunOnTheirBytes) {
  static std::atomic<uint64_t> good{0}, bad{0};
  good = 0;
  bad = 0;
  Invoker inv(rt(), small_rings(8, 1));
  const Thread peer{test::right(), 0};
  constexpr int kCalls = 40;
  constexpr size_t kBytes = 256;
  std::vector<memory::RDMAMemory> bufs;
  const int me = rt().rank();
  for (int k = 0; k < kCalls; ++k) {
    bufs.push_back(rt().heap().allocate(kBytes));
    std::memset(bufs.back().addr, k + 16 * me, kBytes);
  }
  Synchronizer sync(kCalls);
  for (int k = 0; k < kCalls; ++k) {
    auto f = [k, me](std::span<std::byte> b) {
      bool ok = b.size() == kBytes;
      for (size_t i = 0; ok && i < b.size(); ++i) ok = b[i] == std::byte(static_cast<uint8_t>(k + 16 * me));
      (ok ? good : bad).fetch_add(1);
    };
    if (k % 2 == 0) ASSERT_TRUE((call_buffer<Notify::Executed, OnFull::Retry, Async::Yes>(peer, f, bufs[static_cast<size_t>(k)].slice(0, kBytes), &sync)));
    else send::call_buffer<Notify::Executed, Async::Yes>(peer, f, bufs[static_cast<size_t>(k)].slice(0, kBytes), &sync);
  }
  sync.wait();
  inv.wait_until([] { return good.load() + bad.load() == kCalls; });
  EXPECT_EQ(good.load(), static_cast<uint64_t>(kCalls));
  EXPECT_EQ(bad.load(), 0u);
  rt().barrier();
  for (auto& b : bufs) rt().heap().free(b.addr);
  EXPECT_EQ(inv.bad_calls(), 0u);
}

TEST(Invoke, SynchronizerModes) {
  // Reset before the Invoker exists: its helper may run calls as soon as it does.
  static std::atomic<uint64_t> ran{0};
  ran = 0;
  // A helper keeps running calls for this process after its own part is done.
  Invoker inv(rt(), small_rings(8, 1));
  const Thread peer{test::right(), 0};
  // Transmitted: done once the calls left, whether or not the peer ran them.
  Synchronizer sent(50);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(call(peer, [] { ran.fetch_add(1); }, &sent));
  EXPECT_TRUE(sent.done());
  // Executed: done only once the peer ran them; the peer's runs come through fabric atomics.
  Synchronizer executed(50);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(call<Notify::Executed>(peer, [] { ran.fetch_add(1); }, &executed));
  executed.wait();
  EXPECT_EQ(executed.count(), 0);
  // Trad aggregation: Transmitted counts when the record goes, not when the call is buffered.
  Aggregator agg;
  Synchronizer batched(3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agg.call(peer, [] { ran.fetch_add(1); }, &batched));
  EXPECT_EQ(batched.count(), 3);
  agg.flush();
  EXPECT_TRUE(batched.done());
  inv.wait_until([] { return ran.load() >= 103; });
  EXPECT_EQ(ran.load(), 103u);
  rt().barrier();
}

TEST(Invoke, SendBasedCallsUseTheSamePrimitives) {
  // Reset before the Invoker exists: its helper may run calls as soon as it does.
  static std::atomic<uint64_t> seq_next{0}, disorder{0}, bytes_ok{0};
  seq_next = 0;
  disorder = 0;
  bytes_ok = 0;
  // A helper keeps running calls for this process after its own part is done.
  Invoker inv(rt(), small_rings(8, 1));
  const Thread peer{test::right(), 0};
  Synchronizer done(301);
  for (uint64_t s = 0; s < 300; ++s)
    send::call<Notify::Executed>(peer, [s] {
      if (seq_next.load() != s) disorder.fetch_add(1);
      seq_next.store(s + 1);
    }, &done);
  std::vector<std::byte> b(100, std::byte{0x5a});
  send::call_buffer<Notify::Executed>(peer, [](std::span<std::byte> x) {
    if (x.size() == 100 && x[99] == std::byte{0x5a}) bytes_ok.fetch_add(1);
  }, b, &done);
  ReturnSlot<int> r;
  send::call_return(peer, [] { return 42 + caller_rank(); }, r);
  done.wait();
  EXPECT_EQ(r.get(), 42 + rt().rank());
  // Our own counters count the calls of our left neighbour.
  inv.wait_until([] { return bytes_ok.load() == 1 && seq_next.load() == 300; });
  EXPECT_EQ(disorder.load(), 0u);
  EXPECT_EQ(bytes_ok.load(), 1u);
  // Larger than a service message: a clear error, nothing sent.
  std::vector<std::byte> huge(100000);
  EXPECT_THROW(send::call_buffer(peer, [](std::span<std::byte>) {}, huge), Error);
  rt().barrier();
}

namespace {
std::atomic<uint64_t> g_named{0};
void named_add(int, std::span<const std::byte> args) {
  uint64_t v = 0;
  if (args.size() == 8) std::memcpy(&v, args.data(), 8);
  g_named.fetch_add(v);
}
}  // namespace

TEST(Invoke, BadCallsAreReportedAndSurvived) {
  // Reset before the Invoker exists: its helper may run calls as soon as it does.
  g_named = 0;
  static std::atomic<uint64_t> after{0};
  after = 0;
  // A helper keeps running calls for this process after its own part is done. Bad calls are
  // counted and survived (by default the process fails at the first: Misuse.ACallToAnUnknownFunctionFailsTheJob).
  Config cfg = small_rings(8, 1);
  cfg.bad_calls = BadCalls::Report;
  Invoker inv(rt(), cfg);
  const Thread peer{test::right(), 0};
  uint32_t id = register_function("test.named_add", &named_add);
  EXPECT_EQ(id, function_id("test.named_add"));
  uint64_t before = inv.bad_calls();
  rt().barrier();

  // An id nobody registered.
  uint64_t v = 5;
  ASSERT_TRUE(call_named(peer, 0xdeadbeef, std::as_bytes(std::span(&v, 1))));
  // A registered id whose payload is too short for its captures (truncated call).
  struct Wide {
    uint64_t a, b, c;
    void operator()() const { after.fetch_add(a + b + c); }
  };
  FrameSpec truncated;
  truncated.fid = auto_id<invoke::detail::CallEntry<Wide>, Wide>();
  truncated.kind = wire::Kind::Call;
  uint64_t half = 1;
  truncated.captures = &half;
  truncated.capture_len = 8;
  ASSERT_TRUE(inv.messengers().to(peer).call(truncated, OnFull::Retry));
  // A buffer call whose length field lies.
  struct Sink {
    void operator()(std::span<std::byte>) const {}
  };
  const Sink sink;
  FrameSpec liar = invoke::detail::buffer_spec<Notify::Transmitted>(sink, std::as_bytes(std::span(&v, 1)), nullptr);
  liar.set_desc(wire::BufferDesc{1u << 20});
  ASSERT_TRUE(inv.messengers().to(peer).call(liar, OnFull::Retry));
  // A call of the right kind to the wrong kind of function.
  FrameSpec wrong_kind = truncated;
  wrong_kind.kind = wire::Kind::Return;
  ASSERT_TRUE(inv.messengers().to(peer).call(wrong_kind, OnFull::Retry));
  // Broadcasts whose table of per-process addresses (the WRITE form's) is the wrong length, or
  // comes with a call that is not a written call_buffer.
  auto forged_broadcast = [&](uint32_t ranks, const FrameSpec& inner) {
    const size_t in_len = inner.bytes(), len = wire::kFrameHeader + sizeof(wire::BroadcastDesc) + in_len + 8 * size_t{ranks};
    std::vector<uint8_t> f(len);  // the table: zeros
    const uint64_t w = wire::frame_word(0, wire::Kind::Broadcast, false, len);
    std::memcpy(f.data(), &w, 8);
    const wire::BroadcastDesc d{static_cast<uint32_t>(inv.gid(inv.self())), ranks};
    std::memcpy(f.data() + 8, &d, sizeof d);
    inner.fill(f.data() + 8 + sizeof d, in_len);
    FrameSpec raw;
    raw.raw = f.data();
    raw.raw_len = len;
    return inv.messengers().to(peer).call(raw, OnFull::Retry);
  };
  const auto processes = static_cast<uint32_t>(rt().size());
  ASSERT_TRUE(forged_broadcast(processes + 1, invoke::detail::written_spec<Notify::Transmitted>(sink, 0, 8, nullptr)));
  ASSERT_TRUE(forged_broadcast(processes, invoke::detail::call_spec<Notify::Transmitted>(Wide{0, 0, 0}, nullptr)));
  // Then good calls: the receiver kept going.
  ASSERT_TRUE(call_named(peer, id, std::as_bytes(std::span(&v, 1))));
  ASSERT_TRUE(call(peer, Wide{1, 2, 3}));
  // Oversized: refused at the sender with a clear error, nothing sent.
  std::vector<std::byte> huge(8192);
  EXPECT_THROW(call_buffer(peer, [](std::span<std::byte>) {}, huge), Error);
  // Bad destinations.
  EXPECT_THROW(call(Thread{rt().size(), 0}, [] {}), Error);
  EXPECT_THROW(call(Thread{0, inv.threads()}, [] {}), Error);
  inv.flush();
  inv.wait_until([] { return after.load() == 6 && g_named.load() == 5; });
  EXPECT_EQ(inv.bad_calls() - before, 6u) << inv.last_error();
  rt().barrier();
}

TEST(Invoke, AggregatorModesDeliverInOrder) {
  for (Mode mode : {Mode::Trad, Mode::Ovfl}) {
    Invoker inv(rt(), small_rings(3));
    const int total = inv.total_threads();
    make_ledgers(total, inv.threads());
    auto& ledgers = g_ledgers;
    const uint64_t per_pair = 2000;
    on_threads([&](int me) {
      Aggregator::Config ac;
      ac.mode = mode;
      ac.flush_bytes = 1024;
      Aggregator agg(ac);
      const int my_gid = inv.gid(Thread{rt().rank(), me});
      for (uint64_t s = 0; s < per_pair; ++s)
        for (int d = 0; d < total; ++d) {
          Thread dest = inv.thread_of((my_gid + d) % total);
          int idx = dest.index;
          ASSERT_TRUE(agg.call(dest, [my_gid, s, idx] { expect_fifo(my_gid, s, idx); }));
          if (s % 64 == 0) inv.poll();
        }
      agg.drain();
      poll_until(ledgers[static_cast<size_t>(me)]->received[static_cast<size_t>(me)],
                 per_pair * static_cast<uint64_t>(total));
    });
    for (int i = 0; i < inv.threads(); ++i) {
      EXPECT_EQ(ledgers[static_cast<size_t>(i)]->disorder.load(), 0u);
      EXPECT_EQ(ledgers[static_cast<size_t>(i)]->received[static_cast<size_t>(i)].load(),
                per_pair * static_cast<uint64_t>(total));
    }
    EXPECT_EQ(inv.bad_calls(), 0u);
    rt().barrier();
  }
}

// Calls an Ovfl Aggregator keeps (its receiver was behind) go out from any wait of their thread:
// a Synchronizer waited on after a flush() that could not send them returns once the receiver
// catches up, with no other flush (bench_invoke's ovfl rows hung in this wait under load).
TEST(Invoke, KeptCallsGoOutFromAnyWaitOfTheirThread) {
  // Reset before the Invoker exists.
  static std::atomic<uint64_t> got{0};
  got = 0;
  Invoker inv(rt(), small_rings(2));
  const bool sender = rt().rank() % 2 == 0;
  const Thread dest{rt().rank() ^ 1, 0};
  uint64_t made = 0;
  std::optional<Aggregator> agg;
  Synchronizer done(1);
  if (sender) {
    Aggregator::Config ac;
    ac.mode = Mode::Ovfl;
    agg.emplace(ac);
    // The receiver does not poll yet: its ring fills, and the Aggregator keeps calls.
    for (; agg->exceeded_calls() < 100; ++made) ASSERT_TRUE(agg->call(dest, [] { got.fetch_add(1); }));
    ASSERT_TRUE(agg->call<Notify::Executed>(dest, [] { got.fetch_add(1); }, &done));
    ++made;
    agg->flush();  // the ring is still full: the calls stay kept
    EXPECT_GT(agg->exceeding_bytes(), 0u);
    // The peak kept for the destination is what is kept now (nothing went out yet), and only
    // the destination was called.
    const int to = inv.gid(dest);
    EXPECT_EQ(agg->peak_kept_bytes(to), agg->exceeding_bytes());
    for (int g = 0; g < Invoker::current().total_threads(); ++g) EXPECT_EQ(agg->called(g), g == to) << g;
  }
  // The receivers start polling once they know how many calls come.
  uint64_t n = made;
  auto all = rt().bootstrap().allgather(std::as_bytes(std::span(&n, 1)));
  if (sender) {
    const size_t peak = agg->peak_kept_bytes(inv.gid(dest));
    done.wait();
    EXPECT_EQ(agg->exceeding_bytes(), 0u);
    EXPECT_EQ(agg->peak_kept_bytes(inv.gid(dest)), peak) << "a peak stays once the calls went";
    agg->reset_peaks();
    EXPECT_EQ(agg->peak_kept_bytes(inv.gid(dest)), 0u);
    EXPECT_FALSE(agg->called(inv.gid(dest)));
  } else {
    uint64_t expected;
    std::memcpy(&expected, all[static_cast<size_t>(dest.rank)].data(), 8);
    poll_until(got, expected);
    EXPECT_EQ(got.load(), expected);
  }
  agg.reset();
  EXPECT_EQ(inv.bad_calls(), 0u);
  rt().barrier();
}

namespace {
std::vector<std::unique_ptr<std::atomic<uint64_t>>> g_direct, g_nested;  // by receiving thread index
}  // namespace

// Invoker::barrier runs every call made before it — and the calls those calls make — without
// the program polling: every count is complete the moment the barrier returns.
TEST(Invoke, BarrierRunsEveryCallMadeBeforeItAndTheCallsTheyMake) {
  Invoker inv(rt(), small_rings(8));
  const int total = inv.total_threads();
  g_direct.clear();
  g_nested.clear();
  for (int i = 0; i < inv.threads(); ++i) {
    g_direct.push_back(std::make_unique<std::atomic<uint64_t>>(0));
    g_nested.push_back(std::make_unique<std::atomic<uint64_t>>(0));
  }
  constexpr uint64_t kPer = 300;
  on_threads([&](int me) {
    for (int round = 0; round < 3; ++round) {
      Aggregator agg;  // trad: its calls wait in open records, which the barrier sends
      for (uint64_t k = 0; k < kPer; ++k)
        for (int g = 0; g < total; ++g) {
          const Thread d = inv.thread_of(g);
          const Thread after = inv.thread_of((g + 1) % total);
          auto direct = [after] {
            g_direct[static_cast<size_t>(Invoker::current().self().index)]->fetch_add(1);
            // A call made by a call: the barrier waits for it too.
            call(after, [] { g_nested[static_cast<size_t>(Invoker::current().self().index)]->fetch_add(1); });
          };
          if (k % 2 == 0) ASSERT_TRUE(call(d, direct));
          else ASSERT_TRUE(agg.call(d, direct));
        }
      inv.barrier();
      const uint64_t want = kPer * static_cast<uint64_t>(total) * static_cast<uint64_t>(round + 1);
      EXPECT_EQ(g_direct[static_cast<size_t>(me)]->load(), want) << "round " << round;
      EXPECT_EQ(g_nested[static_cast<size_t>(me)]->load(), want) << "round " << round;
      inv.barrier();  // nobody starts the next round before every thread checked this one
    }
  });
  EXPECT_EQ(inv.bad_calls(), 0u);
}

// Futures: many call_returns in flight from every thread, through the Messenger and through an
// Aggregator, collected as they come (wait_any) and all together (wait_all).
TEST(Invoke, FuturesKeepManyResultsInFlight) {
  Invoker inv(rt(), small_rings(8));
  const int total = inv.total_threads();
  on_threads([&](int me) {
    const int my_gid = inv.gid(Thread{rt().rank(), me});
    constexpr int kPer = 200;
    std::vector<Future<uint64_t>> fs;
    Aggregator agg;
    for (int k = 0; k < kPer; ++k)
      for (int g = 0; g < total; ++g) {
        const uint64_t x = static_cast<uint64_t>(my_gid) * 1000000 + static_cast<uint64_t>(k) * 100 + static_cast<uint64_t>(g);
        auto f = [x] { return x * 3 + static_cast<uint64_t>(Invoker::current().self().index); };
        if (k % 2 == 0) fs.push_back(call_future(inv.thread_of(g), f));
        else fs.push_back(call_future(agg, inv.thread_of(g), f));
      }
    // Some as they come: each index once, and its value right.
    std::vector<bool> taken(fs.size(), false);
    for (int n = 0; n < 50; ++n) {
      size_t i = wait_any(std::span(fs));
      ASSERT_LT(i, fs.size());
      ASSERT_FALSE(taken[i]);
      taken[i] = true;
      const int g = static_cast<int>(i % static_cast<size_t>(total));
      const uint64_t k = i / static_cast<size_t>(total);
      const uint64_t x = static_cast<uint64_t>(my_gid) * 1000000 + k * 100 + static_cast<uint64_t>(g);
      EXPECT_EQ(fs[i].get(), x * 3 + static_cast<uint64_t>(inv.thread_of(g).index));
      EXPECT_FALSE(fs[i].valid());
    }
    wait_all(std::span(fs));
    for (size_t i = 0; i < fs.size(); ++i) {
      if (taken[i]) continue;
      ASSERT_TRUE(fs[i].ready()) << i;
      const int g = static_cast<int>(i % static_cast<size_t>(total));
      const uint64_t k = i / static_cast<size_t>(total);
      const uint64_t x = static_cast<uint64_t>(my_gid) * 1000000 + k * 100 + static_cast<uint64_t>(g);
      EXPECT_EQ(fs[i].get(), x * 3 + static_cast<uint64_t>(inv.thread_of(g).index));
    }
    EXPECT_THROW(fs[0].get(), Error);  // taken already
    inv.barrier();  // every thread's futures are in before any Invoker goes
  });
  EXPECT_EQ(inv.bad_calls(), 0u);
}
