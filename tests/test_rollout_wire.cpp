// The owner-invoked tree's messages (mcts_shared_tree/rollout_wire.hpp) and Hex::valid: what
// is packed is parsed back alike, and a message that is not whole and valid is refused.
#include <gtest/gtest.h>

#include <vector>

#include "loom/mcts_shared_tree/hex.hpp"
#include "loom/mcts_shared_tree/rollout_wire.hpp"

using loom::mcts::Hex;
using namespace loom::mcts::invoked;

namespace {

constexpr WireCheck kCheck{7, 4};  // epoch 7, four worker threads in the job

Hex::State some_position(const Hex& g) {
  Hex::State s = g.initial();
  g.play(s, 3);
  g.play(s, 12);
  g.play(s, 20);
  return s;
}

std::vector<std::byte> a_rollout(const Hex& g, std::vector<Step> path) {
  std::vector<std::byte> msg;
  pack_rollout(msg, RolloutHeader{2, kCheck.epoch, 99, static_cast<uint32_t>(path.size()), 0}, some_position(g),
               std::span<const Step>(path));
  return msg;
}

TEST(RolloutWire, ARolloutIsParsedBackAsPacked) {
  Hex g(5);
  const std::vector<Step> path = {{11, 0, 3, 0, 0}, {12, 3, 7, 1, 0}};
  const auto msg = a_rollout(g, path);
  RolloutHeader h{};
  Hex::State s{};
  std::vector<Step> got;
  ASSERT_TRUE(unpack_rollout(g, std::span<const std::byte>(msg), kCheck, h, s, got));
  EXPECT_EQ(h.object, 2u);
  EXPECT_EQ(h.node, 99u);
  EXPECT_EQ(h.depth, 2u);
  EXPECT_EQ(g.hash(s), g.hash(some_position(g)));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].node, 12u);
  EXPECT_EQ(got[1].owner, 3u);
  EXPECT_EQ(got[1].edge, 7u);
  EXPECT_EQ(got[1].mover, 1u);
}

TEST(RolloutWire, ARolloutNotWholeOrOfAnotherSearchIsRefused) {
  Hex g(5);
  RolloutHeader h{};
  Hex::State s{};
  std::vector<Step> got;
  auto msg = a_rollout(g, {{11, 0, 3, 0, 0}});
  const auto refused = [&](std::vector<std::byte> m, WireCheck c = kCheck) { return !unpack_rollout(g, std::span<const std::byte>(m), c, h, s, got); };
  EXPECT_TRUE(refused(msg, WireCheck{8, 4})) << "another epoch";
  EXPECT_TRUE(refused(std::vector<std::byte>(msg.begin(), msg.end() - 1))) << "a byte short";
  auto longer = msg;
  longer.push_back(std::byte{0});
  EXPECT_TRUE(refused(longer)) << "a byte over";
  EXPECT_TRUE(refused(std::vector<std::byte>(msg.begin(), msg.begin() + 10))) << "no header";
  auto deep = msg;
  const uint32_t depth = kMaxDepth + 1;
  std::memcpy(deep.data() + offsetof(RolloutHeader, depth), &depth, 4);
  EXPECT_TRUE(refused(deep)) << "deeper than the bound";
}

TEST(RolloutWire, AStepOrPositionFromNoSearchIsRefused) {
  Hex g(5);
  RolloutHeader h{};
  Hex::State s{};
  std::vector<Step> got;
  const auto ok = [&](const std::vector<std::byte>& m) { return unpack_rollout(g, std::span<const std::byte>(m), kCheck, h, s, got); };
  EXPECT_FALSE(ok(a_rollout(g, {{11, 4, 3, 0, 0}}))) << "an owner beyond the job's threads";
  EXPECT_FALSE(ok(a_rollout(g, {{11, 1, 3, 2, 0}}))) << "a mover 2";
  auto msg = a_rollout(g, {});
  const size_t at = sizeof(RolloutHeader);
  auto bad_state = [&](auto change) {
    Hex::State t = some_position(g);
    change(t);
    auto m = msg;
    std::memcpy(m.data() + at, &t, sizeof t);
    return ok(m);
  };
  EXPECT_TRUE(bad_state([](Hex::State&) {}));
  EXPECT_FALSE(bad_state([](Hex::State& t) { t.mover = 9; })) << "the mover indexes the stones";
  EXPECT_FALSE(bad_state([](Hex::State& t) { t.stones[0][0] |= 1u << 7; })) << "a stone off the board";
  EXPECT_FALSE(bad_state([](Hex::State& t) { t.stones[1][6] = 1; })) << "a stone on a row past the board";
  EXPECT_FALSE(bad_state([](Hex::State& t) { t.stones[1][0] |= t.stones[0][0] | 1u; t.stones[0][0] |= 1u; })) << "a cell of both";
  EXPECT_FALSE(bad_state([](Hex::State& t) { ++t.placed; })) << "a count that is not the stones'";
  EXPECT_FALSE(bad_state([](Hex::State& t) { t.n = 6; })) << "another board";
}

