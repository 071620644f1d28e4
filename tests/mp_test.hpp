#pragma once
// Helpers shared by the multi-process tests.
#include <cstring>
#include <ostream>
#include <vector>

#include "loom/dsm/common/error.hpp"
#include "loom/dsm/runtime/runtime.hpp"

namespace loom::fabric {
// Readable names in assertion messages.
inline void PrintTo(Status s, std::ostream* os) { *os << to_string(s); }
inline void PrintTo(Opcode o, std::ostream* os) { *os << to_string(o); }
inline void PrintTo(PostResult r, std::ostream* os) { *os << to_string(r); }
}  // namespace loom::fabric

namespace loom::test {

inline Runtime& rt() { return Runtime::current(); }

// Where a rank's registered buffer is, as exchanged between ranks.
struct Remote {
  uint64_t addr;
  uint32_t rkey;
  uint32_t pad;
};

// A registered chunk in this process plus every rank's locator for its own.
struct SharedBuffers {
  memory::RDMAMemory local;
  std::vector<Remote> remote;
  explicit SharedBuffers(size_t bytes) {
    local = rt().allocator().allocate_chunk(bytes);
    std::memset(local.addr, 0, local.size);
    Remote mine{local.address(), local.rkey, 0};
    auto all = rt().bootstrap().allgather(std::as_bytes(std::span(&mine, 1)));
    for (auto& b : all) {
      Remote r;
      std::memcpy(&r, b.data(), sizeof r);
      remote.push_back(r);
    }
  }
  ~SharedBuffers() {
    rt().barrier();  // nobody accesses it any more
    rt().allocator().free_chunk(local);
  }
};

inline int right(int step = 1) { return (rt().rank() + step) % rt().size(); }
inline int left(int step = 1) { return (rt().rank() - step % rt().size() + rt().size()) % rt().size(); }

}  // namespace loom::test
