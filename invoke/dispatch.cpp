// Dispatch: one frame from the wire decoded and run (docs/invocation.md, "Protocol (Messenger)"). Nothing in
// a frame is trusted: every length, id, kind and descriptor is checked before use, and a bad
// frame is reported (Invoker::report) and skipped, never run.
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loom/invoke/checks.hpp"
#include "loom/invoke/inbox.hpp"
#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

namespace {
constexpr size_t kMaxReadBytes = size_t{1} << 30;  // call_buffer (READ form): larger pulls are refused

}  // namespace

// One frame being decoded: the cursor over its bytes and what has been learned so far.
struct Inbox::Dispatch {
  enum class Step { Run, Done, Deferred };

  Inbox& ib;
  const uint8_t* frame;
  size_t frame_len;
  int src_rank;
  uint32_t fid = 0;
  uint8_t kind = 0;
  const uint8_t* p = nullptr;
  size_t left = 0;
  bool has_notify = false;
  wire::NotifyDesc nd{};
  wire::ReturnDesc rd{};
  memory::RDMAMemory pulled;  // the caller's buffer, READ form
  std::optional<uint64_t> written_at;  // a broadcast's WRITE form: where the bytes are in this process

  Dispatch(Inbox& i, const uint8_t* f, size_t len, int src) : ib(i), frame(f), frame_len(len), src_rank(src) {
    uint64_t w;
    std::memcpy(&w, f, 8);
    fid = wire::frame_fid(w);
    kind = wire::frame_kind(w);
    has_notify = wire::frame_notify(w);
    p = f + wire::kFrameHeader;
    left = len - wire::kFrameHeader;
  }
  ~Dispatch() { free_pulled(); }

  [[gnu::noinline, gnu::cold]] Step bad(const std::string& why) {
    ib.report_bad_call(src_rank, fid, why);
    return Step::Done;
  }
  void free_pulled() {
    if (pulled.addr) ib.inv_.heap().free(pulled.addr);
    pulled = memory::RDMAMemory{};
  }
  template <typename D>
  void take(D& d) {
    std::memcpy(&d, p, sizeof d);
  }

  [[gnu::always_inline]] Step notification();
  [[gnu::noinline]] Step broadcast(bool nested);
  [[gnu::always_inline]] Step decode(const Entry& e, Incoming& in);
  [[gnu::always_inline]] Step call(size_t cap, Incoming& in);
  [[gnu::noinline]] Step buffer(size_t cap, Incoming& in);
  [[gnu::noinline]] Step written(size_t cap, Incoming& in);
  [[gnu::noinline]] Step read(size_t cap, const Entry& e, Incoming& in);
  [[gnu::always_inline]] Step ret(size_t cap, Incoming& in);
  [[gnu::noinline]] Step named(const Entry& e);
  // Whether the frame is done with (ran, or skipped as bad): false while its READ is in flight.
  [[gnu::always_inline]] bool run(bool nested);
};

inline Inbox::Dispatch::Step Inbox::Dispatch::notification() {
  if (!has_notify) return Step::Run;
  if (left < sizeof nd) return bad("truncated notification descriptor");
  take(nd);
  p += sizeof nd;
  left -= sizeof nd;
  return Step::Run;
}

// A broadcast carries a whole frame: forwarded down the tree, then run here (never nested).
Inbox::Dispatch::Step Inbox::Dispatch::broadcast(bool nested) {
  wire::BroadcastDesc bd;
  if (nested) return bad("broadcast inside a broadcast");
  if (left < sizeof bd + wire::kFrameHeader) return bad("truncated broadcast");
  take(bd);
  if (bd.root >= static_cast<uint32_t>(ib.inv_.total_threads())) return bad("broadcast root out of range");
  const int processes = ib.inv_.runtime().size();
  if (bd.ranks != 0 && bd.ranks != static_cast<uint32_t>(processes))
    return bad("broadcast with " + std::to_string(bd.ranks) + " buffer addresses for " + std::to_string(processes) + " processes");
  const size_t table = size_t{bd.ranks} * 8;
  if (left < sizeof bd + wire::kFrameHeader + table) return bad("truncated broadcast");
  const uint8_t* inner = p + sizeof bd;
  const size_t inner_len = left - sizeof bd - table;
  uint64_t iw;
  std::memcpy(&iw, inner, 8);
  if (wire::frame_len(iw) != inner_len) return bad("broadcast frame length mismatch");
  if (bd.ranks != 0 && wire::frame_kind(iw) != static_cast<uint8_t>(wire::Kind::Written))
    return bad("broadcast buffer addresses with a call that is not a written call_buffer");
  if (wire::frame_kind(iw) == static_cast<uint8_t>(wire::Kind::ReadAsync))
    return bad("broadcast of an asynchronous READ-form call_buffer (broadcasts pull synchronously)");
  ib.forward_broadcast(frame, frame_len, bd.root);
  // The call is the root's (caller_rank(), the process a READ form pulls from), whoever forwarded it.
  Dispatch here(ib, inner, inner_len, ib.inv_.thread_of(static_cast<int>(bd.root)).rank);
  if (bd.ranks != 0) {
    uint64_t at;
    std::memcpy(&at, inner + inner_len + size_t(ib.inv_.runtime().rank()) * 8, 8);
    here.written_at = at;
  }
  here.run(true);
  return Step::Done;
}

