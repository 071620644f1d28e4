// The OpenMP layer's shared heap (omp/shared_heap.hpp) in one process: two processes' views of
// one range, as two heaps over the same bytes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/omp/shared_heap.hpp"

namespace loom::omp {
namespace {

// A coherence block as large as the range: no allocation of the tests below is large (placement
// in blocks is tested on its own).
constexpr size_t kNoLarge = size_t{1} << 20;

struct Range {
  size_t bytes = size_t{1} << 20;
  uint8_t* base = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
  ~Range() { std::free(base); }
};

TEST(OmpSharedHeap, EachProcessAllocatesFromItsOwnSlice) {
  Range r;
  SharedHeap h0(r.base, r.bytes, 0, 2, kNoLarge), h1(r.base, r.bytes, 1, 2, kNoLarge);
  void* a = h0.allocate(100, 16);
  void* b = h1.allocate(100, 16);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(h0.owner(a), 0);
  EXPECT_EQ(h0.owner(b), 1);
  EXPECT_LT(static_cast<uint8_t*>(a), r.base + h0.slice_bytes());
  EXPECT_GE(static_cast<uint8_t*>(b), r.base + h0.slice_bytes());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 16, 0u);
  EXPECT_EQ(h1.size_of(a), 100u) << "any process reads a block's size from its header";
}

TEST(OmpSharedHeap, RankZeroHasHalfTheRangeAndTheOthersShareTheRest) {
  Range r;
  constexpr int kProcs = 4;
  std::vector<std::unique_ptr<SharedHeap>> heaps;
  for (int rank = 0; rank < kProcs; ++rank) heaps.push_back(std::make_unique<SharedHeap>(r.base, r.bytes, rank, kProcs, kNoLarge));
  EXPECT_EQ(heaps[0]->slice_bytes(), r.bytes / 2) << "rank 0's master makes the serial code's allocations";
  size_t total = 0;
  for (int rank = 0; rank < kProcs; ++rank) {
    total += heaps[rank]->slice_bytes();
    if (rank > 0) {
      EXPECT_EQ(heaps[rank]->slice_bytes(), heaps[1]->slice_bytes());
    }
    // The first and the last block a slice can hold belong to its process, seen from any other.
    void* first = heaps[rank]->allocate(64, 16);
    void* last = heaps[rank]->allocate(heaps[rank]->slice_bytes() - 64 - 2 * SharedHeap::kGranule, 16);
    ASSERT_NE(first, nullptr);
    ASSERT_NE(last, nullptr) << rank;
    for (const auto& h : heaps) {
      EXPECT_EQ(h->owner(first), rank);
      EXPECT_EQ(h->owner(static_cast<uint8_t*>(last) + heaps[rank]->size_of(last) - 1), rank);
    }
  }
  EXPECT_LE(total, r.bytes);
  EXPECT_GT(total, r.bytes - kProcs * SharedHeap::kGranule);
}

TEST(OmpSharedHeap, AlignmentsAndSizesAreKept) {
  Range r;
  SharedHeap h(r.base, r.bytes, 0, 1, kNoLarge);
  std::set<void*> seen;
  for (size_t align : {16u, 64u, 256u, 4096u}) {
    for (size_t n : {1u, 17u, 4000u}) {
      void* p = h.allocate(n, align);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << align;
      EXPECT_EQ(h.size_of(p), n);
      std::memset(p, 0xab, n);
      EXPECT_TRUE(seen.insert(p).second);
    }
  }
  for (void* p : seen) h.free(p);
  EXPECT_EQ(h.free_bytes(), h.slice_bytes()) << "every block freed gives back all it took";
}

TEST(OmpSharedHeap, AFullSliceSaysSoAndFreedMemoryIsReused) {
  Range r;
  SharedHeap h(r.base, r.bytes, 0, 4, kNoLarge);
  EXPECT_EQ(h.allocate(h.slice_bytes(), 16), nullptr) << "the header needs room";
  EXPECT_EQ(h.allocate(SIZE_MAX - 8, 16), nullptr);
  EXPECT_EQ(h.allocate(64, 48), nullptr) << "alignment not a power of two";
  void* big = h.allocate(h.slice_bytes() / 2, 16);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(h.allocate(h.slice_bytes() / 2, 16), nullptr);
  h.free(big);
  EXPECT_NE(h.allocate(h.slice_bytes() / 2, 16), nullptr);
}

TEST(OmpSharedHeap, AnotherProcesssBlockIsLeftToItAndCounted) {
  Range r;
  SharedHeap h0(r.base, r.bytes, 0, 2, kNoLarge), h1(r.base, r.bytes, 1, 2, kNoLarge);
  void* b = h1.allocate(64, 16);
  h0.free(b);
  EXPECT_EQ(h0.foreign_frees(), 1u);
  EXPECT_EQ(h1.size_of(b), 64u) << "still allocated in its process";
  h1.free(b);
  EXPECT_EQ(h1.free_bytes(), h1.slice_bytes());
}

TEST(OmpSharedHeap, BadPointersAndDoubleFreesAreClearErrors) {
  Range r;
  SharedHeap h(r.base, r.bytes, 0, 1, kNoLarge);
  void* p = h.allocate(32, 16);
  h.free(p);
  EXPECT_THROW(h.free(p), loom::Error) << "freed twice";
  int outside = 0;
  EXPECT_THROW(h.free(&outside), loom::Error);
  EXPECT_THROW((void)h.size_of(static_cast<uint8_t*>(h.allocate(64, 16)) + 16), loom::Error) << "not a block's start";
  EXPECT_THROW(SharedHeap(r.base, r.bytes, 2, 2, kNoLarge), loom::Error);
  EXPECT_THROW(SharedHeap(r.base + 8, r.bytes, 0, 1, kNoLarge), loom::Error);
}

TEST(OmpSharedHeap, ALargeAllocationHasBlocksOfItsOwn) {
  Range r;
  constexpr size_t kBlock = 4096;
  SharedHeap h(r.base, r.bytes, 0, 2, kBlock);
  const auto block_of = [](const void* p) { return reinterpret_cast<uintptr_t>(p) / kBlock; };
  void* before = h.allocate(100, 16);
  void* large = h.allocate(5000, 16);
  void* exact = h.allocate(kBlock, 16);
  void* after = h.allocate(100, 16);
  ASSERT_TRUE(before != nullptr && large != nullptr && exact != nullptr && after != nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large) % kBlock, 0u) << "a large allocation starts on a block";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(exact) % kBlock, 0u) << "one block's worth is large";
  EXPECT_EQ(h.size_of(large), 5000u);
  EXPECT_LT(block_of(static_cast<uint8_t*>(before) + 99), block_of(large));
  EXPECT_GT(block_of(exact), block_of(static_cast<uint8_t*>(large) + 4999)) << "its last block is its own";
  EXPECT_GT(block_of(after), block_of(static_cast<uint8_t*>(exact) + kBlock - 1));
  std::memset(large, 0xab, 5000);
  for (void* p : {before, large, exact, after}) h.free(p);
  EXPECT_EQ(h.free_bytes(), h.slice_bytes());
  EXPECT_EQ(h.allocate(SIZE_MAX - kBlock / 2, 16), nullptr) << "rounding up to blocks does not wrap";
  EXPECT_THROW(SharedHeap(r.base, r.bytes, 0, 1, 48), loom::Error) << "a block not a power of two";
  EXPECT_THROW(SharedHeap(r.base, r.bytes, 0, 1, 32), loom::Error) << "a block below the granule";
}

}  // namespace
}  // namespace loom::omp
