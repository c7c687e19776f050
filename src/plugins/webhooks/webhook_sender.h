#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent/address_guard.h"
#include "agent/outbox.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "plugins/webhooks/webhook_endpoints.h"
#include "store/database.h"

namespace dsh::webhooks {

// How one attempt went, as HTTP tells it.
struct Response {
  std::optional<int64_t> status;      // the answer's status, when there was one
  std::optional<std::string> error;   // no answer: why (DNS, connect, TLS, timeout, a refused address)
  bool refused = false;               // the address rules refused the target (never retried)
  std::optional<int64_t> retry_after_ms;  // Retry-After of a 429 or 503, in milliseconds
  int64_t duration_ms = 0;
};

// What becomes of a message after an attempt (docs/NOTIFICATIONS.md,
// "Delivery, retries and receipts"): 2xx delivered; network errors,
// timeouts, 408, 429 and 5xx retried after Backoff (or Retry-After, at most
// the backoff cap) until `retry_for_ms` after the message was written; any
// other answer, and a refused address, failed at once. `jitter` in [0, 1).
agent::outbox::After Decide(const Response& response, int64_t attempts_before, int64_t created_at, int64_t now,
                            int64_t retry_for_ms, double jitter);
// The wait before attempt `attempts + 1` (attempts >= 1): 1 s doubling per
// attempt, at most one hour, each between half and all of it by `jitter`.
int64_t BackoffMs(int64_t attempts, double jitter);

struct SenderOptions {
  std::string owner;                  // lease holder: this host's id
  int64_t retry_for_ms = 86'400'000;  // notifications.retry_for
  std::string public_url;             // server.public_url, for links
  int threads = 4;                    // senders at once
  int64_t batch = 16;                 // messages a sender claims at a time
  // How long a claim keeps other hosts off a message: more than `timeout`.
  // A host that dies while sending leaves its messages to others this long.
  int64_t lease_ms = 15'000;
  std::chrono::milliseconds poll{1000};  // the fallback look for due messages (other hosts' messages, retries)
  std::chrono::milliseconds timeout{10'000};  // one attempt, connect included
  // Tests only: loopback addresses that play public ones (agent::AddressGuardOptions).
  std::vector<agent::TestEndpoint> public_for_testing;
  metrics::Registry* metrics = nullptr;   // dsh_webhook_deliveries_total; none when null
  std::function<void()> on_change;        // after an attempt was recorded (the change feed); may be null
};

// Sends the outbox's pending messages to their endpoints with libcurl and
// records every attempt (outbox::Record). `threads` sender threads each
// claim a batch of due messages (a lease, so one host at a time sends a
// message), send them one by one over a connection kept per endpoint, and
// record the attempts in one write, which also claims the next batch (one
// write transaction per batch on the writer that deliveries share), until a
// claim finds nothing due. Wake() after a message was written makes them
// look at once; otherwise they look every `poll` and when the next retry is
// due.
//
// Thread-safe. Start, then Stop (joins the threads; an attempt in flight
// ends within `timeout`) before the database and the endpoints go.
class Sender {
 public:
  Sender(store::Database& db, const Clock& clock, const EndpointSet& endpoints, SenderOptions options);
  ~Sender();  // Stop()
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  void Start();
  void Stop();
  // From any thread: due messages are looked for at once.
  void Wake();
  // Sends message `id` now (the Settings page's Send test), on a sender
  // thread, and calls `done` with the message as its attempt left it.
  // Errors: `not_found`, `conflict` (not pending, or another host holds it),
  // `shutting_down`.
  void SendNow(std::string id, std::function<void(Result<agent::outbox::Message>)> done);

 private:
  struct Connection;  // a curl handle kept for one endpoint
  struct Worker;

  void Run(Worker& worker);
  // Claims and sends batches while some are due, each recorded with the
  // claim of the next.
  void SendBatches(Worker& worker);
  bool Stopping();
  // One attempt of `message` to its endpoint; the outcome to record.
  std::pair<agent::outbox::Attempt, agent::outbox::After> Attempt(Worker& worker,
                                                                   const agent::outbox::Claimed& message);
  Response Post(Worker& worker, const Endpoint& endpoint, const std::string& content_type,
                const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body);
  void Count(const std::string& endpoint, const std::string& result);
  int64_t Now() const;

  store::Database& db_;
  const Clock& clock_;
  const EndpointSet& endpoints_;
  const SenderOptions options_;
  metrics::Family<metrics::Counter>* deliveries_ = nullptr;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;   // GUARDED_BY(mu_)
  uint64_t wakes_ = 0;      // GUARDED_BY(mu_): bumped by Wake
  std::deque<std::function<void(Worker&)>> urgent_;  // GUARDED_BY(mu_): SendNow's work
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
};

}  // namespace dsh::webhooks
