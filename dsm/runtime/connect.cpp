#include "loom/dsm/runtime/connect.hpp"

#include <cstring>

#include "loom/dsm/common/error.hpp"

namespace loom::runtime {

void connect_all(Bootstrap& boot, const std::vector<fabric::QueuePair*>& qps) {
  const int n = boot.size();
  if (qps.size() != static_cast<size_t>(n)) fail("connect_all: need one queue pair per rank (", n, "), got ", qps.size());
  std::vector<std::byte> mine;
  for (auto* qp : qps) {
    auto ep = qp->endpoint();
    uint32_t len = static_cast<uint32_t>(ep.size());
    mine.insert(mine.end(), reinterpret_cast<std::byte*>(&len), reinterpret_cast<std::byte*>(&len) + 4);
    mine.insert(mine.end(), ep.begin(), ep.end());
  }
  auto all = boot.allgather(mine);
  for (int r = 0; r < n; ++r) {
    // Rank r's table lists its endpoint for each rank in order; ours is entry `boot.rank()`.
    const auto& blob = all[static_cast<size_t>(r)];
    size_t off = 0;
    for (int k = 0; k < n; ++k) {
      uint32_t len;
      if (off + 4 > blob.size()) fail("connect_all: malformed endpoint table from rank ", r);
      std::memcpy(&len, blob.data() + off, 4);
      off += 4;
      if (off + len > blob.size()) fail("connect_all: malformed endpoint table from rank ", r);
      if (k == boot.rank()) qps[static_cast<size_t>(r)]->connect(std::span(blob.data() + off, len));
      off += len;
    }
  }
  boot.barrier();
}

}  // namespace loom::runtime
