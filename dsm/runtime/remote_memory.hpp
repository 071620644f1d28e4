#pragma once
// Remote allocation: allocate registered memory in another process's NUMA zone through a
// service call, and free it the same way. The result names the memory for one-sided access.
#include <cstdint>

#include "loom/dsm/runtime/runtime.hpp"

namespace loom {

struct RemoteMemoryLocator {
  int rank = -1;
  int zone = -1;
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t rkey = 0;
  bool valid() const { return rank >= 0 && size != 0; }
  // [a, a+len) lies inside [addr, addr+size) (no overflow for any a, len).
  bool holds(uint64_t a, uint64_t len) const { return a >= addr && a - addr <= size && len <= size - (a - addr); }
};

// zone -1: the target process's own zone. Throws loom::Error with the target's reason.
RemoteMemoryLocator remote_allocate(Runtime& rt, int rank, uint64_t size, int zone = -1);
// In the NUMA zone of thread `thread` of `rank` (seed 000: a zone named by a long-lived thread's
// name; Runtime::thread_zone there). A thread the target has not started is an error.
RemoteMemoryLocator remote_allocate_near(Runtime& rt, int rank, int thread, uint64_t size);
void remote_free(Runtime& rt, const RemoteMemoryLocator& loc);

// The registration of `rank` that holds [addr, addr+len): its whole range and key (a service
// call, or the local allocators for this process). Registrations live as long as the Runtime,
// so the answer may be cached. Throws loom::Error if that memory is not registered there.
RemoteMemoryLocator registration_at(Runtime& rt, int rank, uint64_t addr, uint64_t len);

namespace runtime {
// Registers the allocation handlers on rt's service (done by Runtime itself).
void register_remote_memory_handlers(Runtime& rt);
}  // namespace runtime

}  // namespace loom
