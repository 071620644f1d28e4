// Seed 004's experiments on this machine: requester threads posting 8-byte RDMA READs to one
// peer through one queue pair, by direct injection (each thread posts itself) and by static and
// dynamic offloading (an executor thread posts, a completer polls; docs/offloading.md), the
// dynamic one with both wake methods. All variants run in one process, one after another, over
// queue pairs of their own.
//   latency_us   one READ, posted and waited for, per requester thread
//   overhead_us  time a requester spends inside post() per request, 256 requests in flight each
//   msgs_per_s   READs completed per second in that same run
//   idle_cpu_fraction  CPU the executor and completer take in the second after the runs
//                      (_next: in the second after that one)
// and the rate and overhead over Q queue pairs to the peer (rows -q<Q>: a mesh with Q ways,
// requester thread t posting on way t % Q, offloaded with one executor-completer pair a way).
// Run: loomrun -n 2 bench_offload [--quick] [--csv FILE]
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/context/continuation.hpp>

#include "bench/bench_common.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/futex.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/dsm/signal/offload/offloader.hpp"

using namespace loom;
using namespace loom::bench;
namespace off = loom::signal::offload;

namespace {

constexpr uint32_t kWindow = 256;  // requests in flight per thread (the seed's batch)

struct Variant {
  std::string name;
  off::Mode mode;
  off::Wake wake;
};

struct Target {
  uint64_t addr;
  uint32_t rkey;
  uint32_t pad;
};

fabric::SendWr read_request(const memory::RDMAMemory& local, int thread, uint32_t i, const Target& t) {
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::Read;
  wr.local = {local.address() + (static_cast<uint64_t>(thread) * kWindow + i % kWindow) * 8, 8, local.lkey};
  wr.remote_addr = t.addr + (static_cast<uint64_t>(thread) * kWindow + i % kWindow) * 8;
  wr.rkey = t.rkey;
  return wr;
}

template <typename F>
void run_threads(int threads, F f) {
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back(f, t);
  for (auto& t : ts) t.join();
}

// Each thread posts a READ and waits for it, `rounds` times; the mean latency over threads.
// The Transmitter requester thread t posts on: way t % ways of the mesh's queue pairs to rank 1.
signal::Transmitter& tx_of(Mesh& mesh, int t) { return mesh.tx(1, t % mesh.ways); }

double latency_us(Mesh& mesh, const memory::RDMAMemory& local, const Target& tgt, int threads, int rounds) {
  std::vector<double> per(static_cast<size_t>(threads));
  run_threads(threads, [&](int t) {
    signal::Transmitter& tx = tx_of(mesh, t);
    for (int i = 0; i < rounds / 10; ++i) tx.wait(tx.post(read_request(local, t, static_cast<uint32_t>(i), tgt), true).tag);
    auto t0 = clk::now();
    for (int i = 0; i < rounds; ++i) tx.wait(tx.post(read_request(local, t, static_cast<uint32_t>(i), tgt), true).tag);
    per[static_cast<size_t>(t)] = seconds_since(t0) * 1e6 / rounds;
  });
  double sum = 0;
  for (double v : per) sum += v;
  return sum / threads;
}

struct Rate {
  double overhead_us = 0;
  double msgs_per_s = 0;
};

// Each thread keeps kWindow READs in flight for `seconds`; the time inside post() per request,
// and the rate of completed READs.
Rate rate(Mesh& mesh, const memory::RDMAMemory& local, const Target& tgt, int threads, double seconds) {
  std::atomic<uint64_t> total{0};
  std::atomic<bool> stop{false};
  std::vector<double> inside(static_cast<size_t>(threads));
  std::vector<uint64_t> posted(static_cast<size_t>(threads));
  auto t0 = clk::now();
  std::thread timer([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
  });
  run_threads(threads, [&](int t) {
    signal::Transmitter& tx = tx_of(mesh, t);
    std::vector<uint64_t> tags(kWindow);
    double in_post = 0;
    uint32_t i = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      if (i >= kWindow) tx.wait(tags[i % kWindow]);  // the slot's previous READ is done
      auto a = clk::now();
      signal::Posted p = tx.post(read_request(local, t, i, tgt));
      in_post += std::chrono::duration<double>(clk::now() - a).count();
      if (!p.ok()) fail("bench_offload: post failed: ", fabric::to_string(p.result));
      tags[i % kWindow] = p.tag;
      ++i;
    }
    tx.flush();
    inside[static_cast<size_t>(t)] = in_post;
    posted[static_cast<size_t>(t)] = i;
    total.fetch_add(i);
  });
  const double elapsed = seconds_since(t0);
  timer.join();
  Rate r;
  double in = 0;
  uint64_t n = 0;
  for (int t = 0; t < threads; ++t) {
    in += inside[static_cast<size_t>(t)];
    n += posted[static_cast<size_t>(t)];
  }
  r.overhead_us = n == 0 ? 0 : in * 1e6 / static_cast<double>(n);
  r.msgs_per_s = static_cast<double>(total.load()) / elapsed;
  return r;
}

