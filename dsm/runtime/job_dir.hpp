#pragma once
// Job directories (`loom-<job>/` under LOOM_SHM_DIR) and what happens to them when nobody is
// left to clean up.
//
// Every process that uses a job directory holds a shared flock on it for as long as it lives;
// the kernel drops the lock however the process ends, SIGKILL included. A directory that nobody
// holds belongs to a job whose launcher (or a lone process started without loomrun) was killed
// before it could remove it: its segments would keep their memory until the next reboot. The
// next launcher or lone process to start removes such directories ("sweeps" them), unless
// LOOM_SWEEP=0. The lock decides, not a process id: ids are reused and differ between PID
// namespaces that share /dev/shm. A name's process id (`loom-<pid>-...`) only holds a sweep back
// while that process runs, for directories of Loom versions that took no lock.
#include <string>
#include <vector>

namespace loom::runtime {

// LOOM_SHM_DIR, else /dev/shm.
std::string shm_root();

// The job directories on hugetlbfs mounts that go with `job_id` (the shm provider puts
// huge-page segments there).
std::vector<std::string> hugetlbfs_job_dirs(const std::string& job_id);

// Removes a job directory and its hugetlbfs counterparts; false if `dir` could not be removed.
bool remove_job_dir(const std::string& dir, const std::string& job_id);

// Holds an existing job directory (shared lock) for the life of the process; returns the
// descriptor that holds it, or -1 if the directory is gone (a sweep removed it first) or cannot
// be opened. Waits while a sweep is deciding about it.
int hold_job_dir(const std::string& dir);

// Creates `dir` (mode 0700) and holds it. Returns the descriptor, or -1 with errno set. With
// `may_exist` (a directory the job's processes share, such as a PMIx job's), an existing one is
// held, and one that a sweep removes before the hold is made again. Without it, EEXIST if it
// exists and ENOENT if a sweep removed it before the hold (the caller takes another name).
int create_job_dir(const std::string& dir, bool may_exist = false);

// Creates and holds a job directory of a fresh name, `loom-<pid>-<random>` under shm_root();
// sets `job_id` (the part after "loom-") and `dir`. Returns the descriptor, or -1 with errno.
int create_new_job_dir(std::string& job_id, std::string& dir);

// Removes the job directories under shm_root() (and their hugetlbfs counterparts) that no
// process holds, that belong to this user and whose naming process (if the name has one) has
// ended; returns the directories removed. Does nothing if LOOM_SWEEP=0.
std::vector<std::string> sweep_stale_job_dirs();

}  // namespace loom::runtime
