#include "dsm/common/system.hpp"

#include <fstream>

namespace loom::sys {

std::vector<std::string> hugetlbfs_mounts() {
  std::vector<std::string> out;
  std::ifstream mounts("/proc/mounts");
  std::string dev, dir, type, rest;
  while (mounts >> dev >> dir >> type) {
    std::getline(mounts, rest);
    if (type == "hugetlbfs") out.push_back(dir);
  }
  return out;
}

}  // namespace loom::sys
