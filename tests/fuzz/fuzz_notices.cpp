// Write-notice buffers (coherence/notices): the bytes a releaser leaves in a synchronization
// object's notice area are merged whole or refused whole; what is kept respects the buffer's
// bound and the job's ranks, and re-serializes to bytes that merge again to the same knowledge.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "loom/coherence/notices.hpp"

using namespace loom::coherence;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t nprocs = 1 + data[0] % 16;  // the job's ranks
  const size_t capacity = 1 + data[1] % 64;  // this process's buffer
  std::span<const uint8_t> wire(data + 2, size - 2);
  NoticeBuffer buf(capacity);
  buf.add(Notice{1, 5, 0});  // something already known, to merge into
  const bool ok = buf.merge_wire(wire, nprocs);
  if (!ok && (buf.entries().size() != 1 || buf.min_wts() != 0)) std::abort();  // refused whole
  if (buf.entries().size() > capacity) std::abort();
  for (const Notice& n : buf.entries())
    if (n.writer >= nprocs) std::abort();
  std::vector<uint8_t> out(buf.wire_bytes());
  if (buf.serialize(out.data()) != out.size()) std::abort();
  NoticeBuffer again(capacity);
  if (!again.merge_wire(out, nprocs)) std::abort();
  // What an acquirer learns survives the trip: the bound, and every notice above it (notices at
  // or below the bound are implied by it and may be dropped).
  if (again.min_wts() != buf.min_wts()) std::abort();
  size_t above = 0;
  for (const Notice& n : buf.entries()) {
    if (n.wts <= buf.min_wts()) continue;
    ++above;
    auto it = std::find_if(again.entries().begin(), again.entries().end(), [&](const Notice& m) { return m.key == n.key && m.chunk == n.chunk; });
    if (it == again.entries().end() || it->wts != n.wts || it->writer != n.writer) std::abort();
  }
  if (again.entries().size() != above) std::abort();
  return 0;
}
