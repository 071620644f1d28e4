#pragma once
// The multiple-writer merge (seed 003): the bytes where a process's private copy differs from
// its twin are its writes; they go over the master copy. One pass also brings the private copy
// up to the merged master, so after a release the private copy is the new version.
#include <cstddef>
#include <cstdint>

namespace loom::coherence {

// n is a multiple of 8 (a block); priv is 8-byte aligned. master, priv and twin do not overlap.
void merge_diff(uint8_t* master, uint8_t* priv, const uint8_t* twin, size_t n);

}  // namespace loom::coherence
