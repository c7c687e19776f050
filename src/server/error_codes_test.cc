// One table of error codes (docs/API.md "Errors"), checked against the
// sources and against the statuses the server gives: no code reaches a
// client without a documented status, and no input error is a 5xx.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "server/http_types.h"

namespace dsh::server {
namespace {

namespace fs = std::filesystem;

fs::path SourceDir() {
  const char* dir = std::getenv("DSH_SOURCE_DIR");  // set by CTest (cmake/dsh.cmake)
  return dir ? fs::path(dir) : fs::path(DSH_SOURCE_DIR_FALLBACK);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// docs/API.md's "Errors" table: code -> HTTP status.
std::map<std::string, int> DocumentedStatuses() {
  std::string doc = ReadFile(SourceDir() / "docs" / "API.md");
  auto begin = doc.find("## Errors");
  auto end = doc.find("## Routes", begin);
  std::map<std::string, int> out;
  if (begin == std::string::npos || end == std::string::npos) return out;
  std::istringstream section(doc.substr(begin, end - begin));
  static const std::regex kRow(R"(^\| (.*) \| (\d{3}) \|$)");
  static const std::regex kCode("`([a-z][a-z0-9_]*)`");
  for (std::string line; std::getline(section, line);) {
    std::smatch row;
    if (!std::regex_match(line, row, kRow)) continue;
    std::string codes = row[1];
    for (std::sregex_iterator it(codes.begin(), codes.end(), kCode), last; it != last; ++it) {
      out[(*it)[1]] = std::stoi(row[2]);
    }
  }
  return out;
}

// Every code the program's sources can produce: the literals of
// `Status("code", …)` / `Status name("code", …)`, and the constants declared
// in `namespace codes` blocks. Tests and test helpers are left out. Code ->
// the first file it was seen in.
std::map<std::string, std::string> CodesInSources() {
  static const std::regex kLiteral(R"re(Status\s*(?:[A-Za-z_]\w*\s*)?\(\s*"([a-z][a-z0-9_]*)")re");
  static const std::regex kConstant(R"re(=\s*"([a-z][a-z0-9_]*)")re");
  static const std::regex kCodesBlock(R"(namespace (?:dsh::)?codes \{([^}]*)\})");
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(SourceDir() / "src")) {
    const fs::path& p = entry.path();
    std::string name = p.filename().string();
    if (!entry.is_regular_file() || (p.extension() != ".cc" && p.extension() != ".h")) continue;
    if (name.ends_with("_test.cc") || p.parent_path().filename() == "testing") continue;
    std::string text = ReadFile(p);
    std::string rel = fs::relative(p, SourceDir()).string();
    for (std::sregex_iterator it(text.begin(), text.end(), kLiteral), last; it != last; ++it) out.emplace((*it)[1], rel);
    for (std::sregex_iterator b(text.begin(), text.end(), kCodesBlock), last; b != last; ++b) {
      std::string block = (*b)[1];
      for (std::sregex_iterator it(block.begin(), block.end(), kConstant); it != last; ++it) out.emplace((*it)[1], rel);
    }
  }
  return out;
}

TEST(ErrorCodes, EveryCodeTheSourcesCanProduceHasTheDocumentedStatus) {
  auto documented = DocumentedStatuses();
  auto produced = CodesInSources();
  ASSERT_GE(documented.size(), 30u) << "docs/API.md's error table was not found under " << SourceDir();
  ASSERT_GE(produced.size(), 30u) << "the sources were not found under " << SourceDir();
  for (const auto& [code, file] : produced) {
    auto doc = documented.find(code);
    if (doc == documented.end()) {
      ADD_FAILURE() << "`" << code << "` (" << file << ") is missing from docs/API.md's error table";
      continue;
    }
    EXPECT_EQ(HttpStatusFor(code), doc->second) << code << " (" << file << ")";
  }
}

TEST(ErrorCodes, EveryDocumentedCodeHasItsDocumentedStatus) {
  auto documented = DocumentedStatuses();
  ASSERT_FALSE(documented.empty());
  for (const auto& [code, status] : documented) EXPECT_EQ(HttpStatusFor(code), status) << code;
}

TEST(ErrorCodes, InputErrorsAreClientErrors) {
  for (const char* code : {"invalid_arguments", "invalid_cron", "cron_never_fires", "invalid_time_zone",
                           "invalid_local_time", "unknown_loop", "unknown_tool", "invalid_plugin_thing",
                           "unknown_plugin_thing"}) {
    int status = HttpStatusFor(code);
    EXPECT_TRUE(status >= 400 && status < 500) << code << " -> " << status;
  }
  EXPECT_EQ(HttpStatusFor("cron_never_fires"), 400);
  EXPECT_EQ(HttpStatusFor("some_new_failure"), 500);
}

}  // namespace
}  // namespace dsh::server
