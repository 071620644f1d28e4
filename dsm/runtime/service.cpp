#include "loom/dsm/runtime/service.hpp"

#include <cstring>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/dsm/runtime/connect.hpp"
#include "loom/dsm/runtime/service_wire.hpp"
#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/futex.hpp"

namespace loom::runtime {

namespace {

using namespace service_wire;

thread_local const Service* t_service_thread_of = nullptr;

}  // namespace

struct Service::Pending {
  std::atomic<uint32_t> done{0};
  bool error = false;
  std::vector<std::byte> data;
};

uint32_t Service::id_of(std::string_view name) {
  uint32_t h = 2166136261u;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 16777619u;
  }
  return h == 0 ? 1 : h;  // 0 is never a valid function id
}

Service::Service(Bootstrap& boot, fabric::Provider& provider, PeerWatch& peers, memory::RDMAAllocator& alloc, Config cfg)
    : boot_(boot), watch_(peers), alloc_(alloc), cfg_(cfg) {
  if (cfg.message_bytes < sizeof(Header) + 8 || cfg.recv_buffers == 0) fail("Service: message size or buffer count too small");
  const int n = boot.size();
  recv_cq_ = provider.create_cq(cfg.recv_buffers * static_cast<uint32_t>(n) + 16);
  size_t slots = static_cast<size_t>(n) * cfg.recv_buffers;
  recv_chunk_ = alloc.allocate_chunk(slots * cfg.message_bytes);
  fabric::QpCaps caps;
  caps.max_send_wr = 64;
  caps.max_recv_wr = cfg.recv_buffers;
  caps.max_inline = std::min<uint32_t>(64, provider.info().max_inline);
  std::vector<fabric::QueuePair*> raw;
  for (int r = 0; r < n; ++r) {
    auto p = std::make_unique<Peer>();
    p->send_cq = provider.create_cq(caps.max_send_wr);
    p->qp = provider.create_qp(r, *p->send_cq, *recv_cq_, caps);
    p->tx = std::make_unique<signal::Transmitter>(*p->qp, *p->send_cq);
    p->send_buffers = std::make_unique<memory::LinearCircularAllocator>(alloc, 64 * 1024, 1, 64);
    raw.push_back(p->qp.get());
    peers_.push_back(std::move(p));
  }
  // Receives are posted before anyone can send.
  for (size_t s = 0; s < slots; ++s) repost(s);
  connect_all(boot, raw);
}

Service::~Service() {
  stop();
  // The caller (Runtime) has quiesced and barriered: nobody sends to us any more.
  peers_.clear();
  recv_cq_.reset();
  alloc_.free_chunk(recv_chunk_);
}

uint32_t Service::register_handler(std::string_view name, ServiceHandler h) {
  uint32_t id = id_of(name);
  std::unique_lock<std::shared_mutex> g(handlers_mu_);
  auto it = handlers_.find(id);
  if (it != handlers_.end()) fail("Service: handler '", name, "' collides with '", it->second.first, "' (id ", id, ")");
  handlers_.emplace(id, std::make_pair(std::string(name), std::move(h)));
  return id;
}

void Service::unregister_handler(uint32_t id) {
  {
    std::unique_lock<std::shared_mutex> g(handlers_mu_);
    handlers_.erase(id);
  }
  // A call that found the handler before the erase may still be running: wait for it (the
  // service thread takes running_mu_ before it looks the handler up).
  if (!on_service_thread()) std::lock_guard<std::mutex> wait_for_running(running_mu_);
}

void Service::start() {
  if (thread_.joinable()) return;
  stop_.store(false);
  thread_ = std::thread([this] {
    t_service_thread_of = this;
    loop();
  });
}

void Service::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  recv_cq_->interrupt();
  thread_.join();
}

void Service::quiesce() {
  for (auto& p : peers_) {
    std::lock_guard<std::mutex> g(p->send_mu);
    if (p->qp->state() != fabric::QpState::Init) p->tx->flush();
  }
}

bool Service::on_service_thread() const { return t_service_thread_of == this; }

size_t Service::max_payload() const { return cfg_.message_bytes - sizeof(Header); }

void Service::repost(size_t slot) {
  size_t peer = slot / cfg_.recv_buffers;
  fabric::RecvWr wr;
  wr.wr_id = slot;
  wr.local.addr = recv_chunk_.address() + slot * cfg_.message_bytes;
  wr.local.length = cfg_.message_bytes;
  wr.local.lkey = recv_chunk_.lkey;
  if (peers_[peer]->qp->post_recv(wr) != fabric::PostResult::Ok) fail("Service: cannot repost receive buffer ", slot);
}

