// CachedNodes (objects/cached_nodes.hpp) between processes: nodes made anywhere reach every
// process after a publication and read back as written; an edge links once (concurrent links
// from every process: exactly one wins, and everyone sees the winner); counters sum every
// process's stripe; a new generation forgets the last one's links and counters, whatever the
// processes did last; the arena and the edges end cleanly; bad options are a clear error.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/objects/cached_nodes.hpp"
#include "tests/mp_test.hpp"
#include "tests/objects_test.hpp"

using loom::objects::CachedNodes;
using loom::test::rt;

namespace {

class CachedNodesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ctx_ = new loom::objects::Context(rt()); }
  static void TearDownTestSuite() {
    delete ctx_;
    ctx_ = nullptr;
  }
  static loom::objects::Context& ctx() { return *ctx_; }
  static int me() { return rt().rank(); }
  static int np() { return rt().size(); }
  static CachedNodes::Options small() {
    CachedNodes::Options o;
    o.edges = 4096;
    o.arena_bytes = 1 << 20;
    o.block_size = 4096;
    o.words = 2;
    return o;
  }
  // A node of `edges` edges whose payload is `edges` words of value tag * 1000 + i.
  static CachedNodes::Node make(CachedNodes& nodes, uint32_t edges, uint64_t tag) {
    return nodes.make(edges, edges * 8, [&](std::byte* p) {
      for (uint32_t i = 0; i < edges; ++i) {
        const uint64_t v = tag * 1000 + i;
        std::memcpy(p + i * 8, &v, 8);
      }
    });
  }
  static bool reads_back(const CachedNodes& nodes, CachedNodes::Node n, uint32_t edges, uint64_t tag) {
    if (nodes.head(n).edges != edges) return false;
    for (uint32_t i = 0; i < edges; ++i) {
      uint64_t v;
      std::memcpy(&v, nodes.payload(n) + i * 8, 8);
      if (v != tag * 1000 + i) return false;
    }
    return true;
  }

 private:
  static loom::objects::Context* ctx_;
};
loom::objects::Context* CachedNodesTest::ctx_ = nullptr;

}  // namespace

// Every process makes a root-like node and links each of its edges to a child; the others
// find them all after a publication, with the payload as written.
TEST_F(CachedNodesTest, NodesAndLinksReachEveryProcess) {
  CachedNodes nodes(ctx(), small());
  nodes.reset();
  const CachedNodes::Node mine = make(nodes, 4, static_cast<uint64_t>(me()));
  ASSERT_NE(mine, 0u);
  const std::vector<CachedNodes::Node> all = rt().bootstrap().allgather_value(mine);
  const CachedNodes::Head h = nodes.head(mine);
  for (uint32_t i = 0; i < 4; ++i) {
    const CachedNodes::Node c = make(nodes, 1, static_cast<uint64_t>(me() * 10 + i));
    ASSERT_NE(c, 0u);
    EXPECT_TRUE(nodes.link(h.first + i, c));
    EXPECT_EQ(nodes.known(h.first + i), c) << "a link made here is known here";
  }
  nodes.sync_all();
  for (int p = 0; p < np(); ++p) {
    ASSERT_TRUE(reads_back(nodes, all[static_cast<size_t>(p)], 4, static_cast<uint64_t>(p))) << "rank " << p << "'s node";
    const CachedNodes::Head ph = nodes.head(all[static_cast<size_t>(p)]);
    for (uint32_t i = 0; i < 4; ++i) {
      const CachedNodes::Link l = nodes.look(ph.first + i);
      ASSERT_TRUE(l.taken);
      ASSERT_NE(l.node, 0u) << "published, so here";
      EXPECT_TRUE(reads_back(nodes, l.node, 1, static_cast<uint64_t>(p * 10 + i)));
      EXPECT_EQ(nodes.known(ph.first + i), l.node);
    }
  }
  ctx().process_barrier();
}

// All processes link the same edges at once: one link per edge wins, and after a publication
// every process sees the same winner.
TEST_F(CachedNodesTest, AnEdgeLinksOnce) {
  CachedNodes nodes(ctx(), small());
  nodes.reset();
  CachedNodes::Node root = me() == 0 ? make(nodes, 64, 7) : 0;
  root = rt().bootstrap().allgather_value(root)[0];
  nodes.sync_all();
  const uint32_t first = nodes.head(root).first;
  uint64_t won = 0;
  for (uint32_t i = 0; i < 64; ++i) {
    const CachedNodes::Node c = make(nodes, 1, static_cast<uint64_t>(me() * 100 + i));
    ASSERT_NE(c, 0u);
    if (nodes.link(first + i, c)) ++won;
  }
  const std::vector<uint64_t> wins = rt().bootstrap().allgather_value(won);
  uint64_t total = 0;
  for (uint64_t w : wins) total += w;
  EXPECT_EQ(total, 64u) << "every edge linked exactly once";
  nodes.sync_all();
  std::vector<CachedNodes::Node> seen(64);
  for (uint32_t i = 0; i < 64; ++i) {
    const CachedNodes::Link l = nodes.look(first + i);
    ASSERT_NE(l.node, 0u);
    seen[i] = l.node;
    uint64_t v;
    std::memcpy(&v, nodes.payload(l.node), 8);
    EXPECT_EQ(v / 1000 % 100, i) << "a child of this edge";
  }
  std::vector<std::byte> bytes(64 * 8);
  std::memcpy(bytes.data(), seen.data(), bytes.size());
  for (const auto& other : rt().bootstrap().allgather(bytes)) EXPECT_EQ(other, bytes) << "every process sees the same winners";
  ctx().process_barrier();
}

