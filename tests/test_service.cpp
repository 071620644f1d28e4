// Service threads, send-based service calls and remote allocation, between processes.
#include <gtest/gtest.h>
#include <hwloc.h>

#include <chrono>

#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>
#include <string>

#include "loom/dsm/runtime/remote_memory.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "tests/mp_test.hpp"
#include "tests/test_settings_table.hpp"

using namespace loom;
using namespace loom::test;

namespace {
std::vector<std::byte> bytes_of(const std::string& s) {
  auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}
std::string text_of(const std::vector<std::byte>& b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }
}  // namespace

TEST(Service, RequestReplyBetweenEveryPair) {
  static std::atomic<int> seen{0};
  rt().service().register_handler("test.echo", [](const runtime::ServiceRequest& r) {
    seen.fetch_add(1);
    std::string s = "rank " + std::to_string(Runtime::current().rank()) + " got '" +
                    std::string(reinterpret_cast<const char*>(r.payload.data()), r.payload.size()) + "' from " +
                    std::to_string(r.src_rank);
    return bytes_of(s);
  });
  rt().barrier();
  for (int d = 0; d < rt().size(); ++d) {
    auto reply = rt().service().call_sync(d, runtime::Service::id_of("test.echo"), bytes_of("hi"));
    EXPECT_EQ(text_of(reply), "rank " + std::to_string(d) + " got 'hi' from " + std::to_string(rt().rank()));
  }
  rt().barrier();
  EXPECT_EQ(seen.load(), rt().size());
}

// A reply larger than a service message is an error at the caller, not a hang; so
// is an error text larger than a message.
TEST(Service, AReplyTooLargeIsAnErrorNotAHang) {
  const size_t limit = rt().service().max_payload();
  rt().service().register_handler("test.too-large", [limit](const runtime::ServiceRequest&) {
    return std::vector<std::byte>(limit + 1000, std::byte{7});
  });
  rt().service().register_handler("test.long-error", [limit](const runtime::ServiceRequest&) -> std::vector<std::byte> {
    fail(std::string(limit + 1000, 'x'));
  });
  rt().service().register_handler("test.fits", [limit](const runtime::ServiceRequest&) {
    return std::vector<std::byte>(limit, std::byte{9});
  });
  rt().barrier();
  try {
    rt().service().call_sync(right(), runtime::Service::id_of("test.too-large"), {});
    ADD_FAILURE() << "no error for a reply over the limit";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the service message limit"), std::string::npos) << e.what();
  }
  try {
    rt().service().call_sync(right(), runtime::Service::id_of("test.long-error"), {});
    ADD_FAILURE() << "no error from a failing handler";
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find("xxxx"), std::string::npos);
  }
  EXPECT_EQ(rt().service().call_sync(right(), runtime::Service::id_of("test.fits"), {}).size(), limit);
  rt().barrier();
}

TEST(Service, OneWayCallsNeedNoSetupAndArriveOnce) {
  static std::atomic<int> count{0};
  rt().service().register_handler("test.count", [](const runtime::ServiceRequest&) {
    count.fetch_add(1);
    return std::vector<std::byte>{};
  });
  rt().barrier();
  const int K = 500;
  // From two threads at once: calls are no-setup and thread-safe.
  auto sender = [&] {
    for (int i = 0; i < K; ++i) rt().service().call(right(), runtime::Service::id_of("test.count"), {});
  };
  std::thread t1(sender), t2(sender);
  t1.join();
  t2.join();
  wait::Backoff b;
  while (count.load() < 2 * K) b.pause();
  rt().barrier();
  EXPECT_EQ(count.load(), 2 * K);
}

// Unregistering a handler while a call of it runs waits for that call to return, so what the
// handler uses may be freed right after (a coherence Space freed itself under a running
// downgrade handler: ThreadSanitizer, coherence.np4).
TEST(Service, UnregisteringWaitsForARunningCall) {
  static std::atomic<int> started{0}, finished{0};
  const uint32_t id = rt().service().register_handler("test.slow", [](const runtime::ServiceRequest&) {
    started.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    finished.fetch_add(1);
    return std::vector<std::byte>{};
  });
  rt().barrier();
  rt().service().call(right(), id, {});
  wait::Backoff b;
  while (started.load() < 1) b.pause();
  rt().service().unregister_handler(id);
  EXPECT_EQ(finished.load(), 1);
  rt().barrier();
}

