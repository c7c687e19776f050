#include "store/sqlite_wal_vfs.h"

#include <gtest/gtest.h>

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "base/testing/temp_dir.h"
#include "store/sqlite_connection.h"

namespace dsh::store {
namespace {

// SqliteConnectionFactory uses CoalescingWalVfs with synchronous=FULL (the
// default); these check that what the gathered writes put in the WAL is what
// SQLite wrote, however the writes fall.
class CoalescingWalVfsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Connection> Open() {
    auto conn = SqliteConnectionFactory(SqliteOptions{.path = path_}).Open();
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    return conn.ok() ? std::move(conn).value() : nullptr;
  }

  void CreateTable(Connection& conn) {
    ASSERT_TRUE(conn.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)", {}).ok());
  }

  // A body that differs in every row and along its length.
  static std::string Body(int64_t id, size_t size) {
    std::string s(size, ' ');
    for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>('a' + (id * 7 + static_cast<int64_t>(i)) % 26);
    return s;
  }

  Status InsertRows(Connection& conn, int64_t from, int64_t to, size_t size) {
    for (int64_t id = from; id < to; ++id) {
      std::string body = Body(id, size);
      DSH_RETURN_IF_ERROR(conn.Exec("INSERT INTO t (id, body) VALUES (?, ?)", {id, std::string_view(body)}).status());
    }
    return Status::Ok();
  }

  // Every row in [from, to) present with its body.
  void ExpectRows(Connection& conn, int64_t from, int64_t to, size_t size) {
    int64_t next = from;
    Status st = conn.Query("SELECT id, body FROM t WHERE id >= ? AND id < ? ORDER BY id", {from, to},
                           [&](const Row& row) {
                             EXPECT_EQ(row.Int(0), next);
                             EXPECT_EQ(row.Text(1), Body(next, size)) << "row " << next;
                             ++next;
                             return Status::Ok();
                           });
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(next, to);
  }

  std::string IntegrityCheck(Connection& conn) {
    std::string out;
    EXPECT_TRUE(conn.Query("PRAGMA integrity_check", {}, [&](const Row& row) {
                      out += std::string(row.Text(0));
                      return Status::Ok();
                    }).ok());
    return out;
  }

  testing::TempDir dir_;
  std::string path_ = dir_.File("t.db");
};

TEST_F(CoalescingWalVfsTest, AvailableUnderItsName) {
  const char* name = CoalescingWalVfs();
  ASSERT_NE(name, nullptr);
  EXPECT_NE(sqlite3_vfs_find(name), nullptr);
  EXPECT_EQ(std::string(CoalescingWalVfs()), name) << "registered once";
}

// Over 4 MiB of frames in one commit: the gathered writes reach the file in
// pieces (the default VFS takes under 128 KiB per write) and midway.
TEST_F(CoalescingWalVfsTest, ALargeCommitReadsBackWholeInAnotherConnection) {
  auto writer = Open();
  CreateTable(*writer);
  ASSERT_TRUE(writer->BeginWrite().ok());
  ASSERT_TRUE(InsertRows(*writer, 0, 1500, 4000).ok());
  Status commit = writer->Commit();
  ASSERT_TRUE(commit.ok()) << commit.ToString();
  auto reader = Open();
  ASSERT_TRUE(reader->BeginRead().ok());
  ExpectRows(*reader, 0, 1500, 4000);
  ASSERT_TRUE(reader->Rollback().ok());
}

// A transaction larger than its page cache writes pages to the WAL before
// its commit, reads them back from there, and writes changed ones again over
// their earlier frames (not at the end), at its commit among new frames.
TEST_F(CoalescingWalVfsTest, ATransactionThatSpillsPagesToTheWalReadsAndRewritesThem) {
  auto writer = Open();
  CreateTable(*writer);
  ASSERT_TRUE(writer->Exec("PRAGMA cache_size=16", {}).ok());  // pages
  ASSERT_TRUE(writer->BeginWrite().ok());
  ASSERT_TRUE(InsertRows(*writer, 0, 400, 3000).ok());
  ExpectRows(*writer, 0, 400, 3000);
  ASSERT_TRUE(writer->Exec("DELETE FROM t WHERE id % 2 = 1", {}).ok());
  ASSERT_TRUE(InsertRows(*writer, 400, 420, 3000).ok());
  ASSERT_TRUE(writer->Commit().ok());
  auto reader = Open();
  int64_t rows = 0;
  ASSERT_TRUE(reader->Query("SELECT id, body FROM t ORDER BY id", {}, [&](const Row& row) {
                      int64_t id = row.Int(0);
                      EXPECT_TRUE(id >= 400 || id % 2 == 0) << id;
                      EXPECT_EQ(row.Text(1), Body(id, 3000)) << "row " << id;
                      ++rows;
                      return Status::Ok();
                    }).ok());
  EXPECT_EQ(rows, 220);
  EXPECT_EQ(IntegrityCheck(*reader), "ok");
}

// With synchronous=NORMAL a commit does not sync the WAL, so nothing may
// stay gathered in memory: another connection reads the frames at once.
TEST_F(CoalescingWalVfsTest, NotUsedWithoutSyncedCommits) {
  SqliteConnectionFactory normal(SqliteOptions{.path = path_, .synchronous = SqliteOptions::Synchronous::kNormal});
  auto writer = normal.Open();
  auto reader = normal.Open();
  ASSERT_TRUE(writer.ok() && reader.ok());
  CreateTable(**writer);
  for (int64_t id = 0; id < 50; ++id) {
    ASSERT_TRUE((*writer)->BeginWrite().ok());
    ASSERT_TRUE(InsertRows(**writer, id, id + 1, 3000).ok());
    ASSERT_TRUE((*writer)->Commit().ok());
    ExpectRows(**reader, 0, id + 1, 3000);
  }
}

// Thousands of commits: checkpoints copy the WAL into the database and the
// WAL restarts from its beginning several times (writes go back to offset 0).
TEST_F(CoalescingWalVfsTest, ManyCommitsAcrossWalRestartsAreAllKept) {
  constexpr int64_t kCommits = 3000;
  {
    auto writer = Open();
    CreateTable(*writer);
    uintmax_t largest_wal = 0;
    for (int64_t id = 0; id < kCommits; ++id) {
      ASSERT_TRUE(writer->BeginWrite().ok());
      ASSERT_TRUE(InsertRows(*writer, id, id + 1, 1500).ok());
      ASSERT_TRUE(writer->Commit().ok());
      largest_wal = std::max(largest_wal, std::filesystem::file_size(path_ + "-wal"));
    }
    // Without restarts the WAL would hold every commit's frames (> 24 MB).
    EXPECT_LT(largest_wal, uintmax_t{8} << 20);
    auto reader = Open();
    ExpectRows(*reader, 0, kCommits, 1500);
  }
  auto reopened = Open();
  ExpectRows(*reopened, 0, kCommits, 1500);
  EXPECT_EQ(IntegrityCheck(*reopened), "ok");
}

}  // namespace
}  // namespace dsh::store
