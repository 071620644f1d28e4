// The writing direction: rmalloc in the peer's heap (deferred: from this end's view, brought up
// to date by READs of the peer's free list; immediate: asked of the peer), rwrite and roffer, and
// the writer's own frees.
#include <cstring>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/service.hpp"
#include "loom/rpipe/impl.hpp"
#include "loom/rpipe/service_calls.hpp"

namespace loom::rpipe {

RAddr Pipe::Impl::rmalloc(size_t size) {
  if (!writes) fail("rmalloc: this end of pipe ", pair, " with rank ", peer, " reads (a half-duplex pipe's reader allocates nothing)");
  if (size == 0) fail("rmalloc: size 0");
  const uint64_t ext = codec::extent(size);
  if (ext > o.segment_bytes)
    fail("rmalloc: ", size, " bytes (", ext, " with the flag) cannot fit a segment of ", o.segment_bytes, " bytes (Options::segment_bytes)");
  retire_complete();
  const uint64_t pos = o.sync == Sync::Deferred ? take_deferred(ext) : take_immediate(ext);
  RAddr a;
  a.serial = out.next_serial++;
  a.segment = static_cast<uint32_t>(pos / o.segment_bytes);
  a.offset = pos % o.segment_bytes;
  a.size = size;
  a.pipe = id;
  a.writer = self;
  out.live.emplace(a.serial, OutAlloc{a, false, 0});
  ++out.stats.rmallocs;
  return a;
}

void Pipe::Impl::note_in_use(uint64_t in_use) {
  out.stats.in_use_bytes = in_use;
  if (in_use > out.stats.peak_in_use_bytes) out.stats.peak_in_use_bytes = in_use;
}

uint64_t Pipe::Impl::take_deferred(uint64_t ext) {
  FreeRanges& v = *out.view;
  std::optional<uint64_t> pos = v.take(ext);
  // Out of space: what the peer has freed, version by version (it publishes the next once it
  // sees our acknowledgement, at its next call), for as long as it spins and yields; only then
  // a new segment, and at the last segment, a wait for frees.
  wait::Backoff b(kWaitYields);
  while (!pos && v.segments() != 0 && !b.should_sleep()) {
    if (collect()) pos = v.take(ext);
    else b.pause();
  }
  if (!pos && v.segments() < o.max_segments) {
    grow_remote();
    pos = v.take(ext);
  }
  if (!pos) {
    ++out.stats.heap_waits;
    wait_until([&] { return collect() && (pos = v.take(ext)).has_value(); }, "rmalloc: waiting for rank ", peer,
               " to free space in a full heap (", v.segments(), " segments of ", o.segment_bytes, " bytes)");
  }
  note_in_use(v.total_bytes() - v.free_bytes());
  return *pos;
}

uint64_t Pipe::Impl::take_immediate(uint64_t ext) {
  // The peer's service thread allocates in the heap it keeps; a full heap is answered as such and
  // asked again until the peer has freed space.
  std::optional<service::AllocateReply> r;
  auto ask = [&] {
    r = service::allocate(*this, ext);
    return r->status == service::kGranted;
  };
  if (!ask()) {
    ++out.stats.heap_waits;
    wait_until(ask, "rmalloc: waiting for rank ", peer, " to free space in a full heap");
  }
  wait_writes_done();
  note_in_use(r->in_use);
  return r->pos;
}

bool Pipe::Impl::collect() {
  // One READ of the peer's whole free list; a version after the last collected is taken and
  // acknowledged, so that the peer may publish the next.
  if (out.view->segments() == 0) return false;
  ++out.stats.collects;
  const size_t bytes = codec::free_list_bytes(o.free_list_capacity);
  auto p = tx->post(fabric::read_request({reinterpret_cast<uint64_t>(at(lay.peer_free)), static_cast<uint32_t>(bytes), ctrl.lkey},
                                         peer_ctrl + lay.free_list, peer_ctrl_rkey),
                    true);
  if (!p.ok()) fail("rpipe: a READ from rank ", peer, " was refused (", fabric::to_string(p.result), ")");
  tx->wait(p.tag);
  auto got = codec::read_free_list(at(lay.peer_free), o.free_list_capacity, out.collected + 1, out.view->total_bytes(), peer);
  if (!got) {
    ++out.stats.empty_collects;
    return false;
  }
  wait_writes_done();
  for (const codec::FreeRange& f : *got) out.view->give(f.pos, f.len);
  ++out.collected;
  post_word(lay.ack, out.collected);
  return true;
}

void Pipe::Impl::add_out_segment(uint32_t index, uint64_t addr, uint32_t rkey) {
  if (index != out.segments.size()) fail("rpipe: rank ", peer, " made segment ", index, " where ", out.segments.size(), " was next");
  Segment s;
  s.local = rt.heap(o.zone).allocate(o.segment_bytes);
  std::memset(s.local.addr, 0, o.segment_bytes);  // touched once now, as the reader's copy is
  s.remote_addr = addr;
  s.remote_rkey = rkey;
  s.remote_mapped = map_peer(addr, rkey, o.segment_bytes);
  out.segments.push_back(s);
  if (out.view) out.view->add_segment(index);
}

void Pipe::Impl::grow_remote() {
  const service::SegmentReply r = service::new_segment(*this);
  add_out_segment(r.index, r.addr, r.rkey);
}

Pipe::Impl::OutAlloc& Pipe::Impl::outgoing(const RAddr& a, const char* what) {
  auto it = out.live.find(a.serial);
  if (it == out.live.end() || !(it->second.addr == a))
    fail(what, ": serial ", a.serial, " is not a live allocation of this end of pipe ", id, " (freed, handed over, or never allocated)");
  return it->second;
}

void Pipe::Impl::announce(const codec::Slot& slot) {
  if (tx->errors() != 0) fail("rpipe: a request to rank ", peer, " failed (", fabric::to_string(tx->last_error()), "): the pipe is broken");
  // A credit: fewer than `width` messages announced and not yet taken by the peer.
  if (out.sent - load(lay.credit) >= width) {
    ++out.stats.credit_waits;
    wait_until([&] { return out.sent - load(lay.credit) < width; }, "rpipe: waiting for rank ", peer, " to take a message");
  }
  const uint32_t s = static_cast<uint32_t>(out.sent % width);
  if (peer_ctrl_mapped != nullptr) {  // the stamp stored last, paired with try_next's load of it
    uint8_t* to = peer_ctrl_mapped + lay.ring + s * codec::kSlotBytes;
    std::memcpy(to, &slot, codec::kStampOffset);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(to + codec::kStampOffset)).store(slot.stamp, std::memory_order_release);
    ++out.sent;
    return;
  }
  if (slot_tags[s] != 0) tx->wait(slot_tags[s] - 1);
  uint8_t* staged = at(lay.staging + s * codec::kSlotBytes);
  std::memcpy(staged, &slot, sizeof slot);
  auto p = tx->post(fabric::write_request({reinterpret_cast<uint64_t>(staged), codec::kSlotBytes, ctrl.lkey},
                                          peer_ctrl + lay.ring + s * codec::kSlotBytes, peer_ctrl_rkey, false));
  if (!p.ok()) fail("rpipe: a WRITE to rank ", peer, " was refused (", fabric::to_string(p.result), ")");
  slot_tags[s] = p.tag + 1;
  ++out.sent;
}

