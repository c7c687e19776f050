#include "host/config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/testing/temp_dir.h"

namespace dsh::host {
namespace {

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Config, DefaultsWithoutAnyFile) {
  dsh::testing::TempDir dir;
  auto c = LoadConfig({{dir.File("dsh.yml"), true}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.host, "127.0.0.1");
  EXPECT_EQ(c->server.port, 7433);
  EXPECT_TRUE(c->storage.synchronous_full);
}

TEST(Config, PatchesMergeDeeplyAndLaterWins) {
  dsh::testing::TempDir dir;
  Write(dir.File("dsh.yml"), "server:\n  host: 0.0.0.0\n  port: 9000\nlog:\n  level: debug\n");
  Write(dir.File("p1.yml"), "server:\n  port: 9100\n");
  Write(dir.File("p2.yml"), "storage:\n  synchronous: normal\nserver:\n  port: 9200\n");
  auto c = LoadConfig({{dir.File("dsh.yml"), true}, {dir.File("p1.yml")}, {dir.File("p2.yml")}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.host, "0.0.0.0");  // kept from dsh.yml
  EXPECT_EQ(c->server.port, 9200);
  EXPECT_EQ(c->log.level, "debug");
  EXPECT_FALSE(c->storage.synchronous_full);
}

TEST(Config, AnUnknownKeyNamesTheFileAndTheKey) {
  dsh::testing::TempDir dir;
  Write(dir.File("p.yml"), "server:\n  hots: x\n");
  auto c = LoadConfig({{dir.File("p.yml")}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), "invalid_config");
  EXPECT_NE(c.status().message().find(dir.File("p.yml") + ": unknown key `server.hots`"), std::string::npos)
      << c.status().message();
}

TEST(Config, ABadValueNamesTheFileAndTheKey) {
  struct Case {
    const char* yaml;
    const char* expected;
  } cases[] = {
      {"server:\n  port: 70000\n", "`server.port` must be an integer from 0 to 65535 (got \"70000\")"},
      {"server:\n  port: abc\n", "`server.port` must be an integer"},
      {"server:\n  port: 1.5\n", "`server.port` must be an integer"},
      {"storage:\n  synchronous: off\n", "`storage.synchronous` must be full or normal"},
      {"server: 5\n", "`server` must be a mapping"},
      {"log:\n  level: [a]\n", "`log.level` must be one of"},
      {"- a\n- b\n", "`(top level)` must be a mapping"},
      {"server: {host: \n", "not valid YAML"},
  };
  for (const auto& c : cases) {
    auto r = ParseConfigText("x.yml", c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), "invalid_config");
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().rfind("x.yml: ", 0), 0u) << r.status().message();
  }
}

TEST(Config, AMissingPatchFileIsAnError) {
  auto c = LoadConfig({{"/nonexistent/patch.yml"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "/nonexistent/patch.yml: no such file");
}

TEST(Config, EmptyFileAndEmptySectionsAreFine) {
  EXPECT_TRUE(ParseConfigText("x.yml", "").ok());
  EXPECT_TRUE(ParseConfigText("x.yml", "server:\n").ok());
}

}  // namespace
}  // namespace dsh::host
