// The cost model's pieces (objects/cost_model.hpp): the calibration file's round trip and its
// errors, and what each prediction counts; an Auto cell's switches (objects/chooser.hpp); a
// slot's words read into a value (objects/slots.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "loom/dsm/common/error.hpp"
#include "loom/objects/chooser.hpp"
#include "loom/objects/cost_model.hpp"
#include "loom/objects/projection.hpp"
#include "loom/objects/slots.hpp"

using loom::objects::Components;
using loom::objects::Level;
using loom::objects::Op;
using loom::objects::Policy;
using loom::objects::predict;

namespace {

// Every component a different power of two (2^-10 to 2^19: exact in the file's ten digits, below its 10^6 bound), so a
// prediction's sum names the components in it.
Components powers() {
  Components c;
  double v = 1.0 / 1024;
  c.provider = "shm";
  c.processes = 2;
  for (double* f : {&c.get, &c.put, &c.fad, &c.cas, &c.atomic_read, &c.miss, &c.line, &c.cas_contended, &c.rpc, &c.call, &c.post, &c.h_insert,
                    &c.h_find, &c.h_push, &c.h_pop, &c.h_find_phasal, &c.h_push_phasal, &c.h_pop_phasal, &c.op, &c.region_atomic,
                    &c.region_acquire, &c.region_release, &c.region_release_clean, &c.region_write, &c.region_read, &c.region_write_shared,
                    &c.region_release_shared, &c.publish_phasal, &c.cas_persistent, &c.fad_single})
    *f = v, v *= 2;
  return c;
}

std::string error_of(const std::string& text) {
  try {
    Components::parse(text, "test.txt");
  } catch (const loom::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CostModel, TheCalibrationFileKeepsEveryComponent) {
  const Components c = powers();
  const Components back = Components::parse(c.serialize(), "test.txt");
  EXPECT_EQ(back.serialize(), c.serialize());
  EXPECT_EQ(back.line, c.line);
  EXPECT_EQ(back.h_pop_phasal, c.h_pop_phasal);
  EXPECT_EQ(back.provider, "shm");
}

TEST(CostModel, AFileWithoutAComponentAsksForACalibration) {
  std::string text = powers().serialize();
  const size_t at = text.find("\nline ");
  ASSERT_NE(at, std::string::npos);
  text.erase(at + 1, text.find('\n', at + 1) - at);
  const std::string e = error_of(text);
  EXPECT_NE(e.find("'line' is missing"), std::string::npos) << e;
  EXPECT_NE(e.find("rerun loom-calibrate"), std::string::npos) << e;
  EXPECT_NE(error_of(powers().serialize() + "lines 1\n").find("unknown component 'lines'"), std::string::npos);
  EXPECT_NE(error_of(powers().serialize() + "line -1\n").find("not a cost"), std::string::npos);
}

TEST(CostModel, APhasalOperationRunsItsOwnLevelsLogic) {
  const Components c = powers();
  // OwnerInvoked: the round trip, the front end, the operation at the owner (and a hash bucket's line).
  EXPECT_EQ(predict(c, Op::QueuePush, Policy::OwnerInvoked, Level::PhasalPush), c.op + c.rpc + c.h_push_phasal);
  EXPECT_EQ(predict(c, Op::QueuePush, Policy::OwnerInvoked, Level::Atomic), c.op + c.rpc + c.h_push);
  EXPECT_EQ(predict(c, Op::QueuePop, Policy::OwnerInvoked, Level::PhasalPop), c.op + c.rpc + c.h_pop_phasal);
  EXPECT_EQ(predict(c, Op::HashFind, Policy::OwnerInvoked, Level::PhasalFind), c.op + c.rpc + c.h_find_phasal + c.line);
  EXPECT_EQ(predict(c, Op::HashFind, Policy::OwnerInvoked, Level::Atomic), c.op + c.rpc + c.h_find + c.line);
  // An insert has one algorithm at both levels.
  EXPECT_EQ(predict(c, Op::HashInsert, Policy::OwnerInvoked, Level::PhasalInsert),
            predict(c, Op::HashInsert, Policy::OwnerInvoked, Level::Atomic));
}

TEST(CostModel, AHashOperationMeetsItsBucketsLine) {
  const Components c = powers();
  // A find reads a bucket written before: its line from the caches below. A Cached read's
  // accessor runs while it comes, and region_read is timed on slots in many lines: it is in it.
  EXPECT_EQ(predict(c, Op::HashFind, Policy::OneSided, Level::PhasalFind), c.op + c.line + c.get);
  EXPECT_EQ(predict(c, Op::HashFind, Policy::Cached, Level::PhasalFind), c.h_find_phasal + c.op + c.region_read);
  // A one-sided insert claims a fresh bucket: the owner's line (a miss), not one of ours.
  EXPECT_EQ(predict(c, Op::HashInsert, Policy::OneSided, Level::Atomic), c.op + c.miss + c.cas + c.post + c.cas);
  // Phasal: one atomic (the claim) and the Ready word's publication behind key and value.
  EXPECT_EQ(predict(c, Op::HashInsert, Policy::OneSided, Level::PhasalInsert), c.op + c.miss + c.cas + c.post + c.publish_phasal);
  // A queue's slots are walked in order: no line counted.
  EXPECT_EQ(predict(c, Op::QueuePush, Policy::OneSided, Level::PhasalPush), c.op + c.fad + c.put);
}

// Every process on one queue: the claim on the shared counter is the contended component (a
// phasal claim's fetch-and-add on one word, an atomic claim's CAS retried until it lands), the
// slot's own transfers and publication stay what they cost alone; a hash operation has none.
TEST(CostModel, AContendedQueueOperationPaysTheContendedClaim) {
  const Components c = powers();
  using loom::objects::predict_contended;
  EXPECT_EQ(predict_contended(c, Op::QueuePush, Level::PhasalPush), c.op + c.fad_single + c.put);
  EXPECT_EQ(predict_contended(c, Op::QueuePop, Level::PhasalPop), c.op + c.fad_single + c.get + c.put);
  EXPECT_EQ(predict_contended(c, Op::QueuePush, Level::Atomic), c.op + c.atomic_read + c.post + c.cas_persistent + c.post + c.cas);
  EXPECT_EQ(predict_contended(c, Op::QueuePop, Level::Atomic), c.op + c.atomic_read + c.post + c.cas_persistent + c.post + c.cas);
  EXPECT_THROW(predict_contended(c, Op::HashInsert, Level::Atomic), loom::Error);
}

TEST(CostModel, TheLocalLevelCostsTheOperationOnTheHostsMemoryUnderEveryPolicy) {
  const Components c = powers();
  for (Policy p : loom::objects::kFixedPolicies) {
    EXPECT_EQ(predict(c, Op::QueuePush, p, Level::Local), c.op + c.h_push);
    EXPECT_EQ(predict(c, Op::QueuePop, p, Level::Local), c.op + c.h_pop);
  }
  EXPECT_THROW(predict(c, Op::HashInsert, Policy::OneSided, Level::Local), loom::Error);
  EXPECT_THROW(loom::objects::predict_contended(c, Op::QueuePush, Level::Local), loom::Error);
  loom::objects::Workload w;
  w.level = Level::Local;
  EXPECT_FALSE(loom::objects::prefer_cached(c, Op::QueuePush, Op::QueuePop, w)) << "Local keeps the queue at its host";
}

TEST(CostModel, AChecksumQueueOperationIsItsReadsAClaimAndOneWrite) {
  const Components c = powers();
  using loom::objects::predict_checksum;
  EXPECT_EQ(predict_checksum(c, Op::QueuePush, Policy::OneSided), c.op + c.atomic_read + c.post + c.cas + c.put);
  EXPECT_EQ(predict_checksum(c, Op::QueuePop, Policy::OneSided), c.op + c.atomic_read + 2 * c.post + c.cas + c.put);
  EXPECT_EQ(predict_checksum(c, Op::QueuePop, Policy::OwnerInvoked), predict(c, Op::QueuePop, Policy::OwnerInvoked, Level::Atomic));
  EXPECT_THROW(predict_checksum(c, Op::QueuePush, Policy::Cached), loom::Error);
  EXPECT_THROW(predict_checksum(c, Op::HashFind, Policy::OneSided), loom::Error);
}

TEST(CostModel, AOneSidedOperationCountsTheFabricOperationsItMakes) {
  const Components c = powers();
  // A seqlock's state word is read by an atomic read (a load where the memory is mapped), not a
  // fetch-and-add; the operation's logic is in the front end, its memory accesses are these.
  EXPECT_EQ(predict(c, Op::HashFind, Policy::OneSided, Level::Atomic), c.op + c.line + c.atomic_read + c.get + c.atomic_read);
  EXPECT_EQ(predict(c, Op::QueuePush, Policy::OneSided, Level::Atomic), c.op + c.atomic_read + c.post + c.cas + c.post + c.cas);
  EXPECT_EQ(predict(c, Op::QueuePop, Policy::OneSided, Level::Atomic), c.op + c.atomic_read + c.post + c.cas + c.post + c.cas);
  EXPECT_EQ(predict(c, Op::QueuePop, Policy::OneSided, Level::PhasalPop), c.op + c.fad + c.get + c.put);
  // Batched, the front end is shared and each operation's logic runs on the results: h counts.
  EXPECT_EQ(predict(c, Op::HashFind, Policy::OneSided, Level::Atomic, 4), c.h_find + c.op / 4 + 3 * c.post + c.atomic_read / 4);
  // A Cached operation reads and compares its local copy's slots as h does: h counts, one at a
  // time and batched.
  const double a = c.region_atomic;
  EXPECT_EQ(predict(c, Op::QueuePush, Policy::Cached, Level::PhasalPush), c.h_push_phasal + c.op + a + c.region_write + 2 * a);
  EXPECT_EQ(predict(c, Op::QueuePush, Policy::Cached, Level::PhasalPush, 2), c.h_push_phasal + c.op / 2 + a + c.region_write + 2 * a);
  // Writing blocks every process writes: the shared write and release; a pop writes nothing.
  using loom::objects::Writers;
  EXPECT_EQ(predict(c, Op::HashInsert, Policy::Cached, Level::Atomic, 1, Writers::Many),
            c.h_insert + c.op + a + c.region_acquire + c.region_write_shared + a + c.region_release_shared);
  EXPECT_EQ(predict(c, Op::HashInsert, Policy::Cached, Level::Atomic, 1, Writers::One),
            c.h_insert + c.op + a + c.region_acquire + c.region_write + a + c.region_release);
  EXPECT_EQ(predict(c, Op::QueuePop, Policy::Cached, Level::Atomic, 1, Writers::Many), predict(c, Op::QueuePop, Policy::Cached, Level::Atomic));
}

namespace {
using loom::objects::Chooser;

// Runs `ops` operations of one cell through the Chooser, each timed one taking what `us` says
// for the policy it ran under; the policy in use at the end.
template <typename F>
Policy run_cell(Chooser& ch, uint32_t ops, F&& us) {
  for (uint32_t i = 0; i < ops; ++i) {
    bool timed = false;
    const Policy p = ch.pick(Op::HashFind, Level::Atomic, timed);
    if (timed) ch.record(Op::HashFind, Level::Atomic, p, us(p));
  }
  return ch.current(Op::HashFind, Level::Atomic);
}

// OneSided the model's pick for an atomic find (0.1 us against 0.5).
Components one_sided_cheaper() {
  Components c;
  c.rpc = 0.5, c.get = 0.05, c.atomic_read = 0.025;
  return c;
}
}  // namespace

TEST(Chooser, AnAutoCellLeavesAPolicyThatWentBadAndComesBack) {
  Chooser ch(one_sided_cheaper(), true, Policy::OneSided, Policy::OwnerInvoked);
  EXPECT_EQ(ch.current(Op::HashFind, Level::Atomic), Policy::OneSided);
  // The owner's memory got far (a loaded fabric): one-sided 2 us, the call still 0.5.
  EXPECT_EQ(run_cell(ch, 64 * 1024, [](Policy p) { return p == Policy::OneSided ? 2.0 : 0.5; }), Policy::OwnerInvoked);
  EXPECT_GE(ch.switches(), 1u);
  EXPECT_NEAR(ch.estimate(Op::HashFind, Level::Atomic, Policy::OneSided), 2.0, 1e-9);
  // It came back: the probes see it and the cell returns.
  EXPECT_EQ(run_cell(ch, 64 * 1024, [](Policy p) { return p == Policy::OneSided ? 0.1 : 0.5; }), Policy::OneSided);
  // The other cells were left alone.
  EXPECT_EQ(ch.current(Op::HashInsert, Level::Atomic), Policy::OneSided);
}

TEST(Chooser, OneSlowOperationMovesNothing) {
  Chooser ch(one_sided_cheaper(), true, Policy::OneSided, Policy::OwnerInvoked);
  uint32_t timed_ops = 0;
  const Policy end = run_cell(ch, 64 * 1024, [&](Policy p) {
    if (p != Policy::OneSided) return 0.5;
    return ++timed_ops == 3 ? 50.0 : 0.1;  // one preemption
  });
  EXPECT_EQ(end, Policy::OneSided);
  EXPECT_EQ(ch.switches(), 0u);
  // Within the hysteresis (1.2x, not 1.3x) neither.
  EXPECT_EQ(run_cell(ch, 64 * 1024, [](Policy p) { return p == Policy::OneSided ? 0.6 : 0.5; }), Policy::OneSided);
  EXPECT_EQ(ch.switches(), 0u);
}

TEST(Chooser, WithoutAdaptationTheModelsPickStaysAndNothingIsTimed) {
  Chooser ch(one_sided_cheaper(), false, Policy::OneSided, Policy::OwnerInvoked);
  bool any_timed = false;
  for (int i = 0; i < 10000; ++i) {
    bool timed = false;
    EXPECT_EQ(ch.pick(Op::HashFind, Level::Atomic, timed), Policy::OneSided);
    any_timed |= timed;
  }
  EXPECT_FALSE(any_timed);
}

namespace {
struct Twelve {
  uint32_t a, b, c;
};
struct KeyValue {
  uint64_t key, value;
};
template <typename T>
T through_words(const T& v) {
  alignas(8) uint64_t words[(sizeof(T) + 7) / 8] = {};
  std::memcpy(words, &v, sizeof(T));
  return loom::objects::detail::load_words<T>(words);
}
}  // namespace

TEST(SlotWords, AValueComesBackWhole) {
  EXPECT_EQ(through_words(uint64_t{0x1122334455667788}), 0x1122334455667788u);
  using Entry = loom::objects::Slot<KeyValue>;
  static_assert(sizeof(Entry) == 24);
  const Entry e = through_words(Entry{7, {8, 9}});
  EXPECT_EQ(e.word, 7u);
  EXPECT_EQ(e.payload.key, 8u);
  EXPECT_EQ(e.payload.value, 9u);
  const Twelve t = through_words(Twelve{1, 2, 3});  // not whole words: the last one's half
  EXPECT_EQ(t.a, 1u);
  EXPECT_EQ(t.b, 2u);
  EXPECT_EQ(t.c, 3u);
}

// The node sweep's projection (objects/projection.hpp): each kind of part weighs by the share of
// keys it holds; an owner-invoked operation on the process's own part makes no call.
TEST(Projection, EachPartWeighsByItsShareOfTheKeys) {
  using loom::objects::Placements;
  using loom::objects::Scale;
  Placements c;
  c.self = powers();
  c.node = powers();
  c.wire = powers();
  c.node.get *= 3, c.wire.get *= 10;  // a find's get costs 1, 3 and 10 times as much
  const auto find = [&](Scale s) { return loom::objects::predict_at(c, s, Op::HashFind, Policy::OneSided, Level::PhasalFind); };
  const double self = predict(c.self, Op::HashFind, Policy::OneSided, Level::PhasalFind);
  const double node = predict(c.node, Op::HashFind, Policy::OneSided, Level::PhasalFind);
  const double wire = predict(c.wire, Op::HashFind, Policy::OneSided, Level::PhasalFind);
  EXPECT_DOUBLE_EQ(find({1, 1}), self);
  EXPECT_DOUBLE_EQ(find({4, 1}), (self + 3 * wire) / 4);
  EXPECT_DOUBLE_EQ(find({1, 2}), (self + node) / 2);
  EXPECT_DOUBLE_EQ(find({8, 2}), (self + node + 14 * wire) / 16);
  EXPECT_DOUBLE_EQ(loom::objects::ops_per_s({8, 2}, 2.0), 16 * 1e6 / 2.0);
  // Past a few nodes, nearly every operation crosses the wire.
  EXPECT_NEAR(find({64, 1}), wire, (wire - self) / 64 + 1e-12);
}

TEST(Projection, AnOwnerInvokedOperationOnItsOwnPartMakesNoCall) {
  loom::objects::Placements c;
  c.self = powers();
  c.wire = powers();
  const double alone = loom::objects::predict_at(c, {1, 1}, Op::HashInsert, Policy::OwnerInvoked, Level::Atomic);
  EXPECT_DOUBLE_EQ(alone, predict(c.self, Op::HashInsert, Policy::OwnerInvoked, Level::Atomic) - c.self.rpc);
  EXPECT_DOUBLE_EQ(loom::objects::predict_at(c, {2, 1}, Op::HashInsert, Policy::OwnerInvoked, Level::Atomic),
                   (alone + predict(c.wire, Op::HashInsert, Policy::OwnerInvoked, Level::Atomic)) / 2);
  EXPECT_THROW(loom::objects::predict_at(c, {0, 1}, Op::HashInsert, Policy::OneSided, Level::Atomic), loom::Error);
}

TEST(Projection, AutoTakesTheCheaperPolicyAtTheOwners) {
  loom::objects::Placements c;
  c.self = powers();
  c.wire = powers();
  const loom::objects::Workload w{0.5, Level::Atomic};
  for (int nodes : {1, 2, 8, 64}) {
    const loom::objects::Scale s{nodes, 1};
    const double at_owners = std::min(loom::objects::predict_at(c, s, Op::HashFind, Policy::OneSided, Level::Atomic),
                                      loom::objects::predict_at(c, s, Op::HashFind, Policy::OwnerInvoked, Level::Atomic));
    const double cached = loom::objects::predict_at(c, s, Op::HashFind, Policy::Cached, Level::Atomic);
    const bool region = loom::objects::prefer_cached(nodes > 1 ? c.wire : c.self, Op::HashInsert, Op::HashFind, w);
    EXPECT_DOUBLE_EQ(loom::objects::predict_auto_at(c, s, Op::HashInsert, Op::HashFind, Op::HashFind, w, Level::Atomic),
                     region ? cached : at_owners);
  }
}
