#pragma once
// What every Loom benchmark shares: CSV rows, timing, the cache-line ping-pong floor, the load
// average, and UCX error handling for the baselines.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "dsm/common/env.hpp"
#include "dsm/runtime/runtime.hpp"
#include "dsm/signal/backoff.hpp"

#ifdef LOOM_HAVE_UCX
#include <ucp/api/ucp.h>
#endif

namespace loom::bench {

using clk = std::chrono::steady_clock;

struct Row {
  std::string variant;
  size_t size;
  std::string metric;
  double value;
  std::string unit;
};

inline double seconds_since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Cache-line ping-pong between ranks 0 and 1 through a shared mapping: the floor for any
// notification between two processes on this host.
inline double pingpong_rtt_us(Runtime& rt, int rounds) {
  std::string path = env::get_string("LOOM_JOB_DIR", "/tmp") + "/bench-pingpong";
  if (rt.rank() == 0) {
    int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) { std::perror("pingpong"); std::exit(1); }
    close(fd);
  }
  rt.barrier();
  int fd = open(path.c_str(), O_RDWR);
  auto* m = static_cast<uint8_t*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  close(fd);
  auto* ping = reinterpret_cast<std::atomic<uint64_t>*>(m);
  auto* pong = reinterpret_cast<std::atomic<uint64_t>*>(m + 128);
  rt.barrier();
  double rtt = 0;
  auto t0 = clk::now();
  for (int i = 1; i <= rounds; ++i) {
    if (rt.rank() == 0) {
      ping->store(static_cast<uint64_t>(i), std::memory_order_release);
      signal::Backoff b;
      while (pong->load(std::memory_order_acquire) != static_cast<uint64_t>(i)) b.spin_or_yield();
    } else if (rt.rank() == 1) {
      signal::Backoff b;
      while (ping->load(std::memory_order_acquire) != static_cast<uint64_t>(i)) b.spin_or_yield();
      pong->store(static_cast<uint64_t>(i), std::memory_order_release);
    }
  }
  rtt = seconds_since(t0) / rounds * 1e6;
  rt.barrier();
  munmap(m, 4096);
  return rtt;
}


inline void write_csv(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream f(path);
  f << "variant,size,metric,value,unit\n";
  for (auto& r : rows) f << r.variant << ',' << r.size << ',' << r.metric << ',' << r.value << ',' << r.unit << '\n';
  std::printf("wrote %s\n", path.c_str());
}

inline double load_average() {
  double l[3] = {0, 0, 0};
  getloadavg(l, 3);
  return l[0];
}

#ifdef LOOM_HAVE_UCX
inline void ucx_check(ucs_status_t s, const char* what) {
  if (s != UCS_OK) {
    std::fprintf(stderr, "ucx: %s: %s\n", what, ucs_status_string(s));
    std::exit(1);
  }
}

inline void ucx_wait(ucp_worker_h w, void* req) {
  if (req == nullptr) return;
  if (UCS_PTR_IS_ERR(req)) {
    std::fprintf(stderr, "ucx: request failed: %s\n", ucs_status_string(UCS_PTR_STATUS(req)));
    std::exit(1);
  }
  while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(w);
  ucp_request_free(req);
}
#endif

}  // namespace loom::bench
