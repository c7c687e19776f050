#include "plugins/workspace/file_tools.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/testing/temp_dir.h"

namespace dsh::workspace {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

mode_t ModeOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

std::string NumberedLines(int first, int last) {
  std::string out;
  for (int i = first; i <= last; ++i) out += "line " + std::to_string(i) + "\n";
  return out;
}

// tmp/ws is the cwd; tmp/outside is not in the workspace.
class FileTools : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::canonical(tmp_.path());
    fs::create_directory(ws());
    fs::create_directory(outside());
    WriteText(outside() / "secret.txt", "secret\n");
    roots_.cwd = ws();
  }

  fs::path ws() const { return base_ / "ws"; }
  fs::path outside() const { return base_ / "outside"; }

  // The names in `dir`, to see that no temporary file is left.
  static std::vector<std::string> Names(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  testing::TempDir tmp_;
  fs::path base_;
  Roots roots_;
};

void ExpectError(const Result<Json>& result, const std::string& code, const std::string& in_message) {
  ASSERT_FALSE(result.ok()) << "unexpectedly succeeded: " << result.value().dump();
  EXPECT_EQ(result.status().code(), code) << result.status().message();
  EXPECT_THAT(result.status().message(), HasSubstr(in_message));
}

// read

TEST_F(FileTools, ReadNumbersLinesLikeCatN) {
  WriteText(ws() / "f.txt", "alpha\nbeta\n\ngamma\n");
  auto read = ReadFile(roots_, "f.txt", std::nullopt, std::nullopt);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)["content"], "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma\n");
  EXPECT_EQ((*read)["path"], "f.txt");
  EXPECT_EQ((*read)["first_line"], 1);
  EXPECT_EQ((*read)["last_line"], 4);
  EXPECT_EQ((*read)["total_lines"], 4);
  EXPECT_FALSE(read->contains("next_offset"));
  EXPECT_FALSE(read->contains("cut_lines"));
}

TEST_F(FileTools, ReadCountsALastLineWithoutNewline) {
  WriteText(ws() / "f.txt", "one\ntwo");
  auto read = ReadFile(roots_, "f.txt", std::nullopt, std::nullopt);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)["content"], "     1\tone\n     2\ttwo\n");
  EXPECT_EQ((*read)["total_lines"], 2);
}

TEST_F(FileTools, ReadShowsTheWindowFromOffsetAndLimit) {
  WriteText(ws() / "f.txt", NumberedLines(1, 10));
  auto read = ReadFile(roots_, "f.txt", 3, 2);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)["content"], "     3\tline 3\n     4\tline 4\n");
  EXPECT_EQ((*read)["first_line"], 3);
  EXPECT_EQ((*read)["last_line"], 4);
  EXPECT_EQ((*read)["total_lines"], 10);
  EXPECT_EQ((*read)["next_offset"], 5);

  auto tail = ReadFile(roots_, "f.txt", 9, 100);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_EQ((*tail)["content"], "     9\tline 9\n    10\tline 10\n");
  EXPECT_EQ((*tail)["last_line"], 10);
  EXPECT_FALSE(tail->contains("next_offset"));
}

TEST_F(FileTools, ReadUsesTheDefaultLimitWhenNoneIsGiven) {
  WriteText(ws() / "f.txt", NumberedLines(1, 10));
  FileLimits limits;
  limits.default_read_lines = 4;
  auto read = ReadFile(roots_, "f.txt", std::nullopt, std::nullopt, limits);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)["last_line"], 4);
  EXPECT_EQ((*read)["next_offset"], 5);
  EXPECT_EQ((*read)["content"], "     1\tline 1\n     2\tline 2\n     3\tline 3\n     4\tline 4\n");
}

TEST_F(FileTools, ReadCutsLongLinesAtACharacterAndSaysSo) {
  // 12 two-byte characters: cut at 5 characters, not 5 bytes.
  std::string long_line;
  for (int i = 0; i < 12; ++i) long_line += "\xC3\xA9";  // é
  WriteText(ws() / "f.txt", "short\n" + long_line + "\n");
  FileLimits limits;
  limits.max_line_chars = 5;
  auto read = ReadFile(roots_, "f.txt", std::nullopt, std::nullopt, limits);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)["content"],
            "     1\tshort\n     2\t\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9 … [line cut: 12 characters]\n");
  EXPECT_EQ((*read)["cut_lines"], 1);
}