// The floors of a hand-over between threads of this process, measured in the same run: a word
// passed round `threads` threads (2: back and forth) by spinning (what static offloading's
// hand-overs cost at best), and by futex wake and wait (what dynamic offloading's cost when the
// thread handed to sleeps). Three threads are one offloaded READ's: the requester hands it to the
// executor, the completer polls its completion and hands it back — three runnable threads on
// this machine's two cores.
double handoff_us(bool futex, int rounds, uint32_t threads = 2) {
  std::atomic<uint32_t> word{0};
  auto pass = [&](uint32_t mine, uint32_t next) {
    for (int i = 0; i < rounds; ++i) {
      if (futex) {
        for (uint32_t seen; (seen = word.load(std::memory_order_acquire)) != mine;)
          wait::futex_wait(&word, seen, std::chrono::milliseconds(10));
      } else {
        // Spin, then yield: two pure spinners on one core pass the word once per time slice.
        for (int k = 0; word.load(std::memory_order_acquire) != mine; ++k) {
          if (k < 64) wait::cpu_relax();
          else std::this_thread::yield();
        }
      }
      word.store(next, std::memory_order_release);
      if (futex) wait::futex_wake_all(&word);
    }
  };
  auto t0 = clk::now();
  std::vector<std::thread> others;
  for (uint32_t i = 1; i < threads; ++i) others.emplace_back([&, i] { pass(i, (i + 1) % threads); });
  pass(0, 1);
  for (auto& o : others) o.join();
  return seconds_since(t0) * 1e6 / rounds;
}

// What a user-level thread costs to start and stop (seed 004 runs executors as MassiveThreads):
// a Boost.Context continuation switched into and back, on the calling thread's own core. It runs
// nothing in parallel with its caller: to use another core, an OS thread there must be running
// (static offloading) or woken (the futex floor above), with or without user-level threads on it.
double context_switch_us(int rounds) {
  namespace ctx = boost::context;
  ctx::continuation c = ctx::callcc([](ctx::continuation&& caller) {
    for (;;) caller = caller.resume();
    return std::move(caller);
  });
  auto t0 = clk::now();
  for (int i = 0; i < rounds; ++i) c = c.resume();
  return seconds_since(t0) * 1e6 / rounds;
}

