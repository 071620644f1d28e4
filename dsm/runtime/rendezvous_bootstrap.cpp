// The bootstrap of a job over several nodes: fences of this node's ranks on the embedded
// bootstrap's file, joined across nodes by the leader rank through its launcher.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "loom/dsm/common/backoff.hpp"
#include "loom/dsm/common/dsm_settings.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/futex.hpp"
#include "loom/dsm/runtime/bootstrap.hpp"
#include "loom/dsm/runtime/bootstrap_file.hpp"
#include "loom/dsm/runtime/launch/node_wire.hpp"

namespace loom::runtime {

namespace {

const char* kind_name(uint8_t k) { return k == 1 ? "barrier" : k == 2 ? "allgather" : "unknown collective"; }

void write_all(int fd, const std::vector<std::byte>& b) {
  size_t at = 0;
  while (at < b.size()) {
    const ssize_t n = ::send(fd, b.data() + at, b.size() - at, MSG_NOSIGNAL);
    if (n > 0) at += static_cast<size_t>(n);
    else if (n < 0 && errno == EINTR) continue;
    else fail_errno("bootstrap: cannot write to the launcher");
  }
}

// Reads bytes from the launcher's link into `buf`, or waits up to 100 ms; false at its end.
bool read_some(int fd, std::vector<std::byte>& buf) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 100) <= 0) return true;
  std::byte tmp[65536];
  const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
  if (n > 0) buf.insert(buf.end(), tmp, tmp + n);
  return n > 0 || (n < 0 && errno == EINTR);
}

class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> b) : b_(b) {}
  template <typename T>
  T take(const char* what) {
    T v;
    if (sizeof(T) > b_.size() - at_) fail("bootstrap: a malformed fence from the launcher (", what, " cut short)");
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::span<const std::byte> bytes(uint64_t n, const char* what) {
    if (n > b_.size() - at_) fail("bootstrap: a malformed fence from the launcher (", what, " cut short)");
    auto s = b_.subspan(at_, n);
    at_ += n;
    return s;
  }
  bool at_end() const { return at_ == b_.size(); }

 private:
  std::span<const std::byte> b_;
  size_t at_ = 0;
};

}  // namespace

RendezvousBootstrap::RendezvousBootstrap() {
  node_ = static_cast<int>(settings::get_int(settings::dsm::kNode));
  nodes_ = static_cast<int>(settings::get_int(settings::dsm::kNodes));
  if (node_ >= nodes_) fail("bootstrap: LOOM_NODE=", node_, " is not below LOOM_NODES=", nodes_);
  first_rank_ = rank_ - local_rank_;
  if (local_rank_ == 0 && nodes_ > 1) {
    uplink_ = static_cast<int>(settings::get_int(settings::dsm::kBootFd));
    if (uplink_ < 0 || fcntl(uplink_, F_SETFD, FD_CLOEXEC) != 0)
      fail("bootstrap: the leader rank of node ", node_, " has no link to its launcher (LOOM_BOOT_FD); start the job with loomrun");
  }
}

RendezvousBootstrap::~RendezvousBootstrap() {
  if (uplink_ >= 0) ::close(uplink_);
}

void RendezvousBootstrap::barrier() { fence(FenceKind::Barrier); }

std::vector<std::vector<std::byte>> RendezvousBootstrap::allgather(std::span<const std::byte> mine) {
  std::vector<std::vector<std::byte>> out(static_cast<size_t>(size_));
  size_t offset = 0;
  for (;;) {  // rounds of at most one slot per rank, as on one host
    const size_t n = std::min(kSlotBytes, mine.size() - offset);
    if (n != 0) std::memcpy(slot(rank_), mine.data() + offset, n);
    const uint64_t remaining_after = mine.size() - offset - n;
    // Release after the slot's bytes: pairs with the acquire loads below (other local ranks) and
    // in node_part (the leader sending the node's slots up).
    lengths()[rank_].store((static_cast<uint64_t>(n) << 1) | (remaining_after != 0 ? 1u : 0u), std::memory_order_release);
    fence(FenceKind::Allgather);
    bool more = false;
    for (int r = 0; r < size_; ++r) {
      const uint64_t v = lengths()[r].load(std::memory_order_acquire);
      const size_t len = static_cast<size_t>(v >> 1);
      if (len > kSlotBytes) fail("bootstrap: rank ", r, " published a malformed slot");
      out[static_cast<size_t>(r)].insert(out[static_cast<size_t>(r)].end(), slot(r), slot(r) + len);
      more = more || (v & 1u);
    }
    local_barrier();  // this node's file may take the next round only once every rank here read it
    offset += n;
    if (!more) break;
  }
  return out;
}

