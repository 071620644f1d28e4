#include "loom/dsm/runtime/runtime.hpp"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <sstream>

#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/fault_report.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/common/settings_check.hpp"
#include "loom/dsm/common/stall.hpp"
#include "loom/dsm/runtime/connect.hpp"
#include "loom/dsm/runtime/output.hpp"
#include "loom/dsm/runtime/remote_memory.hpp"
#include "loom/dsm/runtime/transports.hpp"

namespace loom {

namespace {
std::atomic<Runtime*> g_runtime{nullptr};
thread_local ThreadName t_name;
}  // namespace

std::string ThreadName::str() const {
  // Built with a stream: GCC 12 warns falsely (-Wrestrict) on chains of std::string operator+.
  std::ostringstream os;
  os << 'm' << machine << ".p" << process << ".t" << thread;
  if (!label.empty()) os << '(' << label << ')';
  return os.str();
}

const ThreadName& this_thread_name() { return t_name; }

Runtime* Runtime::find() { return g_runtime.load(std::memory_order_acquire); }

Runtime& Runtime::current() {
  Runtime* r = g_runtime.load(std::memory_order_acquire);
  if (r == nullptr) fail("no loom::Runtime exists in this process");
  return *r;
}

namespace {
// Checking mode (LOOM_CHECK), the same in every process: a process comparing its collective
// calls while another does not would wait for it forever.
bool checking_agreed(runtime::Bootstrap& boot) {
  const std::string v = settings::get_choice(settings::dsm::kCheck);
#ifdef NDEBUG
  const bool debug_build = false;
#else
  const bool debug_build = true;
#endif
  const uint8_t mine = v == "on" || (v == "auto" && debug_build);
  const auto all = boot.allgather_value(mine);
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != mine) fail("LOOM_CHECK differs between processes (rank ", r, " has checking ", all[r] ? "on" : "off", ")");
  return mine != 0;
}

// An uncaught loom::Error (a bad setting, no RDMA device, a dead peer) ends the process with one
// clear line and status 1, which loomrun reports with the rank — not an abort and a core dump.
[[noreturn]] void terminate_with_one_line() {
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      std::fprintf(stderr, "loom: error: %s\n", x.what());
      runtime::flush_output_if_free();
      std::_Exit(1);
    } catch (...) {
    }
  }
  std::fprintf(stderr, "loom: terminated\n");
  runtime::flush_output_if_free();
  std::abort();
}
}  // namespace

