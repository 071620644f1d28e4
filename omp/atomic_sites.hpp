#pragma once
// The program's inline atomics: x86-64 read-modify-write instructions on memory that are atomic
// on one machine (a LOCK prefix, or XCHG with a memory operand, which locks implicitly) and
// that GCC emits for `omp atomic` and scalar reductions. Found by decoding machine code (Zydis),
// each described well enough to carry it out without the bytes (atomic_ops.hpp). Pure: no
// process state.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom::omp {

enum class AtomicOp : uint8_t {
  Add, Sub, And, Or, Xor, Adc, Sbb,  // mem op= src (register or immediate)
  Inc, Dec, Neg, Not,                // mem = op mem
  Xadd,                              // src register <- mem, mem += src
  Xchg,                              // src register <-> mem
  Cmpxchg,                           // if accumulator == mem: mem = src, else accumulator = mem
  Bts, Btr, Btc,                     // CF <- bit of mem, then set / clear / flip it
  Unsupported,                       // locked, but not carried out here (CMPXCHG8B/16B, ...)
};
const char* name(AtomicOp op);

// General-purpose registers in the encoding's order: 0 rax, 1 rcx, 2 rdx, 3 rbx, 4 rsp, 5 rbp,
// 6 rsi, 7 rdi, 8-15 r8-r15. `high` names ah, ch, dh, bh (bits 8-15 of registers 0-3).
struct Gpr {
  int8_t index = -1;  // -1: none
  bool high = false;
};

// base + index * scale + disp (+ the next instruction's address when rip_relative, + the
// thread's FS base when fs).
struct MemRef {
  Gpr base, index;
  uint8_t scale = 1;
  int64_t disp = 0;
  bool rip_relative = false;
  bool fs = false;
};

struct AtomicSite {
  uint64_t pc = 0;      // the instruction's address
  uint8_t length = 0;   // its bytes
  AtomicOp op = AtomicOp::Unsupported;
  uint8_t width = 0;    // bytes of the memory operand: 1, 2, 4 or 8
  MemRef mem;
  Gpr src;              // the register operand (index -1: an immediate, or none)
  int64_t imm = 0;      // the immediate, sign-extended
  std::string text;     // the instruction in AT&T syntax, for messages
  uint64_t next_pc() const { return pc + length; }
  // GCC's full fence (`omp flush`, __sync_synchronize): `lock or $0, (%rsp)`.
  bool is_fence() const {
    constexpr int8_t kRsp = 4;
    return op == AtomicOp::Or && src.index < 0 && imm == 0 && mem.base.index == kRsp && mem.index.index < 0 &&
           mem.disp == 0 && !mem.rip_relative && !mem.fs;
  }
};

// The instruction at `code` (at address pc) when it is an atomic read-modify-write on memory;
// nullopt for anything else, including bytes that do not decode.
std::optional<AtomicSite> decode_atomic(std::span<const uint8_t> code, uint64_t pc);

// Every atomic read-modify-write in a run of machine code, decoded from its start one
// instruction after another (a compiler's text holds no data; an undecodable byte is skipped).
std::vector<AtomicSite> find_atomics(std::span<const uint8_t> code, uint64_t pc);

}  // namespace loom::omp
