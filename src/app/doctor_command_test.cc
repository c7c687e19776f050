#include "app/doctor_command.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "app/testing/run_cli.h"
#include "base/testing/temp_dir.h"
#include "host/host.h"
#include "plugins/loop/loop_plugin.h"
#include "store/sqlite_connection.h"

namespace dsh::app {
namespace {

using dsh::testing::CliRun;

// Variables that would change what doctor checks; unset for each test and
// restored after it.
constexpr const char* kEnvironment[] = {"DSH_DATABASE_URL", "DSH_MODEL", "OPENAI_BASE_URL", "DSH_HOME"};

class DoctorCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kEnvironment) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }

  std::string Home() const { return dir_.File("home"); }
  CliRun Doctor() { return dsh::testing::RunCliWith({"doctor", "--home", home_.c_str()}); }
  void WriteFile(const std::string& name, const std::string& text) {
    std::filesystem::create_directories(Home());
    std::ofstream(Home() + "/" + name) << text;
  }
  // The report's line for `check` that contains `text`, or "".
  static std::string LineWith(const std::string& report, const std::string& check, const std::string& text) {
    std::istringstream in(report);
    for (std::string line; std::getline(in, line);) {
      if (line.size() > 6 && line.compare(6, check.size() + 1, check + " ") == 0 &&
          line.find(text) != std::string::npos) {
        return line;
      }
    }
    return "";
  }
  // Every schema migration `dsh web` applies.
  static std::vector<store::Migration> Migrations() {
    std::vector<store::Migration> all = host::Host::AllMigrations();
    for (auto& m : plugins::loop::PluginMigrations()) all.push_back(std::move(m));
    return all;
  }
  // Creates the profile's database through the store, as `dsh web` does.
  void CreateDatabase() {
    host::HostOptions options;
    options.home = Home();
    options.env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    options.plugin_migrations = plugins::loop::PluginMigrations();
    auto host = host::Host::Open(options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    (*host)->Close();
  }

  dsh::testing::TempDir dir_;
  std::string home_ = Home();
  std::map<std::string, std::string> saved_;
};