// Handlers that send (as the docs recommend instead of call_sync) while the main threads flood
// each other: a main thread waiting for a receive buffer at its peer must not stop this
// process's service thread from freeing its own buffers (31 calls passed, 100 hung).
TEST(Service, HandlersThatCallBackDuringAFloodDoNotDeadlock) {
  static std::atomic<int> pongs{0};
  static std::atomic<int> pings{0};
  const uint32_t pong = rt().service().register_handler("test.flood.pong", [](const runtime::ServiceRequest&) {
    pongs.fetch_add(1);
    return std::vector<std::byte>{};
  });
  rt().service().register_handler("test.flood.ping", [pong](const runtime::ServiceRequest& r) {
    pings.fetch_add(1);
    r.service->call(r.src_rank, pong, {});
    return std::vector<std::byte>{};
  });
  rt().barrier();
  const int K = 1000;
  const uint32_t ping = runtime::Service::id_of("test.flood.ping");
  for (int i = 0; i < K; ++i) rt().service().call(right(), ping, {});
  wait::Backoff b;
  while (pongs.load() < K || pings.load() < K) b.pause();
  rt().barrier();
  EXPECT_EQ(pongs.load(), K);
  EXPECT_EQ(pings.load(), K);
}

TEST(Service, BadCallsAreErrorsAndTheReceiverKeepsRunning) {
  uint64_t bad_before = rt().service().bad_messages();
  rt().barrier();
  // An id nobody registered.
  try {
    rt().service().call_sync(right(), 0x12345678u, {});
    FAIL() << "an unknown function id must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown function id"), std::string::npos) << e.what();
  }
  // Oversized payloads are refused before sending.
  std::vector<std::byte> huge(rt().service().max_payload() + 1);
  EXPECT_THROW(rt().service().call(right(), runtime::Service::id_of("test.echo"), huge), Error);
  EXPECT_THROW(rt().service().call(rt().size(), runtime::Service::id_of("test.echo"), {}), Error);
  EXPECT_THROW(rt().service().call(-1, runtime::Service::id_of("test.echo"), {}), Error);
  rt().barrier();
  EXPECT_EQ(rt().service().bad_messages(), bad_before + 1);
  // Still serving.
  auto reply = rt().service().call_sync(right(), runtime::Service::id_of("test.echo"), bytes_of("again"));
  EXPECT_NE(text_of(reply).find("again"), std::string::npos);
  rt().barrier();
}

TEST(RemoteMemory, AllocateWriteReadFree) {
  auto mesh = rt().make_mesh(fabric::QpCaps{});
  memory::RDMAMemory local = rt().allocator().allocate_chunk(1 << 21);
  const int dst = right();
  RemoteMemoryLocator loc = remote_allocate(rt(), dst, 100000);
  ASSERT_TRUE(loc.valid());
  EXPECT_EQ(loc.rank, dst);
  EXPECT_GE(loc.size, 100000u);
  for (int i = 0; i < 100000; ++i) local.bytes()[i] = static_cast<uint8_t>(i * 13 + 1);
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::Write;
  wr.local = {local.address(), 100000, local.lkey};
  wr.remote_addr = loc.addr;
  wr.rkey = loc.rkey;
  auto& tx = mesh->tx(dst);
  ASSERT_TRUE(tx.post(wr).ok());
  wr.opcode = fabric::Opcode::Read;
  wr.local = {local.address() + 200000, 100000, local.lkey};
  auto p = tx.post(wr);
  ASSERT_TRUE(p.ok());
  tx.wait(p.tag);
  EXPECT_EQ(tx.errors(), 0u);
  EXPECT_EQ(std::memcmp(local.bytes(), local.bytes() + 200000, 100000), 0);
  remote_free(rt(), loc);
  try {
    remote_free(rt(), loc);
    FAIL() << "double free must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("double free"), std::string::npos) << e.what();
  }
  EXPECT_THROW(remote_allocate(rt(), dst, 0), Error);
  EXPECT_THROW(remote_allocate(rt(), dst, 1ull << 40), Error);
  EXPECT_THROW(remote_allocate(rt(), dst, 64, 1000), Error);  // no such zone
  EXPECT_THROW(remote_allocate(rt(), rt().size() + 3, 64), Error);
  rt().barrier();
  EXPECT_EQ(rt().heap().live_allocations(), 0u);
  rt().allocator().free_chunk(local);
}

