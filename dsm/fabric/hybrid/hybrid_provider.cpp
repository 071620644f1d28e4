// The shm+verbs provider: per-peer transports, memory registered with both, key aliases.
#include "loom/dsm/fabric/hybrid/hybrid_provider.hpp"

#include <algorithm>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/fabric/hybrid/same_host_qp.hpp"

namespace loom::fabric::hybrid {

HybridProvider::HybridProvider(const ProviderContext& ctx) : ctx_(ctx) {
  // The shm provider serves this host's ranks only: its context says they are all here.
  ProviderContext local = ctx;
  local.host_of.clear();
  shm_ = std::make_unique<shm::ShmProvider>(local);
  device_ = std::make_unique<verbs::VerbsProvider>(ctx);
  device_atomics_ = !device_->info().cpu_atomics;
  relay_ = std::make_unique<EventRelay>();
  own_aliases_ = shm::Mapping::create(shm_->path("alias", ctx.rank, 0), sizeof(AliasFile));
  auto* f = own_aliases_.as<AliasFile>();
  f->slots = kAliasSlots;
  f->magic = kAliasMagic;
  const auto& s = shm_->info();
  const auto& d = device_->info();
  info_.name = "shm+verbs";
  info_.huge_pages = s.huge_pages;
  info_.max_qp_depth = std::min(s.max_qp_depth, d.max_qp_depth);
  info_.max_inline = std::min(s.max_inline, d.max_inline);
  info_.max_message = std::min(s.max_message, d.max_message);
  info_.cpu_atomics = d.cpu_atomics;
  info_.description = "shared memory to this host's ranks, " + d.description + " to other hosts'" +
                      (device_atomics_ ? "; atomics through the device to every rank" : "");
}

HybridProvider::~HybridProvider() { ::unlink(shm_->path("alias", ctx_.rank, 0).c_str()); }

std::string HybridProvider::transport(int rank) const { return same_host(rank) ? "shm" : "verbs"; }

Chunk HybridProvider::map_chunk(size_t size, int numa_node) {
  Chunk c = shm_->map_chunk(size, numa_node);
  device_->adopt_chunk(c);
  return c;
}

void HybridProvider::unmap_chunk(const Chunk& c) {
  {
    std::lock_guard<std::mutex> g(mu_);
    auto* base = static_cast<uint8_t*>(c.addr);
    for (auto it = shm_mr_.begin(); it != shm_mr_.end();) {
      auto* a = static_cast<uint8_t*>(it->second.addr);
      if (a >= base && a < base + c.size) {
        alias_erase(own_aliases_.as<AliasFile>(), it->first);
        it = shm_mr_.erase(it);
      } else {
        ++it;
      }
    }
  }
  device_->unmap_chunk(c);  // deregisters what the device had in it; the memory stays mapped
  shm_->unmap_chunk(c);      // revokes the shm keys in it
}

MemoryRegion HybridProvider::register_memory(void* addr, size_t len, uint32_t access) {
  MemoryRegion d = device_->register_memory(addr, len, access);
  MemoryRegion s;
  try {
    s = shm_->register_memory(addr, len, access);
  } catch (...) {
    device_->deregister(d);
    throw;
  }
  std::lock_guard<std::mutex> g(mu_);
  auto* f = own_aliases_.as<AliasFile>();
  bool placed = alias_insert(f, d.lkey, s.lkey);
  if (placed && d.rkey != 0 && d.rkey != d.lkey) placed = alias_insert(f, d.rkey, s.rkey);
  if (!placed) {
    alias_erase(f, d.lkey);
    shm_->deregister(s);
    device_->deregister(d);
    fail("shm+verbs: too many memory registrations to publish their keys (", kAliasSlots, " slots)");
  }
  shm_mr_[d.lkey] = s;
  return d;
}

void HybridProvider::deregister(const MemoryRegion& mr) {
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = shm_mr_.find(mr.lkey);
    if (it == shm_mr_.end()) fail("shm+verbs: deregister of key ", mr.lkey, " that is not registered");
    drop_aliases(mr);
    shm_->deregister(it->second);
    shm_mr_.erase(it);
  }
  device_->deregister(mr);
}

void HybridProvider::drop_aliases(const MemoryRegion& device_mr) {
  auto* f = own_aliases_.as<AliasFile>();
  alias_erase(f, device_mr.lkey);
  if (device_mr.rkey != 0 && device_mr.rkey != device_mr.lkey) alias_erase(f, device_mr.rkey);
}

std::unique_ptr<CompletionQueue> HybridProvider::create_cq(uint32_t depth) {
  return std::make_unique<HybridCq>(shm_->create_cq(depth), device_->create_cq(depth), *relay_, depth);
}

std::unique_ptr<QueuePair> HybridProvider::create_qp(int peer, CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                                     const QpCaps& caps) {
  if (peer < 0 || peer >= ctx_.size) fail("shm+verbs: create_qp to rank ", peer, ", but the job has ", ctx_.size, " ranks");
  auto* s = dynamic_cast<HybridCq*>(&send_cq);
  auto* r = dynamic_cast<HybridCq*>(&recv_cq);
  if (s == nullptr || r == nullptr) fail("shm+verbs: completion queues belong to another provider");
  if (!same_host(peer)) return device_->create_qp(peer, s->device(), r->device(), caps);
  std::unique_ptr<AtomicLane> lane;
  if (device_atomics_) {
    QpCaps lc;
    lc.max_send_wr = 1;
    lc.max_recv_wr = 1;
    lc.max_inline = 0;
    auto cq = device_->create_cq(2);
    auto qp = device_->create_qp(peer, *cq, *cq, lc);
    lane = std::make_unique<AtomicLane>(std::move(cq), std::move(qp));
  }
  return std::make_unique<SameHostQp>(shm_->create_qp(peer, s->shm(), r->shm(), caps), std::move(lane),
                                      own_aliases_.as<AliasFile>(), [this](int rank) { return aliases_of(rank); });
}

const AliasFile* HybridProvider::aliases_of(int rank) {
  if (rank == ctx_.rank) return own_aliases_.as<AliasFile>();
  std::lock_guard<std::mutex> g(mu_);
  auto it = peer_aliases_.find(rank);
  if (it == peer_aliases_.end()) {
    shm::Mapping m;
    try {
      m = shm::Mapping::open(shm_->path("alias", rank, 0));
    } catch (const Error&) {
      return nullptr;
    }
    // The file is the peer's: its size and magic are checked before it is used.
    if (m.size() < sizeof(AliasFile) || m.as<AliasFile>()->magic != kAliasMagic) return nullptr;
    it = peer_aliases_.emplace(rank, std::move(m)).first;
  }
  return it->second.as<AliasFile>();
}

bool HybridProvider::peer_alive(int rank) const {
  return same_host(rank) ? shm_->peer_alive(rank) : device_->peer_alive(rank);
}

}  // namespace loom::fabric::hybrid
