#pragma once

#include <atomic>
#include <memory>

#include "store/connection.h"

namespace dsh::store::testing {

// Fault injection for tests: wraps a real factory; while `fail_commits` is
// positive, each COMMIT is refused (and counted down) without committing,
// as a full disk or an I/O error would.
struct Faults {
  std::atomic<int> fail_commits{0};
};

class FaultyConnection final : public Connection {
 public:
  FaultyConnection(std::unique_ptr<Connection> inner, std::shared_ptr<Faults> faults)
      : inner_(std::move(inner)), faults_(std::move(faults)) {}
  Result<int64_t> Exec(std::string_view sql, std::span<const Value> params) override {
    return inner_->Exec(sql, params);
  }
  Status Query(std::string_view sql, std::span<const Value> params, const RowFn& on_row) override {
    return inner_->Query(sql, params, on_row);
  }
  Result<int64_t> Insert(std::string_view sql, std::span<const Value> params) override {
    return inner_->Insert(sql, params);
  }
  Status Notify(std::string_view channel, std::string_view payload) override {
    return inner_->Notify(channel, payload);
  }
  Status BeginWrite() override { return inner_->BeginWrite(); }
  Status BeginRead() override { return inner_->BeginRead(); }
  Status Commit() override {
    if (faults_->fail_commits.load() > 0) {
      faults_->fail_commits--;
      return Status(codes::kStorage, "injected fault: disk I/O error");
    }
    return inner_->Commit();
  }
  Status Rollback() override { return inner_->Rollback(); }
  Status Savepoint(std::string_view n) override { return inner_->Savepoint(n); }
  Status RollbackToSavepoint(std::string_view n) override { return inner_->RollbackToSavepoint(n); }
  Status ReleaseSavepoint(std::string_view n) override { return inner_->ReleaseSavepoint(n); }
  int64_t TotalChanges() override { return inner_->TotalChanges(); }
  bool InTransaction() override { return inner_->InTransaction(); }

 private:
  std::unique_ptr<Connection> inner_;
  std::shared_ptr<Faults> faults_;
};

class FaultyFactory final : public ConnectionFactory {
 public:
  FaultyFactory(std::unique_ptr<ConnectionFactory> inner, std::shared_ptr<Faults> faults)
      : inner_(std::move(inner)), faults_(std::move(faults)) {}
  Result<std::unique_ptr<Connection>> Open() override { return Wrap(inner_->Open()); }
  Result<std::unique_ptr<Connection>> OpenWriter() override { return Wrap(inner_->OpenWriter()); }
  Result<std::unique_ptr<Listener>> OpenListener() override { return inner_->OpenListener(); }
  std::string Describe() const override { return "faulty " + inner_->Describe(); }

 private:
  Result<std::unique_ptr<Connection>> Wrap(Result<std::unique_ptr<Connection>> conn) {
    if (!conn.ok()) return conn.status();
    return std::unique_ptr<Connection>(std::make_unique<FaultyConnection>(std::move(conn).value(), faults_));
  }

  std::unique_ptr<ConnectionFactory> inner_;
  std::shared_ptr<Faults> faults_;
};

}  // namespace dsh::store::testing