// Seed 000: remote memory in the zone of a named thread. Every process tells the zones of its
// threads; an allocation near thread t of the right neighbour comes from that thread's zone.
// Under map-by zone each process's zone is its local rank's turn over the zones (the suite also
// runs on a synthetic two-zone machine: tests/CMakeLists.txt, service.zones.*).
TEST(RemoteMemory, AnAllocationNearAThreadTakesThatThreadsZone) {
  const int threads = rt().threads_started();
  std::vector<int32_t> mine;
  for (int t = 0; t < threads; ++t) mine.push_back(rt().thread_zone(t));
  const auto all = rt().bootstrap().allgather(std::as_bytes(std::span(mine)));
  const int dst = right();
  const auto& theirs = all[static_cast<size_t>(dst)];
  for (int t = 0; t * 4 < static_cast<int>(theirs.size()); ++t) {
    int32_t zone;
    std::memcpy(&zone, theirs.data() + 4 * t, 4);
    RemoteMemoryLocator loc = remote_allocate_near(rt(), dst, t, 4096);
    EXPECT_EQ(loc.zone, zone) << "thread " << t << " of rank " << dst;
    remote_free(rt(), loc);
  }
  EXPECT_THROW(remote_allocate_near(rt(), dst, 1 << 20, 64), Error);  // no such thread there
  EXPECT_THROW(remote_allocate_near(rt(), dst, -1, 64), Error);
  EXPECT_THROW(remote_allocate_near(rt(), dst, 0, 0), Error);
  EXPECT_THROW(remote_allocate_near(rt(), rt().size(), 0, 64), Error);
  const auto& shape = rt().machine_shape();
  if (rt().map_by() == runtime::MapBy::Zone && shape.zones() == rt().numa_zones()) {
    EXPECT_EQ(rt().local_zone(), rt().bootstrap().local_rank() % shape.zones());
    for (int t = 0; t < threads; ++t) EXPECT_EQ(rt().thread_zone(t), rt().local_zone());
  }
  rt().barrier();
  EXPECT_EQ(rt().heap().live_allocations(), 0u);
}

// A zone's memory is bound to the NUMA node the system numbers it by: zones are hwloc's logical
// indices, and the memory binding takes the operating system's (service.zones names them 1 and 0
// on its synthetic machine; the allocators passed the zone itself before).
TEST(RemoteMemory, AZonesMemoryIsBoundToItsOperatingSystemNode) {
  hwloc_topology_t topo;  // the machine as the runtime read it (HWLOC_SYNTHETIC included)
  ASSERT_EQ(hwloc_topology_init(&topo), 0);
  ASSERT_EQ(hwloc_topology_load(topo), 0);
  for (int z = 0; z < rt().numa_zones(); ++z) {
    const hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(z));
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(rt().allocator(z).zone(), z);
    EXPECT_EQ(rt().allocator(z).numa_node(), static_cast<int>(node->os_index)) << "zone " << z;
  }
  hwloc_topology_destroy(topo);
}

TEST(Runtime, NamesMachinesProcessesAndThreads) {
  EXPECT_EQ(this_thread_name().process, rt().rank());
  EXPECT_EQ(this_thread_name().thread, 0);
  // Machines are the job's hosts, numbered alike everywhere (one on a single host).
  EXPECT_EQ(rt().machines(), rt().layout().hosts());
  EXPECT_EQ(rt().machine(), rt().layout().host_of[static_cast<size_t>(rt().rank())]);
  EXPECT_EQ(rt().hostname(), rt().layout().host_names[static_cast<size_t>(rt().machine())]);
  std::string name;
  auto t = rt().spawn("worker", [&] { name = this_thread_name().str(); });
  t.join();
  EXPECT_NE(name.find("m" + std::to_string(rt().machine()) + ".p" + std::to_string(rt().rank()) + ".t"), std::string::npos) << name;
  EXPECT_NE(name.find("(worker)"), std::string::npos) << name;
  EXPECT_GE(rt().numa_zones(), 1);
}

// Started by loomrun the bootstrap is the embedded one (the rendezvous one over several nodes:
// scripts/nodes-suite.sh sets LOOM_EXPECT_BOOTSTRAP=rendezvous); by mpirun (ctest sets
// LOOM_EXPECT_BOOTSTRAP=pmix) it is PMIx — and the whole suite passes either way.
TEST(Runtime, BootstrapIsTheExpectedKind) {
  EXPECT_EQ(rt().bootstrap().kind(), settings::get_choice(test_settings::kExpectBootstrap));
  EXPECT_EQ(rt().bootstrap().size(), rt().size());
  int here = 0;  // the ranks on this host: all of them on one host
  for (int r = 0; r < rt().size(); ++r) here += rt().layout().same_host(r, rt().rank()) ? 1 : 0;
  EXPECT_EQ(rt().bootstrap().local_size(), here);
  EXPECT_FALSE(rt().bootstrap().job_dir().empty());
}
