#include "plugins/workspace/search_tools.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/testing/temp_dir.h"

namespace dsh::workspace {
namespace {

namespace fs = std::filesystem;

void WriteText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A small project: a .gitignore, an ignored file and directory, a dotfile,
// a .git directory, a profile directory.
class Project {
 public:
  Project() : root_(fs::canonical(dir_.path())) {
    WriteText(root_ / ".gitignore", "*.log\nbuild/\n");
    WriteText(root_ / "a.txt", "one\ntwo needle\n");
    WriteText(root_ / "debug.log", "needle in a log\n");
    WriteText(root_ / "build" / "out.o", "needle in a build\n");
    WriteText(root_ / "src" / "main.cc", "int main() { return 0; }  // Needle\n");
    WriteText(root_ / "src" / "util.h", "#pragma once\n");
    WriteText(root_ / "docs" / "guide.md", "-dash option\nneedle\n");
    WriteText(root_ / ".github" / "ci.yml", "on: push\n");
    WriteText(root_ / ".git" / "config", "needle in git\n");
    WriteText(root_ / ".dsh" / "token", "needle secret\n");
  }
  const fs::path& root() const { return root_; }

  ListRequest List() const {
    ListRequest r;
    r.dir = root_;
    r.display_root = root_;
    return r;
  }
  GrepRequest Grep(const std::string& pattern) const {
    GrepRequest r;
    r.pattern = pattern;
    r.path = root_;
    r.display_root = root_;
    return r;
  }

