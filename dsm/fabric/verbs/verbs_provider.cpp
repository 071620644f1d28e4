// The verbs provider: the device and port chosen, memory registered, queues created.
#include "loom/dsm/fabric/verbs/verbs_qp.hpp"

namespace loom::fabric::verbs {

VerbsProvider::VerbsProvider(const ProviderContext& ctx)
    : pctx_(ctx), posts_(new std::atomic<uint64_t>[static_cast<size_t>(ctx.size)]()),
      atomics_(new std::atomic<uint64_t>[static_cast<size_t>(ctx.size)]()) {
  std::string why;
  auto devices = survey(&why);
  if (devices.empty()) fail("verbs provider: ", why, "; use the shm provider on one host");
  std::string want_dev = settings::get_string(settings::dsm::kVerbsDevice);
  int want_port = static_cast<int>(settings::get_int(settings::dsm::kVerbsPort));
  const DeviceReport* dev = nullptr;
  int port = 0;
  std::string seen;
  for (const auto& d : devices) {
    for (const auto& p : d.ports) seen += " " + d.name + ":" + std::to_string(p.port) + "(" + p.state + ")";
    if (!want_dev.empty() && d.name != want_dev) continue;
    for (const auto& p : d.ports) {
      if ((want_port == 0 || p.port == want_port) && p.active) {
        dev = &d;
        port = p.port;
        break;
      }
    }
    if (dev) break;
  }
  if (dev == nullptr)
    fail("verbs provider: no active port", want_dev.empty() ? "" : " on device " + want_dev,
         want_port ? " port " + std::to_string(want_port) : "", "; found:", seen.empty() ? " no ports" : seen);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  for (int i = 0; i < n && ctx_ == nullptr; ++i)
    if (dev->name == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  if (ctx_ == nullptr) fail_errno("verbs provider: cannot open device " + dev->name);
  port_ = static_cast<uint8_t>(port);
  ibv_port_attr pa{};
  if (ibv_query_port(ctx_, port_, &pa) != 0) fail_errno("verbs provider: ibv_query_port");
  lid_ = pa.lid;
  mtu_ = pa.active_mtu;
  // GID: LOOM_VERBS_GID_INDEX, else the first RoCE v2 GID on Ethernet, else index 0.
  gid_index_ = static_cast<int>(settings::get_int(settings::dsm::kVerbsGidIndex));
  if (gid_index_ < 0) {
    gid_index_ = 0;
    if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
      for (int g = 0; g < pa.gid_tbl_len; ++g) {
        ibv_gid_entry entry{};
        if (ibv_query_gid_ex(ctx_, port_, static_cast<uint32_t>(g), &entry, 0) != 0 || gid_zero(entry.gid)) continue;
        if (entry.gid_type == IBV_GID_TYPE_ROCE_V2) {
          gid_index_ = g;
          break;
        }
      }
    }
  }
  if (ibv_query_gid(ctx_, port_, gid_index_, &gid_) != 0) fail("verbs provider: no GID at index ", gid_index_);
  pd_ = ibv_alloc_pd(ctx_);
  if (pd_ == nullptr) fail_errno("verbs provider: ibv_alloc_pd");
  ibv_device_attr da{};
  ibv_query_device(ctx_, &da);
  info_.name = "verbs";
  info_.huge_pages = false;
  info_.max_qp_depth = static_cast<uint32_t>(da.max_qp_wr);
  info_.max_inline = 64;
  info_.max_message = pa.max_msg_sz;
  info_.cpu_atomics = da.atomic_cap == IBV_ATOMIC_GLOB;
  info_.description = dev->name + " port " + std::to_string(port) + " (" +
                      (pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand") + ", gid index " +
                      std::to_string(gid_index_) + " " + gid_string(gid_) + ", lid " + std::to_string(lid_) + ")";
  log::debug("verbs provider: ", info_.description);
}

VerbsProvider::~VerbsProvider() {
  for (auto& [k, mr] : mrs_) ibv_dereg_mr(mr);
  for (auto& [a, c] : chunks_)
    if (!foreign_.count(a)) munmap(c.addr, c.size);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

Chunk VerbsProvider::map_chunk(size_t size, int numa_node) {
  if (size == 0) fail("verbs: cannot map a chunk of 0 bytes");
  Chunk c;
  c.size = size;
  c.numa_node = numa_node;
  void* p = MAP_FAILED;
  if (size % (2u << 20) == 0 && settings::get_bool(settings::dsm::kHugePages))
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (p != MAP_FAILED) {
    c.huge_pages = true;
  } else {
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail_errno("verbs: cannot map a chunk of " + std::to_string(size) + " bytes");
    madvise(p, size, MADV_HUGEPAGE);
  }
  if (numa_node >= 0 && numa_available() >= 0 && numa_node <= numa_max_node()) numa_tonode_memory(p, size, numa_node);
  c.addr = p;
  std::lock_guard<std::mutex> g(mu_);
  chunks_.emplace(reinterpret_cast<uintptr_t>(p), c);
  return c;
}

void VerbsProvider::unmap_chunk(const Chunk& c) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = chunks_.find(reinterpret_cast<uintptr_t>(c.addr));
  if (it == chunks_.end()) fail("verbs: unmap_chunk of an address that is not a mapped chunk");
  // Registrations inside the chunk go first, so the NIC never reaches unmapped memory.
  auto* base = static_cast<uint8_t*>(c.addr);
  for (auto m = mrs_.begin(); m != mrs_.end();) {
    auto* a = static_cast<uint8_t*>(m->second->addr);
    if (a >= base && a < base + it->second.size) {
      ibv_dereg_mr(m->second);
      m = mrs_.erase(m);
    } else {
      ++m;
    }
  }
  if (!foreign_.count(it->first)) munmap(c.addr, it->second.size);
  foreign_.erase(it->first);
  chunks_.erase(it);
}

void VerbsProvider::adopt_chunk(const Chunk& c) {
  std::lock_guard<std::mutex> g(mu_);
  chunks_.emplace(reinterpret_cast<uintptr_t>(c.addr), c);
  foreign_.insert(reinterpret_cast<uintptr_t>(c.addr));
}

PeerTraffic VerbsProvider::traffic(int rank) const {
  if (rank < 0 || rank >= pctx_.size) return {};
  return PeerTraffic{posts_[static_cast<size_t>(rank)].load(std::memory_order_relaxed),
                     atomics_[static_cast<size_t>(rank)].load(std::memory_order_relaxed)};
}

MemoryRegion VerbsProvider::register_memory(void* addr, size_t len, uint32_t access) {
  std::lock_guard<std::mutex> g(mu_);
  auto a = reinterpret_cast<uintptr_t>(addr);
  auto it = chunks_.upper_bound(a);
  if (it == chunks_.begin() || len == 0) fail("verbs: register_memory(", addr, ", ", len, "): not inside a chunk from map_chunk");
  --it;
  if (a + len > it->first + it->second.size) fail("verbs: register_memory(", addr, ", ", len, "): range is not inside one chunk");
  ibv_mr* mr = ibv_reg_mr(pd_, addr, len, access_flags(access));
  if (mr == nullptr) fail_errno("verbs: ibv_reg_mr of " + std::to_string(len) + " bytes");
  mrs_[mr->lkey] = mr;
  return MemoryRegion{addr, len, mr->lkey, mr->rkey, access};
}

void VerbsProvider::deregister(const MemoryRegion& m) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = mrs_.find(m.lkey);
  if (it == mrs_.end()) fail("verbs: deregister of key ", m.lkey, " that is not registered");
  ibv_dereg_mr(it->second);
  mrs_.erase(it);
}

std::unique_ptr<CompletionQueue> VerbsProvider::create_cq(uint32_t depth) {
  if (depth == 0) fail("verbs: completion queue depth 0");
  return std::make_unique<VerbsCq>(*this, depth);
}

std::unique_ptr<QueuePair> VerbsProvider::create_qp(int peer_rank, CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                                    const QpCaps& caps) {
  if (peer_rank < 0 || peer_rank >= pctx_.size) fail("verbs: create_qp to rank ", peer_rank, ", but the job has ", pctx_.size, " ranks");
  auto* s = dynamic_cast<VerbsCq*>(&send_cq);
  auto* r = dynamic_cast<VerbsCq*>(&recv_cq);
  if (s == nullptr || r == nullptr) fail("verbs: completion queues belong to another provider");
  if (caps.max_send_wr == 0 || caps.max_send_wr > info_.max_qp_depth || caps.max_recv_wr == 0 || caps.max_recv_wr > info_.max_qp_depth)
    fail("verbs: queue depths must be 1..", info_.max_qp_depth);
  auto qp = std::make_unique<VerbsQp>(*this, peer_rank, *s, *r, caps);
  std::lock_guard<std::mutex> g(mu_);
  qps_[qp->qp_num()] = qp.get();
  return qp;
}

int VerbsProvider::peer_of_qp(uint32_t qpn) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = qp_peers_.find(qpn);
  return it == qp_peers_.end() ? -1 : it->second;
}

