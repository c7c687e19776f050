#include "app/backup_command.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <ostream>

#include "host/config.h"
#include "host/profile.h"

namespace dsh::app {
namespace fs = std::filesystem;
namespace {

int Fail(CommandContext& ctx, const Status& status, int code) {
  ctx.err << "error: " << status.code() << ": " << status.message() << "\n";
  return code;
}

// The profile as host::Profile resolves it, but never created: a backup of
// a profile that is not there is an error.
Result<fs::path> ResolveHome(const std::optional<std::string>& flag) {
  DSH_ASSIGN_OR_RETURN(fs::path home, host::Profile::ResolveHome(flag));
  std::error_code ec;
  if (!fs::is_directory(home, ec)) return Status(codes::kNotFound, "no profile directory at " + home.string());
  return home;
}

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using SqliteHandle = std::unique_ptr<sqlite3, SqliteCloser>;

Result<SqliteHandle> OpenSqlite(const std::string& path, int flags) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  SqliteHandle handle(db);
  if (rc != SQLITE_OK) {
    return Status(codes::kStorage,
                  "cannot open " + path + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  }
  sqlite3_busy_timeout(db, 5000);
  return handle;
}

Status Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string msg = err ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  return Status(codes::kStorage, sql + ": " + msg);
}

// The rows of a one-column query, as text.
Result<std::vector<std::string>> Rows(sqlite3* db, const std::string& sql, size_t limit = 20) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    return Status(codes::kStorage, sql + ": " + sqlite3_errmsg(db));
  }
  std::vector<std::string> rows;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    if (rows.size() < limit) rows.emplace_back(text ? text : "");
  }
  Status st = rc == SQLITE_DONE ? Status::Ok() : Status(codes::kStorage, sql + ": " + sqlite3_errmsg(db));
  sqlite3_finalize(stmt);
  if (!st.ok()) return st;
  return rows;
}

void RemoveTemporary(const std::string& tmp) {
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) ::unlink((tmp + suffix).c_str());
}

