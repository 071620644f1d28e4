#pragma once
// The directory entry of one block, held registered at the block's manager (dsm/region decides
// who manages a block):
//
//   offset 0   word0   [63] W: the entry is locked by a releaser
//                      [62] E: the home holds the block exclusively (docs/coherence.md,
//                           "Exclusive blocks"); its public copy may be stale
//                      [61] S: the block was shared after an exclusive claim (sticky)
//                      [60..48] home rank (13 bits); under E the owner, under every policy
//                      [47] A: the block holds atomic words (docs/coherence.md, "Atomic words
//                           in regions"): no copies, no releases; the manager's public copy
//                           holds the values, and wts the release clock of their releasers
//                      [46..0]  read timestamp rts (the end of every lease handed out)
//   offset 8   wts     write timestamp of the version in the home's public copy
//   offset 16  sharers one byte per process (directory policy only)
//
// word0 is touched only by fabric atomics (CAS); wts and the sharer bytes by READ and WRITE
// while W is held. Every release raises rts, so word0 never repeats: a reader that sees the same
// (home, wts) unlocked after reading the data knows no publication overlapped its read.
#include <cstddef>
#include <cstdint>

namespace loom::coherence {

struct DirWord {
  static constexpr uint64_t kLocked = uint64_t{1} << 63;
  static constexpr uint64_t kExclusive = uint64_t{1} << 62;
  static constexpr uint64_t kShared = uint64_t{1} << 61;
  static constexpr uint64_t kAtomic = uint64_t{1} << 47;
  static constexpr uint64_t kRtsMask = (uint64_t{1} << 47) - 1;
  static constexpr int kMaxHome = 0x1fff;  // homes are ranks 0 .. kMaxHome

  uint64_t raw = 0;

  static constexpr DirWord make(int home, uint64_t rts) {
    return DirWord{(static_cast<uint64_t>(home & kMaxHome) << 48) | (rts & kRtsMask)};
  }
  constexpr bool locked() const { return (raw & kLocked) != 0; }
  constexpr bool exclusive() const { return (raw & kExclusive) != 0; }
  constexpr bool shared() const { return (raw & kShared) != 0; }
  constexpr bool atomic() const { return (raw & kAtomic) != 0; }
  constexpr DirWord with_atomic() const { return DirWord{raw | kAtomic}; }
  constexpr DirWord with_exclusive() const { return DirWord{raw | kExclusive}; }
  constexpr DirWord with_shared() const { return DirWord{raw | kShared}; }
  // The same flags and home, another rts.
  constexpr DirWord with_rts(uint64_t rts) const { return DirWord{(raw & ~kRtsMask) | (rts & kRtsMask)}; }
  // The class this word passes on to the next version: S only (E and W belong to one version).
  constexpr DirWord class_bits() const { return DirWord{raw & kShared}; }
  constexpr int home() const { return static_cast<int>((raw >> 48) & kMaxHome); }
  constexpr uint64_t rts() const { return raw & kRtsMask; }
  constexpr DirWord with_lock() const { return DirWord{raw | kLocked}; }
  constexpr DirWord without_lock() const { return DirWord{raw & ~kLocked}; }
  constexpr bool operator==(const DirWord&) const = default;
};

// Where the fields of an entry are, and how far apart entries lie.
struct DirEntry {
  static constexpr size_t kWord0 = 0;
  static constexpr size_t kWts = 8;
  static constexpr size_t kSharers = 16;
  // Bytes a reader fetches: the two words, and the sharer bytes under the directory policy.
  static constexpr size_t read_bytes(bool directory, int nprocs) {
    return kSharers + (directory ? static_cast<size_t>(nprocs) : 0);
  }
  // Entries are 16-byte aligned so word0 is always an aligned 8-byte atomic target.
  static constexpr size_t stride(bool directory, int nprocs) { return (read_bytes(directory, nprocs) + 15) & ~size_t{15}; }
};

}  // namespace loom::coherence
