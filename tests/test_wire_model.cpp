// The emulated wire's pure pieces (dsm/fabric/shm/wire_model.hpp): the presets and the LOOM_WIRE
// parser, the split of ranks over emulated nodes, and when a request takes effect and completes.
#include <gtest/gtest.h>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/fabric/shm/wire_model.hpp"

using namespace loom;
using namespace loom::fabric;
using namespace loom::fabric::shm;

namespace {

WireSpec wire(double latency_ns, double gbps, double gap_ns) { return WireSpec{"test", latency_ns, gbps, gap_ns}; }

TEST(WireModel, PresetsAndCustomWiresParse) {
  EXPECT_TRUE(parse_wire("").name.empty());
  for (const char* name : {"ib-edr", "roce-25g", "tcp-10g"}) {
    const WireSpec w = parse_wire(name);
    EXPECT_EQ(w.name, name);
    EXPECT_GT(w.latency_ns, 0);
    EXPECT_GT(w.bytes_per_ns, 0);
    EXPECT_GT(w.message_gap_ns, 0);
  }
  const WireSpec a = parse_wire("2,10");
  EXPECT_DOUBLE_EQ(a.latency_ns, 2000);
  EXPECT_DOUBLE_EQ(a.bytes_per_ns, 10);
  EXPECT_DOUBLE_EQ(a.message_gap_ns, 0);
  const WireSpec b = parse_wire("0.5,1.25,20");
  EXPECT_DOUBLE_EQ(b.latency_ns, 500);
  EXPECT_DOUBLE_EQ(b.message_gap_ns, 50);
  EXPECT_EQ(b.name, "0.5,1.25,20");
}

TEST(WireModel, BadWiresAreRefusedWithTheForm) {
  for (const char* bad : {"ib", "1", "1,2,3,4", "-1,2", "1,0", "1,nan", "1,2x", ",2", "1,,2", "1e9,2", "1,2,0"}) {
    try {
      parse_wire(bad);
      ADD_FAILURE() << "accepted LOOM_WIRE=" << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("LATENCY_US,GBPS"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ib-edr"), std::string::npos) << e.what();
    }
  }
}

TEST(WireModel, RanksSplitEvenlyInContiguousBlocks) {
  EXPECT_EQ(emulated_nodes(4, 2), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(emulated_nodes(5, 2), (std::vector<int>{0, 0, 0, 1, 1}));
  EXPECT_EQ(emulated_nodes(3, 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(emulated_nodes(8, 1), std::vector<int>(8, 0));
  EXPECT_THROW(emulated_nodes(4, 0), Error);
  EXPECT_THROW(emulated_nodes(4, 5), Error);
}

TEST(WireModel, AWriteOnAnIdleLinkTakesLatencyAndSizeOverBandwidth) {
  LinkClock a, b;
  const WireSpec w = wire(1000, 12, 0);
  const WireTimes t = wire_schedule(w, Opcode::Write, 4096, 10'000, a, b);
  EXPECT_EQ(t.effect, 10'000u + 1000 + 341);  // 4096 B at 12 B/ns, rounded
  EXPECT_EQ(t.complete, t.effect + 1000);     // the acknowledgement
}

TEST(WireModel, WritesFromOneNodePipelineAtTheLinkRate) {
  LinkClock a, b;
  const WireSpec w = wire(1000, 1, 0);
  const WireTimes first = wire_schedule(w, Opcode::Write, 1000, 0, a, b);
  const WireTimes second = wire_schedule(w, Opcode::Write, 1000, 0, a, b);
  EXPECT_EQ(first.effect, 2000u);
  EXPECT_EQ(second.effect, 3000u);  // behind the first on the link, not a round trip later
}

TEST(WireModel, TwoNodesSendingToOneShareItsIncomingLink) {
  LinkClock a, c, target;
  const WireSpec w = wire(1000, 1, 0);
  const WireTimes from_a = wire_schedule(w, Opcode::Send, 1000, 0, a, target);
  const WireTimes from_c = wire_schedule(w, Opcode::Send, 1000, 0, c, target);
  EXPECT_EQ(from_a.effect, 2000u);
  EXPECT_EQ(from_c.effect, 3000u);
}

TEST(WireModel, AReadTakesARoundTripAndItsPayloadComesBack) {
  LinkClock a, b;
  const WireSpec w = wire(1000, 2, 0);
  const WireTimes t = wire_schedule(w, Opcode::Read, 4000, 0, a, b);
  EXPECT_EQ(t.effect, 1000u);                // the request arrives; the data is read then
  EXPECT_EQ(t.complete, 1000u + 1000 + 2000);  // back one latency later, 4000 B at 2 B/ns
  const WireTimes atomic = wire_schedule(w, Opcode::FetchAdd, 8, 10'000, a, b);
  EXPECT_EQ(atomic.effect, 11'000u);
  EXPECT_EQ(atomic.complete, 12'004u);
}

TEST(WireModel, SmallMessagesAreSpacedByTheMessageRate) {
  LinkClock a, b;
  const WireSpec w = wire(500, 10, 100);  // 10 million messages a second
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) {
    const WireTimes t = wire_schedule(w, Opcode::Write, 8, 0, a, b);
    if (i > 0) {
      EXPECT_EQ(t.effect - last, 100u);
    }
    last = t.effect;
  }
  EXPECT_EQ(last, 500u + 10 * 100);
}

}  // namespace
