#include "bench/nas/team.hpp"

#include <algorithm>
#include <stdexcept>

namespace loom::nas {

Range partition(size_t n, int member, int members, size_t grain) {
  if (members <= 0 || member < 0 || member >= members || grain == 0) throw std::invalid_argument("nas: bad partition");
  const size_t units = (n + grain - 1) / grain;
  auto edge = [&](int m) { return std::min(n, units * static_cast<size_t>(m) / static_cast<size_t>(members) * grain); };
  return {edge(member), edge(member + 1)};
}

// Two banks of slots alternate: a sum writes its bank only after every member passed the
// barrier of the previous sum, which each reaches after reading the bank of the one before.
void Team::sum(double* v, int count) {
  if (count < 1 || count > kMaxSum) throw std::invalid_argument("nas: Team::sum of 1 to 16 values");
  const size_t bank = static_cast<size_t>(sums_++ & 1) * static_cast<size_t>(size()) * kMaxSum;
  double* mine = writing(slots_ + bank + static_cast<size_t>(rank()) * kMaxSum, static_cast<size_t>(count));
  std::copy(v, v + count, mine);
  barrier();
  const double* all = reading(slots_ + bank, static_cast<size_t>(size()) * kMaxSum);
  for (int i = 0; i < count; ++i) {
    double s = 0;
    for (int m = 0; m < size(); ++m) s += all[static_cast<size_t>(m) * kMaxSum + static_cast<size_t>(i)];
    v[i] = s;
  }
}

double Team::max(double v) {
  // Each member's value in its slot; every member takes the largest (banks as in sum).
  const size_t bank = static_cast<size_t>(sums_++ & 1) * static_cast<size_t>(size()) * kMaxSum;
  *writing(slots_ + bank + static_cast<size_t>(rank()) * kMaxSum, 1) = v;
  barrier();
  const double* all = reading(slots_ + bank, static_cast<size_t>(size()) * kMaxSum);
  double m = all[0];
  for (int i = 1; i < size(); ++i) m = std::max(m, all[static_cast<size_t>(i) * kMaxSum]);
  return m;
}

}  // namespace loom::nas
