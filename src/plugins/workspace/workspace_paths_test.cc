#include "plugins/workspace/workspace_paths.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/testing/temp_dir.h"

namespace dsh::workspace {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// tmp/ws is the cwd, tmp/extra an extra root, tmp/outside and tmp/ws2 are
// outside (ws2 shares the cwd's name as a prefix).
class WorkspacePaths : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::canonical(tmp_.path());
    for (const char* dir : {"ws", "ws/a", "ws/sub", "extra", "outside", "ws2"})
      fs::create_directory(base_ / dir);
    WriteText(ws() / "b.txt", "b\n");
    WriteText(ws() / "sub" / "c.txt", "c\n");
    WriteText(base_ / "extra" / "e.txt", "e\n");
    WriteText(base_ / "outside" / "secret.txt", "secret\n");
    WriteText(base_ / "ws2" / "b.txt", "not in the workspace\n");
    roots_.cwd = ws();
    roots_.extra = {base_ / "extra"};
  }

  fs::path ws() const { return base_ / "ws"; }
  fs::path outside() const { return base_ / "outside"; }

  testing::TempDir tmp_;
  fs::path base_;
  Roots roots_;
};

#define EXPECT_REFUSED(result, code_)                                          \
  do {                                                                         \
    auto refused_ = (result);                                                  \
    ASSERT_FALSE(refused_.ok()) << "unexpectedly succeeded";                   \
    EXPECT_EQ(refused_.status().code(), code_) << refused_.status().message(); \
  } while (0)

TEST_F(WorkspacePaths, ResolvesARelativePathAgainstTheCwd) {
  auto resolved = Resolve(roots_, "sub/c.txt", Access::kRead);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(*resolved, ws() / "sub" / "c.txt");
}

TEST_F(WorkspacePaths, ResolvesAnAbsolutePathInsideAnExtraRoot) {
  auto where = Locate(roots_, (base_ / "extra" / "e.txt").string(), Access::kRead);
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  EXPECT_EQ(where->path, base_ / "extra" / "e.txt");
  EXPECT_EQ(where->root, base_ / "extra");
  EXPECT_EQ(where->below, fs::path("e.txt"));
  EXPECT_TRUE(where->exists);
}

TEST_F(WorkspacePaths, TheCwdItselfIsInside) {
  auto where = Locate(roots_, ".", Access::kRead);
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  EXPECT_EQ(where->path, ws());
  EXPECT_EQ(where->below, fs::path("."));
}

TEST_F(WorkspacePaths, AcceptsDotDotThatStaysInside) {
  auto resolved = Resolve(roots_, "a/../sub/./c.txt", Access::kRead);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(*resolved, ws() / "sub" / "c.txt");
}

