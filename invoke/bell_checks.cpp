#include "loom/invoke/bell_checks.hpp"

#include <algorithm>
#include <cstring>

#include "loom/dsm/common/error.hpp"
#include "loom/invoke/invoker.hpp"

namespace loom::invoke {

BellChecks::BellChecks(Invoker& inv) : inv_(inv), threads_(inv.threads()) {
  const size_t ranks = static_cast<size_t>(inv_.runtime().size());
  slots_ = inv_.heap().allocate(inv_.bells().block_bytes() * ranks);
  std::memset(slots_.addr, 0, slots_.size);
  peers_.resize(ranks);
  for (Peer& p : peers_) {
    p.want.assign(static_cast<size_t>(threads_), 0);
    p.want_again.assign(static_cast<size_t>(threads_), 0);
  }
}

BellChecks::~BellChecks() {
  // A READ in flight lands in slots_: wait for it (its queue pair lives as long as the Invoker).
  for (Peer& p : peers_)
    if (p.in_flight) p.tx->wait(p.tag);
  inv_.heap().free(slots_.addr);
}

uint8_t* BellChecks::slot(int rank) const {
  return slots_.bytes() + inv_.bells().block_bytes() * static_cast<size_t>(rank);
}

void BellChecks::ring(int rank, int index, signal::Transmitter& tx) {
  Peer& p = peers_.at(static_cast<size_t>(rank));
  std::vector<uint8_t>& mark = p.in_flight ? p.want_again : p.want;
  if (index < 0) std::fill(mark.begin(), mark.end(), uint8_t{1});
  else mark.at(static_cast<size_t>(index)) = 1;
  if (p.in_flight) {
    p.again = true;  // after the request that rang: the check in flight may have run before it
    p.again_tx = &tx;
    return;
  }
  p.tx = &tx;
  post(rank, p);
}

void BellChecks::post(int rank, Peer& p) {
  const Doorbells::Locator& at = inv_.bells().remote(rank);
  const uint64_t len = std::min<uint64_t>(inv_.bells().block_bytes(), at.size);  // what the peer registered
  const fabric::Sge into{reinterpret_cast<uint64_t>(slot(rank)), static_cast<uint32_t>(len), slots_.lkey};
  signal::Posted posted = p.tx->post(fabric::read_request(into, at.addr, at.rkey), true);
  if (!posted.ok()) {
    // The queue pair refused it (a peer gone, a QP in error): that peer's wait reports it; its
    // sleeper, if any, wakes on its own within kMaxSleep.
    std::fill(p.want.begin(), p.want.end(), uint8_t{0});
    return;
  }
  p.tag = posted.tag;
  p.in_flight = true;
  ++in_flight_;
  inv_.bells().count_check();
}

bool BellChecks::poll() {
  if (in_flight_ == 0) return false;
  for (size_t r = 0; r < peers_.size(); ++r) {
    Peer& p = peers_[r];
    if (!p.in_flight) continue;
    if (p.tx->test(p.tag)) answer(static_cast<int>(r), p);
  }
  return in_flight_ != 0;
}

void BellChecks::answer(int rank, Peer& p) {
  p.in_flight = false;
  --in_flight_;
  Doorbells& bells = inv_.bells();
  const uint8_t* block = slot(rank);
  std::vector<uint16_t> asleep;
  for (int i = 0; i < threads_; ++i)
    if (p.want[static_cast<size_t>(i)] != 0 && bells.asleep_in(block, i)) asleep.push_back(static_cast<uint16_t>(i));
  std::fill(p.want.begin(), p.want.end(), uint8_t{0});
  if (!asleep.empty()) bells.send_wake(rank, asleep);
  if (p.again) {
    p.again = false;
    p.tx = p.again_tx;
    p.want.swap(p.want_again);
    post(rank, p);
  }
}

}  // namespace loom::invoke