TEST_F(FileTools, ReadOfAnEmptyFileHasNoLines) {
  WriteText(ws() / "empty.txt", "");
  auto read = ReadFile(roots_, "empty.txt", std::nullopt, std::nullopt);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)["content"], "");
  EXPECT_EQ((*read)["total_lines"], 0);
  EXPECT_EQ((*read)["first_line"], 0);
  EXPECT_EQ((*read)["last_line"], 0);
  ExpectError(ReadFile(roots_, "empty.txt", 2, std::nullopt), codes::kInvalidArguments, "past the end");
}

TEST_F(FileTools, ReadRefusesAnOffsetPastTheEnd) {
  WriteText(ws() / "f.txt", NumberedLines(1, 3));
  ExpectError(ReadFile(roots_, "f.txt", 4, std::nullopt), codes::kInvalidArguments,
              "offset 4 is past the end of `f.txt` (3 lines)");
}

TEST_F(FileTools, ReadRefusesOffsetOrLimitBelowOne) {
  WriteText(ws() / "f.txt", NumberedLines(1, 3));
  ExpectError(ReadFile(roots_, "f.txt", 0, std::nullopt), codes::kInvalidArguments, "offset");
  ExpectError(ReadFile(roots_, "f.txt", -5, std::nullopt), codes::kInvalidArguments, "offset");
  ExpectError(ReadFile(roots_, "f.txt", std::nullopt, 0), codes::kInvalidArguments, "limit");
}

TEST_F(FileTools, ReadRefusesADirectory) {
  fs::create_directory(ws() / "dir");
  ExpectError(ReadFile(roots_, "dir", std::nullopt, std::nullopt), codes::kInvalidArguments,
              "`dir` is a directory; use list");
}

TEST_F(FileTools, ReadRefusesAFifoWithoutBlocking) {
  ASSERT_EQ(::mkfifo((ws() / "pipe").c_str(), 0600), 0);
  ExpectError(ReadFile(roots_, "pipe", std::nullopt, std::nullopt), codes::kInvalidArguments,
              "not a regular file");
}

TEST_F(FileTools, ReadRefusesABinaryFile) {
  WriteText(ws() / "nul.bin", std::string("text\0more", 9));
  WriteText(ws() / "latin1.txt", "caf\xE9\n");
  ExpectError(ReadFile(roots_, "nul.bin", std::nullopt, std::nullopt), codes::kInvalidArguments,
              "binary file");
  ExpectError(ReadFile(roots_, "latin1.txt", std::nullopt, std::nullopt), codes::kInvalidArguments,
              "binary file");
}

TEST_F(FileTools, ReadJudgesTextByTheFirst8KiBOnly) {
  // A multi-byte character across the 8 KiB mark is fine; a stray byte later
  // shows as U+FFFD.
  std::string text(8191, 'a');
  text += "\xC3\xA9\n";
  text += "late \xFF byte\n";
  WriteText(ws() / "f.txt", text);
  auto read = ReadFile(roots_, "f.txt", 2, std::nullopt);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)["content"], "     2\tlate \xEF\xBF\xBD byte\n");
}

TEST_F(FileTools, ReadRefusesA1GiBSparseFileFromItsSize) {
  int fd = ::open((ws() / "huge.bin").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, int64_t{1} << 30), 0);
  ::close(fd);
  // All NUL bytes: a reader that looked at the content first would call it
  // binary; refused from its size, it is "too large".
  ExpectError(ReadFile(roots_, "huge.bin", std::nullopt, std::nullopt), codes::kInvalidArguments,
              "is 1073741824 bytes");
  auto read = ReadFile(roots_, "huge.bin", std::nullopt, std::nullopt);
  EXPECT_THAT(read.status().message(), AllOf(HasSubstr("1048576"), Not(HasSubstr("binary"))));
}

TEST_F(FileTools, ReadTakesAFileOfExactlyTheCap) {
  FileLimits limits;
  limits.max_read_bytes = 10;
  WriteText(ws() / "ten.txt", "123456789\n");
  WriteText(ws() / "eleven.txt", "1234567890\n");
  EXPECT_TRUE(ReadFile(roots_, "ten.txt", std::nullopt, std::nullopt, limits).ok());
  ExpectError(ReadFile(roots_, "eleven.txt", std::nullopt, std::nullopt, limits), codes::kInvalidArguments,
              "is 11 bytes; use grep");
}

