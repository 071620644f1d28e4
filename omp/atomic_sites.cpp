#include "loom/omp/atomic_sites.hpp"

#include <Zydis/Zydis.h>

namespace loom::omp {
namespace {

struct Tools {
  ZydisDecoder decoder;
  ZydisFormatter formatter;
  Tools() {
    ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisFormatterInit(&formatter, ZYDIS_FORMATTER_STYLE_ATT);
  }
};

const Tools& tools() {
  static const Tools t;
  return t;
}

std::optional<AtomicOp> op_of(ZydisMnemonic m) {
  switch (m) {
    case ZYDIS_MNEMONIC_ADD: return AtomicOp::Add;
    case ZYDIS_MNEMONIC_SUB: return AtomicOp::Sub;
    case ZYDIS_MNEMONIC_AND: return AtomicOp::And;
    case ZYDIS_MNEMONIC_OR: return AtomicOp::Or;
    case ZYDIS_MNEMONIC_XOR: return AtomicOp::Xor;
    case ZYDIS_MNEMONIC_ADC: return AtomicOp::Adc;
    case ZYDIS_MNEMONIC_SBB: return AtomicOp::Sbb;
    case ZYDIS_MNEMONIC_INC: return AtomicOp::Inc;
    case ZYDIS_MNEMONIC_DEC: return AtomicOp::Dec;
    case ZYDIS_MNEMONIC_NEG: return AtomicOp::Neg;
    case ZYDIS_MNEMONIC_NOT: return AtomicOp::Not;
    case ZYDIS_MNEMONIC_XADD: return AtomicOp::Xadd;
    case ZYDIS_MNEMONIC_XCHG: return AtomicOp::Xchg;
    case ZYDIS_MNEMONIC_CMPXCHG: return AtomicOp::Cmpxchg;
    case ZYDIS_MNEMONIC_BTS: return AtomicOp::Bts;
    case ZYDIS_MNEMONIC_BTR: return AtomicOp::Btr;
    case ZYDIS_MNEMONIC_BTC: return AtomicOp::Btc;
    default: return std::nullopt;
  }
}

// A general-purpose register of any width, as its 64-bit register's number.
std::optional<Gpr> gpr_of(ZydisRegister r) {
  if (r == ZYDIS_REGISTER_NONE) return Gpr{};
  switch (r) {
    case ZYDIS_REGISTER_AH: return Gpr{0, true};
    case ZYDIS_REGISTER_CH: return Gpr{1, true};
    case ZYDIS_REGISTER_DH: return Gpr{2, true};
    case ZYDIS_REGISTER_BH: return Gpr{3, true};
    default: break;
  }
  const ZydisRegister full = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
  if (full >= ZYDIS_REGISTER_RAX && full <= ZYDIS_REGISTER_R15) {
    return Gpr{static_cast<int8_t>(full - ZYDIS_REGISTER_RAX), false};
  }
  return std::nullopt;  // rip (handled by the caller), segment and vector registers
}

std::optional<MemRef> mem_of(const ZydisDecodedOperand& op) {
  const auto& m = op.mem;
  if (op.type != ZYDIS_OPERAND_TYPE_MEMORY || m.type != ZYDIS_MEMOP_TYPE_MEM) return std::nullopt;
  MemRef ref;
  ref.disp = m.disp.value;
  ref.scale = m.scale == 0 ? 1 : m.scale;
  if (m.segment == ZYDIS_REGISTER_FS) {
    ref.fs = true;
  } else if (m.segment != ZYDIS_REGISTER_DS && m.segment != ZYDIS_REGISTER_SS && m.segment != ZYDIS_REGISTER_ES &&
             m.segment != ZYDIS_REGISTER_CS && m.segment != ZYDIS_REGISTER_NONE) {
    return std::nullopt;  // GS: no thread's memory the layer knows
  }
  if (m.base == ZYDIS_REGISTER_RIP) {
    ref.rip_relative = true;
  } else {
    auto base = gpr_of(m.base);
    if (!base) return std::nullopt;
    ref.base = *base;
  }
  auto index = gpr_of(m.index);
  if (!index) return std::nullopt;
  ref.index = *index;
  return ref;
}

// The second operand: a register, an immediate, or none.
bool source_of(const ZydisDecodedOperand* ops, size_t visible, AtomicSite& s) {
  if (visible < 2) return true;
  const ZydisDecodedOperand& src = ops[1];
  if (src.type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
    s.imm = src.imm.is_signed ? src.imm.value.s : static_cast<int64_t>(src.imm.value.u);
    return true;
  }
  if (src.type != ZYDIS_OPERAND_TYPE_REGISTER) return false;
  auto r = gpr_of(src.reg.value);
  if (!r || r->index < 0) return false;
  s.src = *r;
  return true;
}

}  // namespace

const char* name(AtomicOp op) {
  static constexpr const char* kNames[] = {"add", "sub", "and", "or", "xor", "adc", "sbb", "inc", "dec",
                                           "neg", "not", "xadd", "xchg", "cmpxchg", "bts", "btr", "btc", "unsupported"};
  return kNames[static_cast<size_t>(op)];
}

std::optional<AtomicSite> decode_atomic(std::span<const uint8_t> code, uint64_t pc) {
  ZydisDecodedInstruction insn;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&tools().decoder, code.data(), code.size(), &insn, ops))) return std::nullopt;
  const bool locked = (insn.attributes & ZYDIS_ATTRIB_HAS_LOCK) != 0;
  const size_t visible = insn.operand_count_visible;
  const bool xchg_mem = insn.mnemonic == ZYDIS_MNEMONIC_XCHG && visible == 2 &&
                        (ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY || ops[1].type == ZYDIS_OPERAND_TYPE_MEMORY);
  if (!locked && !xchg_mem) return std::nullopt;
  AtomicSite s;
  s.pc = pc;
  s.length = insn.length;
  char text[96];
  if (ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&tools().formatter, &insn, ops, insn.operand_count_visible, text,
                                                   sizeof text, pc, nullptr))) {
    s.text = text;
  }
  // XCHG names its operands either way round; the memory one is made the first.
  if (xchg_mem && ops[0].type != ZYDIS_OPERAND_TYPE_MEMORY) std::swap(ops[0], ops[1]);
  auto op = op_of(insn.mnemonic);
  auto mem = visible >= 1 ? mem_of(ops[0]) : std::nullopt;
  const unsigned width = visible >= 1 ? ops[0].size / 8 : 0;
  if (!op || !mem || (width != 1 && width != 2 && width != 4 && width != 8) || !source_of(ops, visible, s)) {
    s.op = AtomicOp::Unsupported;  // still reported: its memory may be shared
    return s;
  }
  s.op = *op;
  s.mem = *mem;
  s.width = static_cast<uint8_t>(width);
  return s;
}

std::vector<AtomicSite> find_atomics(std::span<const uint8_t> code, uint64_t pc) {
  std::vector<AtomicSite> found;
  size_t at = 0;
  while (at < code.size()) {
    ZydisDecodedInstruction insn;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&tools().decoder, nullptr, code.data() + at, code.size() - at, &insn))) {
      ++at;
      continue;
    }
    const bool candidate = (insn.attributes & ZYDIS_ATTRIB_HAS_LOCK) != 0 || insn.mnemonic == ZYDIS_MNEMONIC_XCHG;
    if (candidate) {
      if (auto s = decode_atomic(code.subspan(at, insn.length), pc + at)) found.push_back(std::move(*s));
    }
    at += insn.length;
  }
  return found;
}

}  // namespace loom::omp
