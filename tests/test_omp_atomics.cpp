// The OpenMP layer's inline atomics: decoding locked instructions (omp/atomic_sites.hpp), their
// effects with the processor's flags (omp/atomic_ops.hpp), and replacing them with breakpoints
// carried out by the SIGTRAP handler (omp/inline_atomics.hpp), in one process.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "loom/omp/atomic_ops.hpp"
#include "loom/omp/atomic_sites.hpp"
#include "loom/omp/inline_atomics.hpp"

namespace loom::omp {
namespace {

constexpr uint64_t kCF = 0x1, kZF = 0x40, kSF = 0x80, kOF = 0x800;

AtomicSite decode(std::vector<uint8_t> bytes, uint64_t pc = 0x1000) {
  auto s = decode_atomic(bytes, pc);
  EXPECT_TRUE(s.has_value());
  return s.value_or(AtomicSite{});
}

TEST(OmpAtomicSites, LockedAddRipRelative) {
  AtomicSite s = decode({0xf0, 0x48, 0x01, 0x05, 0x10, 0x00, 0x00, 0x00});  // lock add %rax, 0x10(%rip)
  EXPECT_EQ(s.op, AtomicOp::Add);
  EXPECT_EQ(s.width, 8);
  EXPECT_EQ(s.length, 8);
  EXPECT_TRUE(s.mem.rip_relative);
  EXPECT_EQ(s.mem.disp, 0x10);
  EXPECT_EQ(s.src.index, 0);
  EXPECT_EQ(s.next_pc(), 0x1008u);
  EXPECT_NE(s.text.find("lock"), std::string::npos) << s.text;
}

TEST(OmpAtomicSites, ImmediateBaseIndexAndByteForms) {
  AtomicSite add = decode({0xf0, 0x83, 0x07, 0x01});  // lock addl $1, (%rdi)
  EXPECT_EQ(add.op, AtomicOp::Add);
  EXPECT_EQ(add.width, 4);
  EXPECT_EQ(add.mem.base.index, 7);
  EXPECT_EQ(add.src.index, -1);
  EXPECT_EQ(add.imm, 1);
  AtomicSite xadd = decode({0xf0, 0x0f, 0xc1, 0x04, 0x8a});  // lock xadd %eax, (%rdx,%rcx,4)
  EXPECT_EQ(xadd.op, AtomicOp::Xadd);
  EXPECT_EQ(xadd.mem.base.index, 2);
  EXPECT_EQ(xadd.mem.index.index, 1);
  EXPECT_EQ(xadd.mem.scale, 4);
  AtomicSite inc = decode({0xf0, 0xfe, 0x00});  // lock incb (%rax)
  EXPECT_EQ(inc.op, AtomicOp::Inc);
  EXPECT_EQ(inc.width, 1);
  AtomicSite high = decode({0xf0, 0x00, 0x20});  // lock add %ah, (%rax)
  EXPECT_EQ(high.src.index, 0);
  EXPECT_TRUE(high.src.high);
  AtomicSite sub = decode({0xf0, 0x48, 0x83, 0x2b, 0xff});  // lock subq $-1, (%rbx): sign-extended
  EXPECT_EQ(sub.op, AtomicOp::Sub);
  EXPECT_EQ(sub.imm, -1);
}

TEST(OmpAtomicSites, ExchangeCompareAndBitForms) {
  AtomicSite xchg = decode({0x48, 0x87, 0x03});  // xchg %rax, (%rbx): locked without a prefix
  EXPECT_EQ(xchg.op, AtomicOp::Xchg);
  EXPECT_EQ(xchg.mem.base.index, 3);
  EXPECT_EQ(xchg.src.index, 0);
  AtomicSite cas = decode({0xf0, 0x0f, 0xb1, 0x0d, 0x00, 0x01, 0x00, 0x00});  // lock cmpxchg %ecx, 0x100(%rip)
  EXPECT_EQ(cas.op, AtomicOp::Cmpxchg);
  EXPECT_EQ(cas.src.index, 1);
  AtomicSite bts = decode({0xf0, 0x0f, 0xab, 0x07});  // lock bts %eax, (%rdi)
  EXPECT_EQ(bts.op, AtomicOp::Bts);
  EXPECT_EQ(bts.src.index, 0);
  AtomicSite tls = decode({0x64, 0xf0, 0x48, 0x83, 0x04, 0x25, 0x08, 0x00, 0x00, 0x00, 0x01});  // lock addq $1, %fs:8
  EXPECT_TRUE(tls.mem.fs);
  EXPECT_EQ(tls.mem.base.index, -1);
  EXPECT_EQ(tls.mem.disp, 8);
}

TEST(OmpAtomicSites, OtherInstructionsAreNotAtomicsAndSomeAtomicsAreUnsupported) {
  const std::vector<uint8_t> plain_add{0x48, 0x01, 0x05, 0x10, 0x00, 0x00, 0x00};  // add %rax, 0x10(%rip)
  EXPECT_FALSE(decode_atomic(plain_add, 0).has_value());
  const std::vector<uint8_t> xchg_regs{0x48, 0x87, 0xc3};  // xchg %rax, %rbx
  EXPECT_FALSE(decode_atomic(xchg_regs, 0).has_value());
  const std::vector<uint8_t> garbage{0xf0};
  EXPECT_FALSE(decode_atomic(garbage, 0).has_value());
  AtomicSite wide = decode({0xf0, 0x48, 0x0f, 0xc7, 0x0f});  // lock cmpxchg16b (%rdi)
  EXPECT_EQ(wide.op, AtomicOp::Unsupported);
}

TEST(OmpAtomicSites, GccsFullFenceIsRecognized) {
  EXPECT_TRUE(decode({0xf0, 0x48, 0x83, 0x0c, 0x24, 0x00}).is_fence());   // lock orq $0, (%rsp): omp flush
  EXPECT_FALSE(decode({0xf0, 0x48, 0x83, 0x0c, 0x24, 0x01}).is_fence());  // lock orq $1, (%rsp)
  EXPECT_FALSE(decode({0xf0, 0x48, 0x83, 0x08, 0x00}).is_fence());        // lock orq $0, (%rax)
  EXPECT_FALSE(decode({0xf0, 0x48, 0x83, 0x04, 0x24, 0x00}).is_fence());  // lock addq $0, (%rsp)
}

TEST(OmpAtomicSites, FindsEveryAtomicInARunOfCode) {
  const std::vector<uint8_t> code{
      0x90,                                // nop
      0xf0, 0x83, 0x07, 0x01,              // lock addl $1, (%rdi)
      0x48, 0x8b, 0x07,                    // mov (%rdi), %rax
      0x48, 0x87, 0x03,                    // xchg %rax, (%rbx)
      0x48, 0x01, 0x05, 0x10, 0, 0, 0,     // add %rax, 0x10(%rip)
      0xc3};                               // ret
  auto sites = find_atomics(code, 0x400000);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].pc, 0x400001u);
  EXPECT_EQ(sites[1].pc, 0x400008u);
  EXPECT_EQ(sites[1].op, AtomicOp::Xchg);
}

