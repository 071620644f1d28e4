// The process's pipes: ids for rfree(RAddr), pair numbers for matching ends, and the service
// handlers through which a peer asks for a segment of our heap or (immediate synchronization)
// an allocation in it. A handler does its work holding the table's lock, so a pipe leaves the
// table only when no handler is using it.
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "loom/dsm/common/error.hpp"
#include "loom/rpipe/impl.hpp"
#include "loom/rpipe/service_calls.hpp"

namespace loom::rpipe {

namespace {

struct Table {
  std::mutex life;  // adding and removing pipes (handler registration) one at a time
  std::mutex mu;    // the maps; held by handlers while they work
  Runtime* rt = nullptr;
  size_t users = 0;
  uint32_t handler_ids[3] = {};
  uint32_t next_id = 1;
  std::map<std::pair<int, uint64_t>, Pipe::Impl*> by_pair;
  std::unordered_map<uint32_t, Pipe::Impl*> by_id;
};
Table& table() {
  static Table t;
  return t;
}

constexpr uint64_t kPairFamily = 0x72706970;  // the mailbox's sequence of pipes between two ranks

struct SegmentRequest {
  uint64_t pair;
};
struct AllocateRequest {
  uint64_t pair;
  uint64_t extent;
  uint32_t known;  // segments the writer knows
  uint32_t pad;
};
struct FreeRequest {
  uint64_t pair;
  uint64_t pos;
  uint64_t extent;
};
struct AllocateWire {
  uint32_t status;
  uint32_t segments;  // segments there are; those after `known` follow as (addr, rkey)
  uint64_t pos;
  uint64_t in_use;
};
struct SegmentWire {
  uint64_t addr;
  uint32_t rkey;
  uint32_t index;
};

template <typename T>
T decode(std::span<const std::byte> b, const char* what, int src) {
  if (b.size() != sizeof(T)) fail("rpipe: a malformed ", what, " of ", b.size(), " bytes from rank ", src);
  T v;
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}
template <typename T>
std::span<const std::byte> bytes_of(const T& v) {
  return std::as_bytes(std::span(&v, 1));
}

// Runs fn on the pipe `pair` with rank src, under the table's lock.
template <typename Fn>
std::vector<std::byte> with_pipe(int src, uint64_t pair, Fn fn) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  auto it = t.by_pair.find({src, pair});
  if (it == t.by_pair.end()) fail("rpipe: rank ", src, " names pipe ", pair, ", which this rank does not have open with it");
  return fn(*it->second);
}

SegmentWire segment_wire(Pipe::Impl& p, uint32_t i) {
  const memory::RDMAMemory& m = p.in.segments[i];
  return SegmentWire{m.address(), m.rkey, i};
}

std::vector<std::byte> serve_allocate(Pipe::Impl& p, const AllocateRequest& r) {
  std::lock_guard<std::mutex> g(p.in.mu);
  if (!p.in.owned) fail("rpipe: rank ", p.peer, " asked for an immediate allocation in a pipe with deferred synchronization");
  if (r.extent == 0 || r.extent % codec::kUnit != 0 || r.extent > p.o.segment_bytes) fail("rpipe: an allocation of ", r.extent, " bytes");
  FreeRanges& h = *p.in.owned;
  std::optional<uint64_t> pos = h.take(r.extent);
  if (!pos && h.segments() < p.o.max_segments) {
    h.add_segment(p.grow_local());
    pos = h.take(r.extent);
  }
  const uint32_t n = h.segments();
  AllocateWire w{pos ? service::kGranted : service::kFull, n, pos.value_or(0), h.total_bytes() - h.free_bytes()};
  std::vector<std::byte> out(sizeof w);
  std::memcpy(out.data(), &w, sizeof w);
  for (uint32_t i = std::min(r.known, n); i < n; ++i) {
    const SegmentWire s = segment_wire(p, i);
    auto b = bytes_of(s);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

}  // namespace

uint32_t Pipe::Impl::grow_local() {
  // Called with in.mu held (a handler); the reading thread sees the segment after `count`.
  const uint32_t n = in.count.load(std::memory_order_relaxed);
  if (n >= o.max_segments) fail("rpipe: the heap has all its ", o.max_segments, " segments (Options::max_segments)");
  in.segments[n] = rt.heap(o.zone).allocate(o.segment_bytes);
  // Touched once now: a message should not pay for the first touch of its pages.
  std::memset(in.segments[n].addr, 0, o.segment_bytes);
  in.count.store(n + 1, std::memory_order_release);
  return n;
}

namespace service {

void register_handlers(Runtime& rt, uint32_t ids[3]) {
  ids[0] = rt.service().register_handler("loom.rpipe.segment", [](const runtime::ServiceRequest& req) {
    const auto r = decode<SegmentRequest>(req.payload, "segment request", req.src_rank);
    return with_pipe(req.src_rank, r.pair, [](Pipe::Impl& p) {
      std::lock_guard<std::mutex> g(p.in.mu);
      if (!p.reads) fail("rpipe: rank ", p.peer, " asked for a segment of a heap this end does not read into");
      const SegmentWire s = segment_wire(p, p.grow_local());
      auto b = bytes_of(s);
      return std::vector<std::byte>(b.begin(), b.end());
    });
  });
  ids[1] = rt.service().register_handler("loom.rpipe.allocate", [](const runtime::ServiceRequest& req) {
    const auto r = decode<AllocateRequest>(req.payload, "allocation request", req.src_rank);
    return with_pipe(req.src_rank, r.pair, [&](Pipe::Impl& p) { return serve_allocate(p, r); });
  });
  ids[2] = rt.service().register_handler("loom.rpipe.free", [](const runtime::ServiceRequest& req) {
    const auto r = decode<FreeRequest>(req.payload, "free request", req.src_rank);
    return with_pipe(req.src_rank, r.pair, [&](Pipe::Impl& p) {
      std::lock_guard<std::mutex> g(p.in.mu);
      if (!p.in.owned) fail("rpipe: rank ", p.peer, " sent an immediate free in a pipe with deferred synchronization");
      p.in.owned->give(r.pos, r.extent);
      return std::vector<std::byte>{};
    });
  });
}

void unregister_handlers(Runtime& rt, const uint32_t ids[3]) {
  for (int i = 0; i < 3; ++i) rt.service().unregister_handler(ids[i]);
}

SegmentReply new_segment(Pipe::Impl& p) {
  ++p.out.stats.service_calls;
  const auto reply = p.rt.service().call_sync(p.peer, runtime::Service::id_of("loom.rpipe.segment"), bytes_of(SegmentRequest{p.pair}));
  const auto s = decode<SegmentWire>(reply, "segment reply", p.peer);
  return SegmentReply{s.index, s.rkey, s.addr};
}

AllocateReply allocate(Pipe::Impl& p, uint64_t extent) {
  ++p.out.stats.service_calls;
  const AllocateRequest req{p.pair, extent, static_cast<uint32_t>(p.out.segments.size()), 0};
  const auto reply = p.rt.service().call_sync(p.peer, runtime::Service::id_of("loom.rpipe.allocate"), bytes_of(req));
  if (reply.size() < sizeof(AllocateWire) || (reply.size() - sizeof(AllocateWire)) % sizeof(SegmentWire) != 0)
    fail("rpipe: a malformed allocation reply of ", reply.size(), " bytes from rank ", p.peer);
  AllocateWire w;
  std::memcpy(&w, reply.data(), sizeof w);
  const size_t extra = (reply.size() - sizeof w) / sizeof(SegmentWire);
  if (w.segments > p.o.max_segments || w.segments != p.out.segments.size() + extra)
    fail("rpipe: rank ", p.peer, " answered ", w.segments, " segments with ", extra, " new to this end's ", p.out.segments.size());
  for (size_t i = 0; i < extra; ++i) {
    SegmentWire s;
    std::memcpy(&s, reply.data() + sizeof w + i * sizeof s, sizeof s);
    p.add_out_segment(s.index, s.addr, s.rkey);
  }
  if (w.status == kGranted) {
    const uint64_t S = p.o.segment_bytes;
    if (w.pos / S >= w.segments || w.pos % codec::kUnit != 0 || w.pos % S + extent > S)
      fail("rpipe: rank ", p.peer, " granted position ", w.pos, " outside its heap");
  } else if (w.status != kFull) {
    fail("rpipe: rank ", p.peer, " answered an allocation with status ", w.status);
  }
  return AllocateReply{w.status, w.pos, w.in_use};
}

void free(Pipe::Impl& p, uint64_t pos, uint64_t extent) {
  ++p.out.stats.service_calls;
  p.rt.service().call_sync(p.peer, runtime::Service::id_of("loom.rpipe.free"), bytes_of(FreeRequest{p.pair, pos, extent}));
}

}  // namespace service

namespace directory {

void add(Pipe::Impl* p) {
  Table& t = table();
  std::lock_guard<std::mutex> life(t.life);
  if (t.users == 0) {
    t.rt = &p->rt;
    service::register_handlers(p->rt, t.handler_ids);
  } else if (t.rt != &p->rt) {
    fail("rpipe: a pipe on another Runtime than the open pipes'");
  }
  ++t.users;
  std::lock_guard<std::mutex> g(t.mu);
  p->id = t.next_id++;
  p->pair = p->rt.mailbox().sequence(p->peer, kPairFamily);
  t.by_pair[{p->peer, p->pair}] = p;
  t.by_id[p->id] = p;
}

void remove(Pipe::Impl* p) {
  Table& t = table();
  std::lock_guard<std::mutex> life(t.life);
  bool last = false;
  {
    std::lock_guard<std::mutex> g(t.mu);
    if (t.by_id.erase(p->id) == 0) return;
    t.by_pair.erase({p->peer, p->pair});
    last = --t.users == 0;
  }
  if (last) {
    service::unregister_handlers(*t.rt, t.handler_ids);
    t.rt = nullptr;
  }
}

Pipe::Impl* by_id(uint32_t id) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  auto it = t.by_id.find(id);
  return it == t.by_id.end() ? nullptr : it->second;
}

}  // namespace directory

}  // namespace loom::rpipe
