#pragma once

#include <libpq-fe.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "store/pg_connection.h"

namespace dsh::store::testing {

// scripts/pg_test_server of the checkout the test binary was built in
// (build directories live inside it).
inline std::string PgTestServerScript() {
  std::error_code ec;
  for (auto dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path(); !dir.empty();
       dir = dir.parent_path()) {
    auto candidate = dir / "scripts" / "pg_test_server";
    if (std::filesystem::exists(candidate, ec)) return candidate.string();
    if (dir == dir.root_path()) break;
  }
  return "scripts/pg_test_server";
}

// Runs `scripts/pg_test_server VERB DIR`; its standard output, trimmed.
inline Result<std::string> RunPgTestServer(const std::string& verb, const std::string& dir) {
  std::string cmd = "'" + PgTestServerScript() + "' " + verb + " '" + dir + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return Status(codes::kIo, "cannot run " + cmd);
  std::string out;
  std::array<char, 256> buf{};
  while (fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  int rc = pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (rc != 0) return Status(codes::kUnavailable, "failed: " + cmd);
  return out;
}

// The PostgreSQL server of the tests: $DSH_TEST_PG (the libpq conninfo of a
// server scripts/test started, without a dbname) or, when it is unset, a
// private cluster this process starts once with scripts/pg_test_server and
// stops at exit (about 2 s). Never skipped: without PostgreSQL installed the
// tests fail and say so.
class PgTestServer {
 public:
  // A new, empty database on the server; its conninfo. Thread-safe.
  static Result<std::string> NewDatabase() {
    static PgTestServer server;
    if (!server.base_.ok()) return server.base_.status();
    static std::atomic<int> counter{0};
    std::string name = "t" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
    PGconn* admin = PQconnectdb((*server.base_ + " dbname=postgres").c_str());
    if (PQstatus(admin) != CONNECTION_OK) {
      std::string msg = PQerrorMessage(admin);
      PQfinish(admin);
      return Status(codes::kUnavailable, "cannot reach the tests' PostgreSQL: " + msg);
    }
    PGresult* r = PQexec(admin, ("CREATE DATABASE " + name + " TEMPLATE template0 ENCODING 'UTF8'").c_str());
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    std::string msg = ok ? "" : PQresultErrorMessage(r);
    PQclear(r);
    PQfinish(admin);
    if (!ok) return Status(codes::kStorage, "cannot create a test database: " + msg);
    return *server.base_ + " dbname=" + name;
  }

  // Drops a database NewDatabase made (its conninfo), closing what is still
  // connected to it. Best effort: the server is thrown away at the end anyway.
  static void DropDatabase(const std::string& conninfo) {
    size_t at = conninfo.rfind(" dbname=");
    if (at == std::string::npos) return;
    std::string base = conninfo.substr(0, at), name = conninfo.substr(at + 8);
    PGconn* admin = PQconnectdb((base + " dbname=postgres").c_str());
    if (PQstatus(admin) == CONNECTION_OK) PQclear(PQexec(admin, ("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)").c_str()));
    PQfinish(admin);
  }

  static std::unique_ptr<ConnectionFactory> Factory(const std::string& conninfo) {
    return std::make_unique<PgConnectionFactory>(PgOptions{.url = conninfo});
  }

 private:
  PgTestServer() : base_(Start()) {}
  ~PgTestServer() {
    if (dir_.empty()) return;
    (void)RunPgTestServer("stop", dir_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  Result<std::string> Start() {
    if (const char* url = std::getenv("DSH_TEST_PG"); url != nullptr && *url != '\0') return std::string(url);
    std::string tmpl = (std::filesystem::temp_directory_path() / "dsh-pg-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return Status(codes::kIo, "cannot make a directory for PostgreSQL");
    dir_ = tmpl;
    auto conninfo = RunPgTestServer("start", dir_);
    if (!conninfo.ok() || conninfo->empty()) return Status(codes::kUnavailable, "the tests' PostgreSQL did not start");
    return conninfo;
  }

  std::string dir_;
  Result<std::string> base_;
};

// A server of one test's own, for tests that kill it. Stopped and removed
// on destruction.
class PgPrivateServer {
 public:
  static Result<std::unique_ptr<PgPrivateServer>> Start() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dsh-pg-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return Status(codes::kIo, "cannot make a directory for PostgreSQL");
    std::unique_ptr<PgPrivateServer> s(new PgPrivateServer(tmpl));
    DSH_ASSIGN_OR_RETURN(std::string base, RunPgTestServer("start", tmpl));
    s->conninfo_ = base + " dbname=postgres";
    return s;
  }
  ~PgPrivateServer() {
    (void)RunPgTestServer("stop", dir_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& conninfo() const { return conninfo_; }
  Status Kill() { return RunPgTestServer("kill", dir_).status(); }
  Status Resume() { return RunPgTestServer("resume", dir_).status(); }

 private:
  explicit PgPrivateServer(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::string conninfo_;
};

}  // namespace dsh::store::testing