TEST_F(WorkspacePaths, RefusesDotDotLeavingTheCwd) {
  auto resolved = Resolve(roots_, "../outside/secret.txt", Access::kRead);
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), kPathOutsideWorkspace);
  EXPECT_THAT(resolved.status().message(), HasSubstr("../outside/secret.txt"));
  EXPECT_REFUSED(Resolve(roots_, "sub/../../outside/secret.txt", Access::kRead), kPathOutsideWorkspace);
  EXPECT_REFUSED(Resolve(roots_, "..", Access::kRead), kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, RefusesDotDotThatLeavesAndComesBack) {
  EXPECT_REFUSED(Resolve(roots_, "../ws/b.txt", Access::kRead), kPathOutsideWorkspace);
  EXPECT_REFUSED(Resolve(roots_, (ws() / ".." / "ws" / "b.txt").string(), Access::kRead),
                 kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, RefusesAbsolutePathsOutside) {
  EXPECT_REFUSED(Resolve(roots_, "/etc/passwd", Access::kRead), kPathOutsideWorkspace);
  EXPECT_REFUSED(Resolve(roots_, (outside() / "secret.txt").string(), Access::kRead), kPathOutsideWorkspace);
  EXPECT_REFUSED(Resolve(roots_, (outside() / "new.txt").string(), Access::kWrite), kPathOutsideWorkspace);
  EXPECT_REFUSED(Resolve(roots_, "/", Access::kRead), kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, RefusesASiblingWhoseNameStartsWithTheRoot) {
  EXPECT_REFUSED(Resolve(roots_, (base_ / "ws2" / "b.txt").string(), Access::kRead), kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, AMissingPathOutsideIsOutsideNotMissing) {
  EXPECT_REFUSED(Resolve(roots_, "/no/such/dir/file", Access::kRead), kPathOutsideWorkspace);
  EXPECT_REFUSED(Resolve(roots_, "/no/such/dir/file", Access::kWrite), kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, AMissingPathInsideIsNotFoundForReading) {
  auto resolved = Resolve(roots_, "sub/missing.txt", Access::kRead);
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), codes::kNotFound);
  EXPECT_THAT(resolved.status().message(), HasSubstr("sub/missing.txt"));
}

TEST_F(WorkspacePaths, RefusesASymlinkInAMiddleComponentLeadingOutside) {
  fs::create_directory_symlink("../outside", ws() / "dirlink");
  EXPECT_REFUSED(Resolve(roots_, "dirlink/secret.txt", Access::kRead), kPathOutsideWorkspace);
  EXPECT_REFUSED(Resolve(roots_, "dirlink/new.txt", Access::kWrite), kPathOutsideWorkspace);
  EXPECT_REFUSED(Resolve(roots_, "dirlink/newdir/new.txt", Access::kWrite), kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, RefusesASymlinkAsTheFinalComponentLeadingOutside) {
  fs::create_symlink(outside() / "secret.txt", ws() / "link");
  auto resolved = Resolve(roots_, "link", Access::kRead);
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), kPathOutsideWorkspace);
  EXPECT_THAT(resolved.status().message(), HasSubstr("outside"));
  EXPECT_REFUSED(Resolve(roots_, "link", Access::kWrite), kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, RefusesADanglingSymlinkLeadingOutsideForWriting) {
  fs::create_symlink(outside() / "new.txt", ws() / "dangling");
  EXPECT_REFUSED(Resolve(roots_, "dangling", Access::kWrite), kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, FollowsSymlinksThatStayInside) {
  fs::create_symlink("b.txt", ws() / "relative_link");
  fs::create_symlink(ws() / "sub" / "c.txt", ws() / "a" / "absolute_link");
  fs::create_directory_symlink("../sub", ws() / "a" / "dir_link");
  fs::create_symlink(base_ / "extra" / "e.txt", ws() / "to_extra");
  EXPECT_EQ(Resolve(roots_, "relative_link", Access::kRead).value(), ws() / "b.txt");
  EXPECT_EQ(Resolve(roots_, "a/absolute_link", Access::kRead).value(), ws() / "sub" / "c.txt");
  EXPECT_EQ(Resolve(roots_, "a/dir_link/c.txt", Access::kRead).value(), ws() / "sub" / "c.txt");
  auto where = Locate(roots_, "to_extra", Access::kRead);
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  EXPECT_EQ(where->root, base_ / "extra");
}

TEST_F(WorkspacePaths, ADanglingSymlinkInsideResolvesToItsTargetForWriting) {
  fs::create_symlink("sub/new.txt", ws() / "dangling");
  auto where = Locate(roots_, "dangling", Access::kWrite);
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  EXPECT_EQ(where->path, ws() / "sub" / "new.txt");
  EXPECT_FALSE(where->exists);
  EXPECT_REFUSED(Resolve(roots_, "dangling", Access::kRead), codes::kNotFound);
}

TEST_F(WorkspacePaths, RefusesProcSelfRoot) {
  EXPECT_REFUSED(Resolve(roots_, "/proc/self/root/etc/passwd", Access::kRead), kPathOutsideWorkspace);
  // Even where the magic link's text leads back inside.
  auto via_proc = Resolve(roots_, "/proc/self/root" + (ws() / "b.txt").string(), Access::kRead);
  ASSERT_FALSE(via_proc.ok()) << via_proc.value();
  EXPECT_EQ(via_proc.status().code(), kPathOutsideWorkspace);
  EXPECT_THAT(via_proc.status().message(), HasSubstr("/proc"));
}

TEST_F(WorkspacePaths, RefusesProcPidCwdEvenWhenItIsInside) {
  // The test process's cwd, inside a root: only the /proc rule can refuse it.
  fs::path previous = fs::current_path();
  fs::path process_cwd = fs::canonical(ws()) / "cwd";
  fs::create_directories(process_cwd);
  fs::current_path(process_cwd);
  struct Back {
    fs::path to;
    ~Back() { fs::current_path(to); }
  } back{previous};
  roots_.extra.push_back(process_cwd);
  EXPECT_TRUE(Resolve(roots_, process_cwd.string(), Access::kRead).ok());
  std::string via_proc = "/proc/" + std::to_string(getpid()) + "/cwd";
  EXPECT_REFUSED(Resolve(roots_, via_proc, Access::kRead), kPathOutsideWorkspace);
  EXPECT_REFUSED(Resolve(roots_, "/proc/self/cwd", Access::kRead), kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, RefusesASymlinkInsideThatGoesThroughProc) {
  fs::create_symlink("/proc/self/root" + (ws() / "b.txt").string(), ws() / "via_proc");
  fs::create_symlink("/dev/fd", ws() / "fds");
  EXPECT_REFUSED(Resolve(roots_, "via_proc", Access::kRead), kPathOutsideWorkspace);
  EXPECT_REFUSED(Resolve(roots_, "fds/0", Access::kRead), kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, RefusesAFileWithASecondHardLink) {
  ASSERT_EQ(::link((outside() / "secret.txt").c_str(), (ws() / "hard.txt").c_str()), 0);
  for (Access access : {Access::kRead, Access::kWrite}) {
    auto resolved = Resolve(roots_, "hard.txt", access);
    ASSERT_FALSE(resolved.ok());
    EXPECT_EQ(resolved.status().code(), kPathOutsideWorkspace);
    EXPECT_THAT(resolved.status().message(), HasSubstr("hard link"));
    EXPECT_THAT(resolved.status().message(), HasSubstr("hard.txt"));
  }
}

TEST_F(WorkspacePaths, AllowsWritingANewFileInNewDirectories) {
  auto where = Locate(roots_, "new/dir/./file.txt", Access::kWrite);
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  EXPECT_EQ(where->path, ws() / "new" / "dir" / "file.txt");
  EXPECT_EQ(where->root, ws());
  EXPECT_EQ(where->below, fs::path("new/dir/file.txt"));
  EXPECT_FALSE(where->exists);
}

TEST_F(WorkspacePaths, RefusesDotDotAfterAMissingDirectory) {
  auto resolved = Resolve(roots_, "new/../b.txt", Access::kWrite);
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), codes::kInvalidArguments);
  EXPECT_THAT(resolved.status().message(), HasSubstr("does not exist yet"));
}

TEST_F(WorkspacePaths, CanonicalizesARootThatIsASymlink) {
  fs::create_directory_symlink(ws(), base_ / "ws_link");
  roots_.cwd = base_ / "ws_link";
  EXPECT_EQ(Resolve(roots_, "b.txt", Access::kRead).value(), ws() / "b.txt");
  EXPECT_EQ(Resolve(roots_, (base_ / "ws_link" / "b.txt").string(), Access::kRead).value(), ws() / "b.txt");
  EXPECT_EQ(Resolve(roots_, (ws() / "b.txt").string(), Access::kRead).value(), ws() / "b.txt");
  EXPECT_REFUSED(Resolve(roots_, "../outside/secret.txt", Access::kRead), kPathOutsideWorkspace);
}

TEST_F(WorkspacePaths, RefusesEmptyAndNulPaths) {
  EXPECT_REFUSED(Resolve(roots_, "", Access::kRead), codes::kInvalidArguments);
  EXPECT_REFUSED(Resolve(roots_, std::string_view("b.txt\0../x", 10), Access::kRead),
                 codes::kInvalidArguments);
  EXPECT_REFUSED(Resolve(roots_, std::string(5000, 'a'), Access::kWrite), codes::kInvalidArguments);
}

TEST_F(WorkspacePaths, RefusesAFileUsedAsADirectory) {
  EXPECT_REFUSED(Resolve(roots_, "b.txt/x", Access::kWrite), codes::kInvalidArguments);
  EXPECT_REFUSED(Resolve(roots_, "b.txt/", Access::kRead), codes::kInvalidArguments);
  EXPECT_REFUSED(Resolve(roots_, "b.txt/..", Access::kRead), codes::kInvalidArguments);
  EXPECT_EQ(Resolve(roots_, "sub/", Access::kRead).value(), ws() / "sub");
}

TEST_F(WorkspacePaths, RefusesASymlinkLoop) {
  fs::create_symlink("loop2", ws() / "loop1");
  fs::create_symlink("loop1", ws() / "loop2");
  auto resolved = Resolve(roots_, "loop1", Access::kRead);
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), codes::kInvalidArguments);
  EXPECT_THAT(resolved.status().message(), HasSubstr("symbolic links"));
}

TEST_F(WorkspacePaths, AMissingCwdIsNotFound) {
  roots_.cwd = base_ / "gone";
  auto resolved = Resolve(roots_, "b.txt", Access::kRead);
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), codes::kNotFound);
  EXPECT_THAT(resolved.status().message(), HasSubstr("gone"));
}

