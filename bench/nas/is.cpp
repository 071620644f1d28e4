// IS: ranking of NPB's integer keys by counting, ten times (plus one untimed), with NPB's
// partial verification (5 test keys per ranking) and the full sort check after; the run passes
// iff 5 x 10 + 1 = 51 checks pass. Keys, counts and ranks are shared arrays (NPB's variant
// without buckets: what moves between members is counts per key value, not the keys).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "bench/nas/kernel.hpp"
#include "bench/nas/lcg.hpp"

namespace loom::nas {
namespace {

constexpr int kIterations = 10;
constexpr int kTests = 5;

struct IsClass {
  char cls;
  int keys_log2, max_key_log2;
  int64_t test_index[kTests];
  int64_t test_rank[kTests];
};

constexpr IsClass kClasses[] = {
    {'S', 16, 11, {48427, 17148, 23627, 62548, 4431}, {0, 18, 346, 64917, 65463}},
    {'W', 20, 16, {357773, 934767, 875723, 898999, 404505}, {1249, 11698, 1039987, 1043896, 1048018}},
    {'A', 23, 19, {2112377, 662041, 5336171, 3642833, 4250760}, {104, 17523, 123928, 8288932, 8388264}},
    {'B', 25, 21, {41869, 812306, 5102857, 18232239, 26860214}, {33422937, 10244, 59149, 33135281, 99}},
};

const IsClass& is_class(char cls) {
  for (const IsClass& c : kClasses)
    if (c.cls == cls) return c;
  throw std::invalid_argument(std::string("IS: no class ") + cls);
}

// The rank test key j must have in ranking `it` (NPB's per-class rules).
int64_t expected_rank(const IsClass& c, int j, int it) {
  const int64_t r = c.test_rank[j];
  switch (c.cls) {
    case 'S': return j <= 2 ? r + it : r - it;
    case 'W': return j < 2 ? r + (it - 2) : r - it;
    case 'A': return j <= 2 ? r + (it - 1) : r - (it - 1);
    default: return (j == 1 || j == 2 || j == 4) ? r + it : r - it;
  }
}

struct Sizes {
  size_t keys, max_key;
  size_t row;  // stride of a member's counts, in ints (a whole number of units)
};

struct Arrays {
  int32_t* keys;    // key_array
  int32_t* counts;  // members x row: each member's keys <= k, for every key value k
  int32_t* ranks;   // key_buff1: all keys <= k, for every key value k
  int32_t* sorted;  // the keys in order (full verification)
};

// NPB's ranking without buckets: each member counts its part of the keys for every key value
// and sums the counts up (its row of `counts`); then each member adds up all rows over its part
// of the key values. What moves between members is the rows, not the keys.
class Ranker {
 public:
  Ranker(Team& team, const IsClass& c, const Sizes& s, const Arrays& a)
      : team_(team), c_(c), s_(s), a_(a), mine_(team.part(s.keys, team.unit() / sizeof(int32_t))),
        values_(team.part(s.max_key, team.unit() / sizeof(int32_t))) {}

  void create_keys() {
    Lcg g(314159265);
    g.skip(4 * mine_.lo);
    const double k = static_cast<double>(s_.max_key / 4);
    int32_t* keys = team_.writing(a_.keys + mine_.lo, mine_.size());
    for (size_t i = 0; i < mine_.size(); ++i) {
      double x = g.next();
      x += g.next();
      x += g.next();
      x += g.next();
      keys[i] = static_cast<int32_t>(k * x);
    }
    team_.barrier();
  }