// ---- effects ----

uint64_t mask(unsigned w) { return truncate(~uint64_t{0}, w); }
bool sign(uint64_t v, unsigned w) { return (v >> (8 * w - 1)) & 1; }

TEST(OmpAtomicOps, AddAndSubSetTheArithmeticFlagsAsTheProcessorDoes) {
  std::mt19937_64 rng(7);
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    for (int i = 0; i < 2000; ++i) {
      uint64_t a = rng() & mask(w), b = rng() & mask(w);
      if (i % 7 == 0) b = (mask(w) - a + 1) & mask(w);  // a + b wraps to 0
      AtomicEffect add = apply_atomic(AtomicOp::Add, w, a, b, 0, 0x202);
      const uint64_t sum = (a + b) & mask(w);
      ASSERT_EQ(add.memory, sum);
      ASSERT_TRUE(add.store);
      ASSERT_EQ((add.flags & kZF) != 0, sum == 0);
      ASSERT_EQ((add.flags & kSF) != 0, sign(sum, w));
      ASSERT_EQ((add.flags & kCF) != 0, sum < a);
      ASSERT_EQ((add.flags & kOF) != 0, sign(a, w) == sign(b, w) && sign(sum, w) != sign(a, w));
      ASSERT_EQ(add.flags & ~kArithmeticFlags, 0x202u) << "only the arithmetic flags change";
      AtomicEffect sub = apply_atomic(AtomicOp::Sub, w, a, b, 0, 0);
      ASSERT_EQ(sub.memory, (a - b) & mask(w));
      ASSERT_EQ((sub.flags & kCF) != 0, a < b);
    }
  }
}

