// Global pointers through an Endpoint (objects/endpoint.hpp) between processes: gets and puts
// to every rank, many asynchronous operations in flight, exact counts from fetch_add, mutual
// exclusion through compare_swap, allocation at a rank, the distributed array, and bad use.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/objects/calibrate.hpp"
#include "loom/objects/distributed_array.hpp"
#include "loom/objects/endpoint.hpp"
#include "tests/mp_test.hpp"
#include "tests/objects_test.hpp"

using loom::objects::DistributedArray;
using loom::objects::Endpoint;
using loom::objects::GlobalPtr;
using loom::test::rt;

namespace {

class Objects : public loom::test::WithEndpoint {};

// A calibration names the transport between nodes, so that a file measured on shared memory is
// not used across an emulated wire, nor one of a wire on another wire or without one.
TEST(ObjectsCalibration, TheLabelNamesTheWireBetweenNodes) {
  const char* wire = std::getenv("LOOM_WIRE");
  const char* nodes = std::getenv("LOOM_EMULATE_NODES");
  const bool across = wire != nullptr && *wire != '\0' && rt().size() > 1 && (nodes == nullptr || std::string(nodes) != "1");
  const std::string label = loom::objects::fabric_label(rt());
  if (across) EXPECT_EQ(label, "shm+wire:" + std::string(wire));
  else EXPECT_EQ(label, rt().provider().info().name);
  // The same on every rank (Context::components compares it on each).
  const auto all = rt().bootstrap().allgather(std::as_bytes(std::span(label.data(), label.size())));
  for (const auto& a : all) EXPECT_EQ(std::string(reinterpret_cast<const char*>(a.data()), a.size()), label);
}

// Rank 0's calibration peer is across the wire when there is one (the container rows put their
// data there and the components are measured against it), else rank 1.
TEST(ObjectsCalibration, RankZerosPeerIsAcrossTheWireWhenThereIsOne) {
  loom::objects::Context ctx(rt());
  const int peer = loom::objects::calibration_peer(ctx);
  int expected = rt().size() > 1 ? 1 : 0;
  if (rt().rank() == 0)
    for (int r = rt().size() - 1; r > 0; --r)
      if (rt().provider().transport(r) != rt().provider().transport(0)) expected = r;
  EXPECT_EQ(peer, rt().bootstrap().allgather_value(expected)[0]);
  for (int p : rt().bootstrap().allgather_value(peer)) EXPECT_EQ(p, peer);
  rt().barrier();
}

// The node sweep measures rank 0 against a part of its choosing (its own, one on its node, one
// across the wire); every process gets rank 0's figures, and a peer the processes disagree on,
// or no rank at all, is refused on every process.
TEST(ObjectsCalibration, RankZeroMeasuresAgainstTheNamedPeer) {
  loom::objects::Context ctx(rt());
  const int peer = rt().size() - 1;
  const loom::objects::Components c = loom::objects::measure_components(ctx, 50, peer);
  EXPECT_GT(c.get, 0);
  EXPECT_GT(c.rpc, 0);
  EXPECT_EQ(c.processes, rt().size());
  const std::string mine = c.serialize();
  for (const auto& a : rt().bootstrap().allgather(std::as_bytes(std::span(mine.data(), mine.size()))))
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(a.data()), a.size()), mine);
  EXPECT_THROW(loom::objects::measure_components(ctx, 50, rt().size()), loom::Error);
  if (rt().size() > 1) {
    EXPECT_THROW(loom::objects::measure_components(ctx, 50, rt().rank()), loom::Error);
  }
  rt().barrier();
}