TEST_F(FileTools, ReadRefusesMissingAndOutsidePaths) {
  ExpectError(ReadFile(roots_, "missing.txt", std::nullopt, std::nullopt), codes::kNotFound, "missing.txt");
  fs::create_symlink(outside() / "secret.txt", ws() / "link");
  ExpectError(ReadFile(roots_, "link", std::nullopt, std::nullopt), kPathOutsideWorkspace, "link");
  ExpectError(ReadFile(roots_, "../outside/secret.txt", std::nullopt, std::nullopt), kPathOutsideWorkspace,
              "..");
  ExpectError(ReadFile(roots_, "/proc/self/root/etc/passwd", std::nullopt, std::nullopt),
              kPathOutsideWorkspace, "/proc");
}

TEST_F(FileTools, ReadRefusesAHardLinkToAnOutsideFile) {
  ASSERT_EQ(::link((outside() / "secret.txt").c_str(), (ws() / "hard.txt").c_str()), 0);
  ExpectError(ReadFile(roots_, "hard.txt", std::nullopt, std::nullopt), kPathOutsideWorkspace, "hard link");
}

TEST_F(FileTools, ReadShowsAPathInAnotherRootAsAbsolute) {
  fs::create_directory(base_ / "extra");
  WriteText(base_ / "extra" / "e.txt", "e\n");
  roots_.extra = {base_ / "extra"};
  auto read = ReadFile(roots_, (base_ / "extra" / "e.txt").string(), std::nullopt, std::nullopt);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)["path"], (base_ / "extra" / "e.txt").string());
}

// write

TEST_F(FileTools, WriteCreatesAFileWithItsParentDirectories) {
  auto written = WriteFile(roots_, "a/b/c.txt", "hello\n");
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ((*written)["path"], "a/b/c.txt");
  EXPECT_EQ((*written)["bytes_written"], 6);
  EXPECT_EQ((*written)["created"], true);
  EXPECT_EQ(ReadText(ws() / "a" / "b" / "c.txt"), "hello\n");
  EXPECT_EQ(Names(ws() / "a" / "b"), std::vector<std::string>{"c.txt"});
}

TEST_F(FileTools, WriteReplacesAFileKeepingItsMode) {
  WriteText(ws() / "run.sh", "old\n");
  ASSERT_EQ(::chmod((ws() / "run.sh").c_str(), 0751), 0);
  auto written = WriteFile(roots_, "run.sh", "#!/bin/sh\necho new\n");
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ((*written)["created"], false);
  EXPECT_EQ((*written)["bytes_written"], 19);
  EXPECT_EQ(ReadText(ws() / "run.sh"), "#!/bin/sh\necho new\n");
  EXPECT_EQ(ModeOf(ws() / "run.sh"), 0751u);
  EXPECT_EQ(Names(ws()), std::vector<std::string>{"run.sh"});
}

TEST_F(FileTools, WriteReplacesTheFileRatherThanWritingIntoIt) {
  // An open descriptor of the old file still sees the old content: the new
  // one was renamed over it, never written in place.
  WriteText(ws() / "f.txt", "old\n");
  std::ifstream before(ws() / "f.txt");
  ASSERT_TRUE(WriteFile(roots_, "f.txt", "new\n").ok());
  std::string old_line;
  std::getline(before, old_line);
  EXPECT_EQ(old_line, "old");
  EXPECT_EQ(ReadText(ws() / "f.txt"), "new\n");
}

TEST_F(FileTools, WriteRefusesContentOverTheCap) {
  FileLimits limits;
  limits.max_write_bytes = 4;
  ExpectError(WriteFile(roots_, "f.txt", "12345", limits), codes::kInvalidArguments, "content is 5 bytes");
  EXPECT_FALSE(fs::exists(ws() / "f.txt"));
  EXPECT_TRUE(WriteFile(roots_, "f.txt", "1234", limits).ok());
}

TEST_F(FileTools, WriteRefusesASymlinkLeadingOutside) {
  fs::create_symlink(outside() / "secret.txt", ws() / "link");
  ExpectError(WriteFile(roots_, "link", "pwned\n"), kPathOutsideWorkspace, "link");
  EXPECT_EQ(ReadText(outside() / "secret.txt"), "secret\n");
  EXPECT_TRUE(fs::is_symlink(ws() / "link"));
}

