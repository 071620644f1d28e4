#pragma once
// The layout of the embedded bootstrap's file (one per host and job), shared by the one-host
// and the several-node bootstraps.
#include <atomic>
#include <cstdint>

#include "loom/dsm/runtime/bootstrap.hpp"

namespace loom::runtime {

// The bootstrap file: this header, then per rank the byte count of the current allgather round,
// then per rank its pid and whether it left (completed the bootstrap's life); slots follow.
struct EmbeddedBootstrap::Header {
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> generation;
  uint32_t size;
  uint32_t pad;
  std::atomic<uint64_t>* lengths() { return reinterpret_cast<std::atomic<uint64_t>*>(this + 1); }
  // [pid (32 bits) | left (1 bit)] per rank; 0 until the rank joins.
  std::atomic<uint64_t>* presence(int n) { return lengths() + n; }
  // Each rank's current collective call (Collectives::ticket_of); 0 before its first.
  std::atomic<uint64_t>* posted(int n) { return lengths() + 2 * n; }
};

}  // namespace loom::runtime
