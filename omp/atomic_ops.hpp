#pragma once
// What an atomic read-modify-write (atomic_sites.hpp) does, given the memory's old value: the
// memory's new value, the register it writes and the arithmetic flags, as the processor would
// leave them. Pure: the caller reads and writes the memory (under whatever makes the whole
// step atomic) and the thread's registers.
#include <cstdint>

#include "loom/omp/atomic_sites.hpp"

namespace loom::omp {

// The flags an instruction may change: CF, PF, AF, ZF, SF, OF.
inline constexpr uint64_t kArithmeticFlags = 0x8d5;
inline constexpr uint64_t kCarryFlag = 0x1;

struct AtomicEffect {
  uint64_t memory = 0;      // the memory's new value (width bytes, zero-extended)
  bool store = false;       // the memory changes (false: CMPXCHG that failed, BT* that left the bit)
  uint64_t value = 0;       // for `reg`: the value written (width bytes)
  enum class Reg : uint8_t { None, Source, Accumulator } reg = Reg::None;
  uint64_t flags = 0;       // the new RFLAGS (only kArithmeticFlags differ from flags_in)
};

// `old`: the memory's value; `source`: the register operand or the immediate; `accumulator`:
// rax (CMPXCHG); `flags_in`: RFLAGS before (ADC/SBB read CF). All zero-extended to `width`
// except `flags_in`. For BT*, `source` is the bit's number within the operand.
AtomicEffect apply_atomic(AtomicOp op, unsigned width, uint64_t old, uint64_t source, uint64_t accumulator,
                          uint64_t flags_in);

// The low `width` bytes of v.
inline uint64_t truncate(uint64_t v, unsigned width) { return width >= 8 ? v : v & ((uint64_t{1} << (8 * width)) - 1); }

}  // namespace loom::omp
