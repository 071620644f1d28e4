#pragma once
// What every Loom benchmark shares: CSV rows, timing, the cache-line ping-pong floor, the load
// average, and UCX error handling for the baselines.
#include <alloca.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <span>
#include <fstream>
#include <string>
#include <vector>

#include "bench/balanced_order.hpp"
#include "bench/csv_rows.hpp"
#include "bench/cursor.hpp"
#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/dsm/common/backoff.hpp"

#ifdef LOOM_HAVE_UCX
#include <ucp/api/ucp.h>
#endif

namespace loom::bench {

using clk = std::chrono::steady_clock;

inline double seconds_since(clk::time_point t0) { return std::chrono::duration<double>(clk::now() - t0).count(); }

// Runs f with the stack moved down by about `offset` bytes. Where a program's stack lies within a
// page decides whether its stores alias (4 KiB apart) with the loads of a hot path, which stalls
// the loads: in bench_fabric one process in four or five ran the thread-safe Transmitter at 0.65
// of the hand-written loop instead of 0.9, by its stack position alone (the size of the
// environment moved it there and back). Benchmarks run each round at another offset, so that no
// variant is measured only at a lucky or an unlucky position.
template <typename F>
[[gnu::noinline]] double at_stack_offset(size_t offset, F&& f) {
  void* p = alloca((offset & 4095) + 16);
  asm volatile("" : : "r"(p) : "memory");  // keeps the allocation
  return f();
}
// The offset of round r: 256 positions 16 bytes apart, visited in a scattered order.
inline size_t round_stack_offset(int r) { return (static_cast<size_t>(r) * 1552) % 4096; }

// Round r of a benchmark: f(k) for each of its n variants, in row r of the balanced order
// (balanced_order.hpp), all at round r's stack offset.
template <typename F>
void run_round(int n, int r, F&& f) {
  for (int k : balanced_order(n, r)) at_stack_offset(round_stack_offset(r), [&] {
      f(k);
      return 0.0;
    });
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Cache-line ping-pong between ranks 0 and 1 through a shared mapping: the floor for any
// notification between two processes on this host.
inline double pingpong_rtt_us(Runtime& rt, int rounds) {
  std::string path = (settings::raw(settings::dsm::kJobDir) ? *settings::raw(settings::dsm::kJobDir) : std::string("/tmp")) + "/bench-pingpong";
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
      wait::Backoff b;
      while (pong->load(std::memory_order_acquire) != static_cast<uint64_t>(i)) b.spin_or_yield();
    } else if (rt.rank() == 1) {
      wait::Backoff b;
      while (ping->load(std::memory_order_acquire) != static_cast<uint64_t>(i)) b.spin_or_yield();
      pong->store(static_cast<uint64_t>(i), std::memory_order_release);
    }
  }
  rtt = seconds_since(t0) / rounds * 1e6;
  rt.barrier();
  munmap(m, 4096);
  return rtt;
}


// The value of a row (variant, metric) in `rows`, 0 when there is none.
inline double value_of(const std::vector<Row>& rows, const std::string& variant, const std::string& metric) {
  for (const Row& r : rows)
    if (r.variant == variant && r.metric == metric) return r.value;
  return 0;
}

// Under an emulated wire (LOOM_WIRE, loomrun --emulate-nodes K), the suffix the variants of the
// rows that crossed it carry: "@<wire>-nodes<K>" (K: one node a rank when unset); "" without one.
// Rows of a plain loop or OpenMP, which no wire touches, keep their names.
// The wire a benchmark runs on, as variants name it ("" without LOOM_WIRE): a preset's name, or
// a custom wire's figures with ':' for ',' (a CSV field holds no comma): "2:10:20".
inline std::string wire_name() {
  const char* w = std::getenv("LOOM_WIRE");
  std::string s = w == nullptr ? "" : w;
  std::replace(s.begin(), s.end(), ',', ':');
  return s;
}
inline std::string wire_suffix(int ranks) {
  const std::string w = wire_name();
  if (w.empty()) return "";
  const char* k = std::getenv("LOOM_EMULATE_NODES");
  return "@" + w + "-nodes" + (k != nullptr && *k != '\0' ? std::string(k) : std::to_string(ranks));
}

// A benchmark's arguments parsed before its Runtime exists (whose one-line error handler is not
// set yet): a bad argument prints its message and exits with status 2 (a usage error).
template <typename Parse>
auto parse_arguments(Parse&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(2);
  }
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

// A UCX context and worker; after ucx_connect, rank 0 has an endpoint to rank 1.
struct UcxWorker {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;
};

inline UcxWorker ucx_init(uint64_t features, ucs_thread_mode_t mode) {
  UcxWorker u;
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  p.features = features;
  p.mt_workers_shared = mode == UCS_THREAD_MODE_MULTI ? 1 : 0;
  ucp_config_t* cfg;
  ucx_check(ucp_config_read(nullptr, nullptr, &cfg), "config");
  ucx_check(ucp_init(&p, cfg, &u.ctx), "init");
  ucp_config_release(cfg);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = mode;
  ucx_check(ucp_worker_create(u.ctx, &wp, &u.worker), "worker");
  return u;
}

// Collective: exchanges worker addresses (and `extra` bytes) over the bootstrap; rank 0 creates
// an endpoint to rank 1 and gets rank 1's extra bytes back.
inline std::vector<std::byte> ucx_connect(Runtime& rt, UcxWorker& u, std::span<const std::byte> extra = {}) {
  ucp_address_t* addr;
  size_t addr_len;
  ucx_check(ucp_worker_get_address(u.worker, &addr, &addr_len), "get_address");
  std::vector<std::byte> blob(8 + extra.size() + addr_len);
  uint64_t el = extra.size();
  std::memcpy(blob.data(), &el, 8);
  if (!extra.empty()) std::memcpy(blob.data() + 8, extra.data(), extra.size());
  std::memcpy(blob.data() + 8 + extra.size(), addr, addr_len);
  ucp_worker_release_address(u.worker, addr);
  auto all = rt.bootstrap().allgather(blob);
  if (rt.rank() != 0) return {};
  const auto& b = all[1];
  std::memcpy(&el, b.data(), 8);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep.address = reinterpret_cast<const ucp_address_t*>(b.data() + 8 + el);
  ucx_check(ucp_ep_create(u.worker, &ep, &u.ep), "ep_create");
  return std::vector<std::byte>(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(el));
}

inline void ucx_close(UcxWorker& u) {
  if (u.ep) {
    ucp_request_param_t rp{};
    ucx_wait(u.worker, ucp_ep_close_nbx(u.ep, &rp));
    u.ep = nullptr;
  }
  if (u.worker) ucp_worker_destroy(u.worker);
  if (u.ctx) ucp_cleanup(u.ctx);
  u.worker = nullptr;
  u.ctx = nullptr;
}
#endif

}  // namespace loom::bench
