// Making and closing a pipe: the two ends trade offers (queue pair endpoint, control block,
// parameters) through the runtime's mailbox, check that they agree, connect, and say so; closing
// waits for this end's requests and for the peer to close too.
#include <cstring>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/log.hpp"
#include "loom/rpipe/impl.hpp"

namespace loom::rpipe {

namespace {
constexpr uint32_t kOfferMagic = 0x72706970;  // "rpip"
constexpr uint32_t kOfferVersion = 1;
enum Phase : uint64_t { kOffer = 1, kConnected = 2, kClosing = 3 };
uint64_t tag(Phase ph, uint64_t pair) { return (0x7270ull << 48) | (static_cast<uint64_t>(ph) << 40) | pair; }

struct Offer {
  uint32_t magic;
  uint32_t version;
  uint64_t pair;
  uint8_t mode, end, fit, sync;
  uint32_t width;
  uint64_t segment_bytes;
  uint32_t max_segments;
  uint32_t free_capacity;
  uint64_t ctrl_addr;
  uint32_t ctrl_rkey;
  uint32_t endpoint_len;
};

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

void check_arguments(Runtime& rt, int peer, End end, uint32_t width, Mode mode, const Options& o) {
  if (peer < 0 || peer >= rt.size()) fail("rpipe: peer ", peer, " is not a rank of the job (0..", rt.size() - 1, ")");
  if (peer == rt.rank()) fail("rpipe: a pipe from rank ", peer, " to itself");
  if (mode != Mode::HalfDuplex && mode != Mode::FullDuplex) fail("rpipe: unknown mode ", static_cast<int>(mode));
  if (end != End::Writer && end != End::Reader) fail("rpipe: unknown end ", static_cast<int>(end));
  if (width == 0 || width > 4096) fail("rpipe: width ", width, " is outside 1..4096");
  if (o.fit != Fit::Next && o.fit != Fit::Best && o.fit != Fit::Worst) fail("rpipe: unknown fit ", static_cast<int>(o.fit));
  if (o.sync != Sync::Deferred && o.sync != Sync::Immediate) fail("rpipe: unknown synchronization ", static_cast<int>(o.sync));
  if (o.segment_bytes < 4096 || o.segment_bytes % codec::kUnit != 0 || o.segment_bytes > (1ull << 32))
    fail("rpipe: segments of ", o.segment_bytes, " bytes (4 KiB..4 GiB, a multiple of 64)");
  if (o.max_segments == 0 || o.max_segments > 1024) fail("rpipe: max_segments ", o.max_segments, " is outside 1..1024");
  if (o.free_list_capacity == 0 || o.free_list_capacity > 4096) fail("rpipe: free_list_capacity ", o.free_list_capacity, " is outside 1..4096");
}
}  // namespace

ControlLayout::ControlLayout(uint32_t width, uint32_t free_capacity) {
  size_t at = 0;
  ring = at;
  at = align64(at + width * codec::kSlotBytes);
  credit = at;
  ack = at + 8;
  at += 64;
  free_list = at;
  at = align64(at + codec::free_list_bytes(free_capacity));
  peer_free = at;
  at = align64(at + codec::free_list_bytes(free_capacity));
  staging = at;
  at = align64(at + width * codec::kSlotBytes + kWords * 8);
  bytes = at;
}

Pipe::Impl::Impl(Runtime& r, int peer_rank, End end, uint32_t w, Mode m, Options opts)
    : rt(r), peer(peer_rank), self(r.rank()), mode(m), width(w), o(opts),
      writes(m == Mode::FullDuplex || end == End::Writer), reads(m == Mode::FullDuplex || end == End::Reader),
      lay(w, opts.free_list_capacity) {
  fabric::QpCaps caps;
  caps.max_send_wr = 256;
  caps.max_recv_wr = 1;
  caps.max_inline = std::min<uint32_t>(64, rt.provider().info().max_inline);
  caps.single_thread = true;  // one thread at a time uses an end (pipe.hpp)
  cq = rt.provider().create_cq(caps.max_send_wr);
  qp = rt.provider().create_qp(peer, *cq, *cq, caps);
  tx = std::make_unique<signal::Transmitter>(*qp, *cq);
  ctrl = rt.heap(o.zone).allocate(lay.bytes);
  std::memset(ctrl.addr, 0, lay.bytes);
  slot_tags.assign(width, 0);
  in.segments.resize(o.max_segments);
  if (writes && o.sync == Sync::Deferred) out.view.emplace(o.fit, o.segment_bytes);
  if (reads && o.sync == Sync::Immediate) in.owned.emplace(o.fit, o.segment_bytes);
  directory::add(this);
  try {
    connect();
  } catch (...) {
    directory::remove(this);
    tx.reset();
    rt.heap(o.zone).free(ctrl.addr);
    throw;
  }
}

void Pipe::Impl::connect() {
  const auto ep = qp->endpoint();
  std::vector<std::byte> msg(sizeof(Offer) + ep.size());
  Offer mine{kOfferMagic, kOfferVersion, pair, static_cast<uint8_t>(mode),
             static_cast<uint8_t>(writes && !reads ? End::Writer : End::Reader), static_cast<uint8_t>(o.fit),
             static_cast<uint8_t>(o.sync), width, o.segment_bytes, o.max_segments, o.free_list_capacity,
             ctrl.address(), ctrl.rkey, static_cast<uint32_t>(ep.size())};
  std::memcpy(msg.data(), &mine, sizeof mine);
  std::memcpy(msg.data() + sizeof mine, ep.data(), ep.size());
  rt.mailbox().send(peer, tag(kOffer, pair), msg);
  const auto got = rt.mailbox().receive(peer, tag(kOffer, pair), "rpipe: waiting for the peer's end of the pipe");
  Offer theirs;
  if (got.size() < sizeof theirs) fail("rpipe: rank ", peer, " sent a malformed offer (", got.size(), " bytes)");
  std::memcpy(&theirs, got.data(), sizeof theirs);
  if (theirs.magic != kOfferMagic || theirs.version != kOfferVersion || theirs.pair != pair ||
      theirs.endpoint_len != got.size() - sizeof theirs)
    fail("rpipe: rank ", peer, " sent a malformed offer for pipe ", pair, " between the two");
  auto differs = [&](const char* what, uint64_t a, uint64_t b) {
    if (a != b) fail("rpipe: pipe ", pair, " between ranks ", self, " and ", peer, ": ", what, " differs (", a, " here, ", b, " there)");
  };
  differs("the mode", mine.mode, theirs.mode);
  differs("the width", width, theirs.width);
  differs("the fit", mine.fit, theirs.fit);
  differs("the synchronization", mine.sync, theirs.sync);
  differs("segment_bytes", o.segment_bytes, theirs.segment_bytes);
  differs("max_segments", o.max_segments, theirs.max_segments);
  differs("free_list_capacity", o.free_list_capacity, theirs.free_capacity);
  if (mode == Mode::HalfDuplex && mine.end == theirs.end)
    fail("rpipe: pipe ", pair, " between ranks ", self, " and ", peer, ": both ends are ",
         mine.end == static_cast<uint8_t>(End::Writer) ? "writers" : "readers", " of a half-duplex pipe");
  peer_ctrl = theirs.ctrl_addr;
  peer_ctrl_rkey = theirs.ctrl_rkey;
  qp->connect(std::span(got).subspan(sizeof theirs));
  peer_ctrl_mapped = map_peer(peer_ctrl, peer_ctrl_rkey, lay.bytes);
  // A request may only reach a connected queue pair: each end says when its own is.
  rt.mailbox().send(peer, tag(kConnected, pair), {});
  rt.mailbox().receive(peer, tag(kConnected, pair), "rpipe: waiting for the peer to connect");
}

void Pipe::Impl::close() {
  // Our requests done, then both ends agree that neither sends any more (RC needs the peer's
  // queue pair until its requests are acknowledged).
  tx->flush();
  rt.mailbox().send(peer, tag(kClosing, pair), {});
  rt.mailbox().receive(peer, tag(kClosing, pair), "rpipe: closing a pipe");
}

Pipe::Impl::~Impl() {
  try {
    close();
  } catch (const std::exception& e) {
    log::error("rpipe: closing pipe ", pair, " with rank ", peer, ": ", e.what());
  }
  directory::remove(this);
  tx.reset();
  qp.reset();
  cq.reset();
  auto& heap = rt.heap(o.zone);
  for (Segment& s : out.segments) heap.free(s.local.addr);
  for (uint32_t i = 0; i < in.count.load(std::memory_order_acquire); ++i) heap.free(in.segments[i].addr);
  heap.free(ctrl.addr);
}

uint64_t Pipe::Impl::load(size_t offset) const {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(at(offset))).load(std::memory_order_acquire);
}