Runtime::Runtime(int& argc, char**& argv) {
  (void)argc;
  (void)argv;
  std::set_terminate(terminate_with_one_line);
  runtime::keep_output_on_endings();
  fault::install_reporter();
  Runtime* expected = nullptr;
  if (!g_runtime.compare_exchange_strong(expected, this)) fail("a loom::Runtime already exists in this process");
  try {
    settings::get_choice(settings::dsm::kLog);  // refused here: the logger cannot throw
    wait::read_stall_report_setting();           // here: stall watches run in fault handlers
    const auto unknown = settings::check_environment(settings::loom_environment(), settings::registered_tables(), settings::registered_renamed());
    boot_ = runtime::make_bootstrap();
    if (boot_->rank() == 0)
      for (const std::string& w : unknown) log::warn(w);
    threads_ = static_cast<int>(settings::get_int(settings::dsm::kThreads));
    local_rank_ = boot_->local_rank();
    local_size_ = boot_->local_size();
    log::set_host_announcer(local_rank_ == 0);
    collectives_ = std::make_unique<runtime::Collectives>(*boot_, checking_agreed(*boot_));
    boot_->on_long_wait([this] { collectives_->check_posted_all(boot_->rank()); });

    // Machines are named by the sorted set of hosts, so every process agrees.
    const std::string me = runtime::encode_place(runtime::this_place(boot_->job_id(), boot_->job_dir()));
    auto places = boot_->allgather(std::as_bytes(std::span(me.data(), me.size())));
    std::vector<runtime::RankPlace> ranks;
    for (size_t r = 0; r < places.size(); ++r) ranks.push_back(runtime::decode_place(places[r], static_cast<int>(r)));
    layout_ = runtime::make_layout(std::move(ranks));
    hostname_ = layout_.ranks[static_cast<size_t>(boot_->rank())].host;
    machines_ = layout_.hosts();
    machine_ = layout_.host_of[static_cast<size_t>(boot_->rank())];
    t_name = ThreadName{machine_, boot_->rank(), 0, "main"};

    setup_topology();

    fabric::ProviderContext ctx;
    ctx.rank = boot_->rank();
    ctx.size = boot_->size();
    ctx.job_id = boot_->job_id();
    ctx.job_dir = boot_->job_dir();
    for (const auto& p : layout_.ranks) {
      ctx.pids.push_back(p.pid);
      ctx.hosts.push_back(p.host);
      ctx.job_ids.push_back(p.job_id);
      ctx.job_dirs.push_back(p.job_dir);
    }
    ctx.host_of = layout_.host_of;
    provider_ = fabric::make_provider(settings::get_choice(settings::dsm::kProvider), ctx);
    runtime::PeerWatch::Options watch;
    watch.self = boot_->rank();
    watch.pids = ctx.pids;
    for (int r = 0; r < size(); ++r) watch.same_host.push_back(layout_.same_host(r, rank()));
    watch.watch_stops = std::string_view(boot_->kind()) != "embedded";  // loomrun watches its ranks itself
    watch.stopped_limit = std::chrono::milliseconds(settings::get_int(settings::dsm::kStoppedLimit));
    peers_ = std::make_unique<runtime::PeerWatch>(*provider_, std::move(watch));
    if (boot_->rank() == 0 && machines_ > 1) {
      std::string t = runtime::describe_transports(layout_, *provider_, 0);
      t.pop_back();  // the log adds the line's end
      log::info("transports:\n", t);
    }

    size_t super = settings::get_size(settings::dsm::kSuperchunk);
    for (int z = 0; z < std::max(1, numa_zones_hint_); ++z) {
      allocators_.push_back(std::make_unique<memory::RDMAAllocator>(*provider_, z, super, zone_os_node(z)));
      heaps_.push_back(std::make_unique<memory::RegisteredHeap>(*allocators_.back(),
                                                                memory::parse_fit(settings::get_choice(settings::dsm::kHeapFit))));
    }
    runtime::Service::Config scfg;
    scfg.recv_buffers = static_cast<uint32_t>(settings::get_int(settings::dsm::kServiceBuffers));
    scfg.message_bytes = static_cast<uint32_t>(settings::get_size(settings::dsm::kServiceMessage));
    service_ = std::make_unique<runtime::Service>(*boot_, *provider_, *peers_, allocator(), scfg);
    runtime::register_remote_memory_handlers(*this);
    mailbox_ = std::make_unique<runtime::Mailbox>(*service_, *peers_);
    service_->start();
    check_qps_per_peer();
    start_offloader();
    if (pin_) pin_thread(0);
    boot_->barrier();
    // From here every peer's provider is up (before, a peer not yet there looks gone).
    boot_->watch_peers(peers_.get());
  } catch (...) {
    g_runtime.store(nullptr);
    throw;
  }
}

Runtime::~Runtime() {
  try {
    // Everyone stops sending service calls before anyone's service goes away, and every
    // request in flight is acknowledged before any QP goes (RC needs the peer's QP for that).
    boot_->barrier();
    boot_->watch_peers(nullptr);  // peers that passed it may end now
    service_->stop();
    service_->quiesce();
    boot_->barrier();
  } catch (const std::exception& e) {
    log::error("runtime shutdown: ", e.what());
  }
  mailbox_.reset();
  service_.reset();
  offloader_.reset();
  heaps_.clear();
  allocators_.clear();
  peers_.reset();
  provider_.reset();
  if (topology_ != nullptr) hwloc_topology_destroy(static_cast<hwloc_topology_t>(topology_));
  boot_.reset();
  g_runtime.store(nullptr);
  std::lock_guard<std::mutex> g(failures_mu_);
  if (!failures_.empty()) {
    for (const auto& why : failures_) std::fprintf(stderr, "loom: error: %s\n", why.c_str());
    runtime::flush_output_if_free();
    std::_Exit(1);
  }
}

void Runtime::barrier(const std::source_location& where) {
  collectives_->enter("Runtime::barrier", where);
  boot_->barrier();
}

