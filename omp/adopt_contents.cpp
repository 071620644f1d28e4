#include "loom/omp/adopt_contents.hpp"

#include <algorithm>
#include <cstring>

#include "loom/dsm/common/error.hpp"

namespace loom::omp {
namespace {

// The program's memory, read and written without instrumentation (the sanitizer builds
// instrument the layer, not the program).
__attribute__((no_sanitize("address", "thread"))) uint64_t hash_block(const uint8_t* p) {
  const volatile uint64_t* w = reinterpret_cast<const volatile uint64_t*>(p);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < kAdoptBlock / 8; ++i) h = (h ^ w[i]) * 1099511628211ull;
  return h;
}

__attribute__((no_sanitize("address", "thread"))) void copy_block(uint8_t* dst, const std::byte* src) {
  std::memcpy(dst, src, kAdoptBlock);
}

template <typename T>
std::vector<T> words_from(const std::vector<std::byte>& bytes, int rank, const char* what) {
  if (bytes.size() % sizeof(T) != 0) fail("omp: rank ", rank, " sent ", bytes.size(), " bytes of ", what);
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());  // an empty vector's data() may be null
  return out;
}

// The union of the block numbers every process names, sorted; each checked against the range.
std::vector<uint32_t> wanted_blocks(const std::vector<std::vector<std::byte>>& lists, size_t nblocks) {
  std::vector<uint32_t> all;
  for (size_t r = 0; r < lists.size(); ++r)
    for (uint32_t b : words_from<uint32_t>(lists[r], static_cast<int>(r), "block numbers")) {
      if (b >= nblocks) fail("omp: rank ", r, " named block ", b, " of a range of ", nblocks);
      all.push_back(b);
    }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

}  // namespace

std::vector<uint64_t> block_hashes(std::span<const uint8_t> range) {
  if (range.size() % kAdoptBlock != 0) fail("omp: a range of ", range.size(), " bytes is not whole ", kAdoptBlock, "-byte blocks");
  std::vector<uint64_t> out(range.size() / kAdoptBlock);
  for (size_t b = 0; b < out.size(); ++b) out[b] = hash_block(range.data() + b * kAdoptBlock);
  return out;
}

size_t adopt_rank0_contents(runtime::Bootstrap& boot, std::span<uint8_t> range) {
  const bool root = boot.rank() == 0;
  const std::vector<uint64_t> mine = block_hashes(range);
  const auto hashes = boot.allgather(root ? std::as_bytes(std::span(mine)) : std::span<const std::byte>{});
  const std::vector<uint64_t> ref = words_from<uint64_t>(hashes[0], 0, "block hashes");
  if (ref.size() != mine.size()) fail("omp: rank 0 hashed ", ref.size(), " blocks of a range of ", mine.size());
  std::vector<uint32_t> differ;
  for (size_t b = 0; b < mine.size() && !root; ++b)
    if (mine[b] != ref[b]) differ.push_back(static_cast<uint32_t>(b));
  const std::vector<uint32_t> wanted = wanted_blocks(boot.allgather(std::as_bytes(std::span(differ))), mine.size());
  if (wanted.empty()) return 0;
  std::vector<std::byte> blocks;
  if (root) {
    blocks.resize(wanted.size() * kAdoptBlock);
    for (size_t k = 0; k < wanted.size(); ++k)
      std::memcpy(blocks.data() + k * kAdoptBlock, range.data() + size_t{wanted[k]} * kAdoptBlock, kAdoptBlock);
  }
  const auto sent = boot.allgather(blocks);
  if (sent[0].size() != wanted.size() * kAdoptBlock)
    fail("omp: rank 0 sent ", sent[0].size(), " bytes for ", wanted.size(), " blocks");
  size_t replaced = 0;
  for (size_t k = 0; k < wanted.size() && !root; ++k) {
    const size_t b = wanted[k];
    if (mine[b] == ref[b]) continue;
    copy_block(range.data() + b * kAdoptBlock, sent[0].data() + k * kAdoptBlock);
    ++replaced;
  }
  return replaced;
}

}  // namespace loom::omp