TEST(OmpAtomicOps, IncKeepsTheCarryAndAdcUsesIt) {
  AtomicEffect inc = apply_atomic(AtomicOp::Inc, 4, 0xffffffff, 0, 0, kCF);
  EXPECT_EQ(inc.memory, 0u);
  EXPECT_TRUE(inc.flags & kZF);
  EXPECT_TRUE(inc.flags & kCF) << "inc leaves CF as it was";
  EXPECT_EQ(apply_atomic(AtomicOp::Adc, 8, 5, 6, 0, kCF).memory, 12u);
  EXPECT_EQ(apply_atomic(AtomicOp::Adc, 8, 5, 6, 0, 0).memory, 11u);
  AtomicEffect dec = apply_atomic(AtomicOp::Dec, 2, 1, 0, 0, 0);
  EXPECT_EQ(dec.memory, 0u);
  EXPECT_TRUE(dec.flags & kZF);
  EXPECT_EQ(apply_atomic(AtomicOp::Neg, 1, 1, 0, 0, 0).memory, 0xffu);
  EXPECT_EQ(apply_atomic(AtomicOp::Not, 2, 0x00ff, 0, 0, 0).memory, 0xff00u);
}

TEST(OmpAtomicOps, ExchangesReturnTheOldValue) {
  AtomicEffect xadd = apply_atomic(AtomicOp::Xadd, 4, 40, 2, 0, 0);
  EXPECT_EQ(xadd.memory, 42u);
  EXPECT_EQ(xadd.reg, AtomicEffect::Reg::Source);
  EXPECT_EQ(xadd.value, 40u);
  AtomicEffect xchg = apply_atomic(AtomicOp::Xchg, 8, 7, 9, 0, 0x246);
  EXPECT_EQ(xchg.memory, 9u);
  EXPECT_EQ(xchg.value, 7u);
  EXPECT_EQ(xchg.flags, 0x246u) << "xchg changes no flag";
}

TEST(OmpAtomicOps, CompareExchangeStoresOnlyWhenEqualAndSetsZf) {
  AtomicEffect hit = apply_atomic(AtomicOp::Cmpxchg, 8, 5, 9, 5, 0);
  EXPECT_TRUE(hit.store);
  EXPECT_EQ(hit.memory, 9u);
  EXPECT_TRUE(hit.flags & kZF);
  EXPECT_EQ(hit.reg, AtomicEffect::Reg::Accumulator);
  EXPECT_EQ(hit.value, 5u);
  AtomicEffect miss = apply_atomic(AtomicOp::Cmpxchg, 8, 6, 9, 5, kZF);
  EXPECT_FALSE(miss.store);
  EXPECT_FALSE(miss.flags & kZF);
  EXPECT_EQ(miss.value, 6u) << "the accumulator gets the memory's value";
}

TEST(OmpAtomicOps, BitOpsReportTheOldBitInCarry) {
  AtomicEffect set = apply_atomic(AtomicOp::Bts, 4, 0, 3, 0, 0);
  EXPECT_EQ(set.memory, 8u);
  EXPECT_FALSE(set.flags & kCF);
  AtomicEffect again = apply_atomic(AtomicOp::Bts, 4, 8, 3, 0, 0);
  EXPECT_FALSE(again.store);
  EXPECT_TRUE(again.flags & kCF);
  EXPECT_EQ(apply_atomic(AtomicOp::Btr, 8, 0xff, 0, 0, 0).memory, 0xfeu);
  EXPECT_EQ(apply_atomic(AtomicOp::Btc, 2, 0, 15, 0, 0).memory, 0x8000u);
}

// ---- replaced instructions, carried out by the SIGTRAP handler ----

#define LOOM_TEST_ATOMICS __attribute__((noipa, section("loom_test_atomics")))
extern "C" const uint8_t __start_loom_test_atomics[], __stop_loom_test_atomics[];

