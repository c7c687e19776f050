#pragma once

#include <atomic>
#include <memory>

#include "store/testing/forwarding_connection.h"

namespace dsh::store::testing {

// Fault injection for tests: wraps a real factory; while `fail_commits` is
// positive, each COMMIT is refused (and counted down) without committing,
// as a full disk or an I/O error would.
struct Faults {
  std::atomic<int> fail_commits{0};
};

class FaultyConnection final : public ForwardingConnection {
 public:
  FaultyConnection(std::unique_ptr<Connection> inner, std::shared_ptr<Faults> faults)
      : ForwardingConnection(std::move(inner)), faults_(std::move(faults)) {}
  Status Commit() override {
    if (faults_->fail_commits.load() > 0) {
      faults_->fail_commits--;
      return Status(codes::kStorage, "injected fault: disk I/O error");
    }
    return ForwardingConnection::Commit();
  }

 private:
  std::shared_ptr<Faults> faults_;
};

inline std::unique_ptr<ConnectionFactory> MakeFaultyFactory(std::unique_ptr<ConnectionFactory> inner,
                                                            std::shared_ptr<Faults> faults) {
  return std::make_unique<WrappingFactory>(std::move(inner), [faults](std::unique_ptr<Connection> conn) {
    return std::unique_ptr<Connection>(std::make_unique<FaultyConnection>(std::move(conn), faults));
  });
}

}  // namespace dsh::store::testing
