// bench_rpipe (docs/rpipe.md): rpipe's rwrite and rread from 8 B to 1 MiB between ranks 0 and 1
// (latency: a ping-pong of rwrites halved, and an rread of an offered buffer; rate: a stream at
// width 8), and the heap's fits and synchronizations on an allocation trace with bursts of frees.
// Beside them Loom's Messenger (call_buffer) with the same bytes; the MPI RMA baseline of the
// same sizes is bench_rpipe_mpi (Open MPI, run beside it).
//   loomrun -n 2 bench_rpipe [--quick] [--csv FILE]
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "bench/rpipe_messenger.hpp"
#include "loom/rpipe/pipe.hpp"

using namespace loom;
using namespace loom::rpipe;
using loom::bench::Row;

namespace {

struct Settings {
  bool quick = false;
  std::string csv = "bench_rpipe.csv";
};

int iterations(size_t size, bool quick) {
  const int base = size <= 4096 ? 20000 : size <= 65536 ? 4000 : 400;
  return quick ? base / 10 : base;
}

Options big_heap() {
  Options o;
  o.segment_bytes = 8u << 20;  // 1 MiB messages, 8 in flight
  o.max_segments = 16;
  return o;
}

// A ping-pong of rwrites over a full-duplex pipe: half the round trip.
double rwrite_latency_us(Runtime& rt, size_t size, int n) {
  Pipe p(rt, rt.rank() ^ 1, End::Writer, 1, Mode::FullDuplex, big_heap());
  auto send = [&] {
    RAddr a = p.rmalloc(size);
    p.rmem(a)[0] = std::byte{1};
    p.rwrite(a);
  };
  auto take = [&] { p.rfree(p.next().addr); };
  auto rounds = [&](int k) {
    for (int i = 0; i < k; ++i) {
      if (rt.rank() == 0) {
        send();
        take();
      } else {
        take();
        send();
      }
    }
  };
  rounds(n / 10 + 1);  // warm: the heap's segments made, the code and the rings in cache
  rt.barrier();
  const auto t0 = bench::clk::now();
  rounds(n);
  return bench::seconds_since(t0) * 1e6 / (2.0 * n);
}

// A stream of n rwrites at width 8; the reader's last take is answered, so the time is the stream's.
double rwrite_rate_MBps(Runtime& rt, size_t size, int n) {
  Pipe p(rt, rt.rank() ^ 1, End::Writer, 8, Mode::FullDuplex, big_heap());
  // Warm: a first message each way makes each direction's first segment.
  if (rt.rank() == 0) {
    p.rwrite(p.rmalloc(size));
    p.rfree(p.next().addr);
  } else {
    p.rfree(p.next().addr);
    p.rwrite(p.rmalloc(8));
  }
  rt.barrier();
  const auto t0 = bench::clk::now();
  if (rt.rank() == 0) {
    for (int i = 0; i < n; ++i) {
      RAddr a = p.rmalloc(size);
      p.rmem(a)[0] = std::byte{1};
      p.rwrite(a);
    }
    p.rfree(p.next().addr);
  } else {
    for (int i = 0; i < n; ++i) p.rfree(p.next().addr);
    RAddr a = p.rmalloc(8);
    p.rwrite(a);
  }
  return static_cast<double>(size) * n / bench::seconds_since(t0) / 1e6;
}

// rread of one offered buffer, n times: one READ of data and flag and its completion each.
double rread_latency_us(Runtime& rt, size_t size, int n) {
  Pipe p(rt, rt.rank() ^ 1, End::Writer, 1, Mode::FullDuplex, big_heap());
  double us = 0;
  if (rt.rank() == 0) {
    RAddr a = p.rmalloc(size);
    std::memset(p.rmem(a).data(), 7, size);
    p.roffer(a);
    p.rfree(p.next().addr);  // rank 1 is done
  } else {
    Message m = p.next();
    p.rread(m.addr);
    const auto t0 = bench::clk::now();
    for (int i = 0; i < n; ++i) p.rread(m.addr);
    us = bench::seconds_since(t0) * 1e6 / n;
    p.rfree(m.addr);
    p.rwrite(p.rmalloc(8));
  }
  rt.barrier();
  return us;
}

// The allocation trace: rounds of a burst of `burst` messages (sizes log-uniform in 64 B..16 KiB,
// seed 1) written, then taken and freed by the reader in a shuffled order, in one burst.
struct TraceResult {
  double pairs_per_s = 0;
  uint64_t peak_bytes = 0;
  uint64_t heap_bytes = 0;
};
TraceResult alloc_trace(Runtime& rt, Fit fit, Sync sync, int rounds) {
  constexpr int kBurst = 64;
  Options o;
  o.fit = fit;
  o.sync = sync;
  o.segment_bytes = 1u << 20;
  o.max_segments = 64;
  Pipe p(rt, rt.rank() ^ 1, End::Writer, kBurst, Mode::FullDuplex, o);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> logsize(6.0, 14.0);  // log2 of 64 B .. 16 KiB
  rt.barrier();
  const auto t0 = bench::clk::now();
  for (int r = 0; r < rounds; ++r) {
    if (rt.rank() == 0) {
      for (int i = 0; i < kBurst; ++i) {
        RAddr a = p.rmalloc(static_cast<size_t>(std::exp2(logsize(rng))));
        p.rwrite(a);
      }
      p.rfree(p.next().addr);  // the reader has freed the burst
    } else {
      std::vector<RAddr> got;
      for (int i = 0; i < kBurst; ++i) got.push_back(p.next().addr);
      std::shuffle(got.begin(), got.end(), rng);
      for (const RAddr& a : got) p.rfree(a);
      p.rwrite(p.rmalloc(8));
    }
  }
  TraceResult t;
  t.pairs_per_s = kBurst * static_cast<double>(rounds) / bench::seconds_since(t0);
  t.peak_bytes = p.stats().peak_in_use_bytes;
  t.heap_bytes = p.stats().heap_bytes;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime rt(argc, argv);
  Settings s;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") s.quick = true;
    else if (a == "--csv" && i + 1 < argc) s.csv = argv[++i];
  }
  if (rt.size() != 2) {
    if (rt.rank() == 0) std::fprintf(stderr, "bench_rpipe runs on 2 ranks (loomrun -n 2)\n");
    return 2;
  }
  const std::string w = bench::wire_suffix(rt.size());
  std::vector<Row> rows;
  const std::vector<size_t> sizes{8, 64, 512, 4096, 32768, 262144, size_t{1} << 20};
  for (size_t size : sizes) {
    const int n = iterations(size, s.quick);
    const double lat = rwrite_latency_us(rt, size, n);
    const double bw = rwrite_rate_MBps(rt, size, n);
    double rl = rread_latency_us(rt, size, n);
    // rank 1 measured rread: its figure to rank 0.
    auto all = rt.bootstrap().allgather_value(rl);
    rl = all[1];
    rows.push_back({"rwrite" + w, size, "latency_us", lat, "us"});
    rows.push_back({"rwrite" + w, size, "MB_per_s", bw, "MB/s"});
    rows.push_back({"rread" + w, size, "latency_us", rl, "us"});
    rows.push_back({"rread" + w, size, "MB_per_s", static_cast<double>(size) / rl, "MB/s"});
    if (rt.rank() == 0) std::printf("%8zu B  rwrite %8.2f us %9.1f MB/s   rread %8.2f us\n", size, lat, bw, rl);
  }
  {  // The Messenger beside them, its chunks big enough for a 1 MiB call; made after the pipes'
     // rows so that its threads are not there while they run.
    invoke::Config cfg = invoke::Config::from_env();
    cfg.chunk_size = size_t{4} << 20;
    invoke::Invoker inv(rt, cfg);
    for (size_t size : sizes) {
      const int n = iterations(size, s.quick);
      const double lat = bench::messenger_latency_us(inv, size, n), bw = bench::messenger_rate_MBps(inv, size, n);
      rows.push_back({"messenger" + w, size, "latency_us", lat, "us"});
      rows.push_back({"messenger" + w, size, "MB_per_s", bw, "MB/s"});
      if (rt.rank() == 0) std::printf("%8zu B  messenger %8.2f us %9.1f MB/s\n", size, lat, bw);
    }
  }
  // The floor of any notification between two processes here: a cache-line ping-pong, halved.
  const double floor_us = bench::pingpong_rtt_us(rt, s.quick ? 2000 : 20000) / 2;
  rows.push_back({"floor-pingpong", 64, "latency_us", floor_us, "us"});
  if (rt.rank() == 0) std::printf("floor: a cache-line ping-pong, halved: %.3f us\n", floor_us);
  const int rounds = s.quick ? 100 : 1000;
  for (Fit f : {Fit::Next, Fit::Best, Fit::Worst}) {
    for (Sync y : {Sync::Deferred, Sync::Immediate}) {
      const TraceResult t = alloc_trace(rt, f, y, rounds);
      const std::string v = std::string("alloc-") + to_string(f) + "-" + to_string(y) + w;
      rows.push_back({v, 0, "pairs_per_s", t.pairs_per_s, "1/s"});
      rows.push_back({v, 0, "peak_bytes", static_cast<double>(t.peak_bytes), "B"});
      rows.push_back({v, 0, "heap_bytes", static_cast<double>(t.heap_bytes), "B"});
      if (rt.rank() == 0) std::printf("%-28s %12.0f pairs/s  peak %8llu B  heap %8llu B\n", v.c_str(), t.pairs_per_s,
                                      static_cast<unsigned long long>(t.peak_bytes), static_cast<unsigned long long>(t.heap_bytes));
    }
  }
  rows.push_back({"load", 0, "load_average", bench::load_average(), ""});
  if (rt.rank() == 0) bench::write_csv(s.csv, rows);
  return 0;
}
