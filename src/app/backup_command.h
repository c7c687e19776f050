#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "app/command.h"

namespace dsh::app {

// `dsh backup FILE [--home DIR] [--force]`: a consistent copy of the
// profile's SQLite database, safe while `dsh web` runs (docs/DEPLOY.md,
// "Backups"). PostgreSQL profiles are refused with a pointer to pg_dump.
void AddBackupCommand(CLI::App& root, CommandContext& ctx);

struct BackupFlags {
  std::string file;                 // the copy to create
  std::optional<std::string> home;  // --home; else $DSH_HOME, else $HOME/.dsh
  bool force = false;               // replace an existing FILE
  int pages_per_step = 256;         // pages copied per sqlite3_backup_step
  // Progress (a percentage on stderr) once the copy has taken this long.
  std::chrono::milliseconds progress_after{1000};
};

// Copies the database with SQLite's online backup API from one read
// snapshot, held for the whole copy: in WAL mode a reader blocks no writer,
// so a running host keeps committing (its WAL grows until the copy ends,
// as no checkpoint can pass the snapshot), and the copy is exactly the
// database as of the moment the copy began, with every commit acknowledged
// before it. The copy goes to FILE.tmp, is checked (`PRAGMA
// integrity_check`), switched to the rollback journal (one self-contained
// file), fsynced and renamed to FILE; on any failure FILE.tmp is removed
// and FILE is untouched. Prints `ok`, the size, the page count and the time
// taken. Exit 0 on success; 1 when the copy fails or FILE exists (without
// `force`); 2 for a PostgreSQL profile or bad flags.
int RunBackup(const BackupFlags& flags, CommandContext& ctx);

}  // namespace dsh::app