TEST_F(FileTools, WriteRefusesASymlinkedParentLeadingOutside) {
  fs::create_directory_symlink(outside(), ws() / "dirlink");
  ExpectError(WriteFile(roots_, "dirlink/new.txt", "x"), kPathOutsideWorkspace, "dirlink/new.txt");
  ExpectError(WriteFile(roots_, "dirlink/newdir/new.txt", "x"), kPathOutsideWorkspace, "dirlink");
  EXPECT_EQ(Names(outside()), std::vector<std::string>{"secret.txt"});
}

TEST_F(FileTools, WriteRefusesCreatingDirectoriesOutside) {
  ExpectError(WriteFile(roots_, "../outside/newdir/x.txt", "x"), kPathOutsideWorkspace, "..");
  ExpectError(WriteFile(roots_, (outside() / "newdir" / "x.txt").string(), "x"), kPathOutsideWorkspace,
              "outside");
  EXPECT_EQ(Names(outside()), std::vector<std::string>{"secret.txt"});
}

TEST_F(FileTools, WriteFollowsASymlinkLeadingInside) {
  WriteText(ws() / "target.txt", "old\n");
  fs::create_symlink("target.txt", ws() / "link");
  auto written = WriteFile(roots_, "link", "new\n");
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ((*written)["path"], "target.txt");
  EXPECT_EQ(ReadText(ws() / "target.txt"), "new\n");
  EXPECT_TRUE(fs::is_symlink(ws() / "link"));
}

TEST_F(FileTools, WriteRefusesADirectoryAndATrailingSlash) {
  fs::create_directory(ws() / "dir");
  ExpectError(WriteFile(roots_, "dir", "x"), codes::kInvalidArguments, "is a directory");
  ExpectError(WriteFile(roots_, ".", "x"), codes::kInvalidArguments, "is a directory");
  ExpectError(WriteFile(roots_, "new/", "x"), codes::kInvalidArguments, "ends with '/'");
  EXPECT_EQ(Names(ws()), std::vector<std::string>{"dir"});
}

TEST_F(FileTools, WriteRefusesAHardLinkedFileAndLeavesTheOtherNameAlone) {
  ASSERT_EQ(::link((outside() / "secret.txt").c_str(), (ws() / "hard.txt").c_str()), 0);
  ExpectError(WriteFile(roots_, "hard.txt", "x"), kPathOutsideWorkspace, "hard link");
  EXPECT_EQ(ReadText(outside() / "secret.txt"), "secret\n");
}

// edit

TEST_F(FileTools, EditReplacesTheOnlyOccurrence) {
  WriteText(ws() / "f.txt", "one\ntwo\nthree\n");
  auto edited = EditFile(roots_, "f.txt", "two", "TWO", false);
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  EXPECT_EQ(ReadText(ws() / "f.txt"), "one\nTWO\nthree\n");
  EXPECT_EQ((*edited)["path"], "f.txt");
  EXPECT_EQ((*edited)["replacements"], 1);
  EXPECT_EQ((*edited)["first_changed_line"], 2);
  EXPECT_EQ((*edited)["diff"], "--- f.txt\n+++ f.txt\n@@ -2,1 +2,1 @@\n-two\n+TWO\n");
  EXPECT_EQ(Names(ws()), std::vector<std::string>{"f.txt"});
}

TEST_F(FileTools, EditDiffShowsAddedAndRemovedLines) {
  WriteText(ws() / "f.txt", "a\nb\nc\nd\ne\n");
  auto removed = EditFile(roots_, "f.txt", "b\nc\n", "", false);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(ReadText(ws() / "f.txt"), "a\nd\ne\n");
  EXPECT_EQ((*removed)["diff"], "--- f.txt\n+++ f.txt\n@@ -2,2 +1,0 @@\n-b\n-c\n");

  auto added = EditFile(roots_, "f.txt", "d\n", "d\nd2\nd3\n", false);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(ReadText(ws() / "f.txt"), "a\nd\nd2\nd3\ne\n");
  EXPECT_EQ((*added)["diff"], "--- f.txt\n+++ f.txt\n@@ -2,0 +3,2 @@\n+d2\n+d3\n");
  EXPECT_EQ((*added)["first_changed_line"], 3);
  EXPECT_EQ((*removed)["first_changed_line"], 2);
}

