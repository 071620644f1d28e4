#pragma once
// The emulated interconnect of the shm provider (LOOM_WIRE): what a wire is (one-way latency,
// per-link bandwidth, per-link message rate), its presets, how ranks group into emulated nodes
// (LOOM_EMULATE_NODES), and when a request between two nodes takes effect and completes. Pure
// timing: the engine that carries requests out on time is wire_engine.hpp. docs/wire.md states
// the model and where each preset's figures come from.
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loom/dsm/fabric/fabric.hpp"

namespace loom::fabric::shm {

struct WireSpec {
  std::string name;          // the preset's name, or the text of a custom wire
  double latency_ns = 0;     // one way, first byte out of one node to first byte into the other
  double bytes_per_ns = 0;   // per link and direction (GB/s)
  double message_gap_ns = 0; // the link's time per message, however small (1000 / million messages a second)
};

// The presets, in the order docs/wire.md lists them.
const std::vector<WireSpec>& wire_presets();

// "ib-edr", "roce-25g", "tcp-10g", or "LATENCY_US,GBPS[,MMSGS]"; "" (unset) gives a spec with
// an empty name: no wire. Anything else is an Error naming the presets and the form.
WireSpec parse_wire(std::string_view text);

// Rank r's emulated node when `size` ranks are split evenly over `nodes` nodes (contiguous
// blocks: 4 ranks on 2 nodes are 0,0,1,1). nodes must lie in 1..size (an Error otherwise).
std::vector<int> emulated_nodes(int size, int nodes);

// One node's link as every rank of the node sees it (in a file of the job directory): the time
// (steady clock, ns) from which each direction is free again.
struct alignas(64) LinkClock {
  std::atomic<uint64_t> tx_free{0};
  std::atomic<uint64_t> rx_free{0};
};

// Takes `busy` ns of the link direction `free_at` from `from` on, or from when it is free if
// later; returns when the request starts to use it.
uint64_t take_link(std::atomic<uint64_t>& free_at, uint64_t from, uint64_t busy);

// When a request posted at `now` from node `src` to node `dst` takes effect at the target
// (`effect`: the data placed, the receive consumed, the atomic done, a READ's data read) and
// when its completion reaches the initiator (`complete`).
//   WRITE, WRITE_WITH_IMM, SEND: the payload crosses src's tx and dst's rx; effect when its last
//     byte is in; the acknowledgement comes back one latency later.
//   READ, atomics: a request without payload crosses one way; effect at its arrival; the
//     payload (the READ's length, 8 bytes for an atomic) crosses dst's tx and src's rx back.
struct WireTimes {
  uint64_t effect = 0;
  uint64_t complete = 0;
};
WireTimes wire_schedule(const WireSpec& w, Opcode op, uint64_t len, uint64_t now, LinkClock& src, LinkClock& dst);

// How long `bytes` keep a link direction busy: their size over the bandwidth, at least the
// message gap (1 / message rate).
uint64_t wire_busy_ns(const WireSpec& w, uint64_t bytes);

}  // namespace loom::fabric::shm
