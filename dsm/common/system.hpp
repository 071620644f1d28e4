#pragma once
// Facts read from the running system (not from LOOM_* settings, which are settings.hpp's).
#include <cstddef>
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

// Gives [offset, offset+len) of an open file its memory now (fallocate), so that on a
// memory-backed file system (tmpfs, hugetlbfs) lack of room is this call's error instead of a
// SIGBUS at the first touch of a mapping. Returns 0 or an errno; a file system that cannot
// reserve space (EOPNOTSUPP) counts as success: its pages are found at first touch as before.
int reserve_file_space(int fd, size_t offset, size_t len);
// What to say when reserve_file_space failed for `what` in directory `dir`: the errno's text,
// the room left there, and how to give the job more.
std::string no_room_message(const std::string& what, const std::string& dir, size_t len, int err);

}  // namespace loom::sys
