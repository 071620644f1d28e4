#pragma once
// The owner-invoked tree's messages (invoked_tree.hpp), their layout, packing and parsing:
//
//   rollout: [RolloutHeader][State][Step x depth]   (a rollout travelling down, or to evaluate)
//   results: [object | epoch][Result x n]            (each path owner's edges, after evaluation)
//   results with AMAF (RAVE):
//            [object | epoch][AmafHeader][Result x n][black x moves][black won x moves]   (u16 counts)
//   create:  [CreateHeader][State]                    (random-at-expansion: a child to create)
//
// Both begin with the search object's id at the objects::Context (a call finds its object by
// it); the epoch (one per search) keeps a call that arrives after its search ended out of the
// next. The bytes come from other processes: a parser accepts a message only whole and valid
// (its sizes, a depth within bound, owners that are threads of the job, movers 0 or 1, a
// position the game accepts) and refuses it otherwise; nothing in it is used before.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "loom/mcts_shared_tree/rave.hpp"

namespace loom::mcts::invoked {

// One edge of a rollout's path: the node (its id), its owner, the edge taken, the mover there.
struct Step {
  uint64_t node;
  uint32_t owner;  // a worker thread's global id
  uint16_t edge;
  uint8_t mover;
  uint8_t pad;
};

// One edge's result, for its node's owner.
struct Result {
  uint64_t node;
  uint32_t wins;
  uint16_t edge;
  uint8_t root;   // 1: the root's edge, the rollout is over (the starter counts it)
  uint8_t mover;  // the player to move at the node (RAVE's AMAF words are that player's)
};

// The AMAF counts that follow a results message's Results under RAVE (rave.hpp, AmafCounts).
struct AmafHeader {
  uint32_t results;  // Results that follow
  uint32_t moves;    // counts per kind that follow them
  uint32_t k, black_wins;
};

struct RolloutHeader {
  uint32_t object;
  uint32_t epoch;
  uint64_t node;   // where the rollout goes on (0 for an evaluation)
  uint32_t depth;  // steps that follow the state
  uint32_t pad;
};

// random-at-expansion: the parent's edge whose child the receiver creates (and then tells the
// parent's owner of), and the child's position after the State that follows.
struct CreateHeader {
  uint32_t object;
  uint32_t epoch;
  uint64_t parent;        // the parent node's id (at parent_owner)
  uint32_t parent_owner;  // a worker thread's global id
  uint16_t edge;
  uint16_t pad;
};

// The deepest path a rollout may carry (a Hex game on 19x19 has at most 361 moves).
inline constexpr uint32_t kMaxDepth = 1024;

// What a parser checks the message against: this search's epoch and the job's worker threads.
struct WireCheck {
  uint32_t epoch;
  uint32_t threads;  // total worker threads of the job: a Step's owner lies below
};

template <typename State>
void pack_rollout(std::vector<std::byte>& msg, const RolloutHeader& h, const State& s, std::span<const Step> path) {
  msg.resize(sizeof h + sizeof s + path.size() * sizeof(Step));
  std::memcpy(msg.data(), &h, sizeof h);
  std::memcpy(msg.data() + sizeof h, &s, sizeof s);
  if (!path.empty()) std::memcpy(msg.data() + sizeof h + sizeof s, path.data(), path.size() * sizeof(Step));
}

// False for bytes that are not a whole, valid rollout of the search `c` describes; `g` checks
// the position (G::valid).
template <typename G>
bool unpack_rollout(const G& g, std::span<const std::byte> b, WireCheck c, RolloutHeader& h, typename G::State& s,
                    std::vector<Step>& path) {
  if (b.size() < sizeof h + sizeof s) return false;
  std::memcpy(&h, b.data(), sizeof h);
  if (h.epoch != c.epoch || h.depth > kMaxDepth || b.size() != sizeof h + sizeof s + h.depth * sizeof(Step)) return false;
  std::memcpy(&s, b.data() + sizeof h, sizeof s);
  if (!g.valid(s)) return false;
  path.resize(h.depth);
  if (h.depth != 0) std::memcpy(path.data(), b.data() + sizeof h + sizeof s, h.depth * sizeof(Step));
  for (const Step& st : path)
    if (st.owner >= c.threads || st.mover > 1) return false;
  return true;
}

inline void pack_results(std::vector<std::byte>& msg, uint32_t object, uint32_t epoch, std::span<const Result> results) {
  const uint32_t prefix[2] = {object, epoch};
  msg.resize(sizeof prefix + results.size() * sizeof(Result));
  std::memcpy(msg.data(), prefix, sizeof prefix);
  if (!results.empty()) std::memcpy(msg.data() + sizeof prefix, results.data(), results.size() * sizeof(Result));
}

// False for bytes that are not whole results of the search `c` describes. The edges are checked
// where they are applied, against their node.
inline bool unpack_results(std::span<const std::byte> b, WireCheck c, std::vector<Result>& out) {
  uint32_t prefix[2];
  if (b.size() < sizeof prefix || (b.size() - sizeof prefix) % sizeof(Result) != 0) return false;
  std::memcpy(prefix, b.data(), sizeof prefix);
  if (prefix[1] != c.epoch) return false;
  out.resize((b.size() - sizeof prefix) / sizeof(Result));
  if (!out.empty()) std::memcpy(out.data(), b.data() + sizeof prefix, b.size() - sizeof prefix);
  for (const Result& r : out)
    if (r.root > 1 || r.mover > 1) return false;
  return true;
}

inline void pack_results_amaf(std::vector<std::byte>& msg, uint32_t object, uint32_t epoch, std::span<const Result> results, const AmafCounts& c) {
  const uint32_t prefix[2] = {object, epoch};
  const AmafHeader h{static_cast<uint32_t>(results.size()), static_cast<uint32_t>(c.black.size()), c.k, c.black_wins};
  msg.clear();
  auto put = [&msg](const void* bytes, size_t n) {
    const auto* b = static_cast<const std::byte*>(bytes);
    msg.insert(msg.end(), b, b + n);
  };
  put(prefix, sizeof prefix);
  put(&h, sizeof h);
  put(results.data(), results.size() * sizeof(Result));
  put(c.black.data(), c.black.size() * sizeof(uint16_t));
  put(c.black_won.data(), c.black_won.size() * sizeof(uint16_t));
}

// False for bytes that are not whole AMAF results of the search `c` describes, with counts for
// the game's `moves` moves that playouts could have produced (AmafCounts::consistent).
inline bool unpack_results_amaf(std::span<const std::byte> b, WireCheck c, uint32_t moves, std::vector<Result>& out, AmafCounts& amaf) {
  uint32_t prefix[2];
  AmafHeader h;
  if (b.size() < sizeof prefix + sizeof h) return false;
  std::memcpy(prefix, b.data(), sizeof prefix);
  std::memcpy(&h, b.data() + sizeof prefix, sizeof h);
  if (prefix[1] != c.epoch || h.moves != moves || h.results > kMaxDepth) return false;
  const size_t counts = size_t{moves} * sizeof(uint16_t), results = size_t{h.results} * sizeof(Result);
  if (b.size() != sizeof prefix + sizeof h + results + 2 * counts) return false;
  const std::byte* p = b.data() + sizeof prefix + sizeof h;
  out.resize(h.results);
  if (results != 0) std::memcpy(out.data(), p, results);
  amaf.reset(static_cast<int>(moves));
  amaf.k = h.k, amaf.black_wins = h.black_wins;
  if (counts != 0) std::memcpy(amaf.black.data(), p + results, counts), std::memcpy(amaf.black_won.data(), p + results + counts, counts);
  for (const Result& r : out)
    if (r.root > 1 || r.mover > 1) return false;
  return amaf.consistent();
}

template <typename State>
void pack_create(std::vector<std::byte>& msg, const CreateHeader& h, const State& s) {
  msg.resize(sizeof h + sizeof s);
  std::memcpy(msg.data(), &h, sizeof h);
  std::memcpy(msg.data() + sizeof h, &s, sizeof s);
}

// False for bytes that are not a whole, valid create message of the search `c` describes.
template <typename G>
bool unpack_create(const G& g, std::span<const std::byte> b, WireCheck c, CreateHeader& h, typename G::State& s) {
  if (b.size() != sizeof h + sizeof s) return false;
  std::memcpy(&h, b.data(), sizeof h);
  if (h.epoch != c.epoch || h.parent_owner >= c.threads) return false;
  std::memcpy(&s, b.data() + sizeof h, sizeof s);
  return g.valid(s);
}

// The search object's id a message begins with (both kinds), if it has one.
inline bool object_of(std::span<const std::byte> b, uint32_t& id) {
  if (b.size() < sizeof id) return false;
  std::memcpy(&id, b.data(), sizeof id);
  return true;
}

}  // namespace loom::mcts::invoked