void Runtime::fail_at_exit(const std::string& why) {
  std::lock_guard<std::mutex> g(failures_mu_);
  failures_.push_back(why);
}

void Runtime::setup_topology() {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) fail("hwloc: cannot load the machine topology");
  topology_ = topo;
  numa_zones_hint_ = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE));
  int cores = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE));
  read_machine_shape();
  map_by_ = runtime::parse_map_by(settings::get_choice(settings::dsm::kMapBy));
  std::string mode = settings::get_choice(settings::dsm::kPin);
  if (mode == "on") pin_ = true;
  else if (mode == "off") pin_ = false;
  else if (mode == "auto") pin_ = local_size_ * threads_ <= cores;  // never pin an oversubscribed host
  else fail("LOOM_PIN='", mode, "' must be auto, on or off");
  if (!pin_ && mode == "auto" && local_rank_ == 0)
    log::info("not pinning: ", local_size_, " processes x ", threads_, " threads exceed ", cores, " cores");
  // The process's zone: where its first thread runs (runtime/placement.hpp).
  local_zone_ = zone_ids_[static_cast<size_t>(runtime::process_zone(shape_, map_by_, place(), pin_))];
  log::info("rank ", rank(), ": ", runtime::describe(shape_, map_by_, place(), pin_));
}

// The host's cores by NUMA zone; zones without a core (memory only) are left out of placement.
void Runtime::read_machine_shape() {
  auto topo = static_cast<hwloc_topology_t>(topology_);
  const int cores = std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE));
  std::vector<std::vector<int>> by_zone(static_cast<size_t>(numa_zones_hint_));
  for (int c = 0; c < cores; ++c) {
    int zone = 0;
    hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, static_cast<unsigned>(c));
    if (core != nullptr)
      if (hwloc_obj_t node = hwloc_get_next_obj_covering_cpuset_by_type(topo, core->cpuset, HWLOC_OBJ_NUMANODE, nullptr))
        zone = std::min(static_cast<int>(node->logical_index), numa_zones_hint_ - 1);
    by_zone[static_cast<size_t>(zone)].push_back(c);
  }
  for (size_t z = 0; z < by_zone.size(); ++z)
    if (!by_zone[z].empty()) shape_.zone_cores.push_back(std::move(by_zone[z])), zone_ids_.push_back(static_cast<int>(z));
  shape_.check();
}

int Runtime::zone_os_node(int zone) const {
  auto topo = static_cast<hwloc_topology_t>(topology_);
  const hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(zone));
  return node == nullptr || node->os_index == HWLOC_UNKNOWN_INDEX ? -1 : static_cast<int>(node->os_index);
}

runtime::ProcessPlace Runtime::place() const { return runtime::ProcessPlace{local_rank_, local_size_, threads_}; }

int Runtime::thread_zone(int index) const {
  if (index < 0) fail("thread_zone: thread index ", index, " is negative");
  if (map_by_ == runtime::MapBy::Core && !pin_) return local_zone_;
  return zone_ids_[static_cast<size_t>(runtime::place_thread(shape_, map_by_, place(), index).zone)];
}

void Runtime::pin_thread(int index) {
  auto topo = static_cast<hwloc_topology_t>(topology_);
  const int slot = runtime::place_thread(shape_, map_by_, place(), index).core;
  hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, static_cast<unsigned>(slot));
  if (core == nullptr) return;
  if (hwloc_set_cpubind(topo, core->cpuset, HWLOC_CPUBIND_THREAD) != 0)
    log::warn("hwloc: cannot pin thread ", index, " to core ", slot, ": ", std::strerror(errno));
}

size_t Runtime::zone_index(int zone) const {
  if (zone == -1) zone = local_zone_;
  if (zone < 0 || zone >= numa_zones()) fail("no NUMA zone ", zone, " (zones 0..", numa_zones() - 1, ")");
  return static_cast<size_t>(zone);
}

memory::RDMAAllocator& Runtime::allocator(int zone) { return *allocators_[zone_index(zone)]; }

memory::RegisteredHeap& Runtime::heap(int zone) { return *heaps_[zone_index(zone)]; }

std::thread Runtime::spawn(const std::string& label, std::function<void()> fn) {
  return spawn_at(next_thread_.fetch_add(1), label, std::move(fn));
}