  // One ranking; returns the test keys it got right (counted by the leader only).
  int rank(int it) {
    for (size_t i : {static_cast<size_t>(it), static_cast<size_t>(it + kIterations)})
      if (i >= mine_.lo && i < mine_.hi) a_.keys[i] = i == static_cast<size_t>(it) ? it : static_cast<int32_t>(s_.max_key) - it;
    int32_t test_keys[kTests];
    if (team_.leader())
      for (int j = 0; j < kTests; ++j) test_keys[j] = a_.keys[c_.test_index[j]];
    int32_t* row = team_.writing(a_.counts + static_cast<size_t>(team_.rank()) * s_.row, s_.max_key);
    std::fill(row, row + s_.max_key, 0);
    for (size_t i = mine_.lo; i < mine_.hi; ++i) ++row[a_.keys[i]];
    for (size_t k = 1; k < s_.max_key; ++k) row[k] += row[k - 1];
    team_.barrier();
    if (!values_.empty()) {
      int32_t* ranks = team_.writing(a_.ranks + values_.lo, values_.size());
      std::fill(ranks, ranks + values_.size(), 0);
      for (int m = 0; m < team_.size(); ++m) {
        const int32_t* other = team_.reading(a_.counts + static_cast<size_t>(m) * s_.row + values_.lo, values_.size());
        for (size_t k = 0; k < values_.size(); ++k) ranks[k] += other[k];
      }
    }
    team_.barrier();
    int passed = 0;
    if (team_.leader())
      for (int j = 0; j < kTests; ++j) {
        const int64_t k = test_keys[j];
        if (k > 0 && k <= static_cast<int64_t>(s_.keys) - 1 && a_.ranks[k - 1] == expected_rank(c_, j, it)) ++passed;
      }
    return passed;
  }

  // The untimed full verification: every member places the keys of its key values at their
  // ranks; the number of neighbours out of order (0 when sorted).
  double full_verify() {
    const int32_t* keys = team_.reading(a_.keys, s_.keys);
    for (size_t i = 0; i < s_.keys; ++i) {
      const size_t key = static_cast<size_t>(keys[i]);
      if (key >= values_.lo && key < values_.hi) a_.sorted[--a_.ranks[key]] = static_cast<int32_t>(key);
    }
    team_.barrier();
    double wrong = 0;
    for (size_t i = std::max<size_t>(mine_.lo, 1); i < mine_.hi; ++i) wrong += a_.sorted[i - 1] > a_.sorted[i] ? 1 : 0;
    return team_.sum(wrong);
  }

 private:
  Team& team_;
  const IsClass& c_;
  const Sizes& s_;
  const Arrays& a_;
  const Range mine_;    // this member's keys
  const Range values_;  // this member's key values
};

Sizes sizes(const IsClass& c, size_t unit) {
  Sizes s;
  s.keys = size_t{1} << c.keys_log2;
  s.max_key = size_t{1} << c.max_key_log2;
  const size_t per_unit = unit / sizeof(int32_t);
  s.row = (s.max_key + per_unit - 1) / per_unit * per_unit;
  return s;
}

}  // namespace

size_t is_shared_bytes(char cls, int members) {
  const Sizes s = sizes(is_class(cls), 4096);
  return (2 * s.keys + s.max_key + static_cast<size_t>(members) * s.row) * sizeof(int32_t) + 4 * 4096;
}

Result run_is(Team& team, char cls) {
  const IsClass& c = is_class(cls);
  const Sizes s = sizes(c, team.unit());
  const Arrays a{team.shared<int32_t>(s.keys), team.shared<int32_t>(static_cast<size_t>(team.size()) * s.row), team.shared<int32_t>(s.max_key),
                 team.shared<int32_t>(s.keys)};
  Ranker ranker(team, c, s, a);
  ranker.create_keys();
  ranker.rank(1);  // untimed, as the reference
  int passed = 0;
  TeamTimer timer(team);
  for (int it = 1; it <= kIterations; ++it) passed += ranker.rank(it);
  Result r;
  r.seconds = timer.stop();
  const double wrong = ranker.full_verify();
  const double partial = team.sum(static_cast<double>(passed));
  r.kernel = "IS";
  r.cls = cls;
  r.size = std::to_string(s.keys);
  r.iterations = kIterations;
  r.operation = "keys ranked";
  r.mops = 1e-6 * static_cast<double>(s.keys) * kIterations / r.seconds;
  const int checks = static_cast<int>(partial) + (wrong == 0 ? 1 : 0);
  r.verified = checks == kTests * kIterations + 1;
  char line[120];
  std::snprintf(line, sizeof line, "checks     %d of %d passed (partial %d, keys out of order %.0f)", checks, kTests * kIterations + 1,
                static_cast<int>(partial), wrong);
  r.details.emplace_back(line);
  return r;
}

}  // namespace loom::nas
