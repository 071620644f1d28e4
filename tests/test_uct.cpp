// The search's pure pieces (mcts_shared_tree/uct.hpp, options.cpp): UCT edge selection, edge
// statistics in one word, a node's layout, the most visited edge, and the command-line flags
// loom-hex and bench_mcts share.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/mcts_shared_tree/options.hpp"
#include "loom/mcts_shared_tree/uct.hpp"

using namespace loom::mcts;

namespace {

int select(const std::vector<EdgeStats>& edges, double c, Rng& rng) {
  return select_edge(static_cast<int>(edges.size()), [&](int i) { return edges[static_cast<size_t>(i)]; }, c, rng);
}

TEST(Uct, AnUnvisitedEdgeComesFirstAndEachIsDrawn) {
  Rng rng(3);
  const std::vector<EdgeStats> edges = {{10, 9}, {0, 0}, {5, 1}, {0, 0}};
  std::set<int> drawn;
  for (int k = 0; k < 200; ++k) drawn.insert(select(edges, 1.0, rng));
  EXPECT_EQ(drawn, (std::set<int>{1, 3}));
}

TEST(Uct, WithoutExplorationTheBestWinRateIsTaken) {
  Rng rng(3);
  EXPECT_EQ(select({{10, 2}, {10, 7}, {10, 5}}, 0.0, rng), 1);
}

TEST(Uct, ExplorationFavoursTheLessVisitedOfEqualRates) {
  Rng rng(3);
  // Equal win rates: the bonus sqrt(c^2 ln(total + 1) / visits) is larger for fewer visits.
  EXPECT_EQ(select({{1000, 500}, {10, 5}, {500, 250}}, 1.0, rng), 1);
  // A bonus large enough outweighs a better rate.
  EXPECT_EQ(select({{1000, 900}, {4, 0}}, 10.0, rng), 1);
  EXPECT_EQ(select({{1000, 900}, {4, 0}}, 0.1, rng), 0);
}

TEST(Uct, NoEdgesIsMinusOne) {
  Rng rng(3);
  EXPECT_EQ(select({}, 1.0, rng), -1);
}

TEST(Uct, AnEdgesStatisticsAreOneWordThatOneAddUpdates) {
  uint64_t w = EdgeStats::word(3, 2);
  w += EdgeStats::word(1, 1);  // a won playout
  w += EdgeStats::word(1, 0);  // a lost one
  const EdgeStats s = EdgeStats::of(w);
  EXPECT_EQ(s.visits, 5u);
  EXPECT_EQ(s.wins, 3u);
  EXPECT_EQ(EdgeStats::of(EdgeStats::word(0xffffffffu, 0xffffffffu)).visits, 0xffffffffu);
}

TEST(Uct, ANodesArraysFollowEachOtherAndStayInItsBytes) {
  const uint16_t legal[] = {4, 9, 11};
  std::vector<uint64_t> mem(NodeLayout::bytes(3) / 8 + 1, ~uint64_t{0});
  auto* node = reinterpret_cast<uint8_t*>(mem.data());
  NodeLayout::make(node, 3, legal);
  EXPECT_EQ(NodeLayout::edges(node), 3u);
  EXPECT_EQ(NodeLayout::bytes(3) % 8, 0u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(NodeLayout::stats(node)[i], 0u);
    EXPECT_EQ(NodeLayout::children(node)[i], 0u);
    EXPECT_EQ(NodeLayout::in_flight(node)[i], 0u);
    EXPECT_EQ(NodeLayout::moves(node)[i], legal[i]);
  }
  const auto end = reinterpret_cast<uint8_t*>(NodeLayout::moves(node) + 3);
  EXPECT_LE(end - node, static_cast<std::ptrdiff_t>(NodeLayout::bytes(3)));
  EXPECT_EQ(mem.back(), ~uint64_t{0}) << "written past the node";
}

TEST(Uct, TheMostVisitedEdgeIsPlayed) {
  const uint64_t stats[] = {EdgeStats::word(5, 5), EdgeStats::word(9, 1), EdgeStats::word(7, 7)};
  EXPECT_EQ(most_visited(3, stats), 1);
  const uint64_t none[] = {0, 0};
  EXPECT_EQ(most_visited(2, none), -1);
}

// ---- the shared command-line flags

SearchFlags parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  SearchFlags f;
  for (int i = 0; i < static_cast<int>(argv.size()); ++i)
    if (!take_search_flag(static_cast<int>(argv.size()), argv.data(), i, f)) throw std::runtime_error("not a search flag: " + args[static_cast<size_t>(i)]);
  return f;
}

TEST(SearchFlags, EachFlagSetsItsField) {
  const SearchFlags f = parse({"--policy", "cached-shared", "--board", "9", "--rollouts", "5000", "--K", "4", "--exploration", "0.7",
                               "--expand-at", "3", "--virtual-loss", "2", "--in-flight", "32", "--sync-every", "100", "--seed", "42"});
  EXPECT_EQ(f.policy, TreePolicy::CachedShared);
  EXPECT_EQ(f.board, 9);
  EXPECT_EQ(f.budget.rollouts, 5000u);
  EXPECT_EQ(f.budget.seconds, 0.0);
  EXPECT_EQ(f.search.playouts, 4u);
  EXPECT_DOUBLE_EQ(f.search.exploration, 0.7);
  EXPECT_EQ(f.search.expand_at, 3u);
  EXPECT_EQ(f.search.virtual_loss, 2u);
  EXPECT_EQ(f.search.in_flight, 32u);
  EXPECT_EQ(f.search.sync_every, 100u);
  EXPECT_EQ(f.search.seed, 42u);
  EXPECT_EQ(parse({"--seconds", "0.5"}).budget.rollouts, 0u) << "seconds replace a rollout budget";
  const SearchFlags e = parse({"--playout", "bridge", "--rave", "300"});
  EXPECT_EQ(e.playout, loom::mcts::HexPlayout::Bridge);
  EXPECT_EQ(e.search.rave, 300u);
  EXPECT_EQ(parse({}).playout, loom::mcts::HexPlayout::Uniform);
  EXPECT_EQ(parse({}).search.rave, 0u) << "plain UCT unless asked";
}

TEST(SearchFlags, BadValuesAreErrorsNamingTheFlag) {
  const std::vector<std::vector<std::string>> bad = {
      {"--board", "2"}, {"--board", "20"}, {"--rollouts", "0"}, {"--seconds", "nan"}, {"--seconds", "-1"}, {"--K", "x"},
      {"--exploration", "1e9"}, {"--policy", "tree"}, {"--virtual-loss", "65"}, {"--seed", "-3"}, {"--board"}, {"--rave", "-1"}, {"--playout", "mohex"}};
  for (const auto& args : bad) {
    try {
      parse(args);
      ADD_FAILURE() << args[0] << " " << (args.size() > 1 ? args[1] : "") << " was accepted";
    } catch (const loom::Error& e) {
      if (args[0] != "--policy" && args[0] != "--playout") {
        EXPECT_NE(std::string(e.what()).find(args[0]), std::string::npos) << e.what();
      }
    }
  }
}

TEST(SearchFlags, OtherArgumentsAreLeftToTheCaller) {
  std::string a = "--quiet";
  char* argv[] = {a.data()};
  int i = 0;
  SearchFlags f;
  EXPECT_FALSE(take_search_flag(1, argv, i, f));
  EXPECT_EQ(i, 0);
}

}  // namespace