void Pipe::Impl::rwrite(const RAddr& a) {
  OutAlloc& al = outgoing(a, "rwrite");
  if (al.sent) fail("rwrite: serial ", a.serial, " was handed over already");
  const Segment& seg = out.segments[a.segment];
  uint8_t* src = seg.local.bytes() + a.offset;
  if (seg.remote_mapped != nullptr) {  // copied; the flag stored last, paired with try_next's wait
    uint8_t* to = seg.remote_mapped + a.offset;
    std::memcpy(to, src, a.size);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(to + codec::flag_offset(a.size))).store(a.serial, std::memory_order_release);
    al.sent = al.stored = true;
    out.in_flight.push_back(a.serial);
    announce(codec::make_slot(a, Kind::Written, out.sent));
    return;
  }
  std::memcpy(src + codec::flag_offset(a.size), &a.serial, 8);
  // Payload and flag in one WRITE, straight from this end's copy: the flag lands last.
  const uint32_t len = static_cast<uint32_t>(codec::flag_offset(a.size) + 8);
  auto p = tx->post(fabric::write_request({reinterpret_cast<uint64_t>(src), len, seg.local.lkey}, seg.remote_addr + a.offset,
                                          seg.remote_rkey, false));
  if (!p.ok()) fail("rwrite: the WRITE to rank ", peer, " was refused (", fabric::to_string(p.result), ")");
  al.sent = true;
  al.tag = p.tag;
  out.last_write = p.tag;
  out.in_flight.push_back(a.serial);
  announce(codec::make_slot(a, Kind::Written, out.sent));
}

void Pipe::Impl::roffer(const RAddr& a) {
  OutAlloc& al = outgoing(a, "roffer");
  if (al.sent) fail("roffer: serial ", a.serial, " was handed over already");
  uint8_t* src = out.segments[a.segment].local.bytes() + a.offset;
  // The peer READs the flag with the data: stored last, with release.
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(src + codec::flag_offset(a.size))).store(a.serial, std::memory_order_release);
  announce(codec::make_slot(a, Kind::Offered, out.sent, reinterpret_cast<uint64_t>(src), out.segments[a.segment].local.rkey));
  out.live.erase(a.serial);
}

bool Pipe::Impl::in_use(const RAddr& a) {
  if (a.pipe != id || a.writer != self) fail("in_use: the address is not one this end of pipe ", id, " allocated");
  auto it = out.live.find(a.serial);
  if (it == out.live.end() || !it->second.sent) return false;
  return !it->second.stored && !tx->test(it->second.tag);
}

void Pipe::Impl::wait_writes_done() {
  // Space the reader freed may be the source of a WRITE not yet completed here (a reliable
  // connection may send its bytes again until it is acknowledged): it is "in use" until then
  // (seed 002's in-use/re-use). Freed space is older than the last WRITE, so waiting for that
  // one covers all; usually it is done already.
  if (out.last_write) tx->wait(*out.last_write);
}

void Pipe::Impl::retire_complete() {
  // rwritten allocations stay until their WRITE completed; then they are the peer's alone.
  while (!out.in_flight.empty()) {
    auto it = out.live.find(out.in_flight.front());
    if (it != out.live.end() && !it->second.stored && !tx->complete(it->second.tag)) break;
    if (it != out.live.end()) out.live.erase(it);
    out.in_flight.pop_front();
  }
}

void Pipe::Impl::free_outgoing(const RAddr& a) {
  OutAlloc& al = outgoing(a, "rfree");
  if (al.sent) fail("rfree: serial ", a.serial, " was handed to rank ", peer, ", which frees it");
  const uint64_t pos = position(a), ext = codec::extent(a.size);
  out.live.erase(a.serial);
  if (o.sync == Sync::Deferred) {
    out.view->give(pos, ext);
    note_in_use(out.view->total_bytes() - out.view->free_bytes());
  } else {
    service::free(*this, pos, ext);
  }
}

}  // namespace loom::rpipe
