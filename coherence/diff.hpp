#pragma once
// The multiple-writer merge (seed 003): the bytes where a process's private copy differs from
// its twin are its writes; they go over the master copy. One pass also brings the private copy
// up to the merged master, so after a release the private copy is the new version.
#include <cstddef>
#include <cstdint>

namespace loom::coherence {

// n is a multiple of 8 (a block); priv is 8-byte aligned. master, priv and twin do not overlap.
void merge_diff(uint8_t* master, uint8_t* priv, const uint8_t* twin, size_t n);

// Bytes both writers changed: ours (priv differs from twin) that another wrote too since our
// twin was taken (master differs from twin). In a data-race-free program there are none: a write
// that happens before ours reached us at our acquire, before the twin. Same arguments as
// merge_diff, read only; `first` gets the first such byte's offset when there is one.
struct Conflict {
  size_t bytes = 0;
  size_t first = 0;
};
Conflict conflicting_writes(const uint8_t* master, const uint8_t* priv, const uint8_t* twin, size_t n);

}  // namespace loom::coherence
