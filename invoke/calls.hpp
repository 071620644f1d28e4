#pragma once
// The remote invocation primitives of seed 000 Table 1, one-sided (through this thread's
// Messengers) and send-based (namespace send: through the service thread, no setup).
//
//   call(dest, f, sync)                              dest runs f()
//   call_buffer(dest, f, buffer, sync)               dest runs f(span); the bytes travel with the call
//   call_buffer(dest, f, orig, dest_buffer, sync)    orig is RDMA-written to dest_buffer, then f(span)
//   call_buffer(dest, f, orig, sync)                 dest RDMA-reads orig, then runs f(span)
//                                                    (Async::Yes: running later calls meanwhile)
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

#include "loom/dsm/runtime/remote_memory.hpp"
#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

namespace detail {

template <Notify N>
Synchronizer* transmitted_of(Synchronizer* s) {
  return N == Notify::Transmitted ? s : nullptr;
}

template <typename F>
size_t capture_len() {
  return std::is_empty_v<F> ? 0 : sizeof(F);
}

// The frame of one call form, the same whichever way it travels (Messenger, Aggregator, SEND).
// It points at f's bytes: f must outlive the FrameSpec (the callers' by-value parameter does).
template <Notify N, typename Tag, typename F>
FrameSpec spec(const F& f, wire::Kind kind, Synchronizer* sync) {
  check_capture<F>();
  FrameSpec s;
  s.fid = auto_id<Tag, F>();
  s.kind = kind;
  s.captures = &f;
  s.capture_len = capture_len<F>();
  if constexpr (N == Notify::Executed) {
    if (sync == nullptr) fail("invoke: Notify::Executed needs a Synchronizer");
    s.set_notify(sync->notify_desc());
  }
  return s;
}
template <Notify N, typename F>
FrameSpec call_spec(const F& f, Synchronizer* sync) {
  return spec<N, CallEntry<F>>(f, wire::Kind::Call, sync);
}
template <Notify N, typename F>
FrameSpec buffer_spec(const F& f, std::span<const std::byte> buffer, Synchronizer* sync) {
  FrameSpec s = spec<N, BufferEntry<F, wire::Kind::Buffer>>(f, wire::Kind::Buffer, sync);
  s.set_desc(wire::BufferDesc{buffer.size()});
  s.buffer = buffer.data();
  s.buffer_len = buffer.size();
  return s;
}
template <Notify N, typename F>
FrameSpec written_spec(const F& f, uint64_t dest_addr, uint64_t len, Synchronizer* sync) {
  FrameSpec s = spec<N, BufferEntry<F, wire::Kind::Written>>(f, wire::Kind::Written, sync);
  s.set_desc(wire::WrittenDesc{dest_addr, len});
  return s;
}
template <Notify N, typename F, Async A = Async::No>
FrameSpec read_spec(const F& f, const memory::RDMAMemory& orig, Synchronizer* sync) {
  constexpr wire::Kind K = A == Async::Yes ? wire::Kind::ReadAsync : wire::Kind::Read;
  FrameSpec s = spec<N, BufferEntry<F, K>>(f, K, sync);
  s.set_desc(wire::ReadDesc{orig.address(), orig.rkey, 0, orig.size});
  return s;
}
template <Notify N, typename F>
FrameSpec return_spec(const F& f, ReturnSlot<std::invoke_result_t<F&>>& slot, Synchronizer* sync) {
  FrameSpec s = spec<N, ReturnEntry<F>>(f, wire::Kind::Return, sync);
  s.set_desc(slot.arm());
  return s;
}

// One-sided: through this thread's Messenger to dest, in write mode.
template <Notify N, OnFull P>
bool post(Thread dest, const FrameSpec& s, Synchronizer* sync) {
  return Invoker::current().messengers().to(dest).call(s, P, 0, transmitted_of<N>(sync));
}
// Send-based transport: [thread][frame] through the service thread of dest's process.
void send_frame(Thread dest, const FrameSpec& f);
template <Notify N>
void send(Thread dest, const FrameSpec& s, Synchronizer* sync) {
  send_frame(dest, s);
  if (Synchronizer* t = transmitted_of<N>(sync)) t->transmitted();
}
// Writes orig into dest_buffer ahead of the call (same queue pair, so placed before it).
uint64_t write_ahead(Thread dest, const memory::RDMAMemory& orig, const RemoteMemoryLocator& dest_buffer, bool signaled);
void wait_written(Thread dest, uint64_t tag);
// Wraps `inner` into a broadcast frame rooted at this thread and sends it to this thread, which
// forwards it down the tree and runs it like every other thread.
void broadcast(const FrameSpec& inner, Synchronizer* transmitted, std::span<const uint64_t> per_rank = {});
// broadcast_buffer's WRITE form: orig written into every process's buffer (each WRITE complete
// before the calls go, as the tree's calls travel on other queue pairs); the addresses, one per
// process, for the frame.
std::vector<uint64_t> write_everywhere(const memory::RDMAMemory& orig, std::span<const RemoteMemoryLocator> dest_buffers);

}  // namespace detail

