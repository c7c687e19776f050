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
};

// SQLite in WAL mode. Each Open() returns an independent connection with
// prepared statements cached by SQL text.
class SqliteConnectionFactory final : public ConnectionFactory {
 public:
  explicit SqliteConnectionFactory(SqliteOptions options) : options_(std::move(options)) {}
  Result<std::unique_ptr<Connection>> Open() override;
  std::string Describe() const override { return "sqlite " + options_.path; }

 private:
  SqliteOptions options_;
};

// Expands `/*sqlite: ...*/` comments into their contents (see Tx).
std::string ExpandSqliteComments(std::string_view sql);

}  // namespace dsh::store
