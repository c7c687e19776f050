// End-to-end tests of `dsh web` and `dsh tool` against the real binary.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/testing/dsh_process.h"
#include "base/json.h"
#include "base/testing/temp_dir.h"
#include "server/http_client.h"
#include "store/database.h"
#include "store/sqlite_connection.h"

namespace dsh::app {
namespace {

using dsh::testing::DshProcess;
using dsh::testing::RunDsh;

class WebE2E : public ::testing::Test {
 protected:
  std::string Home() const { return dir_.File("home"); }
  std::string Err(const std::string& name = "stderr.log") const { return dir_.File(name); }
  std::unique_ptr<DshProcess> StartWeb(std::vector<std::string> extra = {},
                                       std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {"web", "--home", Home(), "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<DshProcess>(DSH_BINARY, args, Err("web.log"), env);
  }

  dsh::testing::TempDir dir_;
};

TEST_F(WebE2E, StartsAnswersHealthzAndExitsZeroOnSigterm) {
  auto web = StartWeb();
  std::string url = web->WaitListening();
  ASSERT_FALSE(url.empty()) << web->Stderr();
  EXPECT_EQ(url.rfind("http://127.0.0.1:", 0), 0u);
  auto health = server::HttpRequestSync("GET", url + "/healthz", "", {});
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(Json::parse(health->body)["status"], "ok");
  EXPECT_TRUE(std::filesystem::exists(Home() + "/run/" + std::to_string(web->pid()) + ".json"));

  web->Signal(SIGTERM);
  EXPECT_EQ(web->Wait(), 0) << web->Stderr();
  EXPECT_FALSE(std::filesystem::exists(Home() + "/run/" + std::to_string(web->pid()) + ".json"));
  EXPECT_NE(web->Stderr().find("stopped cleanly"), std::string::npos) << web->Stderr();
}

TEST_F(WebE2E, ExitsZeroOnSigint) {
  auto web = StartWeb();
  ASSERT_FALSE(web->WaitListening().empty()) << web->Stderr();
  web->Signal(SIGINT);
  EXPECT_EQ(web->Wait(), 0) << web->Stderr();
}

TEST_F(WebE2E, GeneratesAProfileTokenWithMode0600AndEnforcesIt) {
  auto web = StartWeb();
  std::string url = web->WaitListening();
  ASSERT_FALSE(url.empty());
  std::ifstream in(Home() + "/auth-token");
  std::string token;
  in >> token;
  ASSERT_EQ(token.size(), 32u);
  struct stat st {};
  ASSERT_EQ(stat((Home() + "/auth-token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto no_token = server::HttpRequestSync("POST", url + "/api/tools/x", "{}", {});
  EXPECT_EQ(no_token->status, 401);
  auto with_token = server::HttpRequestSync("POST", url + "/api/tools/x", "{}", {{"Authorization", "Bearer " + token}});
  EXPECT_EQ(with_token->status, 404);  // authorized; the tool does not exist
  EXPECT_EQ(Json::parse(with_token->body)["error"]["code"], "unknown_tool");
}

TEST_F(WebE2E, TokenFlagAndEnvironmentWin) {
  auto web = StartWeb({"--token", "flagtoken"}, {{"DSH_TOKEN", "envtoken"}});
  std::string url = web->WaitListening();
  ASSERT_FALSE(url.empty());
  EXPECT_EQ(server::HttpRequestSync("POST", url + "/api/tools/x", "{}", {{"Authorization", "Bearer flagtoken"}})->status,
            404);
  EXPECT_EQ(server::HttpRequestSync("POST", url + "/api/tools/x", "{}", {{"Authorization", "Bearer envtoken"}})->status,
            401);
  auto env_only = std::make_unique<DshProcess>(
      DSH_BINARY, std::vector<std::string>{"web", "--home", Home(), "--port", "0"}, Err("web2.log"),
      std::map<std::string, std::string>{{"DSH_TOKEN", "envtoken"}});
  std::string url2 = env_only->WaitListening();
  ASSERT_FALSE(url2.empty());
  EXPECT_EQ(server::HttpRequestSync("POST", url2 + "/api/tools/x", "{}", {{"Authorization", "Bearer envtoken"}})->status,
            404);
}

TEST_F(WebE2E, ABadConfigStopsTheHostNamingFileAndKey) {
  std::filesystem::create_directories(Home());
  std::ofstream(Home() + "/dsh.yml") << "server:\n  port: 7433\n";
  std::ofstream(dir_.File("patch.yml")) << "server:\n  hots: 0.0.0.0\n";
  auto r = RunDsh(DSH_BINARY, {"web", "--home", Home(), "--patch", dir_.File("patch.yml")}, Err());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: invalid_config: " + dir_.File("patch.yml") + ": unknown key `server.hots`"),
            std::string::npos)
      << r.err;
  std::ofstream(Home() + "/dsh.yml") << "server:\n  port: huge\n";
  r = RunDsh(DSH_BINARY, {"web", "--home", Home()}, Err());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(Home() + "/dsh.yml: `server.port` must be an integer"), std::string::npos) << r.err;
}

TEST_F(WebE2E, RefusesADatabaseFromANewerDsh) {
  std::filesystem::create_directories(Home());
  {
    auto db = store::Database::Open(
        std::make_unique<store::SqliteConnectionFactory>(store::SqliteOptions{.path = Home() + "/dsh.db"}), {});
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->WriteSync([](store::Tx& tx) {
      return tx.Exec("INSERT INTO dsh_schema (module, version) VALUES ('session', 99)").status();
    }).ok());
  }
  auto r = RunDsh(DSH_BINARY, {"web", "--home", Home(), "--port", "0"}, Err());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: schema_too_new: "), std::string::npos) << r.err;
}

TEST_F(WebE2E, ToolCommandReportsErrorsWithTheirCode) {
  auto none = RunDsh(DSH_BINARY, {"tool", "anything", "{}", "--home", Home()}, Err());
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("error: unavailable: no dsh host is running"), std::string::npos) << none.err;

  auto web = StartWeb();
  ASSERT_FALSE(web->WaitListening().empty());
  auto unknown = RunDsh(DSH_BINARY, {"tool", "nope", "{}", "--home", Home()}, Err());
  EXPECT_EQ(unknown.code, 1);
  EXPECT_EQ(unknown.err, "error: unknown_tool: no tool named 'nope'\n");
  auto bad_json = RunDsh(DSH_BINARY, {"tool", "nope", "{not json", "--home", Home()}, Err());
  EXPECT_EQ(bad_json.code, 2);
  EXPECT_EQ(bad_json.err.rfind("error: invalid_json: ", 0), 0u) << bad_json.err;
}

}  // namespace
}  // namespace dsh::app
