#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/testing/temp_dir.h"
#include "store/sqlite_connection.h"
#include "store/testing/location.h"
#include "store/testing/pg_test_server.h"

namespace dsh::store::testing {

// The database of one test on one backend, for suites that run on both:
//
//   class FooTest : public ::testing::TestWithParam<std::string> { TestBackend backend_{GetParam()}; ... };
//   INSTANTIATE_TEST_SUITE_P(Backends, FooTest, BackendNames(), BackendTestName);
//
// SQLite: a file in a temp dir. PostgreSQL: a fresh database on the tests'
// server (pg_test_server.h), dropped when the TestBackend goes.
class TestBackend {
 public:
  // `fast`: SQLite with synchronous=NORMAL (for suites that do not test
  // durability against power loss).
  explicit TestBackend(std::string name, bool fast = false) : name_(std::move(name)), fast_(fast) {}
  ~TestBackend() {
    if (!pg_.empty()) PgTestServer::DropDatabase(pg_);
  }
  TestBackend(const TestBackend&) = delete;
  TestBackend& operator=(const TestBackend&) = delete;

  bool postgres() const { return name_ == "postgres"; }
  // A factory of connections to this test's database: the same database at
  // every call (a "reopened" database keeps its data).
  std::unique_ptr<ConnectionFactory> Factory() {
    if (!postgres()) {
      SqliteOptions o{.path = dir_.File("dsh.db")};
      if (fast_) o.synchronous = SqliteOptions::Synchronous::kNormal;
      return std::make_unique<SqliteConnectionFactory>(o);
    }
    if (pg_.empty()) {
      auto db = PgTestServer::NewDatabase();
      EXPECT_TRUE(db.ok()) << db.status().ToString();
      pg_ = db.ok() ? *db : "host=/nonexistent dbname=none";
    }
    return PgTestServer::Factory(pg_);
  }
  // Where the database is, for a child process (store::OpenLocation):
  // the SQLite file's path, or "postgres:" and the conninfo.
  std::string Location() {
    if (!postgres()) return dir_.File("dsh.db");
    (void)Factory();  // makes the database
    return "postgres:" + pg_;
  }

  // Starts over with an empty database (SQLite: the file is removed).
  void Recreate() {
    std::error_code ec;
    std::filesystem::remove(dir_.File("dsh.db"), ec);
    if (!pg_.empty()) PgTestServer::DropDatabase(pg_);
    pg_.clear();
  }
  const dsh::testing::TempDir& dir() const { return dir_; }

 private:
  const std::string name_;
  const bool fast_;
  dsh::testing::TempDir dir_;
  std::string pg_;  // conninfo, once made
};

inline auto BackendNames() { return ::testing::Values(std::string("sqlite"), std::string("postgres")); }
inline std::string BackendTestName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace dsh::store::testing
