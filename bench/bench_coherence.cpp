// bench_coherence: the shared regions' costs on 2 processes, beside the fabric's own floor
// measured in the same run, the seed's ablation (floating/fixed home x timestamp/directory
// invalidation) on a write-heavy and a read-heavy micro-kernel, and a whole program: the Jacobi
// stencil (coherence_jacobi.cpp) against the plain loop and OpenMP.
//
//   loomrun -n 2 bench_coherence [--quick] [--csv FILE]
//   loomrun -n P bench_coherence --only jacobi [--quick] [--csv FILE]   (any P)
//
// Rank 0 measures; rank 1 is the other side (the home of what rank 0 misses on, the other
// locker, the other barrier party).

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "bench/coherence_jacobi.hpp"
#include "bench/kernel_floors.hpp"
#include "loom/coherence/space.hpp"

using namespace loom;
using namespace loom::bench;
using coherence::Config;
using coherence::Lock;
using coherence::Policy;
using coherence::Space;

namespace {

Config config_for(const Policy& p) {
  Config c = Config::from_env();
  c.policy = p;
  c.reserve = size_t{4} << 30;
  return c;
}

// The fabric's floor: one signaled READ of `len` bytes from rank 1, waited for, on a QP of our
// own (no Transmitter), the same transport every protocol step uses.
double fabric_read_us(Runtime& rt, size_t len, int rounds) {
  fabric::QpCaps caps;
  caps.max_send_wr = 16;
  caps.max_recv_wr = 1;
  auto mesh = rt.make_mesh(caps);
  memory::RDMAMemory buf = rt.allocator().allocate_chunk(len);
  struct R {
    uint64_t addr;
    uint32_t rkey, pad;
  } mine{buf.address(), buf.rkey, 0};
  R peer = rt.bootstrap().allgather_value(mine)[1];
  double us = 0;
  if (rt.rank() == 0) {
    auto& qp = mesh->qp(1);
    auto& cq = *mesh->send_cqs[1];
    std::vector<double> t;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = clk::now();
      for (int i = 0; i < rounds; ++i) {
        fabric::SendWr wr;
        wr.opcode = fabric::Opcode::Read;
        wr.signaled = true;
        wr.local = fabric::Sge{buf.address(), static_cast<uint32_t>(len), buf.lkey};
        wr.remote_addr = peer.addr;
        wr.rkey = peer.rkey;
        if (qp.post_send(wr) != fabric::PostResult::Ok) { std::fprintf(stderr, "post failed\n"); std::exit(1); }
        fabric::Completion c[1];
        while (cq.poll(c) == 0) wait::cpu_relax();
      }
      t.push_back(seconds_since(t0) / rounds * 1e6);
    }
    us = median(t);
  }
  mesh.reset();
  rt.allocator().free_chunk(buf);
  return us;
}

struct Micro {
  double read_miss = 0, read_miss_explicit = 0, first_write = 0, release_block = 0;
  double lock_unlock = 0, lock_handoff = 0, lock_contended = 0, barrier = 0;
};

