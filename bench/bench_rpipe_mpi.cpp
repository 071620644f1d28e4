// bench_rpipe_mpi: the MPI RMA baseline of bench_rpipe (seed 002 compared rpipe with OSU's
// one-sided benchmarks): MPI_Put of the data, MPI_Win_flush, MPI_Put of a flag, MPI_Win_flush,
// the target polling the flag (a ping-pong, halved), a stream of puts flushed every 8, and
// MPI_Get + MPI_Win_flush, from 8 B to 1 MiB, in a window made by MPI_Win_allocate and by
// MPI_Win_create. Rows as bench_rpipe's (variant mpi-put / mpi-get, "-create" for the second).
//   mpirun -n 2 --mca btl self,vader --mca oob_tcp_if_include lo bench_rpipe_mpi [--quick] [--csv FILE]
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/csv_rows.hpp"

namespace {

using loom::bench::Row;

constexpr size_t kMax = 1u << 20;
constexpr size_t kFlag = kMax;  // the flag word after the largest message

double now() { return MPI_Wtime(); }

int iterations(size_t size, bool quick) {
  const int base = size <= 4096 ? 20000 : size <= 65536 ? 4000 : 400;
  return quick ? base / 10 : base;
}

uint64_t read_flag(MPI_Win win, const uint8_t* base) {
  MPI_Win_sync(win);
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(base + kFlag))).load(std::memory_order_acquire);
}

struct Window {
  MPI_Win win;
  uint8_t* base = nullptr;
  std::vector<uint8_t> own;
};

double put_latency_us(Window& w, int rank, size_t size, int n, std::vector<uint8_t>& src) {
  const int peer = rank ^ 1;
  MPI_Barrier(MPI_COMM_WORLD);
  uint64_t seq = 0;
  auto put = [&] {
    ++seq;
    MPI_Put(src.data(), static_cast<int>(size), MPI_BYTE, peer, 0, static_cast<int>(size), MPI_BYTE, w.win);
    MPI_Win_flush(peer, w.win);
    MPI_Put(&seq, 8, MPI_BYTE, peer, kFlag, 8, MPI_BYTE, w.win);
    MPI_Win_flush(peer, w.win);
  };
  auto wait = [&] {
    ++seq;
    while (read_flag(w.win, w.base) != seq) {
    }
  };
  const double t0 = now();
  for (int i = 0; i < n; ++i) {
    if (rank == 0) {
      put();
      wait();
    } else {
      wait();
      put();
    }
  }
  return (now() - t0) * 1e6 / (2.0 * n);
}

double put_rate_MBps(Window& w, int rank, size_t size, int n, std::vector<uint8_t>& src) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  if (rank == 0) {
    for (int i = 0; i < n; ++i) {
      MPI_Put(src.data(), static_cast<int>(size), MPI_BYTE, 1, 0, static_cast<int>(size), MPI_BYTE, w.win);
      if (i % 8 == 7) MPI_Win_flush(1, w.win);
    }
    MPI_Win_flush(1, w.win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return static_cast<double>(size) * n / (now() - t0) / 1e6;
}

double get_latency_us(Window& w, int rank, size_t size, int n, std::vector<uint8_t>& dst) {
  MPI_Barrier(MPI_COMM_WORLD);
  double us = 0;
  if (rank == 1) {
    const double t0 = now();
    for (int i = 0; i < n; ++i) {
      MPI_Get(dst.data(), static_cast<int>(size), MPI_BYTE, 0, 0, static_cast<int>(size), MPI_BYTE, w.win);
      MPI_Win_flush(0, w.win);
    }
    us = (now() - t0) * 1e6 / n;
  }
  MPI_Bcast(&us, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bool quick = false;
  std::string csv = "bench_rpipe_mpi.csv";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--csv" && i + 1 < argc) csv = argv[++i];
  }
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "bench_rpipe_mpi runs on 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  std::vector<Row> rows;
  std::vector<uint8_t> buf(kMax, 3);
  for (bool create : {false, true}) {
    Window w;
    const MPI_Aint bytes = kMax + 64;
    if (create) {
      w.own.assign(static_cast<size_t>(bytes), 0);
      w.base = w.own.data();
      MPI_Win_create(w.base, bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w.win);
    } else {
      MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w.base, &w.win);
      std::memset(w.base, 0, static_cast<size_t>(bytes));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, w.win);
    const std::string suffix = create ? "-create" : "";
    for (size_t s : {size_t{8}, size_t{64}, size_t{512}, size_t{4096}, size_t{32768}, size_t{262144}, size_t{1} << 20}) {
      const int n = iterations(s, quick);
      const double lat = put_latency_us(w, rank, s, n, buf);
      const double bw = put_rate_MBps(w, rank, s, n, buf);
      const double gl = get_latency_us(w, rank, s, n, buf);
      rows.push_back({"mpi-put" + suffix, s, "latency_us", lat, "us"});
      rows.push_back({"mpi-put" + suffix, s, "MB_per_s", bw, "MB/s"});
      rows.push_back({"mpi-get" + suffix, s, "latency_us", gl, "us"});
      rows.push_back({"mpi-get" + suffix, s, "MB_per_s", static_cast<double>(s) / gl, "MB/s"});
      if (rank == 0) std::printf("%-8s %8zu B  put %8.2f us %9.1f MB/s   get %8.2f us\n", create ? "create" : "allocate", s, lat, bw, gl);
    }
    MPI_Win_unlock_all(w.win);
    MPI_Win_free(&w.win);
  }
  if (rank == 0) loom::bench::write_csv(csv, rows);
  MPI_Finalize();
  return 0;
}
