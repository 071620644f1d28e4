#include "loom/invoke/calls.hpp"

#include "loom/dsm/common/error.hpp"

namespace loom::invoke {

namespace detail {
thread_local int t_caller = -1;
}

int caller_rank() { return detail::t_caller; }

// ---------------------------------------------------------------- registry

Registry& Registry::instance() {
  static Registry r;  // constructed on first use: entries register during static initialisation
  return r;
}

uint32_t Registry::hash(std::string_view key) {
  uint32_t h = 2166136261u;
  for (char c : key) {
    h ^= static_cast<uint8_t>(c);
    h *= 16777619u;
  }
  return h == 0 ? 1 : h;  // 0 is never a function id
}

uint32_t Registry::add(std::string_view key, EntryFn fn, wire::Kind kind, uint32_t capture_size, NamedFn named) {
  uint32_t id = hash(key);
  std::unique_lock<std::shared_mutex> g(mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) {
    if (it->second.name == key && it->second.fn == fn && it->second.named == named) return id;
    fail("invoke: function '", key, "' has the same id as '", it->second.name, "' (0x", std::hex, id,
         "); rename one of them");
  }
  entries_.emplace(id, Entry{fn, named, kind, capture_size, std::string(key)});
  return id;
}

bool Registry::lookup(uint32_t id, Entry* out) const {
  std::shared_lock<std::shared_mutex> g(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  *out = it->second;
  return true;
}

size_t Registry::size() const {
  std::shared_lock<std::shared_mutex> g(mu_);
  return entries_.size();
}

uint32_t register_function(std::string_view name, NamedFn fn) {
  if (fn == nullptr) fail("register_function('", name, "'): null function");
  return Registry::instance().add(std::string("name:") + std::string(name), nullptr, wire::Kind::Named, 0, fn);
}

uint32_t function_id(std::string_view name) { return Registry::hash(std::string("name:") + std::string(name)); }

// ---------------------------------------------------------------- helpers of the primitives

namespace detail {

void send_frame(Thread dest, const FrameSpec& f) {
  Invoker& inv = Invoker::current();
  inv.check(dest);
  size_t n = f.bytes();
  std::vector<std::byte> payload(sizeof(uint64_t) + n);
  uint32_t hdr[2] = {static_cast<uint32_t>(dest.index), 0};
  std::memcpy(payload.data(), hdr, sizeof hdr);
  f.fill(reinterpret_cast<uint8_t*>(payload.data()) + sizeof hdr, n);
  auto& svc = inv.runtime().service();
  if (payload.size() > svc.max_payload())
    fail("invoke::send: a call of ", n, " bytes exceeds the service message size (", svc.max_payload() - 8,
         " bytes); use the one-sided primitives for larger calls");
  svc.call(dest.rank, inv.send_function(), payload);
}

uint64_t write_ahead(Thread dest, const memory::RDMAMemory& orig, const RemoteMemoryLocator& dest_buffer,
                     bool signaled) {
  Invoker& inv = Invoker::current();
  inv.check(dest);
  if (dest_buffer.rank != dest.rank)
    fail("call_buffer: the destination buffer is in rank ", dest_buffer.rank, ", the call goes to rank ", dest.rank);
  if (orig.size > dest_buffer.size)
    fail("call_buffer: ", orig.size, " bytes do not fit the destination buffer of ", dest_buffer.size, " bytes");
  if (orig.size > UINT32_MAX) fail("call_buffer: ", orig.size, " bytes exceed one RDMA WRITE");
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::Write;
  wr.local = fabric::Sge{orig.address(), static_cast<uint32_t>(orig.size), orig.lkey};
  wr.remote_addr = dest_buffer.addr;
  wr.rkey = dest_buffer.rkey;
  // Any open record to this destination goes first, keeping calls in order.
  inv.messengers().to(dest).flush();
  signal::Posted p = inv.tx(dest.rank).post(wr, signaled);
  if (!p.ok()) fail("call_buffer: posting the WRITE failed: ", fabric::to_string(p.result));
  return p.tag;
}

void wait_written(Thread dest, uint64_t tag) {
  auto& tx = Invoker::current().tx(dest.rank);
  uint64_t errors = tx.errors();
  tx.wait(tag);
  if (tx.errors() != errors) fail("call_buffer: the WRITE failed: ", fabric::to_string(tx.last_error()));
}

void broadcast(const FrameSpec& inner, Synchronizer* transmitted) {
  Invoker& inv = Invoker::current();
  const Thread root = inv.self();
  inv.check(root);
  size_t in_len = inner.bytes();
  size_t len = wire::kFrameHeader + sizeof(wire::BroadcastDesc) + in_len;
  if (len > wire::kMaxFrame) fail("broadcast: a call of ", len, " bytes is too large");
  std::vector<uint8_t> f(len);
  uint64_t w = wire::frame_word(0, wire::Kind::Broadcast, false, len);
  std::memcpy(f.data(), &w, 8);
  wire::BroadcastDesc d{static_cast<uint32_t>(inv.gid(root)), 0};
  std::memcpy(f.data() + 8, &d, sizeof d);
  inner.fill(f.data() + 8 + sizeof d, in_len);
  FrameSpec s;
  s.raw = f.data();
  s.raw_len = f.size();
  inv.messengers().to(root).call(s, OnFull::Retry, 0, transmitted);
}

}  // namespace detail

}  // namespace loom::invoke