Micro micro(Runtime& rt, bool quick) {
  Micro m;
  Space s(rt, config_for(Policy::parse("floating-ts")));
  // 1024 blocks: private copies, twins and public copies (12 MiB) stay mostly in the last-level
  // cache; with 4096 (48 MiB) every step also pays DRAM traffic (docs/coherence.md, Costs).
  const size_t blocks = 1024;
  auto& r = s.create_region(blocks * 4096 + (8 << 20), 4096, 0);
  auto* data = r.new_array<uint8_t>(blocks * 4096);
  const bool leader = rt.rank() == 0;
  std::vector<double> miss, miss_x, fw, rel;
  for (int rep = 0; rep < (quick ? 3 : 15); ++rep) {
    // Rank 1 writes every block, becoming its home; the barrier's notices invalidate rank 0's
    // copies, so each first touch on rank 0 is a remote miss (fault path) ...
    if (!leader) for (size_t b = 0; b < blocks; ++b) data[b * 4096 + 8] = static_cast<uint8_t>(rep + 1);
    s.barrier();
    if (leader) {
      uint64_t sink = 0;
      auto t0 = clk::now();
      for (size_t b = 0; b < blocks / 2; ++b) sink += *static_cast<volatile uint8_t*>(&data[b * 4096]);
      miss.push_back(seconds_since(t0) / static_cast<double>(blocks / 2) * 1e6);
      // ... or, declared first, an explicit-accessor miss (no fault).
      t0 = clk::now();
      for (size_t b = blocks / 2; b < blocks; ++b) sink += *s.reading(&data[b * 4096]);
      miss_x.push_back(seconds_since(t0) / static_cast<double>(blocks / 2) * 1e6);
      // First write to a clean block: fault and twin.
      t0 = clk::now();
      for (size_t b = 0; b < blocks; ++b) data[b * 4096 + 16] = static_cast<uint8_t>(rep);
      fw.push_back(seconds_since(t0) / static_cast<double>(blocks) * 1e6);
      // Release of as many dirty blocks (home migrates here from rank 1: one READ each).
      t0 = clk::now();
      s.release();
      rel.push_back(seconds_since(t0) / static_cast<double>(blocks) * 1e6);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (sink == 42424242) std::printf(" ");
    }
    s.barrier();
  }
  if (leader) {
    m.read_miss = median(miss);
    m.read_miss_explicit = median(miss_x);
    m.first_write = median(fw);
    m.release_block = median(rel);
  }

  // Locks: uncontended (homed at rank 1, rank 0 alone), then both ranks on one lock.
  Lock far;
  for (int i = 0; i < 2; ++i) far = s.make_lock();  // the second lock is homed at rank 1
  const int k = quick ? 2000 : 10000;
  s.barrier();
  if (leader) {
    std::vector<double> t;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = clk::now();
      for (int i = 0; i < k; ++i) {
        far.lock();
        far.unlock();
      }
      t.push_back(seconds_since(t0) / k * 1e6);
    }
    m.lock_unlock = median(t);
  }
  s.barrier();
  {
    auto t0 = clk::now();
    for (int i = 0; i < k; ++i) {
      far.lock();
      far.unlock();
    }
    double us = seconds_since(t0) / k * 1e6;
    if (leader) m.lock_handoff = us;
  }
  s.barrier();
  {
    auto t0 = clk::now();
    for (int i = 0; i < k; ++i) {
      far.lock();
      data[8] += 1;  // a shared counter: the lock carries its notice
      far.unlock();
    }
    double us = seconds_since(t0) / k * 1e6;
    if (leader) m.lock_contended = us;
  }
  s.barrier();
  {
    std::vector<double> t;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = clk::now();
      for (int i = 0; i < k; ++i) s.barrier();
      t.push_back(seconds_since(t0) / k * 1e6);
    }
    if (leader) m.barrier = median(t);
  }
  s.destroy_region(r);
  return m;
}

// Write-heavy: every process writes its own bytes of every shared block (false sharing) and
// all of its own blocks, then a barrier. Floating home keeps each release local once the home
// has moved to the writer; fixed home sends every merged block to its home.
double write_heavy(Runtime& rt, const Policy& p, int iters) {
  Space s(rt, config_for(p));
  const int n = rt.size(), me = rt.rank();
  const size_t shared_blocks = 32, own_blocks = 32;
  auto& r = s.create_region((shared_blocks + own_blocks * static_cast<size_t>(n)) * 4096 + (4 << 20), 4096, 0);
  auto* shared = r.new_array<uint64_t>(shared_blocks * 512);
  auto* own = r.new_array<uint64_t>(own_blocks * 512 * static_cast<size_t>(n));
  s.barrier();
  auto t0 = clk::now();
  for (int it = 0; it < iters; ++it) {
    for (size_t b = 0; b < shared_blocks; ++b) shared[b * 512 + static_cast<size_t>(me)] += 1;
    uint64_t* mine = own + static_cast<size_t>(me) * own_blocks * 512;
    for (size_t i = 0; i < own_blocks * 512; i += 64) mine[i] += static_cast<uint64_t>(it);
    s.barrier();
  }
  double sec = seconds_since(t0);
  bool ok = shared[0] == static_cast<uint64_t>(iters);
  s.barrier();
  s.destroy_region(r);
  if (!ok) { std::fprintf(stderr, "write-heavy/%s: wrong result\n", p.name().c_str()); std::exit(1); }
  return sec;
}

