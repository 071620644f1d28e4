// The owner-invoked tree's messages (mcts_shared_tree/rollout_wire.hpp) on Hex boards: a rollout
// or a results message (with or without RAVE's counts) is accepted whole and valid or refused; an accepted position is one the
// game's code may play out (legal moves, winner, a playout), and an accepted message packs back
// to the same bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/rollout_wire.hpp"

using namespace loom::mcts;
using namespace loom::mcts::invoked;

namespace {

void rollout(const Hex& g, std::span<const std::byte> b, WireCheck c) {
  RolloutHeader h{};
  Hex::State s{};
  std::vector<Step> path;
  if (!unpack_rollout(g, b, c, h, s, path)) return;
  if (h.depth > kMaxDepth || path.size() != h.depth || h.epoch != c.epoch) std::abort();
  for (const Step& st : path)
    if (st.owner >= c.threads || st.mover > 1) std::abort();
  Hex::Move moves[Hex::kMaxN * Hex::kMaxN];
  const int n = g.legal_moves(s, moves);
  if (n < 0 || n > g.max_moves()) std::abort();
  (void)g.winner(s);
  Rng rng(h.node);
  if (g.playout(s, rng) > 1) std::abort();
  std::vector<std::byte> again;
  pack_rollout(again, h, s, std::span<const Step>(path));
  if (again.size() != b.size() || std::memcmp(again.data(), b.data(), b.size()) != 0) std::abort();
}

void results(std::span<const std::byte> b, WireCheck c) {
  std::vector<Result> rs;
  uint32_t object = 0;
  if (!unpack_results(b, c, rs)) return;
  if (!object_of(b, object)) std::abort();
  for (const Result& r : rs)
    if (r.root > 1) std::abort();
  std::vector<std::byte> again;
  pack_results(again, object, c.epoch, std::span<const Result>(rs));
  if (again.size() != b.size() || std::memcmp(again.data(), b.data(), b.size()) != 0) std::abort();
}

// Under RAVE: the counts accepted are ones whose words cannot wrap for either player.
void results_amaf(const Hex& g, std::span<const std::byte> b, WireCheck c) {
  std::vector<Result> rs;
  AmafCounts amaf;
  uint32_t object = 0;
  if (!unpack_results_amaf(b, c, static_cast<uint32_t>(g.max_moves()), rs, amaf)) return;
  if (!object_of(b, object) || amaf.black.size() != static_cast<size_t>(g.max_moves())) std::abort();
  for (const Result& r : rs)
    if (r.root > 1 || r.mover > 1) std::abort();
  for (int player : {0, 1})
    for (int m = 0; m < g.max_moves(); ++m) {
      const EdgeStats e = EdgeStats::of(amaf.word(player, static_cast<uint16_t>(m)));
      if (e.wins > e.visits || e.visits > amaf.k) std::abort();
    }
  std::vector<std::byte> again;
  pack_results_amaf(again, object, c.epoch, std::span<const Result>(rs), amaf);
  if (again.size() != b.size() || std::memcmp(again.data(), b.data(), b.size()) != 0) std::abort();
}

}  // namespace

// Bytes: [board size][threads][kind][epoch byte] then the message.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const Hex g(Hex::kMinN + data[0] % (Hex::kMaxN - Hex::kMinN + 1));
  const WireCheck c{data[3], 1u + data[1]};
  const std::span<const std::byte> msg(reinterpret_cast<const std::byte*>(data + 4), size - 4);
  if (data[2] % 3 == 0) rollout(g, msg, c);
  else if (data[2] % 3 == 1) results(msg, c);
  else results_amaf(g, msg, c);
  return 0;
}