// Every process owns one slot per process; each writes its slot at every rank and reads back.
TEST_F(Objects, PutsAndGetsReachEveryRank) {
  DistributedArray<uint64_t> a(ep(), static_cast<size_t>(np() * np()));
  for (int r = 0; r < np(); ++r) ep().rput(a.ptr(static_cast<size_t>(r * np() + me())), uint64_t{1000} * r + me());
  rt().barrier();
  for (int r = 0; r < np(); ++r) EXPECT_EQ(ep().rget(a.ptr(static_cast<size_t>(r * np() + me()))), uint64_t{1000} * r + me());
  // The owner sees the same values through its plain pointer.
  for (int p = 0; p < np(); ++p) EXPECT_EQ(a.local()[static_cast<size_t>(p)], uint64_t{1000} * me() + p);
  rt().barrier();
}

// Thousands of asynchronous gets and puts in flight, more bytes than one staging area.
TEST_F(Objects, ManyAsynchronousOperationsCompleteTogether) {
  const size_t n = 1 << 18;  // 2 MiB of uint64 per process
  DistributedArray<uint64_t> a(ep(), n * static_cast<size_t>(np()));
  const int peer = (me() + 1) % np();
  const size_t first = static_cast<size_t>(peer) * n;
  std::vector<uint64_t> src(n);
  std::iota(src.begin(), src.end(), uint64_t{7} * static_cast<uint64_t>(me()));
  for (size_t i = 0; i < n; i += 512) ep().rput_async(a.ptr(first + i), &src[i], 512);
  ep().flush();
  rt().barrier();
  std::vector<uint64_t> back(n, 0);
  loom::objects::Request last;
  for (size_t i = 0; i < n; i += 256) last = ep().rget_async(a.ptr(first + i), &back[i], 256);
  last.wait();
  EXPECT_EQ(back, src);
  // One large get, past the staging area, in pieces.
  std::vector<uint64_t> whole(n, 0);
  ep().rget(a.ptr(first), whole.data(), n);
  EXPECT_EQ(whole, src);
  rt().barrier();
}

TEST_F(Objects, FetchAddFromEveryProcessCountsExactly) {
  DistributedArray<uint64_t> a(ep(), static_cast<size_t>(np()));
  for (auto& v : a.local()) v = 0;
  rt().barrier();
  constexpr int kAdds = 200;
  for (int k = 0; k < kAdds; ++k)
    for (int r = 0; r < np(); ++r) ep().fetch_add(a.ptr(static_cast<size_t>(r)), static_cast<uint64_t>(me()) + 1);
  rt().barrier();
  const uint64_t want = static_cast<uint64_t>(kAdds) * static_cast<uint64_t>(np()) * static_cast<uint64_t>(np() + 1) / 2;
  EXPECT_EQ(ep().atomic_load(a.ptr(static_cast<size_t>(me()))), want);
  rt().barrier();
}

// A test-and-set lock on rank 0's word guards a counter updated with plain gets and puts.
TEST_F(Objects, CompareSwapLockGuardsGetsAndPuts) {
  DistributedArray<uint64_t> a(ep(), 2 * static_cast<size_t>(np()));
  for (auto& v : a.local()) v = 0;
  rt().barrier();
  const GlobalPtr<uint64_t> lock = a.ptr(0), counter = a.ptr(1);
  constexpr int kIters = 100;
  for (int i = 0; i < kIters; ++i) {
    while (ep().compare_swap(lock, 0, static_cast<uint64_t>(me()) + 1) != 0) {
    }
    ep().rput(counter, ep().rget(counter) + 1);
    ep().atomic_store(lock, 0);
  }
  rt().barrier();
  EXPECT_EQ(ep().rget(counter), static_cast<uint64_t>(kIters * np()));
  rt().barrier();
}

TEST_F(Objects, AllocationAtARankIsReachableByEveryone) {
  const int owner = np() - 1;
  GlobalPtr<uint64_t> p;
  if (me() == 0) p = ep().allocate<uint64_t>(owner, 64);
  auto all = rt().bootstrap().allgather_value(p);
  p = all[0];
  ASSERT_EQ(p.rank(), owner);
  ep().rput(p + me(), static_cast<uint64_t>(me()) * 3);
  rt().barrier();
  for (int r = 0; r < np(); ++r) EXPECT_EQ(ep().rget(p + r), static_cast<uint64_t>(r) * 3);
  rt().barrier();
  if (me() == 0) ep().deallocate(p);
  rt().barrier();
}