TEST(RolloutWire, ResultsAreParsedBackAndRefusedWhenNotWhole) {
  const std::vector<Result> rs = {{5, 3, 1, 0, 0}, {6, 0, 2, 1, 0}};
  std::vector<std::byte> msg;
  pack_results(msg, 2, kCheck.epoch, std::span<const Result>(rs));
  uint32_t id = 0;
  ASSERT_TRUE(object_of(std::span<const std::byte>(msg), id));
  EXPECT_EQ(id, 2u);
  std::vector<Result> got;
  ASSERT_TRUE(unpack_results(std::span<const std::byte>(msg), kCheck, got));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].node, 6u);
  EXPECT_EQ(got[1].root, 1u);
  EXPECT_FALSE(unpack_results(std::span<const std::byte>(msg), WireCheck{8, 4}, got)) << "another epoch";
  EXPECT_FALSE(unpack_results(std::span<const std::byte>(msg.data(), msg.size() - 1), kCheck, got)) << "a result cut short";
  EXPECT_FALSE(unpack_results(std::span<const std::byte>(msg.data(), 4), kCheck, got)) << "no epoch";
  auto bad = msg;
  bad[8 + offsetof(Result, root)] = std::byte{2};
  EXPECT_FALSE(unpack_results(std::span<const std::byte>(bad), kCheck, got)) << "a root flag 2";
  EXPECT_FALSE(object_of(std::span<const std::byte>(msg.data(), 3), id));
}

TEST(RolloutWire, ACreateMessageIsParsedBackAndRefusedWhenNotWholeOrValid) {
  Hex g(5);
  std::vector<std::byte> msg;
  pack_create(msg, CreateHeader{2, kCheck.epoch, uint64_t{3} << 40 | 17, 3, 11, 0}, some_position(g));
  CreateHeader h{};
  Hex::State s{};
  const auto ok = [&](const std::vector<std::byte>& m, WireCheck c = kCheck) { return unpack_create(g, std::span<const std::byte>(m), c, h, s); };
  ASSERT_TRUE(ok(msg));
  EXPECT_EQ(h.parent, uint64_t{3} << 40 | 17);
  EXPECT_EQ(h.parent_owner, 3u);
  EXPECT_EQ(h.edge, 11u);
  EXPECT_EQ(g.hash(s), g.hash(some_position(g)));
  uint32_t id = 0;
  ASSERT_TRUE(object_of(std::span<const std::byte>(msg), id));
  EXPECT_EQ(id, 2u);
  EXPECT_FALSE(ok(msg, WireCheck{8, 4})) << "another epoch";
  EXPECT_FALSE(ok(msg, WireCheck{7, 3})) << "a parent's owner beyond the job's threads";
  EXPECT_FALSE(ok(std::vector<std::byte>(msg.begin(), msg.end() - 1))) << "a byte short";
  auto longer = msg;
  longer.push_back(std::byte{0});
  EXPECT_FALSE(ok(longer)) << "a byte over";
  auto bad = msg;
  bad[sizeof(CreateHeader) + offsetof(Hex::State, mover)] = std::byte{9};
  EXPECT_FALSE(ok(bad)) << "a position the game refuses";
}

TEST(Hex, AStateIsValidOnlyOnItsOwnBoard) {
  Hex g(5), h(6);
  Hex::State s = some_position(g);
  EXPECT_TRUE(g.valid(s));
  EXPECT_TRUE(g.valid(g.initial()));
  EXPECT_FALSE(h.valid(s));
  g.set_to_move(s, 1);
  EXPECT_TRUE(g.valid(s));
}

}  // namespace