// ---------------------------------------------------------------- one-sided

template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
bool call(Thread dest, F f, Synchronizer* sync = nullptr) {
  return detail::post<N, P>(dest, detail::call_spec<N>(f, sync), sync);
}
template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
bool call(Thread dest, F f, Synchronizer& sync) {
  return call<N, P>(dest, f, &sync);
}

template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
bool call_buffer(Thread dest, F f, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) {
  return detail::post<N, P>(dest, detail::buffer_spec<N>(f, buffer, sync), sync);
}

// orig (registered, this process) is RDMA-written into dest_buffer (registered, dest's process);
// then dest runs f(dest_buffer). With Transmitted, sync is decremented once orig may be reused.
template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
bool call_buffer(Thread dest, F f, const memory::RDMAMemory& orig, const RemoteMemoryLocator& dest_buffer,
                 Synchronizer* sync = nullptr) {
  FrameSpec s = detail::written_spec<N>(f, dest_buffer.addr, orig.size, sync);
  const bool wait_source = N == Notify::Transmitted && sync != nullptr;
  uint64_t tag = detail::write_ahead(dest, orig, dest_buffer, wait_source);
  bool ok = Invoker::current().messengers().to(dest).call(s, P, 0, nullptr);
  if (ok && wait_source) {
    detail::wait_written(dest, tag);
    sync->transmitted();
  }
  return ok;
}

// dest pulls orig with RDMA READ, then runs f(buffer). orig must stay unchanged until the call
// ran: use Notify::Executed and wait on sync before reusing it. With Async::Yes dest runs the
// calls behind this one while its READ is in flight (config.hpp).
template <Notify N = Notify::Executed, OnFull P = OnFull::Retry, Async A = Async::No, typename F>
bool call_buffer(Thread dest, F f, const memory::RDMAMemory& orig, Synchronizer* sync) {
  return detail::post<N, P>(dest, detail::read_spec<N, F, A>(f, orig, sync), sync);
}

template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry, typename F>
bool call_return(Thread dest, F f, ReturnSlot<std::invoke_result_t<F&>>& slot, Synchronizer* sync = nullptr) {
  return detail::post<N, P>(dest, detail::return_spec<N>(f, slot, sync), sync);
}

// Explicitly registered functions (register_function): the argument bytes travel with the call.
template <Notify N = Notify::Transmitted, OnFull P = OnFull::Retry>
bool call_named(Thread dest, uint32_t id, std::span<const std::byte> args, Synchronizer* sync = nullptr) {
  FrameSpec s;
  s.fid = id;
  s.kind = wire::Kind::Named;
  if constexpr (N == Notify::Executed) {
    if (sync == nullptr) fail("invoke: Notify::Executed needs a Synchronizer");
    s.set_notify(sync->notify_desc());
  }
  s.set_desc(wire::NamedDesc{args.size()});
  s.buffer = args.data();
  s.buffer_len = args.size();
  return detail::post<N, P>(dest, s, sync);
}

