// The Invoker's life (collective construction and teardown, the service handlers registered
// once per Service), progress (polling, helpers, RetryAsync draining), and reports.
#include "loom/invoke/invoker.hpp"

#include <algorithm>
#include <shared_mutex>

#include "loom/dsm/common/log.hpp"
#include "loom/invoke/checks.hpp"
#include "loom/invoke/chunk_service.hpp"

namespace loom::invoke {

namespace {

// Stored release once the Invoker is whole (and retracted before teardown), loaded acquire by
// current(): a thread that finds it sees everything the constructor made.
std::atomic<Invoker*> g_current{nullptr};
std::atomic<bool> g_exists{false};
// Service handlers run on the service thread and may see a request for an Invoker that is being
// built or torn down: they hold this shared while they use it; construction and destruction
// publish and retract the Invoker under it exclusively.
std::shared_mutex g_life;
std::atomic<uint64_t> g_invoker_serial{1};

// The worker thread whose calls this thread is running (a helper polling another thread's
// Inbox), or -1: inside those calls, self() is that worker thread.
thread_local int t_running_for = -1;
struct RunningFor {
  int saved;
  explicit RunningFor(int index) : saved(t_running_for) { t_running_for = index; }
  ~RunningFor() { t_running_for = saved; }
};

// The handlers find the current Invoker; they are registered once per Service.
void register_service_handlers(runtime::Service& service) {
  static std::mutex reg_mu;
  static std::vector<runtime::Service*> registered;
  std::lock_guard<std::mutex> g(reg_mu);
  if (std::find(registered.begin(), registered.end(), &service) != registered.end()) return;
  registered.push_back(&service);
  service.register_handler("loom.invoke.chunks", [](const runtime::ServiceRequest& req) {
    std::shared_lock<std::shared_mutex> life(g_life);
    return handle_chunk_request(Invoker::current(), req);
  });
  service.register_handler("loom.invoke.send", [](const runtime::ServiceRequest& req) {
    std::shared_lock<std::shared_mutex> life(g_life);
    return handle_send_call(Invoker::current(), req);
  });
  // A wake may arrive once this process's Invoker is gone (a check answered as the peers were
  // tearing down): no thread waits for it then.
  service.register_handler("loom.invoke.bell", [](const runtime::ServiceRequest& req) {
    std::shared_lock<std::shared_mutex> life(g_life);
    if (Invoker* inv = g_current.load(std::memory_order_acquire)) inv->bells().wake_from_wire(req.src_rank, req.payload);
    return std::vector<std::byte>{};
  });
}

}  // namespace

Invoker& Invoker::current() {
  Invoker* i = g_current.load(std::memory_order_acquire);
  if (i == nullptr) fail("invoke: no Invoker (construct loom::invoke::Invoker collectively first)");
  return *i;
}

Invoker::Invoker(Runtime& rt, Config cfg, const std::source_location& where)
    : rt_(rt), cfg_(cfg), ranks_(rt.size()), threads_(rt.threads_per_process()), serial_(g_invoker_serial.fetch_add(1)) {
  rt_.collectives().enter("Invoker::Invoker", where);
  if (cfg_.chunk_size < 4096 || cfg_.chunk_size % 64 != 0 || cfg_.chunk_size > wire::kMaxRecord)
    fail("invoke: chunk size ", cfg_.chunk_size, " must be a multiple of 64 in 4 KiB..", wire::kMaxRecord);
  if (cfg_.max_chunks < 2 || cfg_.max_chunks > 4096) fail("invoke: max_chunks ", cfg_.max_chunks, " must be 2..4096");
  bool expected = false;
  if (!g_exists.compare_exchange_strong(expected, true)) fail("invoke: one Invoker per process at a time");
  fabric::QpCaps caps;
  caps.max_send_wr = cfg_.send_queue_depth;
  caps.max_recv_wr = 4;
  caps.max_inline = Invoker::kInlineLimit;
  try {
    mesh_ = rt_.make_mesh(caps);
    for (int i = 0; i < threads_; ++i) inboxes_.push_back(std::make_unique<Inbox>(*this, i));
    call_barrier_ = std::make_unique<CallBarrier>(*this);  // collective
    bells_ = std::make_unique<Doorbells>(*this);           // collective
    compare_registries(rt_, cfg_.bad_calls);               // collective; throws on every process alike
  } catch (...) {
    g_exists.store(false, std::memory_order_release);
    throw;
  }
  spin_rounds_ = spin_rounds_for(std::chrono::microseconds(20));
  rung_across_ = bells_->rings_across();
  bells_usable_ = true;
  for (int r = 0; r < ranks_; ++r) bells_usable_ = bells_usable_ && bells_->reachable(r);
  bells_usable_ = bells_usable_ || rung_across_;
  describe_faults_in_calls();
  // Published once whole: the service thread's handlers find it (and everything above) through
  // g_current, the only ordering a thread of this process has with the peers' first requests.
  chunks_fn_ = runtime::Service::id_of("loom.invoke.chunks");
  send_fn_ = runtime::Service::id_of("loom.invoke.send");
  register_service_handlers(rt_.service());
  {
    std::unique_lock<std::shared_mutex> g(g_life);
    g_current.store(this, std::memory_order_release);
  }
  for (uint32_t i = 0; i < cfg_.helpers; ++i)
    helpers_.push_back(rt_.spawn_at(threads_ + static_cast<int>(i), "invoke-helper-" + std::to_string(i), [this, i] { helper_loop(static_cast<int>(i)); }));
  rt_.bootstrap().barrier();
}

Invoker::~Invoker() {
  try {
    flush_everything();  // first: a peer may wait for a call still in this process's open records
    rt_.collectives().enter("Invoker::~Invoker");
  } catch (const std::exception& e) {
    log::error("invoke teardown: ", e.what());
  }
  rt_.bootstrap().barrier();  // every process is done calling; every call made is in its receiver's memory
  stop_.store(true, std::memory_order_release);  // pairs with helper_loop's acquire load
  for (auto& t : helpers_) t.join();
  try {
    report_unrun();
  } catch (const std::exception& e) {
    rt_.fail_at_exit(std::string("invoke teardown: ") + e.what());
  }
  rt_.bootstrap().barrier();  // no consumed offset is pushed to a sender after this
  {
    std::unique_lock<std::shared_mutex> g(g_life);
    g_current.store(nullptr, std::memory_order_release);
  }
  call_barrier_.reset();
  for (auto& g : globals_) g->end_checks();  // their READs land before the queue pairs go
  bells_.reset();
  mesh_.reset();  // collective: waits until nothing is in flight anywhere
  globals_.clear();
  inboxes_.clear();
  g_exists.store(false, std::memory_order_release);
}

Thread Invoker::self() const {
  if (t_running_for >= 0) return Thread{rt_.rank(), t_running_for};
  const ThreadName& n = this_thread_name();
  if (n.label.empty()) fail("invoke: this thread was not started by the Loom runtime (use Runtime::spawn)");
  if (n.thread >= threads_)
    fail("invoke: thread '", n.label, "' is a helper: it is a destination only while it runs calls addressed to a worker thread");
  return Thread{rt_.rank(), n.thread};
}

// How many cpu_relax() take `d` here (their cost differs tenfold between processors).
uint32_t Invoker::spin_rounds_for(std::chrono::nanoseconds d) {
  constexpr int kProbe = 2000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kProbe; ++i) wait::cpu_relax();
  const auto per = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kProbe;
  return static_cast<uint32_t>(std::clamp(static_cast<double>(d.count()) / std::max(per, 1.0), 64.0, 100000.0));
}

