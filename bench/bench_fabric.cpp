// Seed 000 Fig. 2 on this machine: one-sided WRITE message rate vs size through (a) a bare queue
// pair with hand-written selective signaling, (b) the Transmitter (automatic signaling and
// buffer recycling), (c) UCX's ucp_put_nbx over shared memory, beside memcpy (into the peer's
// window and into UCX's region) and a cache-line ping-pong as the floor. (a) and (b) run on thread-safe queue pairs (manual-ss, transmitter,
// compared with UCX's thread-safe worker, ucx-put-mt) and on thread domains (manual-ss-st,
// transmitter-st, compared with UCX's single-thread worker, ucx-put): like with like.
// Run: loomrun -n 2 bench_fabric [--quick] [--csv FILE]
// Under an emulated wire (LOOM_WIRE=... loomrun -n 2 --emulate-nodes 2 bench_fabric) it calibrates
// the wire instead: rows wire-read-8, wire-rate-8 and wire-bw-4096, measured beside the preset.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <functional>
#include <string>
#include <vector>

#include "loom/dsm/fabric/shm/shm_provider.hpp"
#include "loom/dsm/memory/circular_allocator.hpp"
#include "loom/dsm/runtime/runtime.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "bench/bench_common.hpp"

#ifdef LOOM_HAVE_UCX
#include <ucp/api/ucp.h>
#endif

using namespace loom;
using namespace loom::bench;