// Read-heavy: one process updates two blocks per iteration; everyone reads the whole table.
// Unchanged blocks stay valid (notices or sharer invalidations name only the two). Returns the
// seconds; `misses` and `rereads` get this process's read misses and data READs beyond the
// first of a miss (fetch_retries).
double read_heavy(Runtime& rt, const Policy& p, int iters, uint64_t& misses, uint64_t& rereads) {
  Space s(rt, config_for(p));
  const int n = rt.size(), me = rt.rank();
  const size_t blocks = 256;
  auto& r = s.create_region(blocks * 4096 + (4 << 20), 4096, 0);
  auto* table = r.new_array<uint64_t>(blocks * 512);
  s.barrier();
  uint64_t sum = 0;
  auto t0 = clk::now();
  for (int it = 0; it < iters; ++it) {
    if (it % n == me) {
      size_t b = static_cast<size_t>(it * 7) % blocks;
      table[b * 512] += 1;
      table[((b + 1) % blocks) * 512] += 1;
    }
    s.barrier();
    for (size_t i = 0; i < blocks * 512; i += 64) sum += table[i];
    s.barrier();
  }
  double sec = seconds_since(t0);
  misses += s.stats().read_misses;
  rereads += s.stats().fetch_retries;
  s.barrier();
  s.destroy_region(r);
  if (sum == 0) { std::fprintf(stderr, "read-heavy: nothing read\n"); std::exit(1); }
  return sec;
}

struct Args {
  bool quick = false;
  bool only_jacobi = false;
  bool only_ablation = false;
  std::string csv;
};

bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--quick") a.quick = true;
    else if (s == "--csv" && i + 1 < argc) a.csv = argv[++i];
    else if (s == "--only" && i + 1 < argc && std::string(argv[i + 1]) == "jacobi") a.only_jacobi = true, ++i;
    else if (s == "--only" && i + 1 < argc && std::string(argv[i + 1]) == "ablation") a.only_ablation = true, ++i;
    else return false;
  }
  return true;
}

JacobiOptions jacobi_options(bool quick) {
  JacobiOptions o;
  if (quick) {
    o.sizes = {512};
    o.reps = 1;
  }
  return o;
}

// What each step needs at least: fabric READs of 4 KiB and 8 B, and the kernel's fault plus
// mprotect.
struct Floors {
  double read4k = 0, read8 = 0, fault = 0;
  ProtectFloors protect;
};

struct Abl {
  std::string name;
  double w, r;
  uint64_t misses = 0, rereads = 0;  // read-heavy, this process, all repetitions
};

// Seed 003's ablation. The policies run interleaved, each repetition in another row of a
// balanced order (balanced_order.hpp; four repetitions make a full cycle), so that no policy
// always inherits the caches and page tables of the same predecessor; each figure is a median.
std::vector<Abl> ablation(Runtime& rt, bool quick) {
  const std::vector<const char*> policies = {"floating-ts", "floating-dir", "fixed-ts", "fixed-dir"};
  // Two full cycles: a read-heavy run lasts ~60 ms, and one slow stretch of this machine should
  // not be a median.
  const int reps = quick ? 1 : 2 * balanced_cycle(static_cast<int>(policies.size()));
  std::vector<std::vector<double>> w(policies.size()), rd(policies.size());
  std::vector<uint64_t> misses(policies.size(), 0), rereads(policies.size(), 0);
  for (int rep = 0; rep < reps; ++rep)
    run_round(static_cast<int>(policies.size()), rep, [&](int k) {
      Policy p = Policy::parse(policies[static_cast<size_t>(k)]);
      w[static_cast<size_t>(k)].push_back(write_heavy(rt, p, quick ? 100 : 500));
      rd[static_cast<size_t>(k)].push_back(
          read_heavy(rt, p, quick ? 50 : 1000, misses[static_cast<size_t>(k)], rereads[static_cast<size_t>(k)]));
    });
  std::vector<Abl> abl;
  for (size_t k = 0; k < policies.size(); ++k) abl.push_back({policies[k], median(w[k]), median(rd[k]), misses[k], rereads[k]});
  return abl;
}