TEST_F(DoctorCommandTest, AFreshProfilePassesWithoutCreatingADatabase) {
  CliRun r = Doctor();
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(LineWith(r.out, "database", "no database yet; `dsh web` creates it").rfind("ok", 0), 0u) << r.out;
  EXPECT_EQ(LineWith(r.out, "token", "created on first `dsh web`").rfind("ok", 0), 0u) << r.out;
  EXPECT_EQ(LineWith(r.out, "model", "echo/echo").rfind("ok", 0), 0u) << r.out;
  EXPECT_EQ(LineWith(r.out, "tz", "tz database present").rfind("ok", 0), 0u) << r.out;
  EXPECT_EQ(LineWith(r.out, "host", "no host is running").rfind("info", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(Home() + "/dsh.db"));
}

TEST_F(DoctorCommandTest, AnInvalidConfigFailsNamingTheKey) {
  WriteFile("dsh.yml", "agents:\n  max_steps: 0\n");
  CliRun r = Doctor();
  EXPECT_EQ(r.code, 1) << r.out;
  std::string line = LineWith(r.out, "config", "invalid_config");
  EXPECT_EQ(line.rfind("FAIL", 0), 0u) << r.out;
  EXPECT_NE(line.find("max_steps"), std::string::npos) << line;
}

TEST_F(DoctorCommandTest, ATokenFileOthersCanReadWarns) {
  WriteFile("auth-token", "0123456789abcdef\n");
  std::string path = Home() + "/auth-token";
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  CliRun r = Doctor();
  EXPECT_EQ(r.code, 0) << r.out;  // a warning is not a failure
  std::string line = LineWith(r.out, "token", "0644");
  EXPECT_EQ(line.rfind("warn", 0), 0u) << r.out;
  EXPECT_NE(line.find("chmod 600 " + path), std::string::npos) << line;

  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  r = Doctor();
  EXPECT_EQ(LineWith(r.out, "token", "0600").rfind("ok", 0), 0u) << r.out;
}

TEST_F(DoctorCommandTest, AHealthyDatabasePassesItsIntegrityCheck) {
  CreateDatabase();
  CliRun r = Doctor();
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(LineWith(r.out, "database", "integrity check passed").rfind("ok", 0), 0u) << r.out;
  EXPECT_EQ(LineWith(r.out, "schema", "at this dsh's version").rfind("ok", 0), 0u) << r.out;
}

TEST_F(DoctorCommandTest, ACorruptedDatabaseFailsItsIntegrityCheck) {
  CreateDatabase();
  std::string path = Home() + "/dsh.db";
  {
    // The whole database into the main file: under load a host's close was
    // seen to leave its WAL behind (the file was one page), and a page read
    // from the WAL would hide the garbage written below.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto size = std::filesystem::file_size(path);
  ASSERT_GE(size, 3 * 4096u);
  {
    // A page in the middle (not the first, which holds the header) turns to garbage.
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2 / 4096 * 4096));
    std::string garbage(4096, '\xA5');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  CliRun r = Doctor();
  EXPECT_EQ(r.code, 1) << r.out;
  std::string line = LineWith(r.out, "database", "integrity check");
  EXPECT_EQ(line.rfind("FAIL", 0), 0u) << r.out;
  EXPECT_NE(line.find("restore"), std::string::npos) << line;
}

TEST_F(DoctorCommandTest, ASchemaNewerThanThisBinaryFails) {
  CreateDatabase();
  std::string db = Home() + "/dsh.db";
  // Through the store API, as a newer dsh would leave it.
  {
    store::SqliteOptions sqlite{.path = db};
    auto database =
        store::Database::Open(std::make_unique<store::SqliteConnectionFactory>(sqlite), Migrations());
    ASSERT_TRUE(database.ok()) << database.status().ToString();
    ASSERT_TRUE((*database)
                    ->WriteSync([](store::Tx& tx) {
                      return tx.Exec("UPDATE dsh_schema SET version = 99 WHERE module = 'host'", {}).status();
                    })
                    .ok());
  }
  CliRun r = Doctor();
  EXPECT_EQ(r.code, 1) << r.out;
  std::string line = LineWith(r.out, "schema", "schema_too_new");
  EXPECT_EQ(line.rfind("FAIL", 0), 0u) << r.out;
  EXPECT_NE(line.find("upgrade dsh"), std::string::npos) << line;
}

TEST_F(DoctorCommandTest, AnUnreachableModelServerFailsNamingItsUrl) {
  uint16_t port;
  {
    // A port nothing listens on: bound, then closed again.
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor acceptor(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = acceptor.local_endpoint().port();
  }
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  WriteFile("dsh.yml", "model: local/m\nproviders:\n  local:\n    type: openai\n    base_url: " + url + "\n");
  CliRun r = Doctor();
  EXPECT_EQ(r.code, 1) << r.out;
  std::string line = LineWith(r.out, "model", url + " is unreachable");
  EXPECT_EQ(line.rfind("FAIL", 0), 0u) << r.out;
}

// Providers saved from the Settings page (providers.yml, provider-keys)
// are checked too: an unreachable one that new sessions do not use warns,
// the saved default route failing fails, and a broken file fails naming it.
TEST_F(DoctorCommandTest, ProvidersSavedFromSettingsAreChecked) {
  uint16_t port;
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor acceptor(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = acceptor.local_endpoint().port();
  }
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  WriteFile("providers.yml", "providers:\n  saved:\n    base_url: " + url + "\n    models:\n      m1: null\n");
  WriteFile("provider-keys", R"({"saved": "sk-saved"})");
  CliRun spare = Doctor();
  EXPECT_EQ(spare.code, 0) << spare.out;  // new sessions still use echo
  std::string line = LineWith(spare.out, "provider saved", url + " is unreachable");
  EXPECT_EQ(line.rfind("warn", 0), 0u) << spare.out;
  EXPECT_EQ(spare.out.find("sk-saved"), std::string::npos) << spare.out;  // never a key

  WriteFile("providers.yml",
            "providers:\n  saved:\n    base_url: " + url + "\n    models:\n      m1: null\nmodel: saved/m1\n");
  CliRun used = Doctor();
  EXPECT_EQ(used.code, 1) << used.out;
  EXPECT_EQ(LineWith(used.out, "model", url + " is unreachable").rfind("FAIL", 0), 0u) << used.out;

  WriteFile("providers.yml", "providers: [not, a, mapping\n");
  CliRun broken = Doctor();
  EXPECT_EQ(broken.code, 1) << broken.out;
  EXPECT_EQ(LineWith(broken.out, "model", "providers.yml").rfind("FAIL", 0), 0u) << broken.out;
}

TEST_F(DoctorCommandTest, AnMcpCommandThatDoesNotExistFails) {
  WriteFile("dsh.yml",
            "mcp:\n  servers:\n    ghost:\n      command: [dsh-no-such-command-7f3a, --stdio]\n"
            "    shell:\n      command: [sh, -c, 'true']\n"
            "    web:\n      url: http://127.0.0.1:1/mcp\n");
  CliRun r = Doctor();
  EXPECT_EQ(r.code, 1) << r.out;
  std::string ghost = LineWith(r.out, "mcp ghost", "dsh-no-such-command-7f3a");
  EXPECT_EQ(ghost.rfind("FAIL", 0), 0u) << r.out;
  EXPECT_NE(ghost.find("not found on PATH"), std::string::npos) << ghost;
  EXPECT_EQ(LineWith(r.out, "mcp shell", "`sh`").rfind("ok", 0), 0u) << r.out;
  EXPECT_EQ(LineWith(r.out, "mcp web", "http://127.0.0.1:1/mcp (not contacted)").rfind("info", 0), 0u)
      << r.out;
}

TEST(DoctorReport, AlignsLevelsAndChecks) {
  using Level = DoctorLine::Level;
  std::string report = FormatDoctorReport(
      {{Level::kOk, "tz", "fine", ""}, {Level::kFail, "database", "broken", "restore it"}});
  EXPECT_EQ(report,
            "ok    tz        fine\n"
            "FAIL  database  broken — restore it\n");
}

}  // namespace
}  // namespace dsh::app
