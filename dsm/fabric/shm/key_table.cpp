// Registrations: each process's key table (a shared segment of seqlocked entries), keys
// handed out and withdrawn, and the views queue pairs take of them, checked in full because a
// peer's table is memory that peer can write.
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/shm/shm_qp.hpp"

namespace loom::fabric::shm {

MemoryRegion ShmProvider::register_memory(void* addr, size_t len, uint32_t access) {
  std::lock_guard<std::mutex> g(mu_);
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  auto it = chunks_.upper_bound(a);
  if (it == chunks_.begin()) fail("shm: register_memory(", addr, ", ", len, "): not inside a chunk from map_chunk");
  --it;
  if (!covers(it->first, it->second.size, a, len))
    fail("shm: register_memory(", addr, ", ", len, "): range is not inside one mapped chunk");
  if (free_key_indices_.empty()) fail("shm: too many memory registrations (limit ", kKeyCapacity - 1, ")");
  uint32_t idx = free_key_indices_.back();
  free_key_indices_.pop_back();
  uint16_t gen = static_cast<uint16_t>(key_generation_[idx] + 1);
  if (gen == 0) gen = 1;
  key_generation_[idx] = gen;
  KeyEntry& e = keys_.as<KeyTable>()->entries[idx];
  e.access.store(access, std::memory_order_relaxed);
  e.segment.store(it->second.segment, std::memory_order_relaxed);
  e.seg_offset.store(a - it->first, std::memory_order_relaxed);
  e.base.store(a, std::memory_order_relaxed);
  e.length.store(len, std::memory_order_relaxed);
  // Publishes the fields above: pairs with the generation's acquire in a reader's seqlock
  // (KeyCache lookup below, any process) and in ShmQp::stands.
  e.generation.store(gen, std::memory_order_release);
  MemoryRegion mr;
  mr.addr = addr;
  mr.size = len;
  mr.lkey = mr.rkey = make_key(idx, gen);
  mr.access = access;
  return mr;
}

void ShmProvider::deregister(const MemoryRegion& mr) {
  std::lock_guard<std::mutex> g(mu_);
  uint32_t idx = key_index(mr.lkey);
  if (idx == 0 || idx >= kKeyCapacity) fail("shm: deregister of an invalid key ", mr.lkey);
  KeyEntry& e = keys_.as<KeyTable>()->entries[idx];
  if (e.generation.load() != key_generation(mr.lkey)) fail("shm: deregister of key ", mr.lkey, " that is not registered");
  e.generation.store(0, std::memory_order_release);  // retires the key: pairs with the readers' acquire, as above
  free_key_indices_.push_back(idx);
}

const KeyTable* ShmProvider::key_table(int rank) {
  if (rank < 0 || rank >= ctx_.size) return nullptr;
  if (rank == ctx_.rank) return keys_.as<KeyTable>();
  Peer& p = peers_[static_cast<size_t>(rank)];
  std::lock_guard<std::mutex> g(mu_);
  if (p.keys.addr() == nullptr) {
    try {
      Mapping m = Mapping::open(path("keys", rank, 0));
      if (m.size() < sizeof(KeyTable) || m.as<KeyTable>()->magic != kKeyMagic) return nullptr;
      p.keys = std::move(m);
    } catch (const Error&) {
      return nullptr;
    }
  }
  return p.keys.as<KeyTable>();
}

ShmProvider::SegmentView ShmProvider::segment_slow(int rank, uint64_t segment) {
  if (rank < 0 || rank >= ctx_.size) return {};
  Peer& p = peers_[static_cast<size_t>(rank)];
  // First use: map the segment file. Mappings stay until the provider closes, so a pointer
  // published here never dangles, even for our own segments after unmap_chunk.
  std::lock_guard<std::mutex> g(mu_);
  auto it = p.segments.find(segment);
  if (it != p.segments.end()) return SegmentView{static_cast<uint8_t*>(it->second.addr()), it->second.size()};
  Mapping m;
  try {
    m = Mapping::open(path("seg", rank, segment));
  } catch (const Error&) {
    if (huge_dir_.empty()) return {};
    try {
      m = Mapping::open(huge_path(rank, segment));
    } catch (const Error&) {
      return {};
    }
  }
  SegmentView v{static_cast<uint8_t*>(m.addr()), m.size()};
  p.segments.emplace(segment, std::move(m));
  if (segment < kFastSegments) {
    p.fast_size[segment].store(v.size, std::memory_order_relaxed);
    p.fast[segment].store(v.base, std::memory_order_release);
  }
  return v;
}

bool ShmQp::view_key(const KeyTable* t, int rank, uint32_t key, KeyView& v) {
  v.key = 0;
  uint32_t idx = key_index(key);
  if (t == nullptr || idx == 0 || idx >= kKeyCapacity) return false;
  const KeyEntry& e = t->entries[idx];
  // A seqlock read: generation, fields, generation again. Acquire loads keep the second read
  // of the generation after the fields (free on x86, where every load is an acquire); the first
  // pairs with register_memory's release of the generation after the fields.
  uint32_t gen = e.generation.load(std::memory_order_acquire);
  uint64_t base = e.base.load(std::memory_order_acquire);
  uint64_t length = e.length.load(std::memory_order_acquire);
  uint64_t seg = e.segment.load(std::memory_order_acquire);
  uint64_t segoff = e.seg_offset.load(std::memory_order_acquire);
  uint32_t access = e.access.load(std::memory_order_acquire);
  // Re-read the generation: a registration replaced while we read it is rejected, not mixed.
  if (gen == 0 || gen != key_generation(key) || e.generation.load(std::memory_order_relaxed) != gen) return false;
  if (base + length < base) return false;
  uint8_t* mapped = nullptr;
  if (rank >= 0) {
    ShmProvider::SegmentView sv = p_.segment(rank, seg);
    // The offset and length came from the peer's key table: the whole registration must lie
    // inside what we mapped, so that every range inside it is too (segments are never unmapped).
    if (sv.base == nullptr || segoff > sv.size || length > sv.size - segoff) return false;
    mapped = sv.base + segoff;
  }
  v.entry = &e;
  v.base = base;
  v.length = length;
  v.access = access;
  v.mapped = mapped;
  v.key = key;
  return true;
}

}  // namespace loom::fabric::shm