inline Inbox::Dispatch::Step Inbox::Dispatch::call(size_t cap, Incoming& in) {
  if (left != cap) return bad("call of " + std::to_string(left) + " bytes, expected " + std::to_string(cap));
  in.captures = p;
  return Step::Run;
}

// call_buffer, buffer carried in the frame after the captures.
Inbox::Dispatch::Step Inbox::Dispatch::buffer(size_t cap, Incoming& in) {
  wire::BufferDesc d;
  if (left < sizeof d + cap) return bad("truncated call_buffer");
  take(d);
  if (d.len > left || wire::pad8(d.len) != left - sizeof d - cap)
    return bad("call_buffer claims " + std::to_string(d.len) + " bytes; the call carries " + std::to_string(left - sizeof d - cap));
  in.captures = p + sizeof d;
  in.buffer = std::span(reinterpret_cast<std::byte*>(const_cast<uint8_t*>(p + sizeof d + cap)), d.len);
  return Step::Run;
}

// call_buffer, buffer already written by the caller into registered memory here.
Inbox::Dispatch::Step Inbox::Dispatch::written(size_t cap, Incoming& in) {
  wire::WrittenDesc d;
  if (left != sizeof d + cap) return bad("malformed call_buffer (written form)");
  take(d);
  if (written_at) d.addr = *written_at;  // checked as any written address
  if (!ib.inv_.runtime().is_registered(reinterpret_cast<void*>(d.addr), d.len))
    return bad("call_buffer destination is not registered memory of this process");
  in.captures = p + sizeof d;
  in.buffer = std::span(reinterpret_cast<std::byte*>(d.addr), d.len);
  return Step::Run;
}

// call_buffer, buffer pulled here with one READ of the caller's registered memory; waited for
// here, or (ReadAsync) left in flight and the call handed to the Inbox's pulls (pull.cpp).
Inbox::Dispatch::Step Inbox::Dispatch::read(size_t cap, const Entry& e, Incoming& in) {
  wire::ReadDesc d;
  if (left != sizeof d + cap) return bad("malformed call_buffer (read form)");
  take(d);
  if (d.len == 0 || d.len > kMaxReadBytes) return bad("call_buffer (read form) of " + std::to_string(d.len) + " bytes");
  in.captures = p + sizeof d;
  pulled = ib.inv_.heap().allocate(d.len);
  auto& tx = ib.inv_.tx(src_rank);
  const uint64_t errors = tx.errors();
  fabric::SendWr wr;
  wr.opcode = fabric::Opcode::Read;
  wr.local = fabric::Sge{pulled.address(), static_cast<uint32_t>(d.len), pulled.lkey};
  wr.remote_addr = d.addr;
  wr.rkey = d.rkey;
  signal::Posted r = tx.post(wr, true);
  if (!r.ok()) return bad(std::string("posting the READ failed: ") + fabric::to_string(r.result));
  if (kind == static_cast<uint8_t>(wire::Kind::ReadAsync)) {
    ib.defer_pull(Pull{&e, fid, src_rank, std::vector<uint8_t>(in.captures, in.captures + cap),
                       std::exchange(pulled, {}).slice(0, d.len),
                       r.tag, errors, has_notify, nd});
    return Step::Deferred;
  }
  tx.wait(r.tag);
  if (tx.errors() != errors) return bad(std::string("the READ of the caller's buffer failed: ") + fabric::to_string(tx.last_error()));
  in.buffer = std::span(static_cast<std::byte*>(pulled.addr), d.len);
  return Step::Run;
}

inline Inbox::Dispatch::Step Inbox::Dispatch::ret(size_t cap, Incoming& in) {
  if (left != sizeof rd + cap) return bad("malformed call_return");
  take(rd);
  in.ret = &rd;
  in.captures = p + sizeof rd;
  return Step::Run;
}

// A named call (registered by name with a byte payload) runs here; it has no captures.
Inbox::Dispatch::Step Inbox::Dispatch::named(const Entry& e) {
  wire::NamedDesc d;
  if (left < sizeof d) return bad("truncated named call");
  take(d);
  if (d.len > left || wire::pad8(d.len) != left - sizeof d) return bad("named call length mismatch");
  {
    CallScope scope(src_rank, &e, ib.index_);
    e.named(src_rank, std::span(reinterpret_cast<const std::byte*>(p + sizeof d), d.len));
  }
  if (has_notify) ib.notify(nd);
  return Step::Done;
}