// A lock contended by 2 processes: the ranks take turns, a turn of each per iteration, and a
// turn needs the four fabric steps of an uncontended one. With a shared counter in the section,
// each turn also misses on the counter's block, which the other rank wrote: the increment is one
// read-modify-write instruction, so one write fault that fetches the block (a 4 KiB READ) and
// twins it.
double handoff_floor(const Floors& f) { return 2 * 4 * f.read8; }
double contended_floor(const Floors& f) { return 2 * (4 * f.read8 + f.read4k + f.fault); }

std::vector<Row> micro_rows(const Floors& f, const Micro& m) {
  return {{"fabric-read", 4096, "us", f.read4k, "us"},          {"fabric-read", 8, "us", f.read8, "us"},
          {"page-fault-floor", 4096, "us", f.fault, "us"},
          {"protect-floor-bare", 4096, "us", f.protect.bare, "us"},
          {"protect-floor-in-process", 4096, "us", f.protect.in_process, "us"},
          {"protect-floor-sibling-running", 4096, "us", f.protect.sibling_running, "us"},
          {"read-miss", 4096, "us", m.read_miss, "us"},
          {"read-miss-explicit", 4096, "us", m.read_miss_explicit, "us"},
          {"first-write", 4096, "us", m.first_write, "us"},      {"release-per-block", 4096, "us", m.release_block, "us"},
          {"lock-unlock", 0, "us", m.lock_unlock, "us"},         {"lock-unlock-handoff", 0, "us", m.lock_handoff, "us"},
          {"lock-unlock-handoff", 0, "floor_us", handoff_floor(f), "us"},
          {"lock-unlock-contended", 0, "us", m.lock_contended, "us"},
          {"lock-unlock-contended", 0, "floor_us", contended_floor(f), "us"},
          {"barrier", 0, "us", m.barrier, "us"}};
}

std::vector<Row> ablation_rows(const std::vector<Abl>& abl) {
  std::vector<Row> rows;
  for (auto& a : abl) {
    rows.push_back({"write-heavy/" + a.name, 4096, "s", a.w, "s"});
    rows.push_back({"read-heavy/" + a.name, 4096, "s", a.r, "s"});
    rows.push_back({"read-heavy-rereads/" + a.name, 4096, "count", static_cast<double>(a.rereads), "count"});
  }
  return rows;
}

void report_micro(const Floors& f, const Micro& m) {
  std::printf("%-28s %10s %10s %8s %s\n", "figure", "Loom us", "floor us", "ratio", "(floor: fabric ops the step needs at least)");
  auto line = [](const char* what, double v, double floor) {
    std::printf("%-28s %10.3f %10.3f %8.2f\n", what, v, floor, floor > 0 ? v / floor : 0.0);
  };
  line("read miss 4 KiB (fault)", m.read_miss, f.read4k + f.read8 + f.fault);
  line("read miss 4 KiB (explicit)", m.read_miss_explicit, f.read4k + f.read8);
  line("first write (twin)", m.first_write, f.fault);
  line("release per dirty block", m.release_block, 2 * f.read8 + f.read4k);
  line("lock + unlock", m.lock_unlock, 4 * f.read8);
  line("lock + unlock, hand-off", m.lock_handoff, handoff_floor(f));
  line("lock + unlock, contended", m.lock_contended, contended_floor(f));
  line("barrier, 2 processes", m.barrier, 2 * f.read8);
  std::printf("fabric READ: 4 KiB %.3f us, 8 B %.3f us; page fault + mprotect: %.3f us\n", f.read4k, f.read8, f.fault);
  std::printf("mprotect of one page: %.3f us in a process of one thread, %.3f us in this one, %.3f us beside a running thread\n",
              f.protect.bare, f.protect.in_process, f.protect.sibling_running);
}