namespace {


struct Target {
  uint64_t addr;
  uint32_t rkey;
  uint32_t pad;
};

constexpr uint32_t kDepth = 256;
constexpr size_t kRegion = 64u << 20;  // target window; writes cycle through it

// The target offsets of a run of `size`-byte messages: consecutive, wrapping within the window.
inline Cursor target_cursor(size_t size) { return Cursor(size, kRegion - size + 1); }


// Sources: every variant writes a fresh payload word into its source before each message, and
// the hand-managed ones cycle through as many buffers as the send queue is deep (what a
// hand-written program needs, since that many writes may be in flight).
size_t ring_slots(const memory::RDMAMemory& src, size_t size) {
  return std::max<size_t>(1, std::min<size_t>(kDepth, src.size / std::max<size_t>(size, 64)));
}
// The offsets into `src` of the UCX and memcpy rows' sources: ring_slots() buffers, a line apart
// at least.
Cursor source_cursor(const memory::RDMAMemory& src, size_t size) {
  const size_t stride = std::max<size_t>(size, 64);
  return Cursor(stride, ring_slots(src, size) * stride);
}

// A source buffer the hand-written loop cycles through.
struct Slot {
  uint8_t* addr;
  uint32_t lkey;
};

// The memory of `units`' first kDepth units (a buffer per WRITE that may be in flight), handed
// back at once. The hand-written loop reads its sources from exactly the memory the Transmitter
// reads from: on this machine two regions of the same kind can differ by 1.5x in bandwidth, which
// would otherwise be counted for or against the Transmitter at large sizes.
std::vector<Slot> slots_of(memory::CircularAllocator& units) {
  std::vector<memory::Unit*> taken;
  for (uint32_t k = 0; k < kDepth; ++k) {
    memory::Unit* u = units.next();
    if (u == nullptr) break;
    taken.push_back(u);
  }
  std::vector<Slot> slots;
  for (memory::Unit* u : taken) {
    slots.push_back({u->bytes(), u->lkey});
    memory::CircularAllocator::release(u);
  }
  return slots;
}

// (a) Hand-written selective signaling on a bare QP: one thread, signal every depth/4-th post,
// poll when the queue could fill; the unsignaled WRITEs through post_write, the fastest entry,
// as a hand-written loop would. Sources cycle through a ring the code manages itself; payloads
// that fit go inline where the QP says it helps, as the Transmitter decides for itself.
double run_manual(fabric::QueuePair& qp, fabric::CompletionQueue& cq, const std::vector<Slot>& slots, const Target& t,
                  size_t size, size_t count) {
  const uint32_t k = kDepth / 4;
  const size_t ring = slots.size();
  const bool inline_data = qp.inline_helps() && size <= qp.caps().max_inline;
  uint64_t posted = 0, completed = 0;  // in units of WRs retired by polled signals
  fabric::Completion c[16];
  Cursor at = target_cursor(size), src(1, ring);
  auto t0 = clk::now();
  for (size_t i = 0; i < count; ++i) {
    while (posted - completed + 1 > kDepth - k) {
      int n = cq.poll(c);
      for (int j = 0; j < n; ++j) completed = c[j].wr_id;
    }
    const Slot& slot = slots[src.next()];
    *reinterpret_cast<uint64_t*>(slot.addr) = i;
    const fabric::Sge local{reinterpret_cast<uint64_t>(slot.addr), static_cast<uint32_t>(size), slot.lkey};
    const uint64_t remote = t.addr + at.next();
    ++posted;
    fabric::PostResult r;
    if ((posted % k == 0) || i + 1 == count) {
      fabric::SendWr wr = fabric::write_request(local, remote, t.rkey, inline_data);
      wr.signaled = true;
      wr.wr_id = posted;
      r = qp.post_send(wr);
    } else {
      r = qp.post_write(local, remote, t.rkey, inline_data);
    }
    if (r != fabric::PostResult::Ok) {
      std::fprintf(stderr, "manual-ss: post failed\n");
      std::exit(1);
    }
  }
  while (completed < posted) {
    int n = cq.poll(c);
    for (int j = 0; j < n; ++j) completed = c[j].wr_id;
  }
  return seconds_since(t0);
}

// (b) The Transmitter: buffers from a circular allocator recycled by flush numbers, WRITEs
// through write() (it puts small payloads inline by the same rule as (a)).
double run_transmitter(signal::Transmitter& tx, memory::CircularAllocator& units, const Target& t, size_t size,
                       size_t count) {
  Cursor at = target_cursor(size);
  auto t0 = clk::now();
  for (size_t i = 0; i < count; ++i) {
    memory::Unit* u;
    while ((u = units.next()) == nullptr) tx.progress();
    *reinterpret_cast<uint64_t*>(u->bytes()) = i;
    auto p = tx.write({u->address(), static_cast<uint32_t>(size), u->lkey}, t.addr + at.next(), t.rkey);
    if (!p.ok()) {
      std::fprintf(stderr, "transmitter: post failed\n");
      std::exit(1);
    }
    units.tag(u, tx, p.tag);
  }
  tx.flush();
  return seconds_since(t0);
}

double run_memcpy(uint8_t* dst, const memory::RDMAMemory& src, size_t size, size_t count) {
  Cursor at = target_cursor(size), from = source_cursor(src, size);
  auto t0 = clk::now();
  for (size_t i = 0; i < count; ++i) {
    uint8_t* s = src.bytes() + from.next();
    *reinterpret_cast<uint64_t*>(s) = i;
    std::memcpy(dst + at.next(), s, size);
    asm volatile("" ::: "memory");
  }
  return seconds_since(t0);
}

#ifdef LOOM_HAVE_UCX
struct Ucx {
  UcxWorker w;
  ucp_mem_h memh = nullptr;
  ucp_rkey_h rkey = nullptr;
  void* region = nullptr;
  uint64_t remote_addr = 0;
  bool ok = false;
};

// Collective: both ranks set up; rank 0 gets an endpoint and rkey for rank 1's region.
Ucx ucx_setup(Runtime& rt, size_t bytes, ucs_thread_mode_t mode) {
  Ucx u;
  u.w = ucx_init(UCP_FEATURE_RMA, mode);
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.length = bytes;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucx_check(ucp_mem_map(u.w.ctx, &mp, &u.memh), "mem_map");
  ucp_mem_attr_t ma{};
  ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  ucp_mem_query(u.memh, &ma);
  u.region = ma.address;
  void* rkey_buf;
  size_t rkey_len;
  ucx_check(ucp_rkey_pack(u.w.ctx, u.memh, &rkey_buf, &rkey_len), "rkey_pack");
  std::vector<std::byte> extra(8 + rkey_len);
  uint64_t a = reinterpret_cast<uint64_t>(u.region);
  std::memcpy(extra.data(), &a, 8);
  std::memcpy(extra.data() + 8, rkey_buf, rkey_len);
  ucp_rkey_buffer_release(rkey_buf);
  auto theirs = ucx_connect(rt, u.w, extra);
  if (rt.rank() == 0) {
    std::memcpy(&u.remote_addr, theirs.data(), 8);
    ucx_check(ucp_ep_rkey_unpack(u.w.ep, theirs.data() + 8, &u.rkey), "rkey_unpack");
  }
  u.ok = true;
  return u;
}

double run_ucx(Ucx& u, const memory::RDMAMemory& src, size_t size, size_t count) {
  Cursor at = target_cursor(size), from = source_cursor(src, size);
  ucp_request_param_t rp{};
  auto t0 = clk::now();
  for (size_t i = 0; i < count; ++i) {
    uint8_t* s = src.bytes() + from.next();
    *reinterpret_cast<uint64_t*>(s) = i;
    void* req = ucp_put_nbx(u.w.ep, s, size, u.remote_addr + at.next(), u.rkey, &rp);
    if (req != nullptr) ucx_wait(u.w.worker, req);
  }
  ucx_wait(u.w.worker, ucp_worker_flush_nbx(u.w.worker, &rp));
  return seconds_since(t0);
}

void ucx_teardown(Ucx& u) {
  if (u.rkey) ucp_rkey_destroy(u.rkey);
  UcxWorker w = u.w;
  u.w.ctx = nullptr;  // the mapping goes before the context
  if (w.ep) {
    ucp_request_param_t rp{};
    ucx_wait(w.worker, ucp_ep_close_nbx(w.ep, &rp));
    w.ep = nullptr;
  }
  if (u.memh) ucp_mem_unmap(w.ctx, u.memh);
  ucx_close(w);
}
#endif

struct Args {
  bool quick = false;
  std::string csv;
  size_t only = 0;  // one message size, or 0 for all
};

bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--quick") a.quick = true;
    else if (s == "--csv" && i + 1 < argc) a.csv = argv[++i];
    else if (s == "--size" && i + 1 < argc) a.only = std::strtoull(argv[++i], nullptr, 10);
    else return false;
  }
  return a.only == 0 || (a.only >= 8 && a.only <= kRegion / 2);
}

