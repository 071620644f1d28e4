#pragma once
// The round trips a pipe makes through the runtime's service (the seed's bootstrap pipe): a new
// segment of the peer's heap, and the immediate synchronization's allocations and frees, which
// the peer's service thread serves from the heap it keeps (directory.cpp).
#include <cstdint>

#include "loom/rpipe/pipe.hpp"

namespace loom::rpipe::service {

constexpr uint32_t kGranted = 1;
constexpr uint32_t kFull = 2;

struct SegmentReply {
  uint32_t index = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
};
struct AllocateReply {
  uint32_t status = 0;
  uint64_t pos = 0;     // heap position (granted)
  uint64_t in_use = 0;  // the heap's bytes not free after this allocation
};

// Writer side (the calling end's thread); each fails with the peer's reason.
SegmentReply new_segment(Pipe::Impl& p);
// Adds the segments the peer made meanwhile to p's view of them.
AllocateReply allocate(Pipe::Impl& p, uint64_t extent);
void free(Pipe::Impl& p, uint64_t pos, uint64_t extent);

// Registers the handlers on rt's service, and takes them off (directory.cpp).
void register_handlers(Runtime& rt, uint32_t ids[3]);
void unregister_handlers(Runtime& rt, const uint32_t ids[3]);

}  // namespace loom::rpipe::service
