#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "store/connection.h"

namespace dsh::store::testing {

// A Connection that hands every call to another one; a test's wrapper
// overrides only the calls it changes (fails, counts, inspects).
class ForwardingConnection : public Connection {
 public:
  explicit ForwardingConnection(std::unique_ptr<Connection> inner) : inner_(std::move(inner)) {}
  Dialect dialect() const override { return inner_->dialect(); }
  Result<int64_t> Exec(std::string_view sql, std::span<const Value> params) override {
    return inner_->Exec(sql, params);
  }
  Status ExecLater(std::string_view sql, std::span<const Value> params, std::optional<int64_t> rows) override {
    return inner_->ExecLater(sql, params, rows);
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
  Status Commit() override { return inner_->Commit(); }
  Status Rollback() override { return inner_->Rollback(); }
  Status Savepoint(std::string_view n) override { return inner_->Savepoint(n); }
  Status RollbackToSavepoint(std::string_view n) override { return inner_->RollbackToSavepoint(n); }
  Status ReleaseSavepoint(std::string_view n) override { return inner_->ReleaseSavepoint(n); }
  int64_t TotalChanges() override { return inner_->TotalChanges(); }
  bool InTransaction() override { return inner_->InTransaction(); }

 private:
  std::unique_ptr<Connection> inner_;
};

// A factory whose connections (readers and the writer) are those of `inner`,
// each wrapped by `wrap`; listeners are `inner`'s own.
class WrappingFactory final : public ConnectionFactory {
 public:
  using Wrap = std::function<std::unique_ptr<Connection>(std::unique_ptr<Connection>)>;
  WrappingFactory(std::unique_ptr<ConnectionFactory> inner, Wrap wrap)
      : inner_(std::move(inner)), wrap_(std::move(wrap)) {}
  Result<std::unique_ptr<Connection>> Open() override { return Wrapped(inner_->Open()); }
  Result<std::unique_ptr<Connection>> OpenWriter() override { return Wrapped(inner_->OpenWriter()); }
  Result<std::unique_ptr<Listener>> OpenListener() override { return inner_->OpenListener(); }
  std::string Describe() const override { return inner_->Describe(); }

 private:
  Result<std::unique_ptr<Connection>> Wrapped(Result<std::unique_ptr<Connection>> conn) {
    if (!conn.ok()) return conn.status();
    return wrap_(std::move(conn).value());
  }

  std::unique_ptr<ConnectionFactory> inner_;
  Wrap wrap_;
};

}  // namespace dsh::store::testing