// Everything the variants need, built collectively by both ranks.
struct Fixture {
  memory::RDMAMemory window;  // where rank 1's WRITEs land
  Target peer;
  std::unique_ptr<Mesh> manual, tx, manual_st, tx_st;  // QPs to rank 1 driven by hand / through the Transmitter
  memory::RDMAMemory src;  // the UCX and memcpy rows' sources: a send queue's worth of the largest messages
#ifdef LOOM_HAVE_UCX
  Ucx ucx, ucx_mt;  // UCX's fastest configuration (one thread per worker) and its thread-safe one
#endif

  explicit Fixture(Runtime& rt) {
    window = rt.allocator().allocate_chunk(kRegion);
    std::memset(window.addr, 0, window.size);  // faulted in before any timing
    Target mine{window.address(), window.rkey, 0};
    auto all = rt.bootstrap().allgather(std::as_bytes(std::span(&mine, 1)));
    std::memcpy(&peer, all[1].data(), sizeof peer);
    fabric::QpCaps caps;
    caps.max_send_wr = kDepth;
    caps.max_inline = 64;
    manual = rt.make_mesh(caps);
    tx = rt.make_mesh(caps);
    fabric::QpCaps st_caps = caps;
    st_caps.single_thread = true;  // thread domains: the counterparts of UCX's single-thread worker
    manual_st = rt.make_mesh(st_caps);
    tx_st = rt.make_mesh(st_caps);
    src = rt.allocator().allocate_chunk(size_t{kDepth} * 65536);
    std::memset(src.addr, 0x5a, src.size);
#ifdef LOOM_HAVE_UCX
    ucx = ucx_setup(rt, kRegion, UCS_THREAD_MODE_SINGLE);
    ucx_mt = ucx_setup(rt, kRegion, UCS_THREAD_MODE_MULTI);
#endif
  }

  void tear_down(Runtime& rt) {
#ifdef LOOM_HAVE_UCX
    ucx_teardown(ucx);
    ucx_teardown(ucx_mt);
#endif
    rt.allocator().free_chunk(src);
    rt.allocator().free_chunk(window);
  }
};

enum V { kManual, kTx, kManualSt, kTxSt, kUcx, kUcxMt, kMemcpy, kMemcpyUcx, kVariants };
const char* const kNames[kVariants] = {"manual-ss", "transmitter", "manual-ss-st", "transmitter-st",
                                       "ucx-put",   "ucx-put-mt",  "memcpy",       "memcpy-ucx"};

struct Ratios {
  double tx = 0, tx_st = 0, st_ucx = 0, mt_ucx = 0, bare_ucx = 0;
};

// The memcpy floors copy into the very memory the WRITEs land in: the peer's window as the shm
// provider maps it here (two windows of one kind can differ in store bandwidth, which a floor
// elsewhere would count as software cost), and UCX's region at rank 1 as UCX maps it.
struct Floors {
  uint8_t* loom = nullptr;
  uint8_t* ucx = nullptr;
};