double idle_fraction(const off::Offloader& o, double seconds) {
  const off::Offloader::Usage a = o.usage();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const off::Offloader::Usage b = o.usage();
  return (b.executor_cpu_s - a.executor_cpu_s + b.completer_cpu_s - a.completer_cpu_s) / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string csv;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--quick") quick = true;
    else if (s == "--csv" && i + 1 < argc) csv = argv[++i];
    else {
      std::fprintf(stderr, "usage: loomrun -n 2 bench_offload [--quick] [--csv FILE]\n");
      return 2;
    }
  }
  // Rank 1 only serves READs, so rank 0's requesters, executor and completer share the machine's
  // cores. Pinned (LOOM_PIN=auto pins a process to one core when the processes fill the cores),
  // the threads this benchmark starts would inherit the main thread's single core, and every
  // hand-over between them would wait for a time slice. LOOM_PIN set by hand is kept.
  setenv("LOOM_PIN", "off", 0);
  Runtime rt(argc, argv);
  if (rt.size() != 2) {
    std::fprintf(stderr, "bench_offload needs 2 processes (loomrun -n 2 bench_offload)\n");
    return 2;
  }
  const std::vector<int> thread_counts = quick ? std::vector<int>{1, 8} : std::vector<int>{1, 2, 4, 8, 16};
  const int max_threads = thread_counts.back();
  const size_t bytes = static_cast<size_t>(max_threads) * kWindow * 8;
  memory::RDMAMemory local = rt.allocator().allocate_chunk(bytes);
  Target mine{local.address(), local.rkey, 0};
  const auto all = rt.bootstrap().allgather_value(mine);
  const Target tgt = all[1];
  const std::vector<Variant> variants = {{"direct", off::Mode::Direct, off::Wake::Futex},
                                         {"static", off::Mode::Static, off::Wake::Futex},
                                         {"dynamic", off::Mode::Dynamic, off::Wake::Futex},
                                         {"dynamic-condvar", off::Mode::Dynamic, off::Wake::CondVar}};
  std::vector<Row> rows;
  const int rounds = quick ? 2000 : 20000;
  const double seconds = quick ? 0.3 : 1.0;
  fabric::QpCaps caps;
  caps.max_send_wr = 256;
  for (const Variant& v : variants) {
    std::unique_ptr<off::Offloader> o;
    if (v.mode != off::Mode::Direct) o = std::make_unique<off::Offloader>(off::Offloader::Config{v.mode, v.wake, 2000, 4096, 1});
    auto mesh = rt.make_mesh_offloaded(caps, o.get(), 1);
    if (rt.rank() == 0) {
      for (int T : thread_counts) {
        const std::string name = "offload-" + v.name + "-t" + std::to_string(T);
        rows.push_back({name, 8, "latency_us", latency_us(*mesh, local, tgt, T, rounds / T), "us"});
        const Rate r = rate(*mesh, local, tgt, T, seconds);
        rows.push_back({name, 8, "overhead_us", r.overhead_us, "us"});
        rows.push_back({name, 8, "msgs_per_s", r.msgs_per_s, "1/s"});
        std::printf("%-28s latency %7.2f us  overhead %7.3f us  rate %10.0f /s\n", name.c_str(), rows[rows.size() - 3].value,
                    r.overhead_us, r.msgs_per_s);
      }
      if (o) {
        // The first second after the last request (the threads spin, yield, then sleep), and the
        // one after it (asleep).
        const double idle = idle_fraction(*o, 1.0);
        const double later = idle_fraction(*o, 1.0);
        rows.push_back({"offload-" + v.name, 0, "idle_cpu_fraction", idle, "cores"});
        rows.push_back({"offload-" + v.name, 0, "idle_cpu_fraction_next", later, "cores"});
        std::printf("%-28s idle CPU %.4f of a core, the second after %.4f\n", ("offload-" + v.name).c_str(), idle, later);
      }
    }
    rt.barrier();
    mesh.reset();
    o.reset();
  }
  // Several queue pairs to the peer, each with its own executor and completer when offloaded.
  const int qp_threads = max_threads < 8 ? max_threads : 8;
  const std::vector<int> qp_counts = quick ? std::vector<int>{2} : std::vector<int>{1, 2, 4};
  for (const Variant& v : variants) {
    if (v.wake == off::Wake::CondVar) continue;
    for (int Q : qp_counts) {
      std::unique_ptr<off::Offloader> o;
      if (v.mode != off::Mode::Direct)
        o = std::make_unique<off::Offloader>(off::Offloader::Config{v.mode, v.wake, 2000, 4096, static_cast<uint32_t>(Q)});
      auto mesh = rt.make_mesh_offloaded(caps, o.get(), Q);
      if (rt.rank() == 0) {
        const std::string name = "offload-" + v.name + "-t" + std::to_string(qp_threads) + "-q" + std::to_string(Q);
        const Rate r = rate(*mesh, local, tgt, qp_threads, seconds);
        rows.push_back({name, 8, "overhead_us", r.overhead_us, "us"});
        rows.push_back({name, 8, "msgs_per_s", r.msgs_per_s, "1/s"});
        std::printf("%-28s overhead %7.3f us  rate %10.0f /s\n", name.c_str(), r.overhead_us, r.msgs_per_s);
      }
      rt.barrier();
      mesh.reset();
      o.reset();
    }
  }
  if (rt.rank() == 0) {
    const double spin_floor = handoff_us(false, quick ? 20000 : 200000);
    const double futex_floor = handoff_us(true, quick ? 2000 : 20000);
    const double ring_floor = handoff_us(false, quick ? 2000 : 20000, 3);
    rows.push_back({"handoff-spin", 0, "rtt_us", spin_floor, "us"});
    rows.push_back({"handoff-futex", 0, "rtt_us", futex_floor, "us"});
    rows.push_back({"handoff-spin-3", 0, "rtt_us", ring_floor, "us"});
    const double context = context_switch_us(quick ? 100000 : 1000000);
    rows.push_back({"wake-context", 0, "rtt_us", context, "us"});
    std::printf("a user-level thread (Boost.Context) switched into and back on one core: %.3f us\n", context);
    std::printf("hand-over round trip between two threads: spinning %.2f us, futex %.2f us; round three spinning threads %.2f us\n",
                spin_floor, futex_floor, ring_floor);
    for (int T : thread_counts) {
      const std::string t = "-t" + std::to_string(T);
      const double d_lat = value_of(rows, "offload-direct" + t, "latency_us");
      const double d_ovh = value_of(rows, "offload-direct" + t, "overhead_us");
      const double d_rate = value_of(rows, "offload-direct" + t, "msgs_per_s");
      for (const char* m : {"static", "dynamic", "dynamic-condvar"}) {
        const std::string n = std::string("offload-") + m + t;
        std::printf("t%-2d %-16s latency %.2fx  overhead %.2fx  rate %.2fx direct\n", T, m, value_of(rows, n, "latency_us") / d_lat,
                    value_of(rows, n, "overhead_us") / d_ovh, value_of(rows, n, "msgs_per_s") / d_rate);
      }
    }
    for (const char* m : {"direct", "static", "dynamic"})
      for (int Q : qp_counts) {
        const std::string n = std::string("offload-") + m + "-t" + std::to_string(qp_threads) + "-q" + std::to_string(Q);
        const std::string d = "offload-direct-t" + std::to_string(qp_threads) + (quick ? "" : "-q1");
        std::printf("t%d %-8s over %d queue pairs: rate %.2fx direct on one\n", qp_threads, m, Q,
                    value_of(rows, n, "msgs_per_s") / value_of(rows, d, "msgs_per_s"));
      }
    std::printf("pinning %s; load average %.2f\n", rt.pinning() ? "on" : "off", load_average());
    if (!csv.empty()) write_csv(csv, rows);
  }
  rt.barrier();
  rt.allocator().free_chunk(local);
  return 0;
}