uint8_t* Pipe::Impl::map_peer(uint64_t addr, uint32_t rkey, uint64_t len, uint32_t access) const {
  // Where the provider maps the peer's memory (shared memory, no emulated wire, not offloaded),
  // stores and loads replace WRITEs and READs: each store lands before the store that follows it
  // is seen, as one WRITE's bytes do before the next WRITE's on a connection.
  return tx->remote_pointer(addr, rkey, len, access);
}

void Pipe::Impl::post_word(size_t remote_offset, uint64_t value) {
  if (peer_ctrl_mapped != nullptr) {  // paired with load() at the peer
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(peer_ctrl_mapped + remote_offset)).store(value, std::memory_order_release);
    return;
  }
  // Staging words are reused in turn, each once its last WRITE has completed.
  const uint32_t w = next_word++ % ControlLayout::kWords;
  if (word_tags[w] != 0) tx->wait(word_tags[w] - 1);
  const size_t off = lay.staging + width * codec::kSlotBytes + w * 8;
  std::memcpy(at(off), &value, 8);
  auto p = tx->post(fabric::write_request({reinterpret_cast<uint64_t>(at(off)), 8, ctrl.lkey}, peer_ctrl + remote_offset,
                                          peer_ctrl_rkey, false));
  if (!p.ok()) fail("rpipe: a WRITE to rank ", peer, " was refused (", fabric::to_string(p.result), ")");
  word_tags[w] = p.tag + 1;  // 0: none yet
}

