// The reading direction: messages taken from the ring in order (each checked, its flag waited
// for), credits given back, rread's READs of offered bytes, and frees recorded (deferred: in the
// sorted, coalesced list the writer reads; immediate: in the heap kept here).
#include <cstring>

#include "loom/dsm/common/error.hpp"
#include "loom/rpipe/impl.hpp"

namespace loom::rpipe {

std::optional<Message> Pipe::Impl::try_next() {
  if (!reads) fail("next: this end of pipe ", pair, " with rank ", peer, " writes (a half-duplex pipe's writer takes no messages)");
  serve();
  const size_t slot_at = lay.ring + (in.taken % width) * codec::kSlotBytes;
  if (load(slot_at + codec::kStampOffset) != in.taken + 1) return std::nullopt;
  codec::Slot s;
  std::memcpy(&s, at(slot_at), sizeof s);
  const codec::SlotLimits lim{in.count.load(std::memory_order_acquire), o.segment_bytes, in.last_serial};
  codec::SlotResult r = codec::decode_slot(s, lim, peer, id);
  if (!r.message) fail("rpipe: rank ", peer, " announced a message this end refuses: ", r.error);
  const Message m = *r.message;
  if (m.kind == Kind::Written) {
    // The flag after the data comes with the data's WRITE, placed last (NotifiedLayout).
    const uint8_t* flag = target(m.addr) + codec::flag_offset(m.addr.size);
    auto landed = [&] {
      return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(flag))).load(std::memory_order_acquire) ==
             m.addr.serial;
    };
    if (!landed()) wait_until(landed, "rpipe: waiting for the data of rank ", peer, "'s message ", m.addr.serial);
  }
  ++in.taken;
  in.last_serial = m.addr.serial;
  in.held.emplace(m.addr.serial, InEntry{m.addr, m.kind, m.kind == Kind::Written, s.source, s.source_rkey});
  report_taken();
  return m;
}

void Pipe::Impl::report_taken() {
  // The writer's credits: our count of messages taken, every half width (every one at width 1).
  const uint64_t every = std::max<uint64_t>(1, width / 2);
  if (in.taken - in.reported < every) return;
  post_word(lay.credit, in.taken);
  in.reported = in.taken;
}

Pipe::Impl::InEntry& Pipe::Impl::incoming(const RAddr& a, const char* what) {
  if (a.writer != peer) fail(what, ": the address was allocated by rank ", a.writer, ", not by either end of this pipe");
  auto it = in.held.find(a.serial);
  if (it == in.held.end() || !(it->second.addr == a))
    fail(what, ": serial ", a.serial, " from rank ", peer, " is not held by this end (freed, or never taken with next)");
  return it->second;
}

uint8_t* Pipe::Impl::target(const RAddr& a) { return in.segments[a.segment].bytes() + a.offset; }

void Pipe::Impl::read_offered(const InEntry& e, uint8_t* dst, size_t size, uint64_t flag_at) {
  // One READ of data and flag when all of it is wanted; else the data's first `size` bytes and
  // the flag apart. The flag was stored before the announcement we took: it must show the serial.
  const uint32_t lkey = in.segments[e.addr.segment].lkey;
  uint64_t last = 0;
  auto read = [&](uint64_t from, uint64_t len) {
    auto p = tx->post(fabric::read_request({reinterpret_cast<uint64_t>(dst + from), static_cast<uint32_t>(len), lkey}, e.source + from,
                                           e.source_rkey),
                      true);
    if (!p.ok()) fail("rread: the READ from rank ", peer, " was refused (", fabric::to_string(p.result), ")");
    last = p.tag;
  };
  if (size == e.addr.size) {
    read(0, flag_at + 8);
  } else {
    read(0, size);
    read(flag_at, 8);
  }
  tx->wait(last);
  if (tx->errors() != 0) fail("rread: the READ from rank ", peer, " failed (", fabric::to_string(tx->last_error()), ")");
}

void Pipe::Impl::rread(const RAddr& a, size_t size) {
  InEntry& e = incoming(a, "rread");
  if (e.kind != Kind::Offered) fail("rread: serial ", a.serial, " was written (rwrite), its bytes are here: use rmem");
  if (size == 0) size = a.size;
  if (size > a.size) fail("rread: ", size, " bytes of a message of ", a.size);
  uint8_t* dst = target(a);
  const uint64_t flag_at = codec::flag_offset(a.size);
  if (const uint8_t* from = map_peer(e.source, e.source_rkey, flag_at + 8, fabric::kRemoteRead)) {
    // Mapped here (shared memory): loads instead of READs. The flag first, paired with roffer's
    // release store; the writer no longer changes an offered copy.
    const uint64_t f = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(from + flag_at))).load(std::memory_order_acquire);
    std::memcpy(dst, from, size);
    std::memcpy(dst + flag_at, &f, 8);
  } else {
    read_offered(e, dst, size, flag_at);
  }
  uint64_t flag;
  std::memcpy(&flag, dst + flag_at, 8);
  if (flag != a.serial) fail("rread: rank ", peer, "'s copy of serial ", a.serial, " is not offered (its flag reads ", flag, ")");
  e.ready = true;
}

void Pipe::Impl::free_incoming(const RAddr& a) {
  incoming(a, "rfree");
  in.held.erase(a.serial);
  const uint64_t pos = position(a), ext = codec::extent(a.size);
  if (o.sync == Sync::Immediate) {
    std::lock_guard<std::mutex> g(in.mu);
    in.owned->give(pos, ext);
    return;
  }
  // Coalesced with its neighbours in the pending list (never across a segment's end).
  uint64_t start = pos, len = ext;
  auto next = in.pending.lower_bound(pos);
  if (next != in.pending.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == pos && prev->first / o.segment_bytes == pos / o.segment_bytes) {
      start = prev->first;
      len += prev->second;
      in.pending.erase(prev);
    }
  }
  if (next != in.pending.end() && next->first == pos + ext && next->first / o.segment_bytes == pos / o.segment_bytes) {
    len += next->second;
    in.pending.erase(next);
  }
  in.pending[start] = len;
  publish_frees();
}

void Pipe::Impl::publish_frees() {
  // A new version once the writer has collected the last one (it acknowledges into `ack`).
  if (in.pending.empty() || load(lay.ack) != in.published) return;
  std::vector<codec::FreeRange> ranges;
  ranges.reserve(std::min<size_t>(in.pending.size(), o.free_list_capacity));
  auto it = in.pending.begin();
  for (; it != in.pending.end() && ranges.size() < o.free_list_capacity; ++it) ranges.push_back({it->first, it->second});
  in.pending.erase(in.pending.begin(), it);
  codec::publish_free_list(at(lay.free_list), o.free_list_capacity, in.published + 1, ranges);
  ++in.published;
}

void Pipe::Impl::serve() {
  if (reads && o.sync == Sync::Deferred) publish_frees();
}

}  // namespace loom::rpipe
