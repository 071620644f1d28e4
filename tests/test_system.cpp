// Facts read from the system (dsm/common/system.hpp) and the job directory's hold
// (dsm/runtime/job_dir.hpp): a directory that already exists in a world-writable place is used
// only if it is private to this user (issue 17 B9).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "dsm/common/system.hpp"
#include "dsm/runtime/job_dir.hpp"

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