std::thread Runtime::spawn_at(int index, const std::string& label, std::function<void()> fn) {
  if (index < 0) fail("spawn_at: thread index ", index, " is negative");
  ThreadName name{machine_, rank(), index, label};
  bool pin = pin_;
  return std::thread([this, name, pin, fn = std::move(fn)] {
    t_name = name;
    if (pin) pin_thread(name.thread);
    signal::Transmitter::prepare_this_thread();
    fn();
  });
}

Mesh::~Mesh() {
  try {
    for (auto& t : transmitters) t->flush();
    boot->barrier();
  } catch (const std::exception& e) {
    log::error("mesh teardown: ", e.what());
  }
  // The members go after this body in reverse declaration order: transmitters, then QPs, then
  // their CQs.
}

uint32_t Mesh::thread_number() {
  static std::atomic<uint32_t> next{0};
  thread_local const uint32_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

std::unique_ptr<Mesh> Runtime::make_mesh(const fabric::QpCaps& caps, uint32_t recv_cq_depth) {
  return make_mesh_with(caps, recv_cq_depth, offloader_.get(), qps_per_peer_);
}

std::unique_ptr<Mesh> Runtime::make_mesh_offloaded(const fabric::QpCaps& caps, signal::offload::Offloader* offloader, int ways) {
  return make_mesh_with(caps, 0, offloader, ways == 0 ? qps_per_peer_ : ways);
}

std::unique_ptr<Mesh> Runtime::make_mesh_with(const fabric::QpCaps& caps, uint32_t recv_cq_depth,
                                              signal::offload::Offloader* offloader, int ways) {
  if (ways < 1 || ways > 16) fail("mesh: ", ways, " queue pairs per peer (need 1..16)");
  auto m = std::make_unique<Mesh>(*boot_);
  const int n = size();
  m->ranks = n;
  m->ways = ways;
  if (recv_cq_depth == 0) recv_cq_depth = caps.max_recv_wr * static_cast<uint32_t>(n * ways);
  m->recv_cq = provider_->create_cq(recv_cq_depth);
  for (int w = 0; w < ways; ++w) {
    std::vector<fabric::QueuePair*> raw;
    for (int r = 0; r < n; ++r) {
      m->send_cqs.push_back(provider_->create_cq(caps.max_send_wr));
      m->qps.push_back(provider_->create_qp(r, *m->send_cqs.back(), *m->recv_cq, caps));
      signal::Transmitter::Config tcfg;
      tcfg.offloader = offloader;
      tcfg.way = static_cast<uint32_t>(w);
      m->transmitters.push_back(std::make_unique<signal::Transmitter>(*m->qps.back(), *m->send_cqs.back(), tcfg));
      raw.push_back(m->qps.back().get());
    }
    runtime::connect_all(*boot_, raw);  // collective: way by way in the same order everywhere
  }
  return m;
}

// Every process must build its meshes with as many ways: one collective, at start-up.
void Runtime::check_qps_per_peer() {
  qps_per_peer_ = static_cast<int>(settings::get_int(settings::dsm::kQpsPerPeer));
  const std::vector<int> all = boot_->allgather_value(qps_per_peer_);
  for (int r = 0; r < size(); ++r)
    if (all[static_cast<size_t>(r)] != qps_per_peer_)
      fail("LOOM_QPS_PER_PEER is ", qps_per_peer_, " here (rank ", rank(), ") but ", all[static_cast<size_t>(r)], " on rank ", r,
           ": every process must use the same value");
}

void Runtime::start_offloader() {
  const auto mode = signal::offload::parse_mode(settings::get_choice(settings::dsm::kOffload));
  if (mode == signal::offload::Mode::Direct) return;
  signal::offload::Offloader::Config cfg;
  cfg.mode = mode;
  cfg.wake = signal::offload::parse_wake(settings::get_choice(settings::dsm::kOffloadWake));
  cfg.commands = static_cast<uint32_t>(settings::get_int(settings::dsm::kOffloadQueue));
  cfg.workers = static_cast<uint32_t>(qps_per_peer_);
  offloader_ = std::make_unique<signal::offload::Offloader>(cfg);
}

bool Runtime::is_registered(const void* addr, size_t len) const {
  for (const auto& a : allocators_)
    if (a->contains(addr, len)) return true;
  return false;
}

}  // namespace loom