void VerbsProvider::set_qp_peer(uint32_t qpn, int rank) {
  std::lock_guard<std::mutex> g(mu_);
  qp_peers_[qpn] = rank;
}

void VerbsProvider::forget_qp(uint32_t qpn) {
  std::lock_guard<std::mutex> g(mu_);
  qp_peers_.erase(qpn);
  qps_.erase(qpn);
}

void VerbsProvider::account(uint32_t qpn, const void* cq, bool error, bool recv_opcode) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return;
  VerbsQp* qp = it->second;
  bool send = qp->is_send_cq(cq), recv = qp->is_recv_cq(cq);
  // A CQ serving both queues of a QP: the opcode tells, except on errors (then undefined; the
  // QP is in the error state and reset() clears its accounting).
  if (send && recv) {
    if (error) return;
    send = !recv_opcode;
    recv = recv_opcode;
  }
  if (send) qp->on_send_completion(error);
  if (recv) qp->on_recv_completion();
}

void VerbsProvider::mark_qp_error(uint32_t qpn) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = qps_.find(qpn);
  if (it != qps_.end()) it->second->mark_error();
}

bool VerbsProvider::peer_alive(int rank) const {
  if (rank < 0 || rank >= pctx_.size) return false;
  if (rank == pctx_.rank) return true;
  // Only a process on this host can be checked directly; elsewhere the transport's retry
  // limit (PeerUnreachable completions) is the signal.
  if (static_cast<size_t>(rank) < pctx_.pids.size() && pctx_.hosts.size() == pctx_.pids.size() &&
      pctx_.hosts[static_cast<size_t>(rank)] == pctx_.hosts[static_cast<size_t>(pctx_.rank)])
    return ::kill(pctx_.pids[static_cast<size_t>(rank)], 0) == 0 || errno != ESRCH;
  return true;
}

}  // namespace loom::fabric::verbs