int Invoker::sleeper_index() const {
  if (t_running_for >= 0 || !bells_usable_) return -1;
  const ThreadName& n = this_thread_name();
  return !n.label.empty() && n.thread < threads_ ? n.thread : -1;
}

bool Invoker::is_helper() const {
  const ThreadName& n = this_thread_name();
  return t_running_for < 0 && !n.label.empty() && n.thread >= threads_;
}

void Invoker::check_failed(Thread t) const {
  if (t.rank < 0 || t.rank >= ranks_) fail("invoke: rank ", t.rank, " is not in 0..", ranks_ - 1);
  fail("invoke: thread ", t.index, " is not in 0..", threads_ - 1, " (threads per process: loomrun --threads)");
}

MessengerGlobal& Invoker::messengers_slow() {
  std::lock_guard<std::mutex> g(globals_mu_);
  globals_.push_back(std::make_unique<MessengerGlobal>(*this));
  t_global_ = TlsGlobal{serial_, globals_.back().get()};
  return *t_global_.global;
}

void Invoker::flush() { messengers().flush(); }

CallBarrier::Counts Invoker::call_counts() {
  CallBarrier::Counts c;
  {
    std::lock_guard<std::mutex> g(globals_mu_);
    for (auto& mg : globals_) c.sent += mg->sent();
  }
  for (auto& in : inboxes_) c.executed += in->executed();
  return c;
}

