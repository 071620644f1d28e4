// Facts read from the system (dsm/common/system.hpp) and the job directory's hold
// (dsm/runtime/job_dir.hpp): a directory that already exists in a world-writable place is used
// only if it is private to this user; the kernel's asynchronous write tracking;
// the process states PeerWatch reads.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "loom/dsm/common/system.hpp"
#include "loom/dsm/common/error.hpp"
#include "loom/dsm/region/write_tracking.hpp"
#include "loom/dsm/runtime/job_dir.hpp"
#include "loom/dsm/runtime/peer_watch.hpp"

namespace fs = std::filesystem;
using loom::sys::is_private_dir;

namespace {
class PrivateDir : public testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("loom-system-test-" + std::to_string(getpid()));
    fs::create_directories(base_);
  }
  void TearDown() override { fs::remove_all(base_); }
  std::string make_dir(const char* name, mode_t mode) {
    std::string p = (base_ / name).string();
    EXPECT_EQ(mkdir(p.c_str(), 0700), 0);
    EXPECT_EQ(chmod(p.c_str(), mode), 0);
    return p;
  }
  fs::path base_;
};
}  // namespace

TEST_F(PrivateDir, OursWithMode0700IsPrivate) {
  std::string why;
  EXPECT_TRUE(is_private_dir(make_dir("ok", 0700), &why)) << why;
}

TEST_F(PrivateDir, GroupOrOtherAccessIsRefused) {
  for (mode_t m : {0755, 0770, 0701, 0777}) {
    std::string why;
    std::string p = make_dir(("m" + std::to_string(m)).c_str(), m);
    EXPECT_FALSE(is_private_dir(p, &why)) << std::oct << m;
    EXPECT_NE(why.find("group or others"), std::string::npos) << why;
  }
}

TEST_F(PrivateDir, ASymlinkOrAFileIsRefused) {
  std::string target = make_dir("target", 0700);
  std::string link = (base_ / "link").string();
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  std::string why;
  EXPECT_FALSE(is_private_dir(link, &why));
  EXPECT_NE(why.find("symlink"), std::string::npos) << why;
  std::string file = (base_ / "file").string();
  std::ofstream(file) << "x";
  EXPECT_FALSE(is_private_dir(file, &why));
  EXPECT_FALSE(is_private_dir((base_ / "missing").string(), &why));
}

TEST_F(PrivateDir, AnotherUsersDirectoryIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  std::string p = make_dir("theirs", 0700);
  ASSERT_EQ(chown(p.c_str(), 65534, 65534), 0);
  std::string why;
  EXPECT_FALSE(is_private_dir(p, &why));
  EXPECT_NE(why.find("owned by uid 65534"), std::string::npos) << why;
}

// The job directory under PMIx may already exist (every rank creates it): one made by someone
// else, or left open to others, is not held.
TEST_F(PrivateDir, AJobDirectoryNotPrivateIsNotHeld) {
  std::string open_dir = make_dir("loom-open", 0777);
  errno = 0;
  EXPECT_LT(loom::runtime::hold_job_dir(open_dir), 0);
  EXPECT_EQ(errno, EPERM);
  std::string link = (base_ / "loom-link").string();
  ASSERT_EQ(symlink(make_dir("elsewhere", 0700).c_str(), link.c_str()), 0);
  EXPECT_LT(loom::runtime::hold_job_dir(link), 0);
  int fd = loom::runtime::hold_job_dir(make_dir("loom-mine", 0700));
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
}

// Asynchronous userfaultfd write protection, where the kernel has it: exactly the pages written
// since the last protection are reported, and reporting protects them again.
TEST(WriteTracking, ScanReportsExactlyThePagesWrittenAndReprotects) {
  const loom::region::KernelWriteTracking k = loom::region::probe_kernel_write_tracking();
  if (!k.uffd_wp_async) GTEST_SKIP() << "not available here: " << k.why_not;
  const size_t ps = static_cast<size_t>(sysconf(_SC_PAGESIZE)), len = 16 * ps;
  auto* m = static_cast<uint8_t*>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(m, MAP_FAILED);
  {
    loom::region::AsyncWriteProtect wp(m, len);
    wp.protect_all();
    m[3 * ps + 5] = 1;
    m[4 * ps] = 2;
    m[9 * ps + ps - 1] = 3;
    auto w = wp.take_written();
    ASSERT_EQ(w.size(), 2u);  // pages 3-4 as one range, page 9
    EXPECT_EQ(w[0], std::make_pair(reinterpret_cast<uintptr_t>(m + 3 * ps), reinterpret_cast<uintptr_t>(m + 5 * ps)));
    EXPECT_EQ(w[1], std::make_pair(reinterpret_cast<uintptr_t>(m + 9 * ps), reinterpret_cast<uintptr_t>(m + 10 * ps)));
    EXPECT_TRUE(wp.take_written().empty());  // protected again, nothing written since
    m[0] = 4;
    w = wp.take_written();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].first, reinterpret_cast<uintptr_t>(m));
    EXPECT_EQ(m[3 * ps + 5], 1);  // writes were not lost
  }
  munmap(m, len);
}

TEST(WriteTracking, ARangeTheKernelCannotProtectIsAClearError) {
  // Unmapped memory cannot be registered: the error names the call.
  const size_t ps = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  munmap(m, ps);
  try {
    loom::region::AsyncWriteProtect wp(m, ps);
    FAIL() << "registered unmapped memory";
  } catch (const loom::SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("write tracking: "), std::string::npos) << e.what();
  }
}

// PeerWatch reads a peer's state from /proc: how it tells a stopped peer (the waits under a PMIx
// launcher fail naming it) and a zombie its launcher has not reaped (gone) from a running one.
TEST(PeerWatch, ProcessStateTellsRunningStoppedAndZombie) {
  using loom::runtime::PeerWatch;
  EXPECT_EQ(PeerWatch::process_state(getpid()), 'R');
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) pause();
  }
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, WUNTRACED), child);
  EXPECT_TRUE(WIFSTOPPED(st));
  EXPECT_EQ(PeerWatch::process_state(child), 'T');
  ASSERT_EQ(kill(child, SIGKILL), 0);
  // Not reaped yet: a zombie, which kill(2) still finds.
  for (int i = 0; i < 1000 && PeerWatch::process_state(child) != 'Z'; ++i) usleep(1000);
  EXPECT_EQ(PeerWatch::process_state(child), 'Z');
  EXPECT_EQ(kill(child, 0), 0);
  ASSERT_EQ(waitpid(child, &st, 0), child);
  EXPECT_EQ(PeerWatch::process_state(child), 0);  // gone: nothing to read
}