// ---- Pipe --------------------------------------------------------------------------------

Pipe::Pipe(Runtime& rt, int peer, End end, uint32_t width, Mode mode, Options options) {
  check_arguments(rt, peer, end, width, mode, options);
  impl_ = std::make_unique<Impl>(rt, peer, end, width, mode, options);
}
Pipe::~Pipe() = default;

RAddr Pipe::rmalloc(size_t size) { return impl_->rmalloc(size); }
std::span<std::byte> Pipe::rmem(const RAddr& a) {
  Impl& p = *impl_;
  if (a.pipe != p.id) fail("rmem: the address belongs to pipe ", a.pipe, ", not this one (", p.id, ")");
  if (a.writer == p.self) {
    Impl::OutAlloc& o = p.outgoing(a, "rmem");
    if (o.sent) fail("rmem: serial ", a.serial, " was handed to rank ", p.peer, " (rwrite/roffer): its copy here is not this end's any more");
    return {reinterpret_cast<std::byte*>(p.out.segments[a.segment].local.bytes() + a.offset), a.size};
  }
  Impl::InEntry& e = p.incoming(a, "rmem");
  if (!e.ready) fail("rmem: serial ", a.serial, " was offered, not written: rread brings it first");
  return {reinterpret_cast<std::byte*>(p.target(a)), a.size};
}
void Pipe::rwrite(const RAddr& a) { impl_->rwrite(a); }
void Pipe::roffer(const RAddr& a) { impl_->roffer(a); }
bool Pipe::in_use(const RAddr& a) { return impl_->in_use(a); }
std::optional<Message> Pipe::try_next() { return impl_->try_next(); }
Message Pipe::next() {
  Impl& p = *impl_;
  std::optional<Message> m;
  p.wait_until([&] { return (m = p.try_next()).has_value(); }, "rpipe: waiting for rank ", p.peer, "'s next message");
  return *m;
}
void Pipe::rread(const RAddr& a, size_t size) { impl_->rread(a, size); }
void Pipe::rfree(const RAddr& a) {
  Impl& p = *impl_;
  if (a.pipe != p.id) fail("rfree: the address belongs to pipe ", a.pipe, ", not this one (", p.id, ")");
  if (a.writer == p.self) p.free_outgoing(a); else p.free_incoming(a);
}
int Pipe::peer() const { return impl_->peer; }
Mode Pipe::mode() const { return impl_->mode; }
uint32_t Pipe::width() const { return impl_->width; }
const Options& Pipe::options() const { return impl_->o; }
uint32_t Pipe::id() const { return impl_->id; }
Pipe::Stats Pipe::stats() const {
  Stats s = impl_->out.stats;
  s.segments = static_cast<uint32_t>(impl_->out.segments.size());
  s.heap_bytes = s.segments * impl_->o.segment_bytes;
  return s;
}

void rfree(const RAddr& a) {
  Pipe::Impl* p = directory::by_id(a.pipe);
  if (p == nullptr) fail("rfree: no pipe ", a.pipe, " in this process (closed, or not an address of a pipe)");
  if (a.writer == p->self) p->free_outgoing(a); else p->free_incoming(a);
}

}  // namespace loom::rpipe
