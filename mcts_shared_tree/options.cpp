#include "loom/mcts_shared_tree/options.hpp"

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/common/settings.hpp"
#include "loom/mcts_shared_tree/hex.hpp"

namespace loom::mcts {

namespace {

int64_t int_in(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  const int64_t x = settings::parse_int(v, flag);
  if (x < lo || x > hi) fail(flag, "=", v, " is outside ", lo, "..", hi);
  return x;
}

double number_in(const std::string& flag, const std::string& v, double lo, double hi) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || x < lo || x > hi) fail(flag, "='", v, "' is not a number in ", lo, "..", hi);
  return x;
}

}  // namespace

bool take_search_flag(int argc, char** argv, int& i, SearchFlags& f) {
  const std::string a = argv[i];
  static constexpr std::string_view kFlags[] = {"--policy", "--board", "--rollouts", "--seconds", "--K", "--exploration", "--expand-at",
                                                "--virtual-loss", "--in-flight", "--owner", "--aggregation", "--sync-every", "--seed", "--playout", "--rave"};
  bool known = false;
  for (std::string_view k : kFlags) known |= a == k;
  if (!known) return false;
  if (i + 1 >= argc) fail(a, " needs a value");
  const std::string v = argv[++i];
  SearchConfig& c = f.search;
  if (a == "--policy") f.policy = parse_tree_policy(v);
  else if (a == "--board") f.board = static_cast<int>(int_in(a, v, Hex::kMinN, Hex::kMaxN));
  else if (a == "--rollouts") f.budget = Budget{static_cast<uint64_t>(int_in(a, v, 1, int64_t{1} << 40)), 0};
  else if (a == "--seconds") f.budget = Budget{0, number_in(a, v, 1e-3, 86400)};
  else if (a == "--K") c.playouts = static_cast<uint32_t>(int_in(a, v, 1, 4096));
  else if (a == "--exploration") c.exploration = number_in(a, v, 0, 100);
  else if (a == "--expand-at") c.expand_at = static_cast<uint32_t>(int_in(a, v, 1, 1 << 20));
  else if (a == "--virtual-loss") c.virtual_loss = static_cast<uint32_t>(int_in(a, v, 0, 64));
  else if (a == "--in-flight") c.in_flight = static_cast<uint32_t>(int_in(a, v, 1, 4096));
  else if (a == "--owner") c.owner = parse_owner_protocol(v);
  else if (a == "--aggregation") c.aggregation = parse_aggregation(v);
  else if (a == "--sync-every") c.sync_every = static_cast<uint32_t>(int_in(a, v, 1, 1 << 24));
  else if (a == "--playout") f.playout = parse_hex_playout(v);
  else if (a == "--rave") c.rave = static_cast<uint32_t>(int_in(a, v, 0, 1 << 24));
  else c.seed = static_cast<uint64_t>(int_in(a, v, 0, INT64_MAX));
  return true;
}

std::string search_flags_usage() {
  return "  --policy P          local | owner-invoked | cached-shared | root (default local)\n"
         "  --board N           board size 3..19 (default 11)\n"
         "  --rollouts N        rollouts per search (the whole job's), or\n"
         "  --seconds S         seconds per search (default 1)\n"
         "  --K K               playouts per leaf (default 16)\n"
         "  --exploration C     UCT constant (default 0.4)\n"
         "  --expand-at N       rollouts through an edge before its child becomes a node (default 2)\n"
         "  --virtual-loss N    rollouts counted lost below a rollout in flight (default 1)\n"
         "  --in-flight N       owner-invoked: rollouts in flight per worker (default 64)\n"
         "  --owner O           owner-invoked: path-hash | random-at-expansion (default path-hash)\n"
         "  --aggregation A     owner-invoked: trad | ovfl (default trad)\n"
         "  --sync-every N      cached-shared: rollouts between publications (default 8192)\n"
         "  --seed S            random seed (default 1)\n"
         "  --playout P         uniform | bridge: Hex's playouts, bridge answers a bridge intrusion (default uniform)\n"
         "  --rave K            RAVE (all-moves-as-first) blended in with equivalence K; 0 is off (default 0)\n"
         "Worker threads per process: loomrun --threads T.\n";
}

}  // namespace loom::mcts