void Service::send(int dest, uint32_t function, uint32_t kind, uint64_t token, std::span<const std::byte> payload,
                   bool may_allocate) {
  if (dest < 0 || dest >= boot_.size()) fail("service call to rank ", dest, ": the job has ranks 0..", boot_.size() - 1);
  if (payload.size() > max_payload())
    fail("service call of ", payload.size(), " bytes exceeds the limit of ", max_payload(), " bytes");
  Peer& p = *peers_[static_cast<size_t>(dest)];
  Header h{kMagic, function, static_cast<uint32_t>(payload.size()), kind, token};
  size_t total = sizeof h + payload.size();
  // The service thread never just waits: another thread holding send_mu may itself wait for a
  // peer whose sender waits for this process's receive buffers, which only it frees (drain).
  const bool service_thread = on_service_thread();
  std::unique_lock<std::mutex> g(p.send_mu, std::defer_lock);
  wait::Backoff b;
  if (service_thread) {
    while (!g.try_lock()) {
      if (drain() == 0) b.pause();
    }
  } else {
    g.lock();
  }
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::Send;
  std::optional<memory::LinearCircularAllocator::Segment> seg;
  p.send_buffers->allow_growth(may_allocate);  // send_mu held: this call's setting alone
  while (!(seg = p.send_buffers->allocate(total, 8))) {
    // Without growth, a full ring waits for its units' tags: an unsignaled tail of sends
    // completes only behind a signaled post, which flush() makes.
    if (!may_allocate) p.tx->flush();
    if (p.tx->progress() == 0 && (!service_thread || drain() == 0)) b.pause();
  }
  p.send_buffers->allow_growth(true);
  std::memcpy(seg->mem.bytes(), &h, sizeof h);
  if (!payload.empty()) std::memcpy(seg->mem.bytes() + sizeof h, payload.data(), payload.size());
  wr.local.addr = seg->mem.address();
  wr.local.length = static_cast<uint32_t>(total);
  wr.local.lkey = seg->mem.lkey;
  auto posted = p.tx->post(wr);
  if (!posted.ok()) fail("service call to rank ", dest, ": post failed: ", fabric::to_string(posted.result));
  p.send_buffers->tag(*seg, *p.tx, posted.tag);
  p.tx->progress();
}

void Service::call(int dest, uint32_t function, std::span<const std::byte> payload) {
  send(dest, function, kOneWay, 0, payload);
}

void Service::call_without_allocating(int dest, uint32_t function, std::span<const std::byte> payload) {
  send(dest, function, kOneWay, 0, payload, false);
}

std::vector<std::byte> Service::call_sync(int dest, uint32_t function, std::span<const std::byte> payload) {
  if (on_service_thread()) fail("Service::call_sync from a service handler would deadlock; use call()");
  uint64_t token = next_token_.fetch_add(1);
  auto pending = std::make_shared<Pending>();
  {
    std::lock_guard<std::mutex> g(pending_mu_);
    pending_.emplace(token, pending);
  }
  try {
    send(dest, function, kRequest, token, payload);
  } catch (...) {
    std::lock_guard<std::mutex> g(pending_mu_);
    pending_.erase(token);
    throw;
  }
  wait::Backoff b;
  while (pending->done.load(std::memory_order_acquire) == 0) {
    if (b.should_sleep()) {
      watch_.check(dest, "service call to rank ", dest);
      wait::futex_wait(&pending->done, 0, std::chrono::milliseconds(50));
    } else {
      b.spin_or_yield();
    }
  }
  if (pending->error) {
    std::string text(reinterpret_cast<const char*>(pending->data.data()), pending->data.size());
    fail("service call to rank ", dest, " failed there: ", text);
  }
  return std::move(pending->data);
}

void Service::reject(const std::string& why) {
  bad_.fetch_add(1, std::memory_order_relaxed);
  log::error("service: rejected a message: ", why);
}

void Service::accept(const fabric::Completion& c) {
  const size_t slots = peers_.size() * cfg_.recv_buffers;
  // Completions are written by peers: validate everything before use.
  if (c.wr_id >= slots) { reject("receive completion names buffer " + std::to_string(c.wr_id) + " which does not exist"); return; }
  size_t slot = static_cast<size_t>(c.wr_id);
  int src = static_cast<int>(slot / cfg_.recv_buffers);
  // The buffer is reposted however this ends: a handler that calls the sender back (whose
  // reply needs a buffer here), or the sender's next message, must not wait for the handler.
  struct Repost {
    Service* s;
    size_t slot;
    ~Repost() { s->repost(slot); }
  } repost_on_exit{this, slot};
  if (c.status != fabric::Status::Success) { reject(std::string("receive failed: ") + fabric::to_string(c.status)); return; }
  if (c.src_rank != src) { reject("completion claims rank " + std::to_string(c.src_rank) + " on the queue pair of rank " + std::to_string(src)); return; }
  if (c.byte_len < sizeof(Header) || c.byte_len > cfg_.message_bytes) { reject("message of " + std::to_string(c.byte_len) + " bytes is truncated or oversized"); return; }
  const std::byte* in = reinterpret_cast<const std::byte*>(recv_chunk_.bytes() + slot * cfg_.message_bytes);
  Received r{src, {}};
  if (!spare_.empty()) {
    r.bytes = std::move(spare_.back());
    spare_.pop_back();
  }
  r.bytes.assign(in, in + c.byte_len);
  backlog_.push_back(std::move(r));
}