Status SyncPath(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Status(codes::kIo, "cannot open " + path + ": " + std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Status(codes::kIo, "cannot fsync " + path + ": " + std::strerror(err));
  return Status::Ok();
}

std::string HumanSize(int64_t bytes) {
  char buf[32];
  if (bytes >= (int64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  } else if (bytes >= (1 << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  }
  return buf;
}

struct CopyStats {
  int64_t pages = 0;
  int64_t page_size = 0;
};

// Copies `source` into the new database `tmp` (see RunBackup), then checks
// it. `tmp` may be left behind on failure; the caller removes it.
Result<CopyStats> CopyAndCheck(const std::string& source, const std::string& tmp, const BackupFlags& flags,
                               CommandContext& ctx) {
  // SQLite's default VFS. The host's writer uses CoalescingWalVfs
  // (store/sqlite_wal_vfs.h), which differs only in how that connection's
  // own WAL writes reach the file: the files, their locks and the shared
  // memory index are the default VFS's, and every commit's frames are
  // synced before other connections can see them, so a reader with the
  // default VFS in another process sees exactly the committed database.
  // Read-only: the backup never writes the source (no checkpoint either).
  DSH_ASSIGN_OR_RETURN(SqliteHandle src, OpenSqlite(source, SQLITE_OPEN_READONLY));
  // One read snapshot for the whole copy. Without it every step would take
  // a new one, and a commit by the host between two steps would restart the
  // copy from its first page (forever, on a busy host).
  DSH_RETURN_IF_ERROR(Exec(src.get(), "BEGIN DEFERRED; SELECT count(*) FROM sqlite_schema"));

  DSH_ASSIGN_OR_RETURN(SqliteHandle dst, OpenSqlite(tmp, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  // Durability comes from the fsync before the rename; a copy cut short is
  // removed, never used.
  DSH_RETURN_IF_ERROR(Exec(dst.get(), "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF"));

  sqlite3_backup* backup = sqlite3_backup_init(dst.get(), "main", src.get(), "main");
  if (backup == nullptr)
    return Status(codes::kStorage, std::string("cannot start the backup: ") + sqlite3_errmsg(dst.get()));
  const MonoTime start = ctx.clock.MonotonicNow();
  int shown = -1;
  int rc;
  while (true) {
    rc = sqlite3_backup_step(backup, flags.pages_per_step);
    if (rc == SQLITE_DONE) break;
    // SQLITE_BUSY / SQLITE_LOCKED come only after both connections' busy
    // handlers (OpenSqlite) waited their 5 s; not expected with the snapshot
    // held (a reader waits for no writer): reported as a failure.
    if (rc != SQLITE_OK) break;
    const int total = sqlite3_backup_pagecount(backup);
    const int remaining = sqlite3_backup_remaining(backup);
    if (total > 0 && ctx.clock.MonotonicNow() - start >= flags.progress_after) {
      int pct = static_cast<int>(100LL * (total - remaining) / total);
      if (pct != shown) {
        ctx.err << "\rbackup: " << pct << "% (" << (total - remaining) << " of " << total << " pages)"
                << std::flush;
        shown = pct;
      }
    }
  }
  if (shown >= 0) {
    const int total = sqlite3_backup_pagecount(backup);
    if (rc == SQLITE_DONE && shown != 100)
      ctx.err << "\rbackup: 100% (" << total << " of " << total << " pages)";
    ctx.err << "\n";
  }
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) {
    return Status(codes::kStorage, std::string("backup failed: ") + sqlite3_errstr(rc) + " (" +
                                       sqlite3_errmsg(dst.get()) + ")");
  }
  (void)Exec(src.get(), "COMMIT");  // a read transaction: nothing to lose
  src.reset();
  dst.reset();

  // The copy as anyone restoring it would open it.
  DSH_ASSIGN_OR_RETURN(SqliteHandle copy, OpenSqlite(tmp, SQLITE_OPEN_READWRITE));
  // The copied header says WAL, as the source's; the rollback journal makes
  // the backup one file that opens even where a -shm cannot be created. The
  // host switches a restored copy back to WAL when it opens it.
  DSH_RETURN_IF_ERROR(Rows(copy.get(), "PRAGMA journal_mode=DELETE").status());
  DSH_ASSIGN_OR_RETURN(std::vector<std::string> check, Rows(copy.get(), "PRAGMA integrity_check"));
  if (check.size() != 1 || check[0] != "ok") {
    std::string problems;
    for (const auto& line : check) problems += "\n  " + line;
    return Status(codes::kStorage, "the copy fails PRAGMA integrity_check:" + problems);
  }
  DSH_ASSIGN_OR_RETURN(std::vector<std::string> pages, Rows(copy.get(), "PRAGMA page_count"));
  DSH_ASSIGN_OR_RETURN(std::vector<std::string> page_size, Rows(copy.get(), "PRAGMA page_size"));
  CopyStats stats;
  stats.pages = pages.empty() ? 0 : std::atoll(pages[0].c_str());
  stats.page_size = page_size.empty() ? 0 : std::atoll(page_size[0].c_str());
  return stats;
}

}  // namespace

int RunBackup(const BackupFlags& flags, CommandContext& ctx) {
  if (flags.file.empty()) return Fail(ctx, InvalidArguments("FILE must not be empty"), kExitUsage);
  if (flags.pages_per_step < 1)
    return Fail(ctx, InvalidArguments("pages per step must be positive"), kExitUsage);
  auto home = ResolveHome(flags.home);
  if (!home.ok()) return Fail(ctx, home.status(), kExitFailure);

  auto config = host::LoadConfig({{(*home / "dsh.yml").string(), /*optional=*/true}});
  if (!config.ok()) return Fail(ctx, config.status(), kExitUsage);
  const char* url = std::getenv("DSH_DATABASE_URL");
  if ((url != nullptr && *url != '\0') || config->storage.postgres) {
    return Fail(
        ctx,
        InvalidArguments(std::string("the profile's database is PostgreSQL (") +
                         (url != nullptr && *url != '\0' ? "DSH_DATABASE_URL is set" : "storage.backend") +
                         "); dsh backup copies SQLite only. Back PostgreSQL up with pg_dump, e.g. "
                         "`pg_dump --format=custom --file=dsh.dump DBNAME` (docs/DEPLOY.md, \"Backups\")"),
        kExitUsage);
  }

  const std::string source = (*home / "dsh.db").string();
  std::error_code ec;
  if (!fs::is_regular_file(source, ec)) {
    return Fail(ctx, Status(codes::kNotFound, "no database at " + source + ": nothing to back up"),
                kExitFailure);
  }
  fs::path target = fs::absolute(flags.file, ec);
  if (ec)
    return Fail(ctx, Status(codes::kIo, "cannot resolve " + flags.file + ": " + ec.message()), kExitFailure);
  const fs::path dir = target.parent_path();
  if (!fs::is_directory(dir, ec)) {
    return Fail(ctx, Status(codes::kNotFound, "directory " + dir.string() + " does not exist"), kExitFailure);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    if (fs::exists(target, ec) && fs::equivalent(target, source + suffix, ec)) {
      return Fail(ctx, InvalidArguments(target.string() + " is the profile's database itself"), kExitUsage);
    }
  }
  if (fs::is_directory(target, ec)) {
    return Fail(ctx, InvalidArguments(target.string() + " is a directory; give a file name"), kExitUsage);
  }
  if (fs::exists(target, ec) && !flags.force) {
    return Fail(ctx, Status(codes::kAlreadyExists, target.string() + " exists; --force replaces it"),
                kExitFailure);
  }

  const std::string tmp = target.string() + ".tmp";
  RemoveTemporary(tmp);  // left by a backup that was killed
  const MonoTime start = ctx.clock.MonotonicNow();
  auto copied = CopyAndCheck(source, tmp, flags, ctx);
  Status st = copied.status();
  if (st.ok()) st = SyncPath(tmp, O_RDONLY);
  if (st.ok() && ::rename(tmp.c_str(), target.c_str()) != 0) {
    st = Status(codes::kIo, "cannot rename " + tmp + " to " + target.string() + ": " + std::strerror(errno));
  }
  if (!st.ok()) {
    RemoveTemporary(tmp);
    return Fail(ctx, st, kExitFailure);
  }
  // The rename itself survives a crash once the directory is synced.
  if (Status synced = SyncPath(dir.string(), O_RDONLY | O_DIRECTORY); !synced.ok()) {
    ctx.err << "warning: " << synced.message() << "\n";
  }
  const double seconds = std::chrono::duration<double>(ctx.clock.MonotonicNow() - start).count();
  const int64_t bytes = copied->pages * copied->page_size;
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s", seconds);
  ctx.out << "ok: " << target.string() << " (integrity_check ok): " << bytes << " bytes (" << HumanSize(bytes)
          << "), " << copied->pages << " pages, " << took << "\n";
  return kExitOk;
}

void AddBackupCommand(CLI::App& root, CommandContext& ctx) {
  auto flags = std::make_shared<BackupFlags>();
  auto home = std::make_shared<std::string>();
  CLI::App* backup = root.add_subcommand(
      "backup", "Copy the profile's SQLite database to FILE, consistently, even while dsh web runs");
  backup->add_option("file", flags->file, "The copy to write (must not exist, unless --force)")->required();
  backup->add_option("--home", *home, "Profile directory (default $DSH_HOME, else ~/.dsh)");
  backup->add_flag("--force", flags->force, "Replace FILE if it exists");
  backup->callback([flags, home, &ctx] {
    if (!home->empty()) flags->home = *home;
    ctx.exit_code = RunBackup(*flags, ctx);
  });
}

}  // namespace dsh::app