 private:
  testing::TempDir dir_;
  fs::path root_;
};

Json MustList(const ListRequest& request) {
  Result<Json> r = ListFiles(request);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Json();
}

Json MustGrep(const GrepRequest& request) {
  Result<Json> r = Grep(request);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Json();
}

Json Match(const std::string& path, int line, const std::string& text) {
  return {{"path", path}, {"line", line}, {"text", text}};
}

TEST(Search, ListRespectsGitignoreAndSortsByPath) {
  Project p;
  Json answer = MustList(p.List());
  EXPECT_EQ(answer["files"], Json({".dsh/token", ".github/ci.yml", ".gitignore", "a.txt", "docs/guide.md",
                                   "src/main.cc", "src/util.h"}));
  EXPECT_EQ(answer["more"], 0);
}

TEST(Search, ListLeavesOutHiddenPaths) {
  Project p;
  ListRequest request = p.List();
  request.hidden = {p.root() / ".dsh"};
  Json answer = MustList(request);
  for (const Json& file : answer["files"]) EXPECT_FALSE(file.get<std::string>().starts_with(".dsh")) << file;
  EXPECT_EQ(answer["files"].size(), 6u);
}

TEST(Search, ListAppliesTheGlob) {
  Project p;
  ListRequest request = p.List();
  request.pattern = "*.cc";
  EXPECT_EQ(MustList(request)["files"], Json({"src/main.cc"}));
  request.pattern = "src/**";
  EXPECT_EQ(MustList(request)["files"], Json({"src/main.cc", "src/util.h"}));
}

TEST(Search, ListIsCappedAndSaysHowManyMore) {
  Project p;
  for (int i = 0; i < 30; ++i) WriteText(p.root() / "many" / ("f" + std::to_string(100 + i)), "");
  ListRequest request = p.List();
  request.dir = p.root() / "many";
  request.max_entries = 10;
  Json answer = MustList(request);
  ASSERT_EQ(answer["files"].size(), 10u);
  EXPECT_EQ(answer["files"][0], "many/f100");  // relative to the display root, not to dir
  EXPECT_EQ(answer["files"][9], "many/f109");
  EXPECT_EQ(answer["more"], 20);
}

TEST(Search, ListCountsTheFilesCutFromALargeOutput) {
  Project p;
  // More than the megabyte of rg's output that is kept.
  std::string long_name(200, 'x');
  for (int i = 0; i < 6000; ++i) WriteText(p.root() / "big" / (std::to_string(10000 + i) + long_name), "");
  ListRequest request = p.List();
  request.dir = p.root() / "big";
  request.max_entries = 10;
  Json answer = MustList(request);
  ASSERT_EQ(answer["files"].size(), 10u);
  EXPECT_EQ(answer["files"][0], "big/10000" + long_name);
  EXPECT_EQ(answer["more"], 5990);
}

TEST(Search, ListOutsideTheDisplayRootIsAbsolute) {
  Project p;
  testing::TempDir other;
  WriteText(other.path() / "x.txt", "");
  ListRequest request = p.List();
  request.dir = fs::canonical(other.path());
  EXPECT_EQ(MustList(request)["files"], Json({(fs::canonical(other.path()) / "x.txt").string()}));
}

TEST(Search, ListHandlesADirectoryNamedLikeAnOption) {
  Project p;
  WriteText(p.root() / "-n" / "file", "");
  ListRequest request = p.List();
  request.dir = p.root() / "-n";
  EXPECT_EQ(MustList(request)["files"], Json({"-n/file"}));
}

TEST(Search, ListRejectsAnInvalidGlob) {
  Project p;
  ListRequest request = p.List();
  request.pattern = "[";
  Result<Json> r = ListFiles(request);
  EXPECT_EQ(r.status().code(), codes::kInvalidArguments);
  EXPECT_NE(r.status().message().find("glob"), std::string::npos) << r.status().message();
  request.pattern = "";
  EXPECT_EQ(ListFiles(request).status().code(), codes::kInvalidArguments);
  request.pattern.reset();
  request.max_entries = 0;
  EXPECT_EQ(ListFiles(request).status().code(), codes::kInvalidArguments);
}

TEST(Search, GrepFindsFileAndLine) {
  Project p;
  GrepRequest request = p.Grep("needle");
  request.hidden = {p.root() / ".dsh"};
  Json answer = MustGrep(request);
  EXPECT_EQ(answer["matches"],
            Json::array({Match("a.txt", 2, "two needle"), Match("docs/guide.md", 2, "needle")}));
  EXPECT_EQ(answer["truncated"], false);
}

TEST(Search, GrepIgnoresCaseOnRequest) {
  Project p;
  GrepRequest request = p.Grep("NEEDLE");
  request.hidden = {p.root() / ".dsh"};
  EXPECT_EQ(MustGrep(request)["matches"], Json::array());  // no match is not an error
  request.ignore_case = true;
  EXPECT_EQ(MustGrep(request)["matches"].size(), 3u);  // a.txt, docs/guide.md, src/main.cc
}

TEST(Search, GrepAppliesTheGlob) {
  Project p;
  GrepRequest request = p.Grep("needle");
  request.glob = "*.md";
  EXPECT_EQ(MustGrep(request)["matches"], Json::array({Match("docs/guide.md", 2, "needle")}));
}

TEST(Search, GrepStopsAtMaxResults) {
  Project p;
  std::string many;
  for (int i = 0; i < 10; ++i) many += "needle " + std::to_string(i) + "\n";
  WriteText(p.root() / "many.txt", many);
  GrepRequest request = p.Grep("needle");
  request.path = p.root() / "many.txt";
  request.max_results = 3;
  Json answer = MustGrep(request);
  EXPECT_EQ(answer["matches"],
            Json::array({Match("many.txt", 1, "needle 0"), Match("many.txt", 2, "needle 1"),
                         Match("many.txt", 3, "needle 2")}));
  EXPECT_EQ(answer["truncated"], true);
}

TEST(Search, GrepStopsAtMaxResultsAcrossFiles) {
  Project p;
  GrepRequest request = p.Grep("needle");
  request.hidden = {p.root() / ".dsh"};
  request.max_results = 1;
  Json answer = MustGrep(request);
  EXPECT_EQ(answer["matches"], Json::array({Match("a.txt", 2, "two needle")}));
  EXPECT_EQ(answer["truncated"], true);
}

TEST(Search, GrepReportsAnInvalidRegexWithRipgrepsWords) {
  Project p;
  Result<Json> r = Grep(p.Grep("(unclosed"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), codes::kInvalidArguments);
  EXPECT_NE(r.status().message().find("unclosed group"), std::string::npos) << r.status().message();
  GrepRequest bad_glob = p.Grep("needle");
  bad_glob.glob = "[";
  EXPECT_EQ(Grep(bad_glob).status().code(), codes::kInvalidArguments);
  EXPECT_EQ(Grep(p.Grep("")).status().code(), codes::kInvalidArguments);
}

TEST(Search, GrepTakesAPatternStartingWithADash) {
  Project p;
  Json answer = MustGrep(p.Grep("-dash"));
  EXPECT_EQ(answer["matches"], Json::array({Match("docs/guide.md", 1, "-dash option")}));
}

TEST(Search, GrepCutsLongLines) {
  Project p;
  WriteText(p.root() / "long.txt", std::string(5000, 'a') + "needle" + std::string(5000, 'b') + "\n");
  GrepRequest request = p.Grep("needle");
  request.path = p.root() / "long.txt";
  Json answer = MustGrep(request);
  ASSERT_EQ(answer["matches"].size(), 1u);
  std::string text = answer["matches"][0]["text"];
  EXPECT_EQ(text, std::string(400, 'a') + "…");
}

TEST(Search, GrepDoesNotFollowSymlinks) {
  Project p;
  testing::TempDir outside;
  WriteText(outside.path() / "secret.txt", "needle outside\n");
  fs::create_symlink(outside.path(), p.root() / "link-dir");
  fs::create_symlink(outside.path() / "secret.txt", p.root() / "link-file");
  Json answer = MustGrep(p.Grep("outside"));
  EXPECT_EQ(answer["matches"], Json::array());
}

}  // namespace
}  // namespace dsh::workspace
