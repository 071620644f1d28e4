#pragma once
// The Loom back end of the team (team.hpp): a kernel's shared arrays in one shared region of a
// coherence Space, its members the threads (Runtime::threads_per_process()) of every process.
#include <cstddef>
#include <cstdint>
#include <string>

#include "bench/nas/kernel.hpp"
#include "loom/coherence/space.hpp"

namespace loom::nas {

// Counters of the timed section, summed over the processes.
struct DsmCounters {
  static constexpr int kCount = 10;
  static const char* const kNames[kCount];  // faults, read_misses, revalidations, invalidations, bytes_fetched, notices, twins, released_blocks, exclusive_claims, downgrades
  double v[kCount] = {};
};

struct LoomRun {
  Result result;      // as member 0 saw it; `verified` agreed by all members
  DsmCounters counters;
};

// The block size of an array whose members access it in pieces of `piece` bytes (Team::shared):
// the largest power of two dividing a piece, 4 to 64 KiB (a piece's blocks are its member's
// alone; fewer, larger blocks cost fewer per-block steps at each release and fetch); 4 KiB
// without a piece (0).
inline constexpr size_t kSmallestBlock = 4096, kLargestBlock = 65536;
size_t block_for_piece(size_t piece);

// Collective over the processes of rt: a Space with `cfg`, a region sized for the kernel at the
// class, one member per thread (threads_per_process(), the calling thread being thread 0), the
// kernel run, the region and Space destroyed. Throws std::invalid_argument on a bad class; a
// member's exception on another thread ends the process with its message (exit code 2).
LoomRun run_on_loom(Runtime& rt, const Kernel& kernel, char cls, const coherence::Config& cfg);

}  // namespace loom::nas