int Service::drain() {
  fabric::Completion cs[16];
  int n = recv_cq_->poll(cs);
  for (int i = 0; i < n; ++i) accept(cs[i]);
  return n;
}

void Service::handle(int src, std::span<const std::byte> msg) {
  std::string why;
  auto m = decode(msg, &why);
  if (!m) { reject(why + " (from rank " + std::to_string(src) + ")"); return; }
  const Header& h = m->header;
  std::span<const std::byte> payload = m->payload;
  if (h.kind == kReply || h.kind == kErrorReply) {
    std::shared_ptr<Pending> p;
    {
      std::lock_guard<std::mutex> g(pending_mu_);
      auto it = pending_.find(h.token);
      if (it != pending_.end()) { p = it->second; pending_.erase(it); }
    }
    if (!p) { reject("reply for unknown token " + std::to_string(h.token) + " from rank " + std::to_string(src)); return; }
    p->data.assign(payload.begin(), payload.end());
    p->error = h.kind == kErrorReply;
    p->done.store(1, std::memory_order_release);
    wait::futex_wake_all(&p->done);
    handled_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ServiceHandler fn;
  std::lock_guard<std::mutex> running(running_mu_);  // pairs with unregister_handler's wait
  {
    std::shared_lock<std::shared_mutex> g(handlers_mu_);
    auto it = handlers_.find(h.function);
    if (it != handlers_.end()) fn = it->second.second;
  }
  if (!fn) {
    reject("unknown function id " + std::to_string(h.function) + " from rank " + std::to_string(src));
    if (h.kind == kRequest) {
      std::string text = "unknown function id " + std::to_string(h.function);
      send(src, 0, kErrorReply, h.token, std::as_bytes(std::span(text.data(), text.size())));
    }
    return;
  }
  run_handler(fn, ServiceRequest{src, h.function, payload, h.kind == kRequest ? h.token : 0, this});
}

void Service::run_handler(const ServiceHandler& fn, const ServiceRequest& req) {
  std::vector<std::byte> reply;
  bool failed = false;
  try {
    reply = fn(req);
  } catch (const std::exception& e) {
    failed = true;
    std::string text = e.what();
    reply.assign(reinterpret_cast<const std::byte*>(text.data()), reinterpret_cast<const std::byte*>(text.data()) + text.size());
    if (req.token == 0) log::error("service: handler for function ", req.function, " failed: ", text);
  }
  handled_.fetch_add(1, std::memory_order_relaxed);
  if (req.token == 0) return;
  // A waiting caller always hears back: a reply too large for one message is an error reply,
  // and an error text too large is cut to fit.
  if (!failed && reply.size() > max_payload()) {
    failed = true;
    std::string text = detail::concat("the reply of ", reply.size(), " bytes exceeds the service message limit of ", max_payload(),
                                      " bytes (LOOM_SERVICE_MESSAGE)");
    reply.assign(reinterpret_cast<const std::byte*>(text.data()), reinterpret_cast<const std::byte*>(text.data()) + text.size());
  }
  if (reply.size() > max_payload()) reply.resize(max_payload());
  send(req.src_rank, 0, failed ? kErrorReply : kReply, req.token, reply);
}

void Service::loop() {
  // While a send of this thread waits for a peer's receive buffer, this thread's own buffers
  // keep being freed (the peer's sender may be waiting for them: fabric::PostWaitHook).
  fabric::t_post_wait_hook = {[](void* s) { static_cast<Service*>(s)->drain(); }, this};
  wait::Backoff b;
  while (!stop_.load(std::memory_order_acquire)) {
    if (backlog_.empty() && drain() == 0) {
      if (recv_cq_->overrun()) fail("service: receive completion queue overran");
      if (b.should_sleep()) recv_cq_->wait(std::chrono::milliseconds(20));
      else b.spin_or_yield();
      continue;
    }
    b.reset();
    while (!backlog_.empty()) {
      Received r = std::move(backlog_.front());
      backlog_.pop_front();
      try {
        handle(r.src, r.bytes);
      } catch (const std::exception& e) {
        log::error("service: ", e.what());
      }
      spare_.push_back(std::move(r.bytes));
    }
  }
}

}  // namespace loom::runtime