// Counters: every process adds to every edge; the sums after a publication are every
// process's, read now (sum) or refreshed per node (summed: the others' as of the node's refresh
// after the last synchronization). A new generation reads zero and no link, however many edges the last one used,
// and a process arriving late at it changes nothing. Seven generations take edges from each of
// the three edge counters twice or more: a counter not zeroed for its next turn runs out of
// edges (each generation here claims more than half of them).
TEST_F(CachedNodesTest, CountersSumAndAGenerationStartsClean) {
  CachedNodes nodes(ctx(), small());
  for (int generation = 0; generation < 7; ++generation) {
    if (me() == np() - 1 && generation % 3 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    nodes.reset();
    CachedNodes::Node root = me() == 0 ? make(nodes, 100, 1) : 0;
    root = rt().bootstrap().allgather_value(root)[0];
    nodes.sync_all();
    const CachedNodes::Head head = nodes.head(root);
    const uint32_t first = head.first;
    nodes.refresh(head);
    for (uint32_t i = 0; i < 100; ++i) {
      EXPECT_EQ(nodes.sum(first + i), 0u) << "generation " << generation << ", edge " << i;
      EXPECT_EQ(nodes.summed(first + i), 0u) << "refreshed: generation " << generation << ", edge " << i;
      EXPECT_EQ(nodes.known(first + i), 0u);
      EXPECT_FALSE(nodes.look(first + i).taken) << "the last generation's link";
    }
    ctx().process_barrier();  // everyone looked before anyone links
    // Edges claimed by every process (the counter runs on), then counted on.
    // Nodes for half of all edges between the processes, a few more in some generations (with
    // the root and the links' nodes, whole claims come to about three quarters).
    const int nodes_of_32 = static_cast<int>(small().edges) / 2 / 32 / np();
    for (int k = 0; k < nodes_of_32 + generation % 3; ++k) ASSERT_NE(make(nodes, 32, 2), 0u);
    for (uint32_t i = 0; i < 100; ++i) {
      // Refreshed sums: this process's word at once, the others' as of the node's refresh.
      const uint64_t was = nodes.summed(first + i);
      nodes.add(first + i, i + 1);
      ASSERT_EQ(nodes.summed(first + i), was + i + 1);
      if (i % 2 == 0) nodes.link(first + i, make(nodes, 1, 3));
    }
    nodes.sync_all();
    for (uint32_t i = 0; i < 100; ++i) ASSERT_EQ(nodes.sum(first + i), static_cast<uint64_t>(np()) * (i + 1));
    nodes.refresh(head);
    for (uint32_t i = 0; i < 100; ++i) ASSERT_EQ(nodes.summed(first + i), static_cast<uint64_t>(np()) * (i + 1));
  }
  ctx().process_barrier();
}

// The program's words are region atomic words every process shares.
TEST_F(CachedNodesTest, ProgramWordsAreShared) {
  CachedNodes nodes(ctx(), small());
  nodes.reset();
  for (int i = 0; i < 10; ++i) nodes.word(1).fetch_add(1, loom::coherence::Order::Relaxed);
  ctx().process_barrier();
  EXPECT_EQ(nodes.word(1).load(loom::coherence::Order::Acquire), static_cast<uint64_t>(10 * np()));
  EXPECT_THROW(nodes.word(2), loom::Error) << "two words were asked for";
  ctx().process_barrier();
}

// A full arena or edge count makes no node (0), and the nodes made before stay good.
TEST_F(CachedNodesTest, RunningOutMakesNoNode) {
  CachedNodes::Options o = small();
  o.arena_bytes = 16 << 10;  // four blocks
  o.edges = 1 << 16;
  CachedNodes nodes(ctx(), o);
  nodes.reset();
  std::vector<CachedNodes::Node> made;
  for (;;) {
    const CachedNodes::Node n = make(nodes, 8, made.size());
    if (n == 0) break;
    made.push_back(n);
    ASSERT_LT(made.size(), 10000u);
  }
  EXPECT_GT(made.size(), 100u);
  for (size_t i = 0; i < made.size(); ++i) ASSERT_TRUE(reads_back(nodes, made[i], 8, i));
  EXPECT_EQ(make(nodes, 600, 1), 0u) << "a node over one block";
  ctx().process_barrier();
  nodes.reset();
  EXPECT_NE(make(nodes, 8, 1), 0u) << "a new generation has its arena back";
  ctx().process_barrier();
}

TEST_F(CachedNodesTest, BadOptionsAreAClearError) {
  CachedNodes::Options o = small();
  o.edges = 0;
  EXPECT_THROW((CachedNodes{ctx(), o}), loom::Error);
  o = small();
  o.words = 65;
  EXPECT_THROW((CachedNodes{ctx(), o}), loom::Error);
  o = small();
  o.arena_bytes = 4096;
  EXPECT_THROW((CachedNodes{ctx(), o}), loom::Error);
  o = small();
  o.edges = me() == 0 ? 4096 : 8192;  // the processes disagree
  if (np() > 1) {
    EXPECT_THROW((CachedNodes{ctx(), o}), loom::Error);
  }
  ctx().process_barrier();
}