// The kind's descriptor, checked against the function's registration.
inline Inbox::Dispatch::Step Inbox::Dispatch::decode(const Entry& e, Incoming& in) {
  const size_t cap = wire::pad8(e.capture_size);
  in.src_rank = src_rank;
  in.inbox = &ib;
  in.capture_len = e.capture_size;
  switch (static_cast<wire::Kind>(kind)) {
    case wire::Kind::Call: return call(cap, in);
    case wire::Kind::Buffer: return buffer(cap, in);
    case wire::Kind::Written: return written(cap, in);
    case wire::Kind::Read:
    case wire::Kind::ReadAsync: return read(cap, e, in);
    case wire::Kind::Return: return ret(cap, in);
    case wire::Kind::Named: return named(e);
    default: return bad("unknown call kind");
  }
}

inline bool Inbox::Dispatch::run(bool nested) {
  if (notification() == Step::Done) return true;
  if (kind == static_cast<uint8_t>(wire::Kind::Broadcast)) {
    broadcast(nested);
    return true;
  }
  const Entry* e = nullptr;
  if (kind == 0 || kind > wire::kMaxKind) {
    bad("unknown call kind " + std::to_string(kind));
    return true;
  }
  if (!ib.lookup(fid, &e)) {
    bad("unknown function id (not registered in this program)");
    return true;
  }
  if (static_cast<uint8_t>(e->kind) != kind) {
    bad("function '" + e->name + "' is registered for call kind " + std::to_string(static_cast<int>(e->kind)) +
        ", the call is kind " + std::to_string(kind));
    return true;
  }
  Incoming in;
  try {
    const Step step = decode(*e, in);
    if (step != Step::Run) return step == Step::Done;
    CallScope scope(src_rank, e, ib.index_);
    e->fn(in);
  } catch (const Error& err) {
    bad(err.what());
    return true;
  }
  free_pulled();
  if (has_notify) ib.notify(nd);
  return true;
}

bool Inbox::run_frame(const uint8_t* f, size_t len, int src_rank, bool nested) {
  if (discard_ != nullptr) [[unlikely]] {
    discard_frame(f);
    return true;
  }
  return Dispatch(*this, f, len, src_rank).run(nested);
}

void Inbox::report_bad_call(int src_rank, uint32_t fid, const std::string& why) {
  char id[16];
  std::snprintf(id, sizeof id, "%08x", fid);
  inv_.report("bad call from rank " + std::to_string(src_rank) + " (function id 0x" + id + "): " + why);
}

// Teardown: a call that arrived but was never run is named and counted instead of run.
void Inbox::discard_frame(const uint8_t* f) {
  uint64_t w;
  std::memcpy(&w, f, 8);
  const Entry* e = nullptr;
  std::string name;
  if (wire::frame_kind(w) == static_cast<uint8_t>(wire::Kind::Broadcast)) name = "a broadcast";
  else if (lookup(wire::frame_fid(w), &e)) name = e->display;
  else name = "an unknown function id";
  ++(*discard_)[name];
}

Unrun Inbox::discard_unrun() {
  Unrun unrun;
  discard_ = &unrun;
  while (poll() > 0) {
  }
  discard_pulls();
  discard_ = nullptr;
  return unrun;
}

// A record's frames, in order; pad frames skipped. The per-frame path (this loop, the function
// cache, the Call decoder) is one translation unit: a trad record carries many small calls.
void Inbox::run_record(Channel& c, const uint8_t* rec, size_t len) {
  const uint8_t* p = rec + 8;
  const uint8_t* end = rec + len - 8;
  uint64_t ran = 0;  // counted once per record, after its calls ran
  while (p < end) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    size_t flen = wire::frame_len(w);
    if (flen < wire::kFrameHeader || flen > static_cast<size_t>(end - p)) {
      count_executed(ran);
      inv_.report("malformed call from rank " + std::to_string(c.src_rank) + ": frame of " + std::to_string(flen) +
                  " bytes in a record with " + std::to_string(end - p) + " bytes left; rest of the record skipped");
      return;
    }
    if (w != wire::pad_frame_word() && run_frame(p, flen, c.src_rank, false)) ++ran;
    p += flen;
  }
  count_executed(ran);
}

bool Inbox::lookup(uint32_t id, const Entry** e) {
  // Calls come in runs of one function (a loop at the sender): remember the last one.
  if (id == last_id_ && last_entry_ != nullptr) {
    *e = last_entry_;
    return true;
  }
  auto it = cache_.find(id);
  if (it == cache_.end()) {
    Entry found;
    if (!Registry::instance().lookup(id, &found)) return false;
    it = cache_.emplace(id, std::move(found)).first;
  }
  *e = &it->second;  // unordered_map nodes do not move
  last_id_ = id;
  last_entry_ = *e;
  return true;
}

}  // namespace loom::invoke