Floors floors_of(Fixture& fx) {
  Floors f;
  f.loom = fx.manual->qp(1).remote_pointer(fx.peer.addr, fx.peer.rkey, kRegion, fabric::kRemoteWrite);
  if (f.loom == nullptr) f.loom = fx.window.bytes();
#ifdef LOOM_HAVE_UCX
  void* mapped = nullptr;
  if (ucp_rkey_ptr(fx.ucx.rkey, fx.ucx.remote_addr, &mapped) == UCS_OK) f.ucx = static_cast<uint8_t*>(mapped);
#endif
  return f;
}

// One message size: many short rounds, in each every variant once in a balanced order (timings
// drift by up to 2x within seconds on a shared host). A rate is the median over rounds; a ratio
// the median over rounds of the ratio within the round (two runs milliseconds apart).
Ratios measure_size(Runtime& rt, Fixture& fx, const Floors& fl, size_t size, bool quick, std::vector<Row>& rows) {
  const size_t max_msgs = quick ? 65536 : 131072;
  const size_t max_bytes = quick ? (32u << 20) : (64u << 20);
  const int rounds = balanced_cycle(kVariants) * (quick ? 1 : 2);  // whole cycles of the balanced order
  const size_t count = std::min(max_msgs, std::max<size_t>(1024, max_bytes / size));
  memory::CircularAllocator units(rt.allocator(), size, 64, 4096);
  memory::CircularAllocator units_st(rt.allocator(), size, 64, 4096);
  const std::vector<Slot> slots = slots_of(units), slots_st = slots_of(units_st);
  auto run = [&](int v) -> double {
    switch (v) {
      case kManual: return run_manual(fx.manual->qp(1), *fx.manual->send_cqs[1], slots, fx.peer, size, count);
      case kTx: return run_transmitter(fx.tx->tx(1), units, fx.peer, size, count);
      case kManualSt: return run_manual(fx.manual_st->qp(1), *fx.manual_st->send_cqs[1], slots_st, fx.peer, size, count);
      case kTxSt: return run_transmitter(fx.tx_st->tx(1), units_st, fx.peer, size, count);
#ifdef LOOM_HAVE_UCX
      case kUcx: return run_ucx(fx.ucx, fx.src, size, count);
      case kUcxMt: return run_ucx(fx.ucx_mt, fx.src, size, count);
#endif
      case kMemcpy: return run_memcpy(fl.loom, fx.src, size, count);
      case kMemcpyUcx: return fl.ucx != nullptr ? run_memcpy(fl.ucx, fx.src, size, count) : 0.0;
      default: return 0.0;  // not built
    }
  };
  std::vector<double> t[kVariants];
  // Round 0 is a warm-up (page-table entries for the peer's window, caches) and is dropped. The
  // balanced order (balanced_order.hpp) hands caches over between the variants that share
  // memory in every direction equally often; each round runs at another stack offset.
  for (int r = 0; r <= rounds; ++r)
    run_round(kVariants, r, [&](int v) {
      double secs = run(v);
      if (r > 0 && secs > 0) t[v].push_back(secs);
    });
  for (int v = 0; v < kVariants; ++v) {
    if (t[v].empty()) continue;
    double rate = static_cast<double>(count) / median(t[v]);
    rows.push_back({kNames[v], size, "msgs_per_s", rate, "1/s"});
    rows.push_back({kNames[v], size, "MB_per_s", rate * static_cast<double>(size) / 1e6, "MB/s"});
  }
  auto ratio = [&](int a, int b) {  // rate of a over rate of b, round by round
    if (t[a].empty() || t[b].empty()) return 0.0;
    std::vector<double> q;
    for (size_t r = 0; r < t[a].size(); ++r) q.push_back(t[b][r] / t[a][r]);
    return median(q);
  };
  return {ratio(kTx, kManual), ratio(kTxSt, kManualSt), ratio(kTxSt, kUcx), ratio(kTx, kUcxMt), ratio(kManualSt, kUcx)};
}

double rate_of(const std::vector<Row>& rows, const std::string& v, size_t s) {
  for (auto& r : rows)
    if (r.variant == v && r.size == s && r.metric == "msgs_per_s") return r.value;
  return 0.0;
}

