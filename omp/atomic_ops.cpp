#include "loom/omp/atomic_ops.hpp"

#include <type_traits>

#include "loom/dsm/common/error.hpp"

namespace loom::omp {
namespace {

// The instruction itself on registers, between loading the caller's flags and reading the
// result's: the flags come out as the processor computes them. The stack pointer steps over the
// 128-byte red zone first, which code without calls keeps its locals in.
#define LOOM_FLAGS_PROLOGUE "lea -128(%%rsp), %%rsp\n\tpushq %[fin]\n\tpopfq\n\t"
#define LOOM_FLAGS_EPILOGUE "\n\tpushfq\n\tpopq %[fout]\n\tlea 128(%%rsp), %%rsp"
#define LOOM_OP2(insn)                                                                         \
  asm(LOOM_FLAGS_PROLOGUE insn " %[s], %[d]" LOOM_FLAGS_EPILOGUE                               \
      : [d] "+q"(d), [fout] "=&r"(fout)                                                         \
      : [s] "q"(s), [fin] "r"(fin)                                                              \
      : "cc")
#define LOOM_OP1(insn)                                                                         \
  asm(LOOM_FLAGS_PROLOGUE insn " %[d]" LOOM_FLAGS_EPILOGUE : [d] "+q"(d), [fout] "=&r"(fout) \
      : [fin] "r"(fin)                                                                          \
      : "cc")

template <class T>
uint64_t run_op(AtomicOp op, T& d, T s, uint64_t flags_in) {
  // Only the arithmetic flags and bit 1 (always set): no trap or direction flag is loaded.
  const uint64_t fin = (flags_in & kArithmeticFlags) | 0x2;
  uint64_t fout = 0;
  switch (op) {
    case AtomicOp::Add: LOOM_OP2("add"); break;
    case AtomicOp::Sub: LOOM_OP2("sub"); break;
    case AtomicOp::And: LOOM_OP2("and"); break;
    case AtomicOp::Or: LOOM_OP2("or"); break;
    case AtomicOp::Xor: LOOM_OP2("xor"); break;
    case AtomicOp::Adc: LOOM_OP2("adc"); break;
    case AtomicOp::Sbb: LOOM_OP2("sbb"); break;
    case AtomicOp::Inc: LOOM_OP1("inc"); break;
    case AtomicOp::Dec: LOOM_OP1("dec"); break;
    case AtomicOp::Neg: LOOM_OP1("neg"); break;
    case AtomicOp::Not: d = static_cast<T>(~d); return flags_in;
    case AtomicOp::Cmpxchg: LOOM_OP2("cmp"); break;  // d: the accumulator, s: the memory
    default:
      if constexpr (sizeof(T) >= 2) {
        if (op == AtomicOp::Bts) LOOM_OP2("bts");
        else if (op == AtomicOp::Btr) LOOM_OP2("btr");
        else if (op == AtomicOp::Btc) LOOM_OP2("btc");
        else fail(std::string("omp: no flags for the atomic operation ") + name(op));
      } else {
        fail(std::string("omp: a one-byte ") + name(op) + " does not exist");
      }
  }
  return (flags_in & ~kArithmeticFlags) | (fout & kArithmeticFlags);
}

#undef LOOM_OP1
#undef LOOM_OP2
#undef LOOM_FLAGS_EPILOGUE
#undef LOOM_FLAGS_PROLOGUE

template <class T>
AtomicEffect apply_as(AtomicOp op, uint64_t old64, uint64_t src64, uint64_t acc64, uint64_t flags_in) {
  const T old = static_cast<T>(old64), src = static_cast<T>(src64);
  AtomicEffect e;
  e.flags = flags_in;
  switch (op) {
    case AtomicOp::Xchg:
      e.memory = src, e.store = true;
      e.reg = AtomicEffect::Reg::Source, e.value = old;
      return e;
    case AtomicOp::Xadd: {
      T sum = old;
      e.flags = run_op<T>(AtomicOp::Add, sum, src, flags_in);
      e.memory = sum, e.store = true;
      e.reg = AtomicEffect::Reg::Source, e.value = old;
      return e;
    }
    case AtomicOp::Cmpxchg: {
      T acc = static_cast<T>(acc64);
      const bool equal = acc == old;
      e.flags = run_op<T>(AtomicOp::Cmpxchg, acc, old, flags_in);
      // The processor writes the memory either way (its own value on a mismatch): no change.
      e.memory = equal ? src : old, e.store = equal;
      e.reg = AtomicEffect::Reg::Accumulator, e.value = old;
      return e;
    }
    case AtomicOp::Bts:
    case AtomicOp::Btr:
    case AtomicOp::Btc: {
      T v = old;
      e.flags = run_op<T>(op, v, static_cast<T>(src64 % (8 * sizeof(T))), flags_in);
      e.memory = v, e.store = v != old;
      return e;
    }
    default: {
      T v = old;
      e.flags = run_op<T>(op, v, src, flags_in);
      e.memory = v, e.store = true;
      return e;
    }
  }
}

}  // namespace

AtomicEffect apply_atomic(AtomicOp op, unsigned width, uint64_t old, uint64_t source, uint64_t accumulator,
                          uint64_t flags_in) {
  if (op == AtomicOp::Unsupported) fail("omp: an unsupported atomic instruction has no effect to compute");
  switch (width) {
    case 1: return apply_as<uint8_t>(op, old, source, accumulator, flags_in);
    case 2: return apply_as<uint16_t>(op, old, source, accumulator, flags_in);
    case 4: return apply_as<uint32_t>(op, old, source, accumulator, flags_in);
    case 8: return apply_as<uint64_t>(op, old, source, accumulator, flags_in);
    default: fail("omp: an atomic operand of " + std::to_string(width) + " bytes");
  }
}

}  // namespace loom::omp