// Every thread of every process runs f once. Executed: sync counts total_threads() runs.
// Transmitted: decremented once, when the call left this thread.
template <Notify N = Notify::Transmitted, typename F>
void broadcast(F f, Synchronizer* sync = nullptr) {
  detail::broadcast(detail::call_spec<N>(f, sync), detail::transmitted_of<N>(sync));
}

template <Notify N = Notify::Transmitted, typename F>
void broadcast_buffer(F f, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) {
  detail::broadcast(detail::buffer_spec<N>(f, buffer, sync), detail::transmitted_of<N>(sync));
}

// Every thread of every process runs f(buffer) on its own copy of orig (registered, this
// process), which it pulls from here with one RDMA READ (seed 000's broadcast_buffer, READ form;
// the calls travel down the broadcast tree, the bytes come from the root). orig must stay
// unchanged until every thread ran: Executed, sync counting total_threads() runs.
template <Notify N = Notify::Executed, typename F>
void broadcast_buffer(F f, const memory::RDMAMemory& orig, Synchronizer* sync) {
  detail::broadcast(detail::read_spec<N>(f, orig, sync), detail::transmitted_of<N>(sync));
}

// Every thread of process r runs f(buffer) on dest_buffers[r] (one per process, in rank order:
// registered memory there, at least orig.size bytes), into which this thread RDMA-WRITEs orig
// first (seed 000's broadcast_buffer, WRITE form; the calls travel down the broadcast tree).
// Transmitted: orig may be reused as soon as this returns.
template <Notify N = Notify::Transmitted, typename F>
void broadcast_buffer(F f, const memory::RDMAMemory& orig, std::span<const RemoteMemoryLocator> dest_buffers,
                      Synchronizer* sync = nullptr) {
  const std::vector<uint64_t> at = detail::write_everywhere(orig, dest_buffers);
  detail::broadcast(detail::written_spec<N>(f, 0, orig.size, sync), detail::transmitted_of<N>(sync), at);
}

// Runs the calls addressed to this thread; returns how many ran.
inline int poll() { return Invoker::current().poll(); }
// Who sent the call being run (valid inside a called function).
int caller_rank();

// ---------------------------------------------------------------- send-based (seed 000 §4.3)
namespace send {

template <Notify N = Notify::Transmitted, typename F>
void call(Thread dest, F f, Synchronizer* sync = nullptr) {
  detail::send<N>(dest, detail::call_spec<N>(f, sync), sync);
}

template <Notify N = Notify::Transmitted, typename F>
void call_buffer(Thread dest, F f, std::span<const std::byte> buffer, Synchronizer* sync = nullptr) {
  detail::send<N>(dest, detail::buffer_spec<N>(f, buffer, sync), sync);
}

template <Notify N = Notify::Transmitted, typename F>
void call_buffer(Thread dest, F f, const memory::RDMAMemory& orig, const RemoteMemoryLocator& dest_buffer,
                 Synchronizer* sync = nullptr) {
  // The SEND travels on another queue pair: the WRITE must have completed before it goes.
  detail::wait_written(dest, detail::write_ahead(dest, orig, dest_buffer, true));
  detail::send<N>(dest, detail::written_spec<N>(f, dest_buffer.addr, orig.size, sync), sync);
}

template <Notify N = Notify::Executed, Async A = Async::No, typename F>
void call_buffer(Thread dest, F f, const memory::RDMAMemory& orig, Synchronizer* sync) {
  detail::send<N>(dest, detail::read_spec<N, F, A>(f, orig, sync), sync);
}

template <Notify N = Notify::Transmitted, typename F>
void call_return(Thread dest, F f, ReturnSlot<std::invoke_result_t<F&>>& slot, Synchronizer* sync = nullptr) {
  detail::send<N>(dest, detail::return_spec<N>(f, slot, sync), sync);
}

}  // namespace send

}  // namespace loom::invoke
