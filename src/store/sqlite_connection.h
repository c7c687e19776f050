#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "store/connection.h"

namespace dsh::store {

struct SqliteOptions {
  std::string path;
  // FULL: a commit survives power loss. NORMAL: it survives a process crash
  // but the last commits may roll back after power loss (WAL).
  enum class Synchronous { kFull, kNormal } synchronous = Synchronous::kFull;
  std::chrono::milliseconds busy_timeout{5000};
  // With FULL: a commit's WAL writes reach the file as one write
  // (CoalescingWalVfs). Off only to measure the difference.
  bool gather_wal_writes = true;
  // WAL checkpoints of the writer's connection (OpenWriter). SQLite's own
  // runs inside the COMMIT that takes the WAL to 1000 frames, so that batch
  // waits for a copy of the WAL into the database file and its fsync. With
  // `background`, a thread with its own connection copies most of the WAL
  // while the writer goes on committing (passive checkpoints: they never
  // block the writer); the writer finishes inline once at most
  // `finish_frames` remain, so that its next transaction restarts the WAL
  // from its beginning. Past `max_frames` (the background cannot keep up)
  // the writer checkpoints inline whatever remains, as SQLite would.
  struct Checkpoints {
    bool background = true;
    int start_frames = 1000;
    int finish_frames = 64;
    int max_frames = 10000;
  } checkpoints;
};

// SQLite in WAL mode. Each Open() returns an independent connection with
// prepared statements cached by SQL text; OpenWriter() one that also drives
// the WAL's checkpoints (SqliteOptions::checkpoints).
class SqliteConnectionFactory final : public ConnectionFactory {
 public:
  explicit SqliteConnectionFactory(SqliteOptions options) : options_(std::move(options)) {}
  Result<std::unique_ptr<Connection>> Open() override;
  Result<std::unique_ptr<Connection>> OpenWriter() override;
  std::string Describe() const override { return "sqlite " + options_.path; }

 private:
  Result<std::unique_ptr<Connection>> OpenConnection(bool writer);

  SqliteOptions options_;
};

// Expands `/*sqlite: ...*/` comments into their contents (see Tx).
std::string ExpandSqliteComments(std::string_view sql);

}  // namespace dsh::store