TEST_F(FileTools, EditReplacesEveryOccurrenceWithReplaceAll) {
  WriteText(ws() / "f.txt", "x = 1;\ny = x + x;\nz = 2;\nw = x;\n");
  auto edited = EditFile(roots_, "f.txt", "x", "value", true);
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  EXPECT_EQ(ReadText(ws() / "f.txt"), "value = 1;\ny = value + value;\nz = 2;\nw = value;\n");
  EXPECT_EQ((*edited)["replacements"], 4);
  EXPECT_EQ((*edited)["first_changed_line"], 1);
  EXPECT_EQ((*edited)["diff"],
            "--- f.txt\n+++ f.txt\n"
            "@@ -1,1 +1,1 @@\n-x = 1;\n+value = 1;\n"
            "@@ -2,1 +2,1 @@\n-y = x + x;\n+y = value + value;\n"
            "@@ -4,1 +4,1 @@\n-w = x;\n+w = value;\n");
}

TEST_F(FileTools, EditRefusesAnAmbiguousStringWithoutReplaceAll) {
  WriteText(ws() / "f.txt", "x\nx\nx\n");
  ExpectError(EditFile(roots_, "f.txt", "x", "y", false), codes::kInvalidArguments,
              "found 3 times in `f.txt`; give more context to make it unique, or set replace_all");
  EXPECT_EQ(ReadText(ws() / "f.txt"), "x\nx\nx\n");
}

TEST_F(FileTools, EditRefusesAStringThatIsNotThere) {
  WriteText(ws() / "f.txt", "abc\n");
  ExpectError(EditFile(roots_, "f.txt", "xyz", "y", false), codes::kInvalidArguments,
              "old_string not found in `f.txt`");
  EXPECT_EQ(ReadText(ws() / "f.txt"), "abc\n");
}

TEST_F(FileTools, EditRefusesAnEmptyOrUnchangedString) {
  WriteText(ws() / "f.txt", "abc\n");
  ExpectError(EditFile(roots_, "f.txt", "", "y", false), codes::kInvalidArguments, "old_string is empty");
  ExpectError(EditFile(roots_, "f.txt", "abc", "abc", false), codes::kInvalidArguments, "the same");
  EXPECT_EQ(ReadText(ws() / "f.txt"), "abc\n");
}

TEST_F(FileTools, EditKeepsTheMode) {
  WriteText(ws() / "run.sh", "echo old\n");
  ASSERT_EQ(::chmod((ws() / "run.sh").c_str(), 0700), 0);
  ASSERT_TRUE(EditFile(roots_, "run.sh", "old", "new", false).ok());
  EXPECT_EQ(ReadText(ws() / "run.sh"), "echo new\n");
  EXPECT_EQ(ModeOf(ws() / "run.sh"), 0700u);
}

TEST_F(FileTools, EditRefusesWhatItCannotEdit) {
  WriteText(ws() / "nul.bin", std::string("a\0b", 3));
  fs::create_directory(ws() / "dir");
  fs::create_symlink(outside() / "secret.txt", ws() / "link");
  ExpectError(EditFile(roots_, "nul.bin", "a", "b", false), codes::kInvalidArguments, "binary file");
  ExpectError(EditFile(roots_, "dir", "a", "b", false), codes::kInvalidArguments, "is a directory");
  ExpectError(EditFile(roots_, "missing.txt", "a", "b", false), codes::kNotFound, "missing.txt");
  ExpectError(EditFile(roots_, "link", "secret", "pwned", false), kPathOutsideWorkspace, "link");
  EXPECT_EQ(ReadText(outside() / "secret.txt"), "secret\n");
}

TEST_F(FileTools, EditRefusesAResultOverTheCap) {
  FileLimits limits;
  limits.max_write_bytes = 8;
  WriteText(ws() / "f.txt", "aaaa\n");
  ExpectError(EditFile(roots_, "f.txt", "a", "bb", true, limits), codes::kInvalidArguments,
              "would be 9 bytes");
  EXPECT_TRUE(EditFile(roots_, "f.txt", "a", "bb", true, FileLimits{}).ok());
  ExpectError(EditFile(roots_, "f.txt", "b", "ccc", true, limits), codes::kInvalidArguments,
              "edit takes files up to");
}

}  // namespace
}  // namespace dsh::workspace
