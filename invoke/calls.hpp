#pragma once
// The remote invocation primitives of seed 000 Table 1, one-sided (through this thread's
// Messengers) and send-based (namespace send: through the service thread, no setup).
//
//   call(dest, f, sync)                              dest runs f()
//   call_buffer(dest, f, buffer, sync)               dest runs f(span); the bytes travel with the call
//   call_buffer(dest, f, orig, dest_buffer, sync)    orig is RDMA-written to dest_buffer, then f(span)
//   call_buffer(dest, f, orig, sync)                 dest RDMA-reads orig, then runs f(span)
//   call_return(dest, f, slot, sync)                 dest runs f(); the result is RDMA-written to slot
//   broadcast(f, sync), broadcast_buffer(f, buffer, sync)   every thread runs f, once, via a tree
//
// N (Notify) says when `sync` is decremented: Transmitted (the call left this thread) or
// Executed (the destination ran it; one fabric FETCH_ADD). P (OnFull) says what a one-sided call
// does when its Messenger is at the chunk limit: Fail, Retry or RetryAsync.
// Lambda captures travel with the call and must be trivially copyable.
#include <span>
#include <type_traits>
#include <vector>

#include "dsm/runtime/remote_memory.hpp"
#include "invoke/invoker.hpp"

namespace loom::invoke {

namespace detail {

template <Notify N>
const wire::NotifyDesc* notify_of(Synchronizer* s, wire::NotifyDesc& tmp) {
  if constexpr (N == Notify::Executed) {
    if (s == nullptr) fail("invoke: Notify::Executed needs a Synchronizer");
    tmp = s->notify_desc();
    return &tmp;
  } else {
    return nullptr;
  }
}
template <Notify N>
Synchronizer* transmitted_of(Synchronizer* s) {
  return N == Notify::Transmitted ? s : nullptr;
}

template <typename F>
size_t capture_len() {
  return std::is_empty_v<F> ? 0 : sizeof(F);
}

template <typename Tag, typename F>
FrameSpec frame_for(const F& f, wire::Kind kind, const wire::NotifyDesc* nd) {
  check_capture<F>();
  FrameSpec s;
  s.fid = auto_id<Tag, F>();
  s.kind = kind;
  s.notify = nd;
  s.captures = &f;
  s.capture_len = capture_len<F>();
  return s;
}

// Send-based transport: [thread][frame] through the service thread of dest's process.
void send_frame(Thread dest, const FrameSpec& f);
// Writes orig into dest_buffer ahead of the call (same queue pair, so placed before it).
uint64_t write_ahead(Thread dest, const memory::RDMAMemory& orig, const RemoteMemoryLocator& dest_buffer, bool signaled);
void wait_written(Thread dest, uint64_t tag);
std::vector<uint8_t> broadcast_frame(const FrameSpec& inner, Thread* root);

}  // namespace detail

// ---------------------------------------------------------------- one-sided

template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
bool call(Thread dest, F f, Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec s = detail::frame_for<detail::CallEntry<F>, F>(f, wire::Kind::Call, detail::notify_of<N>(sync, nd));
  return Invoker::current().messengers().to(dest).call(s, P, 0, detail::transmitted_of<N>(sync));
}
template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
bool call(Thread dest, F f, Synchronizer& sync) {
  return call<N, P>(dest, f, &sync);
}

template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
bool call_buffer(Thread dest, F f, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec s = detail::frame_for<detail::BufferEntry<F, wire::Kind::Buffer>, F>(f, wire::Kind::Buffer,
                                                                                 detail::notify_of<N>(sync, nd));
  wire::BufferDesc d{buffer.size()};
  s.desc = &d;
  s.desc_len = sizeof d;
  s.buffer = buffer.data();
  s.buffer_len = buffer.size();
  return Invoker::current().messengers().to(dest).call(s, P, 0, detail::transmitted_of<N>(sync));
}

// orig (registered, this process) is RDMA-written into dest_buffer (registered, dest's process);
// then dest runs f(dest_buffer). With Transmitted, sync is decremented once orig may be reused.
template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
bool call_buffer(Thread dest, F f, const memory::RDMAMemory& orig, const RemoteMemoryLocator& dest_buffer,
                 Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec s = detail::frame_for<detail::BufferEntry<F, wire::Kind::Written>, F>(f, wire::Kind::Written,
                                                                                  detail::notify_of<N>(sync, nd));
  const bool wait_source = N == Notify::Transmitted && sync != nullptr;
  uint64_t tag = detail::write_ahead(dest, orig, dest_buffer, wait_source);
  wire::WrittenDesc d{dest_buffer.addr, orig.size};
  s.desc = &d;
  s.desc_len = sizeof d;
  bool ok = Invoker::current().messengers().to(dest).call(s, P, 0, nullptr);
  if (ok && wait_source) {
    detail::wait_written(dest, tag);
    sync->transmitted();
  }
  return ok;
}

// dest pulls orig with RDMA READ, then runs f(buffer). orig must stay unchanged until the call
// ran: use Notify::Executed and wait on sync before reusing it.
template <Notify N = Notify::Executed, OnFull P = OnFull::Retry, typename F>
bool call_buffer(Thread dest, F f, const memory::RDMAMemory& orig, Synchronizer* sync) {
  wire::NotifyDesc nd;
  FrameSpec s = detail::frame_for<detail::BufferEntry<F, wire::Kind::Read>, F>(f, wire::Kind::Read,
                                                                               detail::notify_of<N>(sync, nd));
  wire::ReadDesc d{orig.address(), orig.rkey, 0, orig.size};
  s.desc = &d;
  s.desc_len = sizeof d;
  return Invoker::current().messengers().to(dest).call(s, P, 0, detail::transmitted_of<N>(sync));
}

template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
bool call_return(Thread dest, F f, ReturnSlot<std::invoke_result_t<F&>>& slot, Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec s = detail::frame_for<detail::ReturnEntry<F>, F>(f, wire::Kind::Return, detail::notify_of<N>(sync, nd));
  wire::ReturnDesc d = slot.arm();
  s.desc = &d;
  s.desc_len = sizeof d;
  return Invoker::current().messengers().to(dest).call(s, P, 0, detail::transmitted_of<N>(sync));
}

// Explicitly registered functions (register_function): the argument bytes travel with the call.
template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry>
bool call_named(Thread dest, uint32_t id, std::span<const std::byte> args, Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec s;
  s.fid = id;
  s.kind = wire::Kind::Named;
  s.notify = detail::notify_of<N>(sync, nd);
  wire::NamedDesc d{args.size()};
  s.desc = &d;
  s.desc_len = sizeof d;
  s.buffer = args.data();
  s.buffer_len = args.size();
  return Invoker::current().messengers().to(dest).call(s, P, 0, detail::transmitted_of<N>(sync));
}

// Every thread of every process runs f once. Executed: sync counts total_threads() runs.
// Transmitted: decremented once, when the call left this thread.
template <Notify N = Notify::Transmitted, typename F>
void broadcast(F f, Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec inner = detail::frame_for<detail::CallEntry<F>, F>(f, wire::Kind::Call, detail::notify_of<N>(sync, nd));
  Thread root;
  std::vector<uint8_t> frame = detail::broadcast_frame(inner, &root);
  FrameSpec s;
  s.raw = frame.data();
  s.raw_len = frame.size();
  Invoker::current().messengers().to(root).call(s, OnFull::Retry, 0, detail::transmitted_of<N>(sync));
}

template <Notify N = Notify::Transmitted, typename F>
void broadcast_buffer(F f, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec inner = detail::frame_for<detail::BufferEntry<F, wire::Kind::Buffer>, F>(f, wire::Kind::Buffer,
                                                                                     detail::notify_of<N>(sync, nd));
  wire::BufferDesc d{buffer.size()};
  inner.desc = &d;
  inner.desc_len = sizeof d;
  inner.buffer = buffer.data();
  inner.buffer_len = buffer.size();
  Thread root;
  std::vector<uint8_t> frame = detail::broadcast_frame(inner, &root);
  FrameSpec s;
  s.raw = frame.data();
  s.raw_len = frame.size();
  Invoker::current().messengers().to(root).call(s, OnFull::Retry, 0, detail::transmitted_of<N>(sync));
}

// Runs the calls addressed to this thread; returns how many ran.
inline int poll() { return Invoker::current().poll(); }
// Who sent the call being run (valid inside a called function).
int caller_rank();

// ---------------------------------------------------------------- send-based (seed 000 §4.3)
namespace send {

template <Notify N = Notify::Transmitted, typename F>
void call(Thread dest, F f, Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec s = detail::frame_for<detail::CallEntry<F>, F>(f, wire::Kind::Call, detail::notify_of<N>(sync, nd));
  detail::send_frame(dest, s);
  if (auto* t = detail::transmitted_of<N>(sync)) t->transmitted();
}

template <Notify N = Notify::Transmitted, typename F>
void call_buffer(Thread dest, F f, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec s = detail::frame_for<detail::BufferEntry<F, wire::Kind::Buffer>, F>(f, wire::Kind::Buffer,
                                                                                 detail::notify_of<N>(sync, nd));
  wire::BufferDesc d{buffer.size()};
  s.desc = &d;
  s.desc_len = sizeof d;
  s.buffer = buffer.data();
  s.buffer_len = buffer.size();
  detail::send_frame(dest, s);
  if (auto* t = detail::transmitted_of<N>(sync)) t->transmitted();
}

template <Notify N = Notify::Transmitted, typename F>
void call_buffer(Thread dest, F f, const memory::RDMAMemory& orig, const RemoteMemoryLocator& dest_buffer,
                 Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec s = detail::frame_for<detail::BufferEntry<F, wire::Kind::Written>, F>(f, wire::Kind::Written,
                                                                                  detail::notify_of<N>(sync, nd));
  // The SEND travels on another queue pair: the WRITE must have completed before it goes.
  detail::wait_written(dest, detail::write_ahead(dest, orig, dest_buffer, true));
  wire::WrittenDesc d{dest_buffer.addr, orig.size};
  s.desc = &d;
  s.desc_len = sizeof d;
  detail::send_frame(dest, s);
  if (auto* t = detail::transmitted_of<N>(sync)) t->transmitted();
}

template <Notify N = Notify::Executed, typename F>
void call_buffer(Thread dest, F f, const memory::RDMAMemory& orig, Synchronizer* sync) {
  wire::NotifyDesc nd;
  FrameSpec s = detail::frame_for<detail::BufferEntry<F, wire::Kind::Read>, F>(f, wire::Kind::Read,
                                                                               detail::notify_of<N>(sync, nd));
  wire::ReadDesc d{orig.address(), orig.rkey, 0, orig.size};
  s.desc = &d;
  s.desc_len = sizeof d;
  detail::send_frame(dest, s);
  if (auto* t = detail::transmitted_of<N>(sync)) t->transmitted();
}

template <Notify N = Notify::Transmitted, typename F>
void call_return(Thread dest, F f, ReturnSlot<std::invoke_result_t<F&>>& slot, Synchronizer* sync = nullptr) {
  wire::NotifyDesc nd;
  FrameSpec s = detail::frame_for<detail::ReturnEntry<F>, F>(f, wire::Kind::Return, detail::notify_of<N>(sync, nd));
  wire::ReturnDesc d = slot.arm();
  s.desc = &d;
  s.desc_len = sizeof d;
  detail::send_frame(dest, s);
  if (auto* t = detail::transmitted_of<N>(sync)) t->transmitted();
}

}  // namespace send

}  // namespace loom::invoke