void report_ablation(const std::vector<Abl>& abl) {
  std::printf("\nablation (seconds; lower is better; ratio to fixed-dir, the seed's baseline)\n");
  std::printf("%-14s %12s %8s %12s %8s %10s %10s\n", "policy", "write-heavy", "ratio", "read-heavy", "ratio", "misses", "re-reads");
  double bw = abl.back().w, br = abl.back().r;
  for (auto& a : abl)
    std::printf("%-14s %12.4f %8.2f %12.4f %8.2f %10llu %10llu\n", a.name.c_str(), a.w, a.w / bw, a.r, a.r / br,
                static_cast<unsigned long long>(a.misses), static_cast<unsigned long long>(a.rereads));
}

void report_targets(const Floors& f, const Micro& m) {
  std::printf("load average: %.2f\n", load_average());
  std::printf("targets (ArgoDSM here: 10, 56-77, 3-4 us):\n");
  std::printf("  read miss <= 2 us: explicit %.2f us %s; through a fault %.2f us %s (the kernel's fault + mprotect alone: %.2f us)\n",
              m.read_miss_explicit, m.read_miss_explicit <= 2 ? "met" : "MISSED", m.read_miss, m.read_miss <= 2 ? "met" : "MISSED",
              f.fault);
  std::printf("  barrier <= 3 us: %.2f us %s\n", m.barrier, m.barrier <= 3 ? "met" : "MISSED");
  std::printf("  release <= 1 us per dirty block: %.2f us %s\n", m.release_block, m.release_block <= 1 ? "met" : "MISSED");
}

}  // namespace

int main(int argc, char** argv) {
  Runtime rt(argc, argv);
  Args a;
  if (!parse_args(argc, argv, a)) {
    if (rt.rank() == 0)
      std::fprintf(stderr, "usage: loomrun -n 2 bench_coherence [--quick] [--csv FILE]\n"
                           "       loomrun -n 2 bench_coherence --only ablation [--quick] [--csv FILE]\n"
                           "       loomrun -n P bench_coherence --only jacobi [--quick] [--csv FILE]\n");
    return 2;
  }
  if (a.only_jacobi) {
    std::vector<Row> rows = jacobi_benchmark(rt, jacobi_options(a.quick));
    if (rt.rank() == 0 && !a.csv.empty()) write_csv(a.csv, rows);
    return 0;
  }
  if (rt.size() != 2) {
    if (rt.rank() == 0) std::fprintf(stderr, "bench_coherence runs on 2 processes (loomrun -n 2)\n");
    return 2;
  }
  if (a.only_ablation) {
    const std::vector<Abl> abl = ablation(rt, a.quick);
    if (rt.rank() == 0) {
      report_ablation(abl);
      std::printf("load average: %.2f\n", load_average());
      if (!a.csv.empty()) write_csv(a.csv, ablation_rows(abl));
    }
    return 0;
  }
  Floors f;
  f.read4k = fabric_read_us(rt, 4096, a.quick ? 2000 : 20000);
  f.read8 = fabric_read_us(rt, 8, a.quick ? 2000 : 20000);
  f.fault = page_fault_floor_us(a.quick ? 1024 : 4096);
  f.protect = protect_floors_us(a.quick ? 2048 : 8192);
  const Micro m = micro(rt, a.quick);
  const std::vector<Abl> abl = ablation(rt, a.quick);
  std::vector<Row> jacobi = jacobi_benchmark(rt, jacobi_options(a.quick));
  if (rt.rank() == 0) {
    std::printf("\nbench_coherence: shared regions, 2 processes, %s provider%s\n", rt.provider().info().name.c_str(),
                a.quick ? " (quick)" : "");
    report_micro(f, m);
    report_ablation(abl);
    report_targets(f, m);
    std::vector<Row> rows = micro_rows(f, m);
    for (auto& r : ablation_rows(abl)) rows.push_back(r);
    rows.insert(rows.end(), jacobi.begin(), jacobi.end());
    if (!a.csv.empty()) write_csv(a.csv, rows);
  }
  return 0;
}
