// The shm provider: segments of registered memory, peers' segments mapped on first use,
// completion queues and queue pairs created, and whether a peer is alive.
#include "loom/dsm/fabric/shm/shm_provider.hpp"

#include <fcntl.h>
#include <numa.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/common/system.hpp"
#include "loom/dsm/fabric/shm/shm_qp.hpp"
#include "loom/dsm/fabric/shm/wire_engine.hpp"

namespace loom::fabric::shm {

ShmProvider::ShmProvider(const ProviderContext& ctx) : ctx_(ctx), qps_(new std::atomic<ShmQp*>[kMaxQps]) {
  if (ctx.job_dir.empty()) fail("shm provider: no job directory (start the program with loomrun)");
  for (int r = 0; r < ctx.size; ++r)
    if (!ctx.same_host(r, ctx.rank))
      fail("shm provider: rank ", r, " runs on ", ctx.hosts[static_cast<size_t>(r)], ", another host than this rank's (",
           ctx.hosts[static_cast<size_t>(ctx.rank)], "); shared memory reaches this host's ranks only: use LOOM_PROVIDER=auto (shm "
           "within a host, verbs between hosts) or verbs");
  for (uint32_t i = 0; i < kMaxQps; ++i) qps_[i].store(nullptr);
  keys_ = Mapping::create(path("keys", ctx.rank, 0), sizeof(KeyTable));
  KeyTable* t = keys_.as<KeyTable>();
  t->pid = static_cast<int32_t>(getpid());
  t->capacity = kKeyCapacity;
  t->alive.store(1);
  t->magic = kKeyMagic;
  key_generation_.assign(kKeyCapacity, 0);
  for (uint32_t i = kKeyCapacity - 1; i >= 1; --i) free_key_indices_.push_back(i);
  peers_.resize(static_cast<size_t>(ctx.size));
  for (auto& peer : peers_) {
    peer.fast.reset(new std::atomic<uint8_t*>[kFastSegments]);
    peer.fast_size.reset(new std::atomic<uint64_t>[kFastSegments]);
    for (size_t i = 0; i < kFastSegments; ++i) {
      peer.fast[i].store(nullptr, std::memory_order_relaxed);
      peer.fast_size[i].store(0, std::memory_order_relaxed);
    }
  }
  dead_.reset(new std::atomic<int>[static_cast<size_t>(ctx.size)]);
  for (int i = 0; i < ctx.size; ++i) dead_[static_cast<size_t>(i)].store(0);
  rnr_timeout_ns_ = static_cast<uint64_t>(settings::get_int(settings::dsm::kShmRnrTimeout)) * 1000000ull;
  set_up_wire();

  std::string mount = find_hugetlbfs();
  if (!mount.empty() && settings::get_bool(settings::dsm::kHugePages)) {
    huge_dir_ = mount + "/loom-" + ctx.job_id;
    std::string why;
    if (mkdir(huge_dir_.c_str(), 0700) != 0 && errno != EEXIST) {
      huge_dir_.clear();
    } else if (!sys::is_private_dir(huge_dir_, &why)) {
      // Made by someone else before us (a world-writable mount): not used, and not removed.
      log::warn("shm: not using huge pages: ", huge_dir_, " is ", why);
      huge_dir_.clear();
    }
  }
  info_.name = "shm";
  info_.huge_pages = !huge_dir_.empty();
  info_.max_qp_depth = 1u << 16;
  info_.max_inline = kMaxInline;
  info_.max_message = 1u << 30;
  info_.cpu_atomics = true;  // a fabric atomic is the CPU's own on the mapped word
  info_.description = "shared memory between processes on one host (" + ctx.job_dir + ")";
}

ShmProvider::~ShmProvider() {
  engine_.reset();  // its lanes are gone with the QPs
  if (!wire_.name.empty() && ctx_.rank == 0) ::unlink(path("wire", 0, 0).c_str());
  keys_.as<KeyTable>()->alive.store(0, std::memory_order_release);
  for (auto& [base, c] : chunks_) ::unlink(c.file.c_str());
  chunks_.clear();
  ::unlink(path("keys", ctx_.rank, 0).c_str());
  if (!huge_dir_.empty()) ::rmdir(huge_dir_.c_str());
}

std::string ShmProvider::path(const std::string& kind, int rank, uint64_t id) const {
  const std::string& dir = ctx_.job_dirs.empty() ? ctx_.job_dir : ctx_.job_dirs[static_cast<size_t>(rank)];
  return dir + "/" + kind + "." + std::to_string(rank) + "." + std::to_string(id);
}

std::string ShmProvider::huge_path(int rank, uint64_t segment) const {
  if (rank == ctx_.rank || ctx_.job_ids.empty()) return huge_dir_ + "/seg." + std::to_string(rank) + "." + std::to_string(segment);
  const auto slash = huge_dir_.rfind('/');
  return huge_dir_.substr(0, slash) + "/loom-" + ctx_.job_ids[static_cast<size_t>(rank)] + "/seg." + std::to_string(rank) + "." +
         std::to_string(segment);
}

Chunk ShmProvider::map_chunk(size_t size, int numa_node) {
  if (size == 0) fail("shm: cannot map a chunk of 0 bytes");
  std::lock_guard<std::mutex> g(mu_);
  uint64_t seg = next_segment_++;
  Chunk c;
  c.size = size;
  c.numa_node = numa_node;
  c.provider_handle = seg;
  std::string file;
  Mapping m;
  constexpr size_t kHuge = 2u << 20;
  if (!huge_dir_.empty() && size % kHuge == 0) {
    file = huge_path(ctx_.rank, seg);
    try {
      m = Mapping::create(file, size, Mapping::Reserve::None);
      c.huge_pages = true;
    } catch (const Error& e) {
      log::debug("shm: huge-page segment failed (", e.what(), "); using normal pages");
    }
  }
  if (m.addr() == nullptr) {
    file = path("seg", ctx_.rank, seg);
    m = Mapping::create(file, size, Mapping::Reserve::None);
  }
  if (numa_node >= 0 && numa_available() >= 0 && numa_node <= numa_max_node()) {
    numa_tonode_memory(m.addr(), size, numa_node);
  }
  c.addr = m.addr();
  chunks_.emplace(reinterpret_cast<uintptr_t>(c.addr), LocalChunk{size, seg, std::move(m), file});
  return c;
}

void ShmProvider::unmap_chunk(const Chunk& c) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = chunks_.find(reinterpret_cast<uintptr_t>(c.addr));
  if (it == chunks_.end()) fail("shm: unmap_chunk of an address that is not a mapped chunk");
  // Registrations inside the chunk are revoked first, so peers get an error, not stale memory.
  KeyTable* t = keys_.as<KeyTable>();
  for (uint32_t i = 1; i < kKeyCapacity; ++i) {
    if (t->entries[i].generation.load() != 0 && t->entries[i].segment.load() == it->second.segment) {
      t->entries[i].generation.store(0, std::memory_order_release);
      free_key_indices_.push_back(i);
    }
  }
  ::unlink(it->second.file.c_str());
  chunks_.erase(it);
}

