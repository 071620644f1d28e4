#pragma once
// The order in which a benchmark round runs its variants. A variant inherits the caches (and the
// warm or cold target memory) of the one run before it. A seeded shuffle, as bench_fabric used,
// gives each message size its own fixed, uneven set of predecessors: at 256 B, in 15 rounds, the
// single-thread Transmitter ran after the thread-safe one 5 times and never after its own
// hand-written twin, which ran first 3 times. What that does to a ratio differs by size, so it can
// show up as one size that is always worse.
//
// A Williams design removes this first-order carry-over: over one full cycle of rounds (n rounds
// for an even number n of variants, 2n for an odd one) every variant runs directly after every
// other variant equally often, and in every position equally often.
#include <vector>

namespace loom::bench {

// Rounds in one full cycle of balanced_order(n, ·).
inline int balanced_cycle(int n) { return n % 2 == 0 ? n : 2 * n; }

// The order of round `round` among n variants (0..n-1).
inline std::vector<int> balanced_order(int n, int round) {
  if (n <= 0) return {};  // nothing to run (bench_invoke --only with no case at this size)
  std::vector<int> base(static_cast<size_t>(n));
  // 0, 1, n-1, 2, n-2, ...: the successive differences are all distinct mod n.
  for (int j = 0; j < n; ++j) base[static_cast<size_t>(j)] = j % 2 == 1 ? (j + 1) / 2 : (n - j / 2) % n;
  const int cycle = balanced_cycle(n);
  const int r = ((round % cycle) + cycle) % cycle;
  std::vector<int> order(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) order[static_cast<size_t>(j)] = (base[static_cast<size_t>(j)] + r) % n;
  // For an odd n the rows alone give some ordered pairs twice and others never; their mirror
  // images make up the difference.
  if (n % 2 == 1 && r >= n) {
    for (int j = 0; j < n; ++j) order[static_cast<size_t>(j)] = (base[static_cast<size_t>(n - 1 - j)] + r) % n;
  }
  return order;
}

}  // namespace loom::bench