// Teardown: the threads that called are done; their open records and queued calls go out, and
// this thread waits for its own WRITEs (staged records) to complete.
void Invoker::flush_everything() {
  {
    std::lock_guard<std::mutex> g(globals_mu_);
    for (auto& mg : globals_) mg->flush();
  }
  while (async_n_.load(std::memory_order_acquire) != 0) {
    drain_async_all();
    std::lock_guard<std::mutex> g(globals_mu_);
    for (auto& mg : globals_) mg->flush();
  }
  for (int r = 0; r < ranks_; ++r) mesh_->tx(r).flush();
}

// Teardown: calls that reached this process but were never run are an error of the program;
// reported by function, and the process ends with status 1 once the Runtime is gone.
void Invoker::report_unrun() {
  for (auto& in : inboxes_) {
    Unrun unrun = in->discard_unrun();
    if (!unrun.empty()) rt_.fail_at_exit(describe_unrun(rt_.rank(), in->index(), unrun));
  }
}

int Invoker::poll() {
  if (is_helper()) return 0;
  return inboxes_[static_cast<size_t>(self().index)]->poll();
}

int Invoker::poll(int index) {
  if (index < 0 || index >= threads_) fail("invoke: no thread ", index, " to poll");
  RunningFor as(index);
  return inboxes_[static_cast<size_t>(index)]->poll();
}

int Invoker::progress() {
  MessengerGlobal& m = messengers();
  m.flush();
  // This thread's own queued calls only: another thread's Messengers are its owner's (and the
  // helpers'), and draining them here raced with their owner's open records (ThreadSanitizer,
  // Invoke.BarrierRuns... at np 4, once calls made inside calls queued).
  if (m.maybe_async()) m.drain_async();
  if (m.keeping()) m.send_kept();
  if (m.checking()) m.bell_checks().poll();
  const ThreadName& n = this_thread_name();
  if (!n.label.empty() && n.thread < threads_) return inboxes_[static_cast<size_t>(n.thread)]->poll();
  return 0;
}

bool Invoker::has_incoming() {
  const ThreadName& n = this_thread_name();
  return !n.label.empty() && n.thread < threads_ && inboxes_[static_cast<size_t>(n.thread)]->has_incoming();
}

void Invoker::note_async(Messenger* m) {
  std::lock_guard<std::mutex> g(async_mu_);
  if (std::find(async_.begin(), async_.end(), m) == async_.end()) {
    async_.push_back(m);
    async_n_.store(async_.size(), std::memory_order_release);
  }
}