// A chunk's file was only sized (ftruncate) at map_chunk; the part handed out now gets its
// memory, so a full /dev/shm (or hugetlbfs out of pages) is an error here, not a SIGBUS later.
void ShmProvider::commit(const Chunk& c, size_t offset, size_t len) {
  std::string file;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = chunks_.find(reinterpret_cast<uintptr_t>(c.addr));
    if (it == chunks_.end()) fail("shm: commit in an address that is not a mapped chunk");
    if (offset > it->second.size || len > it->second.size - offset)
      fail("shm: commit of [", offset, ", +", len, ") outside a chunk of ", it->second.size, " bytes");
    file = it->second.file;
  }
  int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail_errno("shm: cannot open " + file);
  int e = sys::reserve_file_space(fd, offset, len);
  ::close(fd);
  if (e == 0) return;
  auto slash = file.rfind('/');
  std::string msg = sys::no_room_message("registered memory", file.substr(0, slash), len, e);
  if (c.huge_pages) msg += " (this segment uses huge pages: LOOM_HUGE_PAGES=0 uses normal pages)";
  fail("shm: ", msg);
}

std::unique_ptr<CompletionQueue> ShmProvider::create_cq(uint32_t depth) {
  uint32_t id;
  {
    std::lock_guard<std::mutex> g(mu_);
    id = next_cq_++;
  }
  if (depth == 0 || depth > (1u << 22)) fail("shm: completion queue depth ", depth, " out of range (1..4194304)");
  return std::make_unique<ShmCq>(*this, id, depth);
}

