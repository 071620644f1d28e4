#pragma once
// Where the messages of a benchmark loop go, without a divide on the path.
#include <cstddef>

namespace loom::bench {

// Positions 0, step, 2*step, ... below end, then 0 again: where message i of a benchmark loop
// goes or which source it reads, advanced by an add and a compare. A modulo by a run-time value
// is a 64-bit divide: in bench_fabric two per message (source ring and target offset) took 20-odd
// cycles of the divider in every loop, as much as a whole 8-byte post, and the Transmitter's loop,
// whose sources come from its allocator's list, paid one fewer than the loops it was compared with.
struct Cursor {
  size_t at = 0;
  size_t step;
  size_t end;
  Cursor(size_t step_, size_t end_) : step(step_), end(end_) {}
  size_t next() {
    size_t p = at;
    at += step;
    if (at >= end) [[unlikely]] at = 0;
    return p;
  }
};

}  // namespace loom::bench