// The table, then the targets from each size's worst ratios.
void report(const std::vector<Row>& rows, const std::vector<size_t>& sizes, std::map<size_t, Ratios>& ratios, bool quick,
            double rtt) {
  std::printf("\nbench_fabric: one-sided WRITE, 2 processes, shm provider, send queue depth %u%s\n", kDepth, quick ? " (quick)" : "");
  std::printf("%8s %12s %12s %12s %12s %12s %12s %12s %12s %8s %8s %8s %8s\n", "size", "manual-ss/s", "transmitter/s", "manual-st/s",
              "tx-st/s", "ucx-put/s", "ucx-put-mt/s", "memcpy/s", "memcpy-ucx/s", "tx/man", "txst/mst", "txst/ucx", "tx/ucxmt");
  double worst_tx = 1e9, worst_tx_st = 1e9, worst_small = 1e9, worst_small_mt = 1e9, worst_small_bare = 1e9;
  for (size_t s : sizes) {
    double u = rate_of(rows, "ucx-put", s), v = rate_of(rows, "ucx-put-mt", s);
    const Ratios& q = ratios[s];
    std::printf("%8zu", s);
    for (const char* n : kNames) std::printf(" %12.0f", rate_of(rows, n, s));
    std::printf(" %8.3f %8.3f %8.3f %8.3f\n", q.tx, q.tx_st, q.st_ucx, q.mt_ucx);
    worst_tx = std::min(worst_tx, q.tx);
    worst_tx_st = std::min(worst_tx_st, q.tx_st);
    if (s <= 64 && u > 0) worst_small = std::min(worst_small, q.st_ucx);
    if (s <= 64 && u > 0) worst_small_bare = std::min(worst_small_bare, q.bare_ucx);
    if (s <= 64 && v > 0) worst_small_mt = std::min(worst_small_mt, q.mt_ucx);
  }
  double loads[3] = {0, 0, 0};
  getloadavg(loads, 3);
  std::printf("pingpong (cache line, shared mapping): round trip %.3f us\n", rtt);
  std::printf("load average: %.2f %.2f %.2f\n", loads[0], loads[1], loads[2]);
  std::printf("transmitter vs manual-ss, worst size: %.3f; single-thread QPs: %.3f (target >= 0.85): %s\n", worst_tx, worst_tx_st,
              std::min(worst_tx, worst_tx_st) >= 0.85 ? "met" : "MISSED");
  if (worst_small < 1e9) {
    std::printf("small writes (<= 64 B), worst ratio to UCX in the same thread mode: single-thread %.3f (vs ucx-put), "
                "thread-safe %.3f (vs ucx-put-mt) (target >= 1.0): %s\n",
                worst_small, worst_small_mt, std::min(worst_small, worst_small_mt) >= 1.0 ? "met" : "MISSED");
    std::printf("  the bare single-thread queue pair (manual-ss-st) vs ucx-put, worst size <= 64 B: %.3f\n", worst_small_bare);
  } else {
    std::printf("ucx-put baseline not built (libucx-dev missing)\n");
  }
}

// Under LOOM_WIRE (2 emulated nodes): the emulated READ round trip, 8 B message rate and 4 KiB
// bandwidth through the bare queue pair, each beside what the wire model gives for it unloaded.
const fabric::shm::WireSpec* wire_of(Runtime& rt) {
  auto* shm = dynamic_cast<fabric::shm::ShmProvider*>(&rt.provider());
  return shm != nullptr && shm->across_wire(1 - rt.rank()) ? &shm->wire() : nullptr;
}

double read_rtt_us(fabric::QueuePair& qp, fabric::CompletionQueue& cq, const memory::RDMAMemory& local, const Target& t, int count) {
  std::vector<double> us;
  fabric::Completion c;
  for (int i = 0; i < count; ++i) {
    fabric::SendWr wr;
    wr.opcode = fabric::Opcode::Read;
    wr.signaled = true;
    wr.local = {local.address(), 8, local.lkey};
    wr.remote_addr = t.addr;
    wr.rkey = t.rkey;
    const auto t0 = clk::now();
    if (qp.post_send(wr) != fabric::PostResult::Ok) std::exit(1);
    while (cq.poll(std::span(&c, 1)) == 0) wait::cpu_relax();
    if (c.status != fabric::Status::Success) std::exit(1);
    us.push_back(seconds_since(t0) * 1e6);
  }
  return median(us);
}

