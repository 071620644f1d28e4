#include "loom/dsm/runtime/remote_memory.hpp"

#include <cstring>

#include "loom/dsm/common/error.hpp"

namespace loom {

namespace {
constexpr uint64_t kMaxRemoteAllocation = 1ull << 34;  // 16 GiB: larger requests are refused

struct AllocRequest {
  int32_t zone;    // -1: the process's own, unless a thread is named
  int32_t thread;  // -1: none; else the zone is that thread's
  uint64_t size;
};
struct AllocReply {
  int32_t zone;
  uint32_t rkey;
  uint64_t addr;
  uint64_t size;
};
struct FreeRequest {
  uint64_t addr;
};
struct KeyRequest {
  uint64_t addr;
  uint64_t len;
};

// This process's registration holding [addr, addr+len), any zone.
RemoteMemoryLocator local_registration(Runtime& rt, uint64_t addr, uint64_t len) {
  if (len == 0) fail("registered memory lookup of 0 bytes at 0x", std::hex, addr);
  for (int z = 0; z < rt.numa_zones(); ++z) {
    auto mr = rt.allocator(z).registration_of(reinterpret_cast<const void*>(addr), len);
    if (mr) return RemoteMemoryLocator{rt.rank(), z, reinterpret_cast<uint64_t>(mr->addr), mr->size, mr->rkey};
  }
  fail("rank ", rt.rank(), ": [0x", std::hex, addr, ", +0x", len, ") is not in registered memory");
}

template <typename T>
T decode(std::span<const std::byte> bytes, const char* what) {
  if (bytes.size() != sizeof(T)) fail(what, ": malformed message of ", bytes.size(), " bytes (expected ", sizeof(T), ")");
  T v;
  std::memcpy(&v, bytes.data(), sizeof v);
  return v;
}
template <typename T>
std::vector<std::byte> encode(const T& v) {
  std::vector<std::byte> out(sizeof v);
  std::memcpy(out.data(), &v, sizeof v);
  return out;
}
}  // namespace

namespace runtime {
void register_remote_memory_handlers(Runtime& rt) {
  Runtime* r = &rt;
  rt.service().register_handler("loom.memory.allocate", [r](const ServiceRequest& req) {
    auto a = decode<AllocRequest>(req.payload, "remote allocate");
    if (a.zone < -1 || a.zone >= r->numa_zones()) fail("no NUMA zone ", a.zone, " here (zones 0..", r->numa_zones() - 1, ")");
    if (a.size == 0 || a.size > kMaxRemoteAllocation) fail("allocation of ", a.size, " bytes is outside 1..", kMaxRemoteAllocation);
    if (a.thread != -1 && a.zone != -1) fail("remote allocate: a zone (", a.zone, ") and a thread (", a.thread, ") named together");
    if (a.thread < -1 || a.thread >= r->threads_started())
      fail("remote allocate: rank ", r->rank(), " has no thread ", a.thread, " (threads 0..", r->threads_started() - 1, ")");
    memory::RegisteredHeap& h = r->heap(a.thread >= 0 ? r->thread_zone(a.thread) : a.zone);
    memory::RDMAMemory m = h.allocate(a.size);
    return encode(AllocReply{h.zone(), m.rkey, m.address(), m.size});
  });
  rt.service().register_handler("loom.memory.free", [r](const ServiceRequest& req) {
    auto f = decode<FreeRequest>(req.payload, "remote free");
    for (int z = 0; z < r->numa_zones(); ++z) {
      if (r->heap(z).find(reinterpret_cast<const void*>(f.addr))) {
        r->heap(z).free(reinterpret_cast<const void*>(f.addr));
        return std::vector<std::byte>{};
      }
    }
    fail("remote free of 0x", std::hex, f.addr, ": not a live remote allocation (double free?)");
  });
  rt.service().register_handler("loom.memory.registration", [r](const ServiceRequest& req) {
    auto k = decode<KeyRequest>(req.payload, "registration lookup");
    const RemoteMemoryLocator loc = local_registration(*r, k.addr, k.len);
    return encode(AllocReply{loc.zone, loc.rkey, loc.addr, loc.size});
  });
}
}  // namespace runtime

namespace {
RemoteMemoryLocator allocate_at(Runtime& rt, int rank, const AllocRequest& req) {
  auto reply = rt.service().call_sync(rank, runtime::Service::id_of("loom.memory.allocate"), encode(req));
  auto a = decode<AllocReply>(reply, "remote allocate reply");
  if (a.size < req.size) fail("remote_allocate: rank ", rank, " returned ", a.size, " bytes for a request of ", req.size);
  return RemoteMemoryLocator{rank, a.zone, a.addr, a.size, a.rkey};
}
}  // namespace

RemoteMemoryLocator remote_allocate(Runtime& rt, int rank, uint64_t size, int zone) {
  if (rank < 0 || rank >= rt.size()) fail("remote_allocate: rank ", rank, " is not in 0..", rt.size() - 1);
  if (size == 0) fail("remote_allocate: size 0");
  return allocate_at(rt, rank, AllocRequest{zone, -1, size});
}

RemoteMemoryLocator remote_allocate_near(Runtime& rt, int rank, int thread, uint64_t size) {
  if (rank < 0 || rank >= rt.size()) fail("remote_allocate_near: rank ", rank, " is not in 0..", rt.size() - 1);
  if (thread < 0) fail("remote_allocate_near: thread ", thread, " is negative");
  if (size == 0) fail("remote_allocate_near: size 0");
  return allocate_at(rt, rank, AllocRequest{-1, thread, size});
}

RemoteMemoryLocator registration_at(Runtime& rt, int rank, uint64_t addr, uint64_t len) {
  if (rank < 0 || rank >= rt.size()) fail("registered memory lookup: rank ", rank, " is not in 0..", rt.size() - 1);
  if (rank == rt.rank()) return local_registration(rt, addr, len);
  auto reply = rt.service().call_sync(rank, runtime::Service::id_of("loom.memory.registration"), encode(KeyRequest{addr, len}));
  auto a = decode<AllocReply>(reply, "registration lookup reply");
  const RemoteMemoryLocator loc{rank, a.zone, a.addr, a.size, a.rkey};
  // Nothing from the wire is trusted: the range must hold what was asked.
  if (!loc.holds(addr, len)) fail("registered memory lookup: rank ", rank, " answered a range that does not hold 0x", std::hex, addr);
  return loc;
}

void remote_free(Runtime& rt, const RemoteMemoryLocator& loc) {
  if (!loc.valid() || loc.rank >= rt.size()) fail("remote_free: invalid locator (rank ", loc.rank, ")");
  rt.service().call_sync(loc.rank, runtime::Service::id_of("loom.memory.free"), encode(FreeRequest{loc.addr}));
}

}  // namespace loom
