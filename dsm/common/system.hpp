#pragma once
// Facts read from the running system (not from LOOM_* settings, which are env.hpp's).
#include <string>
#include <vector>

namespace loom::sys {

// The mount points of every hugetlbfs, in /proc/mounts order (none: empty).
std::vector<std::string> hugetlbfs_mounts();

}  // namespace loom::sys