std::unique_ptr<QueuePair> ShmProvider::create_qp(int peer_rank, CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                                  const QpCaps& caps) {
  if (peer_rank < 0 || peer_rank >= ctx_.size) fail("shm: create_qp to rank ", peer_rank, ", but the job has ", ctx_.size, " ranks");
  if (caps.max_send_wr == 0 || caps.max_send_wr > info_.max_qp_depth || caps.max_recv_wr == 0 ||
      caps.max_recv_wr > info_.max_qp_depth)
    fail("shm: queue depths must be 1..", info_.max_qp_depth, " (got send ", caps.max_send_wr, ", recv ", caps.max_recv_wr, ")");
  if (caps.max_inline > info_.max_inline) fail("shm: max_inline ", caps.max_inline, " exceeds ", info_.max_inline);
  auto* scq = dynamic_cast<ShmCq*>(&send_cq);
  auto* rcq = dynamic_cast<ShmCq*>(&recv_cq);
  if (scq == nullptr || rcq == nullptr) fail("shm: completion queues belong to another provider");
  if (scq->reserved_send.load() + caps.max_send_wr + (scq == rcq ? scq->reserved_recv.load() + caps.max_recv_wr : 0) >
      scq->capacity())
    fail("shm: send completion queue (", scq->capacity(), " entries) too small for the send queues attached to it");
  scq->reserved_send.fetch_add(caps.max_send_wr);
  rcq->reserved_recv.fetch_add(caps.max_recv_wr);
  uint32_t qpn = next_qp_.fetch_add(1);
  if (qpn >= kMaxQps) fail("shm: too many queue pairs (limit ", kMaxQps - 1, ")");
  auto qp = std::make_unique<ShmQp>(*this, qpn, peer_rank, *scq, *rcq, caps);
  if (across_wire(peer_rank)) {
    std::lock_guard<std::mutex> g(mu_);
    if (!engine_) engine_ = std::make_unique<WireEngine>(wire_cpus_);
    auto* links = wire_links_.as<LinkClock>();
    qp->attach_wire({engine_.get(), &wire_, &links[wire_node_[static_cast<size_t>(ctx_.rank)]],
                     &links[wire_node_[static_cast<size_t>(peer_rank)]]});
  }
  qps_[qpn].store(qp.get(), std::memory_order_release);
  return qp;
}

ShmQp* ShmProvider::qp_by_num(uint32_t qpn) const {
  return qpn < kMaxQps ? qps_[qpn].load(std::memory_order_acquire) : nullptr;
}

void ShmProvider::forget_qp(uint32_t qpn) {
  if (qpn < kMaxQps) qps_[qpn].store(nullptr, std::memory_order_release);
}

bool ShmProvider::peer_alive(int rank) const {
  if (rank < 0 || rank >= ctx_.size) return false;
  if (rank == ctx_.rank) return true;
  if (dead_[static_cast<size_t>(rank)].load(std::memory_order_relaxed)) return false;
  const KeyTable* t = const_cast<ShmProvider*>(this)->key_table(rank);
  bool alive = t != nullptr && t->alive.load(std::memory_order_acquire) != 0 &&
               (::kill(t->pid, 0) == 0 || errno != ESRCH);
  if (!alive) dead_[static_cast<size_t>(rank)].store(1, std::memory_order_relaxed);
  return alive;
}

}  // namespace loom::fabric::shm

namespace loom::fabric::shm {

void ShmProvider::set_up_wire() {
  wire_ = parse_wire(settings::get_string(settings::dsm::kWire));
  const bool nodes_set = settings::raw(settings::dsm::kEmulateNodes).has_value();
  if (wire_.name.empty()) {
    if (nodes_set) fail("LOOM_EMULATE_NODES (loomrun --emulate-nodes) splits the ranks over nodes joined by an emulated wire: set LOOM_WIRE too");
    return;
  }
  const int nodes = static_cast<int>(settings::get_int(settings::dsm::kEmulateNodes, ctx_.size));
  wire_node_ = emulated_nodes(ctx_.size, nodes);
  if (sched_getaffinity(0, sizeof wire_cpus_, &wire_cpus_) != 0) fail_errno("shm: cannot read this process's CPU set");
  wire_links_ = Mapping::open_or_create(path("wire", 0, 0), sizeof(LinkClock) * static_cast<size_t>(nodes));
}

uint64_t ShmProvider::wire_in_flight() const {
  std::lock_guard<std::mutex> g(mu_);
  return engine_ ? engine_->in_flight() : 0;
}

std::string ShmProvider::transport(int rank) const {
  return across_wire(rank) ? "wire:" + wire_.name : "shm";
}

}  // namespace loom::fabric::shm
