#pragma once
// Rank 0's bytes for a range every process holds at the same address. The program's global
// constructors run in every process before the globals are shared, and may leave different
// bytes there (a pointer to a block each process allocated in its own slice of the shared heap,
// a process id): the globals are one copy from then on, and rank 0's is the one the program
// runs with. Collective.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "loom/dsm/runtime/bootstrap.hpp"

namespace loom::omp {

inline constexpr size_t kAdoptBlock = 4096;

// One hash per kAdoptBlock bytes of `range` (whole blocks).
std::vector<uint64_t> block_hashes(std::span<const uint8_t> range);

// Makes `range` hold rank 0's bytes in this process: rank 0's block hashes go to every process,
// every process names the blocks that differ from them here, and rank 0 sends those blocks (two
// allgathers; nothing moves when the range is alike everywhere). Returns the blocks replaced
// here. What comes from another process is checked: counts, sizes and block numbers.
size_t adopt_rank0_contents(runtime::Bootstrap& boot, std::span<uint8_t> range);

}  // namespace loom::omp