// Every rank here arrives; the leader, once all have, exchanges the node's part with the other
// nodes and releases them (the arrival count and generation are the file's, as in
// local_barrier: the leader resets the count before it moves the generation on).
void RendezvousBootstrap::fence(FenceKind kind) {
  Header* h = header();
  const uint32_t gen = h->generation.load(std::memory_order_acquire);
  if (local_rank_ != 0) {
    // Release: this rank's writes before the fence reach the leader, whose acquire load of the
    // count (leader_wait_for_arrivals) pairs with it.
    h->arrived.fetch_add(1, std::memory_order_acq_rel);
    wait::futex_wake_all(&h->arrived);
    wait_while(h->generation, gen);
    return;
  }
  leader_wait_for_arrivals();
  if (nodes_ > 1) {
    write_all(uplink_, launch::encode(launch::MsgType::FenceUp, launch::Fence{seq_, node_part(kind)}));
    std::vector<std::byte> buf;
    for (;;) {
      if (auto f = launch::take_frame(buf)) {
        if (f->type != launch::MsgType::FenceDown) fail("bootstrap: the launcher sent a ", launch::to_string(f->type), " message");
        const launch::Fence down = launch::decode_fence(f->payload);
        if (down.seq != seq_) fail("bootstrap: the launcher answered fence ", down.seq, " to fence ", seq_);
        take_parts(kind, down.blob);
        break;
      }
      if (!read_some(uplink_, buf)) fail("bootstrap: the launcher closed this node's link (the job is ending)");
      check_peers();
    }
    ++seq_;
  }
  h->arrived.store(0, std::memory_order_relaxed);
  // Release: the leader's writes (the other nodes' slots, take_parts) and the count reset before
  // the waiters' acquire load of the generation (wait_while) lets them go on.
  h->generation.fetch_add(1, std::memory_order_acq_rel);
  wait::futex_wake_all(&h->generation);
}

void RendezvousBootstrap::leader_wait_for_arrivals() {
  Header* h = header();
  const auto want = static_cast<uint32_t>(local_size_ - 1);
  for (uint32_t now; (now = h->arrived.load(std::memory_order_acquire)) < want;) wait_while(h->arrived, now);
}

// [u8 kind][u32 count] then, for an allgather round, per rank here: [u32 rank][u64 length
// word][the slot's bytes].
std::vector<std::byte> RendezvousBootstrap::node_part(FenceKind kind) const {
  std::vector<std::byte> out;
  auto put = [&](const void* p, size_t n) {  // resize and copy: see node_wire.cpp's Writer
    if (n == 0) return;
    const size_t at = out.size();
    out.resize(at + n);
    std::memcpy(out.data() + at, p, n);
  };
  const auto k = static_cast<uint8_t>(kind);
  put(&k, 1);
  const uint32_t count = kind == FenceKind::Allgather ? static_cast<uint32_t>(local_size_) : 0;
  put(&count, 4);
  for (uint32_t i = 0; i < count; ++i) {
    const auto r = static_cast<uint32_t>(first_rank_) + i;
    const uint64_t word = lengths()[r].load(std::memory_order_acquire);
    put(&r, 4);
    put(&word, 8);
    put(slot(static_cast<int>(r)), std::min<uint64_t>(word >> 1, kSlotBytes));
  }
  return out;
}

// The other nodes' parts, from the launcher (which had them from other machines): each must be
// the same collective as ours, and an allgather round must name every other rank exactly once,
// with a slot no longer than a slot.
void RendezvousBootstrap::take_parts(FenceKind kind, std::span<const std::byte> down) {
  Cursor c(down);
  if (c.take<uint32_t>("node count") != static_cast<uint32_t>(nodes_)) fail("bootstrap: the fence does not list ", nodes_, " nodes");
  std::vector<bool> seen(static_cast<size_t>(size_), false);
  for (int k = 0; k < nodes_; ++k) {
    Cursor part(c.bytes(c.take<uint64_t>("part length"), "a node's part"));
    const auto their = part.take<uint8_t>("kind");
    if (their != static_cast<uint8_t>(kind))
      fail("bootstrap: node ", k, " is in a ", kind_name(their), " while node ", node_, " is in a ",
           kind_name(static_cast<uint8_t>(kind)), " (a collective called by some ranks only)");
    const auto count = part.take<uint32_t>("count");
    for (uint32_t i = 0; i < count; ++i) {
      const auto r = part.take<uint32_t>("rank");
      const auto word = part.take<uint64_t>("length");
      if (r >= static_cast<uint32_t>(size_) || seen[r] || (word >> 1) > kSlotBytes)
        fail("bootstrap: node ", k, "'s part names rank ", r, " with ", word >> 1, " bytes");
      const bool ours = r >= static_cast<uint32_t>(first_rank_) && r < static_cast<uint32_t>(first_rank_ + local_size_);
      if (ours != (k == node_)) fail("bootstrap: node ", k, "'s part names rank ", r, ", which is not on that node");
      seen[r] = true;
      auto bytes = part.bytes(word >> 1, "a slot");
      if (k == node_) continue;  // our own, already in place
      std::memcpy(slot(static_cast<int>(r)), bytes.data(), bytes.size());
      lengths()[r].store(word, std::memory_order_release);  // after the slot's bytes, as above
    }
    if (!part.at_end()) fail("bootstrap: node ", k, "'s part has bytes after its end");
  }
  if (!c.at_end()) fail("bootstrap: the fence has bytes after its end");
  if (kind == FenceKind::Allgather)
    for (int r = 0; r < size_; ++r)
      if (!seen[static_cast<size_t>(r)]) fail("bootstrap: no node's part names rank ", r);
}

}  // namespace loom::runtime
