// `dsh backup`: a copy of a profile whose host keeps writing, and the
// refusals (existing FILE, PostgreSQL profile, a directory that is not there).
#include "app/backup_command.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "agent/testing/fake_chat_server.h"
#include "app/testing/dsh_process.h"
#include "app/testing/run_cli.h"
#include "base/json.h"
#include "base/testing/temp_dir.h"
#include "server/http_client.h"

namespace dsh::app {
namespace {

namespace fs = std::filesystem;
using dsh::testing::CliRun;

// One text column of the first row of `sql` on the database at `path`.
std::string QueryOne(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      out = t ? t : "";
    } else {
      out = std::string("error: ") + sqlite3_errmsg(db);
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close_v2(db);
  return out;
}

// A profile database with one table, in WAL mode like the host's.
void MakeDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "PRAGMA journal_mode=WAL; CREATE TABLE t (x TEXT);"
                         "INSERT INTO t VALUES ('kept')",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
}

class Backup : public ::testing::Test {
 protected:
  std::string Home() const { return dir_.File("home"); }
  CliRun Run(std::vector<const char*> args) { return dsh::testing::RunCliWith(std::move(args)); }

  dsh::testing::TempDir dir_;
};

TEST_F(Backup, CopiesAProfileWithoutAHostAndRefusesToOverwrite) {
  fs::create_directories(Home());
  MakeDatabase(Home() + "/dsh.db");
  const std::string file = dir_.File("copy.db");
  CliRun r = Run({"backup", file.c_str(), "--home", Home().c_str()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ok: " + file + " (integrity_check ok): ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" pages, "), std::string::npos) << r.out;
  EXPECT_EQ(QueryOne(file, "SELECT x FROM t"), "kept");
  // One self-contained file: rollback journal, nothing beside it.
  EXPECT_EQ(QueryOne(file, "PRAGMA journal_mode"), "delete");
  EXPECT_FALSE(fs::exists(file + ".tmp"));
  EXPECT_FALSE(fs::exists(file + "-wal"));

  std::ofstream(file, std::ios::trunc) << "mine";
  CliRun again = Run({"backup", file.c_str(), "--home", Home().c_str()});
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.err, "error: already_exists: " + file + " exists; --force replaces it\n");
  std::ifstream in(file);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "mine");

  CliRun forced = Run({"backup", file.c_str(), "--home", Home().c_str(), "--force"});
  EXPECT_EQ(forced.code, 0) << forced.err;
  EXPECT_EQ(QueryOne(file, "SELECT x FROM t"), "kept");

  std::string db = Home() + "/dsh.db";
  CliRun itself = Run({"backup", db.c_str(), "--home", Home().c_str(), "--force"});
  EXPECT_EQ(itself.code, 2);
  EXPECT_NE(itself.err.find("is the profile's database itself"), std::string::npos) << itself.err;
}

TEST_F(Backup, ShowsProgressOnStderrWhenItTakesLong) {
  fs::create_directories(Home());
  MakeDatabase(Home() + "/dsh.db");
  BackupFlags flags;
  flags.file = dir_.File("copy.db");
  flags.home = Home();
  flags.pages_per_step = 1;
  flags.progress_after = std::chrono::milliseconds(0);  // as if a second had passed
  std::ostringstream out, err;
  FakeClock clock;
  CommandContext ctx{out, err, clock};
  ASSERT_EQ(RunBackup(flags, ctx), 0) << err.str();
  EXPECT_NE(err.str().find("\rbackup: 100% ("), std::string::npos) << err.str();
  EXPECT_EQ(err.str().back(), '\n');
  EXPECT_NE(out.str().find(", 0.00 s"), std::string::npos) << out.str();
}

TEST_F(Backup, LeavesNoTemporaryFileWhenItFails) {
  fs::create_directories(Home());
  MakeDatabase(Home() + "/dsh.db");
  const std::string file = dir_.File("missing/copy.db");
  CliRun r = Run({"backup", file.c_str(), "--home", Home().c_str()});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "error: not_found: directory " + dir_.File("missing") + " does not exist\n");
  EXPECT_FALSE(fs::exists(dir_.File("missing")));

  // A failure in the middle of the copy: the source is not a database.
  std::ofstream(Home() + "/dsh.db", std::ios::trunc) << std::string(8192, 'x');
  const std::string file2 = dir_.File("copy.db");
  CliRun bad = Run({"backup", file2.c_str(), "--home", Home().c_str()});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err.rfind("error: storage_error: ", 0), 0u) << bad.err;
  for (const char* suffix : {"", ".tmp", ".tmp-journal", ".tmp-wal", ".tmp-shm"}) {
    EXPECT_FALSE(fs::exists(file2 + suffix)) << suffix;
  }

  CliRun none = Run({"backup", file2.c_str(), "--home", dir_.File("nohome").c_str()});
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(none.err, "error: not_found: no profile directory at " + dir_.File("nohome") + "\n");
  EXPECT_FALSE(fs::exists(dir_.File("nohome")));
}