TEST_F(Objects, BadRanksAddressesAndLengthsAreClearErrors) {
  DistributedArray<uint64_t> a(ep(), static_cast<size_t>(np()));
  rt().barrier();
  uint64_t v = 0;
  EXPECT_THROW(ep().rget(GlobalPtr<uint64_t>(np(), a.ptr(0).address())), loom::Error);
  EXPECT_THROW(ep().rget(GlobalPtr<uint64_t>(-1, 0)), loom::Error);
  // An address the owner never registered: the owner's answer names it.
  uint64_t on_stack = 0;
  const int peer = (me() + 1) % np();
  try {
    ep().rget(GlobalPtr<uint64_t>(peer, reinterpret_cast<uint64_t>(&on_stack)));
    ADD_FAILURE() << "a get of unregistered memory succeeded";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not in registered memory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ep().rget(a.ptr(0), &v, 0), loom::Error);
  EXPECT_THROW(ep().fetch_add(a.ptr(0).as<std::byte>().operator+(4).as<uint64_t>(), 1), loom::Error);  // unaligned
  EXPECT_THROW(a.ptr(static_cast<size_t>(np())), loom::Error);
  EXPECT_THROW(ep().allocate<uint64_t>(np(), 1), loom::Error);
  EXPECT_THROW(ep().allocate<uint64_t>(0, 0), loom::Error);
  // The endpoint still works after every error.
  ep().rput(a.ptr(static_cast<size_t>(me())), uint64_t{42});
  EXPECT_EQ(ep().rget(a.ptr(static_cast<size_t>(me()))), 42u);
  rt().barrier();
}

// Two threads per process (the runtime's worker threads when loomrun --threads 2, else a plain
// second thread sharing the spare lane): atomics and asynchronous puts interleave safely.
TEST_F(Objects, ThreadsOfAProcessUseTheEndpointTogether) {
  DistributedArray<uint64_t> a(ep(), static_cast<size_t>(np()) * 1024);
  for (auto& v : a.local()) v = 0;
  rt().barrier();
  constexpr int kAdds = 100;
  auto work = [&](int t) {
    std::vector<uint64_t> mine(256, static_cast<uint64_t>(me() * 2 + t + 1));
    const size_t slot = 1 + static_cast<size_t>(t) * 256;  // this thread's 256 words at every rank
    for (int r = 0; r < np(); ++r) ep().rput_async(a.ptr(static_cast<size_t>(r) * 1024 + slot + (me() % 2) * 512), mine.data(), 256);
    for (int k = 0; k < kAdds; ++k) ep().fetch_add(a.ptr(0), 1);
    ep().flush();
  };
  std::thread other;
  if (rt().threads_per_process() >= 2) other = rt().spawn_at(1, "objects-test", [&] { work(1); });
  else other = std::thread(work, 1);
  work(0);
  other.join();
  rt().barrier();
  EXPECT_EQ(ep().atomic_load(a.ptr(0)), static_cast<uint64_t>(kAdds) * 2 * static_cast<uint64_t>(np()));
  rt().barrier();
}

TEST_F(Objects, KeysAreLookedUpOncePerRegistration) {
  DistributedArray<uint64_t> a(ep(), 64 * static_cast<size_t>(np()));
  rt().barrier();
  const uint64_t before = ep().registration_lookups();
  for (int k = 0; k < 10; ++k)
    for (size_t i = 0; i < a.size(); i += 7) (void)ep().rget(a.ptr(i));
  EXPECT_LE(ep().registration_lookups() - before, static_cast<uint64_t>(np()));
  rt().barrier();
}