TEST_F(WorkspacePaths, OpenBeneathRefusesWhatLeavesTheDirectory) {
  auto root = OpenRoot(ws());
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  fs::create_symlink("b.txt", ws() / "inner_link");
  EXPECT_TRUE(OpenBeneath(root->get(), "sub/c.txt", O_RDONLY, "sub/c.txt").ok());
  EXPECT_REFUSED(OpenBeneath(root->get(), "../outside/secret.txt", O_RDONLY, "x"), kPathOutsideWorkspace);
  EXPECT_REFUSED(OpenBeneath(root->get(), outside() / "secret.txt", O_RDONLY, "x"), kPathOutsideWorkspace);
  EXPECT_REFUSED(OpenBeneath(root->get(), "/proc/self/root/etc/passwd", O_RDONLY, "x"),
                 kPathOutsideWorkspace);
  // Locate gives symlink-free paths: any link met here was swapped in.
  EXPECT_REFUSED(OpenBeneath(root->get(), "inner_link", O_RDONLY, "x"), kPathOutsideWorkspace);
  EXPECT_REFUSED(OpenBeneath(root->get(), "missing", O_RDONLY, "x"), codes::kNotFound);
}

TEST_F(WorkspacePaths, ADirectorySwappedForASymlinkAfterLocateIsNotFollowed) {
  auto where = Locate(roots_, "sub/c.txt", Access::kRead);
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  // The race: between the check and the open, sub becomes a link outside.
  fs::rename(ws() / "sub", base_ / "sub_moved");
  fs::copy_file(outside() / "secret.txt", outside() / "c.txt");
  fs::create_directory_symlink(outside(), ws() / "sub");
  auto root = OpenRoot(where->root);
  ASSERT_TRUE(root.ok());
  auto opened = OpenBeneath(root->get(), where->below, O_RDONLY, "sub/c.txt");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), kPathOutsideWorkspace);
  EXPECT_THAT(opened.status().message(), HasSubstr("changed while it was being opened"));
}

}  // namespace
}  // namespace dsh::workspace