void Invoker::drain_async_all() {
  std::vector<Messenger*> list;
  {
    std::lock_guard<std::mutex> g(async_mu_);
    list = async_;
  }
  for (Messenger* m : list) {
    if (m->drain_async()) {
      std::lock_guard<std::mutex> g(async_mu_);
      // Only if nothing was queued since: the owner re-notes it otherwise.
      // Two threads may drain the same Messenger: the count follows the list (a second
      // decrement for one erase once wrapped it to zero while a Messenger stayed queued, and
      // nobody drained it again: Invoke.BarrierRuns... hung at 4 processes).
      if (!m->async_pending()) {
        async_.erase(std::remove(async_.begin(), async_.end(), m), async_.end());
        async_n_.store(async_.size(), std::memory_order_release);
      }
    }
  }
}

void Invoker::helper_loop(int) {
  wait::Backoff b;
  while (!stop_.load(std::memory_order_acquire)) {
    int n = 0;
    for (int k = 0; k < threads_; ++k) {
      RunningFor as(k);
      n += inboxes_[static_cast<size_t>(k)]->poll();
    }
    if (async_n_.load(std::memory_order_acquire) != 0) drain_async_all();
    messengers().flush();  // broadcasts forwarded by this helper
    if (n > 0) b.reset();
    else b.pause();
  }
}

// This thread's channels (another thread's Messengers are its own to read), and the inboxes
// nobody is polling just now.
std::string Invoker::describe() {
  std::string out;
  char line[256];
  for (auto& m : messengers().all()) {
    if (!m) continue;
    std::snprintf(line, sizeof line,
                  "messenger -> %d/%d: chunks %zu cur %zu pos %zu offset %llu consumed %llu open %d async %d records %llu\n",
                  m->dest_.rank, m->dest_.index, m->ring_.size(), m->cur_, m->pos_,
                  static_cast<unsigned long long>(m->g_), static_cast<unsigned long long>(m->consumed()), m->open_ ? 1 : 0,
                  m->async_pending() ? 1 : 0, static_cast<unsigned long long>(m->records_));
    out += line;
  }
  for (auto& in : inboxes_) {
    if (in->busy_.test_and_set(std::memory_order_acquire)) {
      out += "inbox " + std::to_string(in->index_) + ": being polled by another thread\n";
      continue;
    }
    for (auto& c : in->channels_) {
      const uint8_t* base = c->ring[c->cur].bytes();
      uint64_t at = c->pos + 8 <= c->chunk_size ? wire::load_word(base + c->pos) : 0;
      uint64_t rot = wire::load_word(base + wire::kProducerOffset);
      std::snprintf(line, sizeof line,
                    "inbox %d <- rank %d: chunks %zu cur %zu pos %zu offset %llu pending %zu%s; word there: offset %llu len %zu; "
                    "rotation: offset %llu +%u\n",
                    in->index_, c->src_rank, c->ring.size(), c->cur, c->pos, static_cast<unsigned long long>(c->g),
                    c->pending.size(), c->broken ? " BROKEN" : "",
                    static_cast<unsigned long long>((at >> wire::kLenBits) << 3), wire::record_len(at),
                    static_cast<unsigned long long>(wire::rotation_offset(rot)), wire::rotation_inserted(rot));
      out += line;
    }
    in->busy_.clear(std::memory_order_release);
  }
  return out;
}

std::string Invoker::stall_report() {
  return "invoke: a wait has made no progress for a long time; this thread's channels:\n" + describe();
}

std::string Invoker::last_error() const {
  std::lock_guard<std::mutex> g(err_mu_);
  return last_error_;
}

void Invoker::report(const std::string& what) {
  if (cfg_.bad_calls == BadCalls::Fail)
    fail("invoke: ", what, " (LOOM_INVOKE_BAD_CALLS=report: count, log and go on instead)");
  uint64_t n = bad_calls_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> g(err_mu_);
    last_error_ = what;
  }
  if (n < 10) log::warn("invoke: ", what);
}

}  // namespace loom::invoke
