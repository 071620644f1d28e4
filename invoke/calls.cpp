#include "loom/invoke/calls.hpp"

#include "loom/dsm/common/error.hpp"

namespace loom::invoke {

int caller_rank() {
  const RunningCall* c = running_call();
  return c != nullptr ? c->src_rank : -1;
}

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
  MessengerGlobal& mine = inv.messengers();
  mine.count_sent(1);  // before the call can run (the barrier's counts)
  try {
    svc.call(dest.rank, inv.send_function(), payload);
  } catch (...) {
    mine.count_sent(-1);
    throw;
  }
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

std::vector<uint64_t> write_everywhere(const memory::RDMAMemory& orig, std::span<const RemoteMemoryLocator> dest_buffers) {
  Invoker& inv = Invoker::current();
  const int n = inv.runtime().size();
  if (dest_buffers.size() != static_cast<size_t>(n))
    fail("broadcast_buffer: ", dest_buffers.size(), " destination buffers for ", n, " processes (one per process, in rank order)");
  std::vector<uint64_t> tags(static_cast<size_t>(n)), at(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const RemoteMemoryLocator& b = dest_buffers[static_cast<size_t>(r)];
    if (b.rank != r) fail("broadcast_buffer: destination buffer ", r, " is in rank ", b.rank, ", not in rank ", r);
    tags[static_cast<size_t>(r)] = write_ahead(Thread{r, 0}, orig, b, true);
    at[static_cast<size_t>(r)] = b.addr;
  }
  for (int r = 0; r < n; ++r) wait_written(Thread{r, 0}, tags[static_cast<size_t>(r)]);
  return at;
}

void broadcast(const FrameSpec& inner, Synchronizer* transmitted, std::span<const uint64_t> per_rank) {
  Invoker& inv = Invoker::current();
  const Thread root = inv.self();
  inv.check(root);
  size_t in_len = inner.bytes();
  const size_t table = per_rank.size_bytes();
  size_t len = wire::kFrameHeader + sizeof(wire::BroadcastDesc) + in_len + table;
  if (len > wire::kMaxFrame) fail("broadcast: a call of ", len, " bytes is too large");
  std::vector<uint8_t> f(len);
  uint64_t w = wire::frame_word(0, wire::Kind::Broadcast, false, len);
  std::memcpy(f.data(), &w, 8);
  wire::BroadcastDesc d{static_cast<uint32_t>(inv.gid(root)), static_cast<uint32_t>(per_rank.size())};
  std::memcpy(f.data() + 8, &d, sizeof d);
  inner.fill(f.data() + 8 + sizeof d, in_len);
  if (table != 0) std::memcpy(f.data() + 8 + sizeof d + in_len, per_rank.data(), table);
  FrameSpec s;
  s.raw = f.data();
  s.raw_len = f.size();
  inv.messengers().to(root).call(s, OnFull::Retry, 0, transmitted);
}

}  // namespace detail

}  // namespace loom::invoke
