#pragma once
// Choosing one range of virtual addresses that is free in every process of a job: each process
// describes what it has mapped, and every process computes the same answer from the gathered
// descriptions (the highest aligned range that lies below each process's own choice for a
// mapping of that size and touches nothing any of them has mapped).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace loom::region {

struct AddressRange {
  uint64_t start = 0;  // inclusive
  uint64_t end = 0;    // exclusive
};

// What one process contributes: where its kernel would put a mapping of the size sought (the
// `probe`), and its mapped ranges, sorted, disjoint, gaps too small to matter closed.
struct MappedLayout {
  uint64_t probe = 0;
  std::vector<AddressRange> mapped;
};

// This process's layout from /proc/self/maps; gaps narrower than `min_gap` are closed (they
// cannot hold the range sought), which keeps the description short.
MappedLayout read_own_layout(uint64_t probe, size_t min_gap);

// The layout as words (probe, count, start, end, ...) and back. The words come from another
// process: anything out of shape is an error naming `rank`.
std::vector<uint64_t> encode_layout(const MappedLayout& layout);
MappedLayout decode_layout(std::span<const std::byte> bytes, int rank);

// The highest `align`-aligned start A with [A, A + bytes) below every layout's probe + bytes,
// at or above `floor`, and clear of every layout's mapped ranges and of `excluded` (ranges tried
// before). nullopt when there is none.
std::optional<uint64_t> highest_common_gap(std::span<const MappedLayout> layouts, std::span<const AddressRange> excluded,
                                           size_t bytes, size_t align, uint64_t floor);

}  // namespace loom::region
