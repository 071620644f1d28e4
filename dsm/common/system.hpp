#pragma once
// Facts read from the running system (not from LOOM_* settings, which are settings.hpp's).
#include <string>
#include <vector>

namespace loom::sys {

// The mount points of every hugetlbfs, in /proc/mounts order (none: empty).
std::vector<std::string> hugetlbfs_mounts();

// An open directory is private to this process's user: a directory (the open did not follow a
// symlink: O_NOFOLLOW), owned by the effective user, with no access for group or others. In a
// world-writable place (/dev/shm, a hugetlbfs mount) a directory that already exists may have
// been made by someone else. On false, *why says what is wrong.
bool is_private_dir(int fd, std::string* why);
// The same by path (opened with O_NOFOLLOW); false if it cannot be opened as a directory.
bool is_private_dir(const std::string& path, std::string* why);

}  // namespace loom::sys