TEST_F(Backup, APostgresProfileIsPointedToPgDump) {
  fs::create_directories(Home());
  std::ofstream(Home() + "/dsh.yml")
      << "storage:\n  backend: postgres\n  url: postgresql://dsh@db1:5432/dsh\n";
  const std::string file = dir_.File("copy.db");
  CliRun r = Run({"backup", file.c_str(), "--home", Home().c_str()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(
      r.err.rfind("error: invalid_arguments: the profile's database is PostgreSQL (storage.backend)", 0), 0u)
      << r.err;
  EXPECT_NE(r.err.find("pg_dump"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("docs/DEPLOY.md"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(file + ".tmp"));
}

// A real `dsh web` on the profile, written to through the API before and
// during the copy.
TEST_F(Backup, CopiesTheDatabaseOfARunningHostWhileItKeepsWriting) {
  agent::testing::FakeChatServer chat;
  dsh::testing::DshProcess web(DSH_BINARY, {"web", "--home", Home(), "--port", "0"}, dir_.File("web.log"),
                               {{"DSH_TOKEN", "t0ken"},
                                {"DSH_MODEL", "openai/test-model"},
                                {"OPENAI_BASE_URL", chat.base_url()},
                                {"OPENAI_API_KEY", "sk-test"}});
  const std::string url = web.WaitListening();
  ASSERT_FALSE(url.empty()) << web.Stderr();
  auto post = [&](const std::string& path, const Json& body) -> Json {
    auto r =
        server::HttpRequestSync("POST", url + path, body.dump(),
                                {{"Authorization", "Bearer t0ken"}, {"Content-Type", "application/json"}});
    if (!r.ok() || (r->status != 200 && r->status != 201)) return Json();
    return Json::parse(r->body, nullptr, false);
  };
  // A session and a message; true once both were acknowledged (committed).
  auto write_one = [&](std::vector<std::string>* sessions, std::vector<std::string>* messages) {
    Json created = post("/api/sessions", Json::object());
    if (!created.is_object()) return false;
    std::string id = created["session"]["id"];
    Json sent = post("/api/sessions/" + id + "/messages", {{"message", "hello"}});
    if (!sent.is_object()) return false;
    if (sessions) sessions->push_back(id);
    if (messages) messages->push_back(sent["message_id"]);
    return true;
  };

  std::vector<std::string> sessions, messages;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(write_one(&sessions, &messages));

  std::atomic<bool> stop{false};
  std::atomic<int> written{0}, failed{0};
  std::thread writer([&] {
    while (!stop.load()) {
      if (write_one(nullptr, nullptr)) {
        ++written;
      } else {
        ++failed;
      }
    }
  });
  while (written.load() < 3) std::this_thread::yield();  // the host is busy writing

  // One page per step: the host commits between the steps, which would
  // restart a copy that did not hold its snapshot.
  BackupFlags flags;
  flags.file = dir_.File("copy.db");
  flags.home = Home();
  flags.pages_per_step = 1;
  std::ostringstream out, err;
  CommandContext ctx{out, err, RealClock()};
  const int code = RunBackup(flags, ctx);
  const int during = written.load();
  while (written.load() < during + 3) std::this_thread::yield();  // and it still writes afterwards
  stop = true;
  writer.join();
  ASSERT_EQ(code, 0) << err.str();
  EXPECT_EQ(failed.load(), 0) << "the host failed writes during the backup";
  EXPECT_EQ(out.str().rfind("ok: " + flags.file + " (integrity_check ok): ", 0), 0u) << out.str();

  EXPECT_EQ(QueryOne(flags.file, "PRAGMA integrity_check"), "ok");
  std::string ids, msg_ids;
  for (const auto& id : sessions) ids += (ids.empty() ? "'" : ",'") + id + "'";
  for (const auto& id : messages) msg_ids += (msg_ids.empty() ? "'" : ",'") + id + "'";
  EXPECT_EQ(QueryOne(flags.file, "SELECT count(*) FROM sessions WHERE id IN (" + ids + ")"), "10");
  EXPECT_EQ(QueryOne(flags.file, "SELECT count(*) FROM inbox WHERE message_id IN (" + msg_ids + ")"), "10");
  const int copied = std::stoi(QueryOne(flags.file, "SELECT count(*) FROM sessions"));
  EXPECT_GE(copied, 10 + 3);

  // The copy is a profile the host opens, as a restore would use it.
  web.Signal(SIGTERM);
  EXPECT_EQ(web.Wait(), 0) << web.Stderr();
  fs::create_directories(dir_.File("restored"));
  fs::copy_file(flags.file, dir_.File("restored/dsh.db"));
  dsh::testing::DshProcess restored(DSH_BINARY, {"web", "--home", dir_.File("restored"), "--port", "0"},
                                    dir_.File("restored.log"), {{"DSH_TOKEN", "t0ken"}});
  const std::string url2 = restored.WaitListening();
  ASSERT_FALSE(url2.empty()) << restored.Stderr();
  auto got = server::HttpRequestSync("GET", url2 + "/api/sessions/" + sessions.front(), "",
                                     {{"Authorization", "Bearer t0ken"}});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status, 200) << got->body;
}

}  // namespace
}  // namespace dsh::app
