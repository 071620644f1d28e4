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

struct Range {
  size_t bytes = size_t{1} << 20;
  uint8_t* base = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
  ~Range() { std::free(base); }
};

TEST(OmpSharedHeap, EachProcessAllocatesFromItsOwnSlice) {
  Range r;
  SharedHeap h0(r.base, r.bytes, 0, 2), h1(r.base, r.bytes, 1, 2);
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
  for (int rank = 0; rank < kProcs; ++rank) heaps.push_back(std::make_unique<SharedHeap>(r.base, r.bytes, rank, kProcs));
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
  SharedHeap h(r.base, r.bytes, 0, 1);
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
  SharedHeap h(r.base, r.bytes, 0, 4);
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
  SharedHeap h0(r.base, r.bytes, 0, 2), h1(r.base, r.bytes, 1, 2);
  void* b = h1.allocate(64, 16);
  h0.free(b);
  EXPECT_EQ(h0.foreign_frees(), 1u);
  EXPECT_EQ(h1.size_of(b), 64u) << "still allocated in its process";
  h1.free(b);
  EXPECT_EQ(h1.free_bytes(), h1.slice_bytes());
}

TEST(OmpSharedHeap, BadPointersAndDoubleFreesAreClearErrors) {
  Range r;
  SharedHeap h(r.base, r.bytes, 0, 1);
  void* p = h.allocate(32, 16);
  h.free(p);
  EXPECT_THROW(h.free(p), loom::Error) << "freed twice";
  int outside = 0;
  EXPECT_THROW(h.free(&outside), loom::Error);
  EXPECT_THROW((void)h.size_of(static_cast<uint8_t*>(h.allocate(64, 16)) + 16), loom::Error) << "not a block's start";
  EXPECT_THROW(SharedHeap(r.base, r.bytes, 2, 2), loom::Error);
  EXPECT_THROW(SharedHeap(r.base + 8, r.bytes, 0, 1), loom::Error);
}

}  // namespace
}  // namespace loom::omp