// Memory allocated at a rank, freed, and allocated again lies in one registration: operations
// on it find their key from the thread's last one, not by a scan per operation (the Endpoint once
// cached each allocation as if it were a registration: a stale entry covering part of a later
// allocation and the registration's own entry then took turns, and a queue's operations ran 2.3x
// slower after calibration).
TEST_F(Objects, KeysOfReusedAllocationsComeFromTheLastKey) {
  const int peer = (me() + 1) % np();
  const size_t words = 64;
  // Two allocations at the peer, one after the other, through its service thread.
  auto x1 = ep().allocate<uint64_t>(peer, words);
  auto x2 = ep().allocate<uint64_t>(peer, 1024 * words);
  ep().rput(x1, uint64_t{1});
  ep().rput(x2, uint64_t{1});
  ep().deallocate(x1);
  ep().deallocate(x2);
  rt().barrier();
  // Each process allocates for itself, likely where x1 was and into x2's range.
  auto mine = ep().allocate<uint64_t>(me(), 16 * words);
  const auto all = rt().bootstrap().allgather_value(mine);
  const loom::objects::GlobalPtr<uint64_t> y = all[static_cast<size_t>(peer)];
  (void)ep().rget(y);
  (void)ep().rget(y + static_cast<std::ptrdiff_t>(16 * words - 1));
  const uint64_t before = ep().key_scans();
  for (size_t i = 0; i < 500; ++i) {
    ep().rput(y, uint64_t{i});
    ep().rput(y + static_cast<std::ptrdiff_t>(16 * words - 1), uint64_t{i});
  }
  EXPECT_LE(ep().key_scans() - before, 2u);
  rt().barrier();
  ep().deallocate(mine);
  rt().barrier();
}

}  // namespace

// A shipped operation pins its object: the owner's teardown (detach) waits until the pin ends,
// and after it the id is unknown. (A helper thread ran a late find on a HashMap whose owner was
// destroying it: TSan saw the parts freed under the running call.)
TEST(ObjectRegistry, DetachWaitsForAPinnedCallAndThenForgetsTheObject) {
  loom::objects::Context ctx(rt());
  int object = 42;
  const uint32_t id = ctx.attach(&object, typeid(int));
  std::atomic<bool> pinned{false}, done{false};
  std::thread call([&] {
    const loom::objects::Context::Pinned<int> p = ctx.pin<int>(id);
    EXPECT_EQ(*p.get(), 42);
    pinned.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    done.store(true);
  });
  while (!pinned.load()) std::this_thread::yield();
  ctx.detach(id);
  EXPECT_TRUE(done.load()) << "detach returned while a call held the object";
  call.join();
  EXPECT_THROW(ctx.pin<int>(id), loom::Error);
  EXPECT_THROW(ctx.pin<int>(id + 1000), loom::Error);
  const uint32_t other = ctx.attach(&object, typeid(int));
  EXPECT_THROW(ctx.pin<double>(other), loom::Error) << "a call expecting another type";
  // What a shipped operation uses: the same misses, empty instead of thrown, and a pin that
  // was not taken leaves nothing behind (detach below would wait for it).
  EXPECT_EQ(loom::objects::Context::try_pin<int>(id).get(), nullptr);
  EXPECT_EQ(loom::objects::Context::try_pin<int>(1u << 30).get(), nullptr);
  EXPECT_EQ(loom::objects::Context::try_pin<double>(other).get(), nullptr);
  EXPECT_EQ(loom::objects::Context::try_pin<int>(other).get(), &object);
  ctx.detach(other);
  ctx.process_barrier();
}

TEST(ObjectRegistry, TryPinWithoutAContextIsEmpty) {
  EXPECT_EQ(loom::objects::Context::try_pin<int>(0).get(), nullptr);
  EXPECT_THROW(loom::objects::Context::current(), loom::Error);
}