void calibrate_wire(Runtime& rt, Fixture& fx, const fabric::shm::WireSpec& w, bool quick, std::vector<Row>& rows) {
  using fabric::shm::LinkClock;
  LinkClock a, b;
  const auto model = fabric::shm::wire_schedule(w, fabric::Opcode::Read, 8, 0, a, b);
  const auto busy8 = static_cast<double>(fabric::shm::wire_busy_ns(w, 8)), busy4k = static_cast<double>(fabric::shm::wire_busy_ns(w, 4096));
  memory::CircularAllocator units8(rt.allocator(), 8, 64, 4096), units4k(rt.allocator(), 4096, 64, 4096);
  auto& qp = fx.manual_st->qp(1);
  auto& cq = *fx.manual_st->send_cqs[1];
  const size_t n8 = quick ? 20000 : 200000, n4k = quick ? 5000 : 50000;
  std::vector<double> rtt, rate, bw;
  for (int round = 0; round < (quick ? 3 : 7); ++round) {
    rtt.push_back(read_rtt_us(qp, cq, fx.src, fx.peer, quick ? 200 : 1000));
    rate.push_back(static_cast<double>(n8) / run_manual(qp, cq, slots_of(units8), fx.peer, 8, n8));
    bw.push_back(static_cast<double>(n4k) * 4096 / 1e6 / run_manual(qp, cq, slots_of(units4k), fx.peer, 4096, n4k));
  }
  const double preset[3] = {static_cast<double>(model.complete) / 1e3, 1e9 / busy8, 4096 / busy4k * 1e3};
  const double measured[3] = {median(rtt), median(rate), median(bw)};
  const char* names[3] = {"wire-read-8", "wire-rate-8", "wire-bw-4096"};
  const size_t sizes[3] = {8, 8, 4096};
  const char* units[3] = {"us", "1/s", "MB/s"};
  double loads[3] = {0, 0, 0};
  getloadavg(loads, 3);
  std::printf("\nbench_fabric: the emulated wire %s (%.2f us one way, %.2f GB/s, %.1f M messages/s a link), 2 emulated nodes%s\n",
              w.name.c_str(), w.latency_ns / 1e3, w.bytes_per_ns, w.message_gap_ns > 0 ? 1e3 / w.message_gap_ns : 0.0,
              quick ? " (quick)" : "");
  std::printf("%-14s %14s %14s %8s\n", "row", "measured", "preset", "ratio");
  for (int i = 0; i < 3; ++i) {
    rows.push_back({names[i], sizes[i], "measured", measured[i], units[i]});
    rows.push_back({names[i], sizes[i], "preset", preset[i], units[i]});
    std::printf("%-14s %14.3f %14.3f %8.3f  %s\n", names[i], measured[i], preset[i], measured[i] / preset[i], units[i]);
  }
  std::printf("load average: %.2f %.2f %.2f\n", loads[0], loads[1], loads[2]);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, a)) {
    std::fprintf(stderr, "usage: loomrun -n 2 bench_fabric [--quick] [--csv FILE] [--size BYTES (8..%zu)]\n", kRegion / 2);
    return 2;
  }
  Runtime rt(argc, argv);
  if (rt.size() != 2) {
    if (rt.rank() == 0) std::fprintf(stderr, "bench_fabric runs on exactly 2 processes (loomrun -n 2)\n");
    return 2;
  }
  Fixture fx(rt);
  if (const fabric::shm::WireSpec* w = wire_of(rt)) {
    std::vector<Row> rows;
    if (rt.rank() == 0) {
      calibrate_wire(rt, fx, *w, a.quick, rows);
      if (!a.csv.empty()) write_csv(a.csv, rows);
    }
    rt.barrier();
    fx.tear_down(rt);
    return 0;
  }
  std::vector<size_t> sizes;
  for (size_t s = 8; s <= 65536; s *= a.quick ? 8 : 2) sizes.push_back(s);
  if (sizes.back() != 65536) sizes.push_back(65536);
  if (a.only != 0) sizes = {a.only};
  std::vector<Row> rows;
  std::map<size_t, Ratios> ratios;
  if (rt.rank() == 0) {
    const Floors fl = floors_of(fx);
    for (size_t size : sizes) ratios[size] = measure_size(rt, fx, fl, size, a.quick, rows);
  }
  rt.barrier();
  double rtt = pingpong_rtt_us(rt, a.quick ? 20000 : 100000);
  if (rt.rank() == 0) {
    rows.push_back({"pingpong", 64, "rtt_us", rtt, "us"});
    report(rows, sizes, ratios, a.quick, rtt);
    if (!a.csv.empty()) write_csv(a.csv, rows);
  }
  rt.barrier();
  fx.tear_down(rt);
  return 0;
}