LOOM_TEST_ATOMICS void add_to(uint64_t* p, uint64_t v) { asm volatile("lock addq %1, %0" : "+m"(*p) : "r"(v) : "cc"); }
LOOM_TEST_ATOMICS uint32_t fetch_add(uint32_t* p, uint32_t v) {
  asm volatile("lock xaddl %0, %1" : "+r"(v), "+m"(*p) : : "cc");
  return v;
}
LOOM_TEST_ATOMICS bool compare_swap(uint64_t* p, uint64_t& expected, uint64_t desired) {
  bool ok;
  asm volatile("lock cmpxchgq %3, %1\n\tsete %0" : "=q"(ok), "+m"(*p), "+a"(expected) : "r"(desired) : "cc");
  return ok;
}
LOOM_TEST_ATOMICS bool decrement_is_zero(uint16_t* p) {
  bool zero;
  asm volatile("lock decw %1\n\tsete %0" : "=q"(zero), "+m"(*p) : : "cc");
  return zero;
}
LOOM_TEST_ATOMICS uint8_t swap_byte_high(uint8_t* p, uint8_t v) {
  uint64_t rax = uint64_t{v} << 8 | 0x11;
  asm volatile("xchg %%ah, %1" : "+a"(rax), "+m"(*p));
  return static_cast<uint8_t>(rax >> 8);
}

// GCC's `omp flush` (__sync_synchronize).
LOOM_TEST_ATOMICS void full_fence() { asm volatile("lock orq $0, (%%rsp)" ::: "memory", "cc"); }

struct CountingRouter : AtomicRouter {
  uintptr_t lo = 0, hi = 0;
  int locks = 0, unlocks = 0, fences = 0;
  bool shared(uintptr_t a) override { return a >= lo && a < hi; }
  void lock(uintptr_t) override { ++locks; }
  void unlock(uintptr_t) override { ++unlocks; }
  void fence() override { ++fences; }
};

TEST(OmpInlineAtomics, ReplacedInstructionsDoWhatTheyDidAndSharedOnesTakeTheLock) {
  alignas(64) static uint64_t shared_words[8];
  CountingRouter router;
  router.lo = reinterpret_cast<uintptr_t>(shared_words);
  router.hi = router.lo + sizeof shared_words;
  const PageRange code{reinterpret_cast<uintptr_t>(__start_loom_test_atomics), reinterpret_cast<uintptr_t>(__stop_loom_test_atomics)};
  replace_inline_atomics(std::span<const PageRange>(&code, 1), &router);
  EXPECT_EQ(inline_atomic_stats().sites, 6u);
  EXPECT_EQ(inline_atomic_stats().fences, 1u);

  add_to(&shared_words[0], 40);
  add_to(&shared_words[0], 2);
  EXPECT_EQ(shared_words[0], 42u);
  uint64_t private_word = 1;
  add_to(&private_word, 2);
  EXPECT_EQ(private_word, 3u);
  EXPECT_EQ(router.locks, 2);
  EXPECT_EQ(router.unlocks, 2);

  uint32_t counter = 10;
  EXPECT_EQ(fetch_add(&counter, 5), 10u);
  EXPECT_EQ(counter, 15u);

  shared_words[1] = 7;
  uint64_t expected = 6;
  EXPECT_FALSE(compare_swap(&shared_words[1], expected, 9));
  EXPECT_EQ(expected, 7u) << "a failed compare-exchange loads the memory's value into rax";
  EXPECT_TRUE(compare_swap(&shared_words[1], expected, 9));
  EXPECT_EQ(shared_words[1], 9u);

  uint16_t refs = 2;
  EXPECT_FALSE(decrement_is_zero(&refs));
  EXPECT_TRUE(decrement_is_zero(&refs)) << "the flags the instruction sets reach the code after it";

  uint8_t byte = 0x55;
  EXPECT_EQ(swap_byte_high(&byte, 0xaa), 0x55);
  EXPECT_EQ(byte, 0xaa);

  const int locks_before = router.locks;
  full_fence();
  EXPECT_EQ(router.fences, 1) << "a full fence is the router's fence across processes";
  EXPECT_EQ(router.locks, locks_before) << "and takes no atomic lock";

  const InlineAtomicStats stats = inline_atomic_stats();
  EXPECT_EQ(stats.shared, 4u);
  EXPECT_EQ(stats.local, 5u);
  EXPECT_EQ(stats.fences_run, 1u);
  set_atomic_router(nullptr);
  add_to(&shared_words[0], 1);
  EXPECT_EQ(shared_words[0], 43u);
  EXPECT_EQ(router.locks, 4) << "without a router every atomic is local";
  full_fence();
  EXPECT_EQ(router.fences, 1) << "and every fence a plain one";
}

}  // namespace
}  // namespace loom::omp
