#include "loom/dsm/region/common_range.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "loom/dsm/common/error.hpp"

namespace loom::region {
namespace {

// Sorts, merges overlapping ranges and closes gaps narrower than `min_gap`.
std::vector<AddressRange> merged(std::vector<AddressRange> ranges, uint64_t min_gap) {
  std::sort(ranges.begin(), ranges.end(), [](const AddressRange& a, const AddressRange& b) { return a.start < b.start; });
  std::vector<AddressRange> out;
  for (const AddressRange& r : ranges) {
    if (!out.empty() && (r.start <= out.back().end || r.start - out.back().end < min_gap)) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

MappedLayout read_own_layout(uint64_t probe, size_t min_gap) {
  MappedLayout layout{probe, {}};
  std::ifstream maps("/proc/self/maps");
  if (!maps) fail("region: cannot read /proc/self/maps to find a common range of addresses");
  std::string line;
  while (std::getline(maps, line)) {
    uint64_t start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64, &start, &end) == 2 && start < end) layout.mapped.push_back({start, end});
  }
  layout.mapped = merged(std::move(layout.mapped), min_gap);
  return layout;
}

std::vector<uint64_t> encode_layout(const MappedLayout& layout) {
  std::vector<uint64_t> words{layout.probe, layout.mapped.size()};
  for (const AddressRange& r : layout.mapped) {
    words.push_back(r.start);
    words.push_back(r.end);
  }
  return words;
}

MappedLayout decode_layout(std::span<const std::byte> bytes, int rank) {
  const size_t n_words = bytes.size() / sizeof(uint64_t);
  if (bytes.size() % sizeof(uint64_t) != 0 || n_words < 2)
    fail("region: rank ", rank, " described its address space in ", bytes.size(), " bytes, not whole words with a header");
  std::vector<uint64_t> w(n_words);
  std::memcpy(w.data(), bytes.data(), bytes.size());
  MappedLayout layout{w[0], {}};
  if (w[1] != (n_words - 2) / 2 || (n_words - 2) % 2 != 0)
    fail("region: rank ", rank, " said it has ", w[1], " mapped ranges and sent ", n_words - 2, " words for them");
  for (size_t i = 0; i < w[1]; ++i) {
    AddressRange r{w[2 + 2 * i], w[3 + 2 * i]};
    if (r.start >= r.end || (!layout.mapped.empty() && r.start < layout.mapped.back().end))
      fail("region: rank ", rank, "'s mapped range ", i, " is empty or out of order");
    layout.mapped.push_back(r);
  }
  return layout;
}

std::optional<uint64_t> highest_common_gap(std::span<const MappedLayout> layouts, std::span<const AddressRange> excluded,
                                           size_t bytes, size_t align, uint64_t floor) {
  if (layouts.empty() || bytes == 0 || align == 0) return std::nullopt;
  uint64_t ceiling = std::numeric_limits<uint64_t>::max();
  std::vector<AddressRange> taken(excluded.begin(), excluded.end());
  for (const MappedLayout& l : layouts) {
    if (l.probe > std::numeric_limits<uint64_t>::max() - bytes) return std::nullopt;
    ceiling = std::min(ceiling, l.probe + bytes);
    taken.insert(taken.end(), l.mapped.begin(), l.mapped.end());
  }
  taken = merged(std::move(taken), 0);
  // Walk the gaps from the top: between the ceiling (or a range's start) and the range below.
  uint64_t top = ceiling;
  for (auto it = taken.rbegin();; ++it) {
    const uint64_t bottom = it == taken.rend() ? 0 : it->end;
    if (bottom < top) {
      const uint64_t hi = std::min(top, ceiling);
      if (hi >= bytes) {
        const uint64_t a = (hi - bytes) / align * align;
        if (a >= bottom && a >= floor) return a;
      }
    }
    if (it == taken.rend()) break;
    top = std::min(top, it->start);
    if (top <= floor) break;
  }
  return std::nullopt;
}

}  // namespace loom::region
