#include "plugins/webhooks/webhook_sender.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <utility>

#include "base/version.h"
#include "plugins/webhooks/webhook_format.h"

namespace dsh::webhooks {

namespace {

constexpr int64_t kBackoffBaseMs = 1'000;
constexpr int64_t kBackoffCapMs = 3'600'000;
constexpr size_t kKeptBody = 512;  // of an error answer, for its receipt

bool Retryable(int64_t status) { return status == 408 || status == 429 || status >= 500; }

// Retry-After as seconds, or as an HTTP date (curl_getdate).
std::optional<int64_t> RetryAfterMs(const std::string& value, int64_t now_ms) {
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (value.size() > 9) return kBackoffCapMs;
    return std::stoll(value) * 1000;
  }
  time_t at = curl_getdate(value.c_str(), nullptr);
  if (at < 0) return std::nullopt;
  return std::max<int64_t>(0, static_cast<int64_t>(at) * 1000 - now_ms);
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t start = s.find_first_not_of(' ');
  return start == std::string::npos ? "" : s.substr(start);
}

}  // namespace

int64_t BackoffMs(int64_t attempts, double jitter) {
  int64_t full = kBackoffCapMs;
  if (attempts <= 22) full = std::min(kBackoffCapMs, kBackoffBaseMs << std::max<int64_t>(0, attempts - 1));
  return full / 2 + static_cast<int64_t>(static_cast<double>(full / 2) * jitter);
}

agent::outbox::After Decide(const Response& r, int64_t attempts_before, int64_t created_at, int64_t now,
                            int64_t retry_for_ms, double jitter) {
  if (r.status && *r.status >= 200 && *r.status < 300) return {"delivered", now};
  bool retry = !r.refused && (!r.status || Retryable(*r.status));
  if (!retry) return {"failed", now};
  int64_t wait = BackoffMs(attempts_before + 1, jitter);
  if (r.retry_after_ms) wait = std::clamp<int64_t>(*r.retry_after_ms, 0, kBackoffCapMs);
  int64_t next = now + wait;
  if (next > created_at + retry_for_ms) return {"failed", now};  // retried long enough
  return {"pending", next};
}

// A curl handle kept for one endpoint (and one thread), so that attempts to
// it reuse the connection; its guard checks every connection it opens.
struct Sender::Connection {
  explicit Connection(agent::AddressGuardOptions options) : guard(std::move(options)) {}
  ~Connection() {
    if (easy != nullptr) curl_easy_cleanup(easy);
  }
  agent::AddressGuard guard;
  CURL* easy = nullptr;
  std::string url;
  bool allow_private = false;
};

struct Sender::Worker {
  std::map<std::string, std::unique_ptr<Connection>> connections;  // by endpoint name
  std::optional<int64_t> next_due;  // of the earliest pending message, at the last look
  std::mt19937_64 random{std::random_device{}()};
};

Sender::Sender(store::Database& db, const Clock& clock, const EndpointSet& endpoints, SenderOptions options)
    : db_(db), clock_(clock), endpoints_(endpoints), options_(std::move(options)) {
  if (options_.metrics != nullptr) {
    deliveries_ = &options_.metrics->AddCounterFamily(
        "dsh_webhook_deliveries_total",
        "Attempts to send a webhook message, by endpoint and result (delivered, retry, failed).",
        {"endpoint", "result"});
  }
}

Sender::~Sender() { Stop(); }

void Sender::Start() {
  std::lock_guard lock(mu_);
  if (!threads_.empty() || stopping_) return;
  for (int i = 0; i < std::max(1, options_.threads); ++i) workers_.push_back(std::make_unique<Worker>());
  for (auto& w : workers_) threads_.emplace_back([this, worker = w.get()] { Run(*worker); });
}

void Sender::Stop() {
  std::deque<std::function<void(Worker&)>> left;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    left.swap(urgent_);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  workers_.clear();
  // Send-test requests no thread took: they are answered, not dropped.
  Worker none;
  for (auto& task : left) task(none);
}

void Sender::Wake() {
  {
    std::lock_guard lock(mu_);
    ++wakes_;
  }
  cv_.notify_one();
}

int64_t Sender::Now() const { return ToUnixMillis(clock_.Now()); }

void Sender::Run(Worker& worker) {
  uint64_t seen = 0;
  while (true) {
    std::function<void(Worker&)> task;
    {
      std::unique_lock lock(mu_);
      if (stopping_) return;
      if (!urgent_.empty()) {
        task = std::move(urgent_.front());
        urgent_.pop_front();
      }
      seen = wakes_;
    }
    if (task) {
      task(worker);
      continue;
    }
    // It sends until a claim finds nothing due.
    SendBatches(worker);
    // Until the next retry falls due, or the fallback look.
    auto wait = options_.poll;
    if (worker.next_due) {
      wait = std::clamp(std::chrono::milliseconds(*worker.next_due - Now()), std::chrono::milliseconds(1), wait);
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return stopping_ || wakes_ != seen || !urgent_.empty(); });
  }
}

void Sender::SendBatches(Worker& worker) {
  int64_t now = Now();
  // A read first: an idle outbox costs no write transaction.
  auto due = db_.ReadValue<std::optional<int64_t>>([](store::Tx& tx) { return agent::outbox::NextDue(tx); });
  worker.next_due = due.ok() ? *due : std::nullopt;
  if (due.ok() && (!*due || **due > now)) return;
  auto claimed = db_.WriteValue<std::vector<agent::outbox::Claimed>>([&](store::Tx& tx) {
    return agent::outbox::Claim(tx, options_.owner, now, options_.lease_ms, options_.batch);
  });
  if (!claimed.ok()) {
    if (claimed.status().code() != codes::kShuttingDown) {
      spdlog::warn("webhooks: claiming messages failed (tried again in {} ms): {}", options_.poll.count(),
                   claimed.status().ToString());
    }
    return;
  }
  struct Done {
    int64_t num;
    agent::outbox::Attempt attempt;
    agent::outbox::After after;
  };
  while (!claimed->empty()) {
    std::vector<Done> done;
    for (const auto& message : *claimed) {
      // An attempt that could outlast the lease is left for the next claim
      // (of any host), so that no two hosts send a message at once.
      if (Now() + options_.timeout.count() > now + options_.lease_ms) break;
      auto [attempt, after] = Attempt(worker, message);
      done.push_back(Done{message.num, std::move(attempt), std::move(after)});
    }
    if (done.empty()) break;  // every attempt could outlast the lease: the next look waits
    // Recorded together, in the same write as the claim of the next batch
    // (one write transaction per batch on the writer that deliveries share,
    // not two); a failure here leaves the leases to expire, and the messages
    // are sent again (with the same id) by whoever claims them next.
    bool claim_next = !Stopping();
    now = Now();
    claimed = db_.WriteValue<std::vector<agent::outbox::Claimed>>(
        [&](store::Tx& tx) -> Result<std::vector<agent::outbox::Claimed>> {
          for (const auto& d : done) DSH_RETURN_IF_ERROR(agent::outbox::Record(tx, d.num, d.attempt, d.after));
          if (!claim_next) return std::vector<agent::outbox::Claimed>();
          return agent::outbox::Claim(tx, options_.owner, now, options_.lease_ms, options_.batch);
        });
    if (options_.on_change) options_.on_change();
    if (!claimed.ok()) {
      spdlog::warn("webhooks: recording {} attempts failed: {}", done.size(), claimed.status().ToString());
      break;
    }
  }
}

bool Sender::Stopping() {
  std::lock_guard lock(mu_);
  return stopping_;
}

std::pair<agent::outbox::Attempt, agent::outbox::After> Sender::Attempt(Worker& worker,
                                                                         const agent::outbox::Claimed& message) {
  int64_t now = Now();
  auto endpoints = endpoints_.Get();
  auto it = endpoints->find(message.endpoint);
  if (it == endpoints->end()) {
    Count(message.endpoint, "failed");
    return {agent::outbox::Attempt{now, std::nullopt,
                                   "the endpoint `" + message.endpoint + "` is no longer configured", 0},
            agent::outbox::After{"failed", now}};
  }
  const Endpoint& endpoint = it->second;
  Target target{endpoint.spec.name, endpoint.spec.url, endpoint.spec.format, endpoint.spec.secret, options_.public_url};
  Message m{message.id, message.event, message.created_at, message.data};
  auto request = Render(target, m, now);
  if (!request.ok()) {
    Count(message.endpoint, "failed");
    return {agent::outbox::Attempt{now, std::nullopt, request.status().message(), 0},
            agent::outbox::After{"failed", now}};
  }
  Response response = Post(worker, endpoint, request->content_type, request->headers, request->body);
  double jitter = std::uniform_real_distribution<double>(0, 1)(worker.random);
  agent::outbox::After after =
      Decide(response, message.attempts, message.created_at, Now(), options_.retry_for_ms, jitter);
  Count(message.endpoint, after.state == "pending" ? "retry" : after.state);
  if (after.state != "delivered") {
    spdlog::info("webhooks: {} to {} ({}): {}{}", message.id, endpoint.spec.name, message.event,
                 response.status ? "HTTP " + std::to_string(*response.status) : response.error.value_or("error"),
                 after.state == "pending" ? ", retried later" : ", failed");
  }
  return {agent::outbox::Attempt{now, response.status, response.error, response.duration_ms}, after};
}

Response Sender::Post(Worker& worker, const Endpoint& endpoint, const std::string& content_type,
                      const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body) {
  Response r;
  auto& slot = worker.connections[endpoint.spec.name];
  // A changed endpoint gets a new handle (and guard).
  if (slot && (slot->url != endpoint.spec.url || slot->allow_private != endpoint.spec.allow_private)) slot.reset();
  if (!slot) {
    auto c = std::make_unique<Connection>(
        agent::AddressGuardOptions{endpoint.spec.allow_private, options_.public_for_testing});
    c->easy = curl_easy_init();
    c->url = endpoint.spec.url;
    c->allow_private = endpoint.spec.allow_private;
    if (c->easy == nullptr) {
      r.error = "curl could not start a transfer";
      return r;
    }
    if (Status st = c->guard.Install(c->easy); !st.ok()) {
      r.error = st.message();
      return r;
    }
    slot = std::move(c);
  }
  CURL* h = slot->easy;
  std::string answer;
  std::string retry_after;
  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_slist* list = nullptr;
  list = curl_slist_append(list, ("Content-Type: " + content_type).c_str());
  for (const auto& [name, value] : headers) list = curl_slist_append(list, (name + ": " + value).c_str());
  list = curl_slist_append(list, "Expect:");  // no 100-continue round trip
  auto on_body = +[](char* data, size_t size, size_t n, void* out) -> size_t {
    auto* s = static_cast<std::string*>(out);
    if (s->size() < kKeptBody) s->append(data, std::min(size * n, kKeptBody - s->size()));
    return size * n;
  };
  auto on_header = +[](char* data, size_t size, size_t n, void* out) -> size_t {
    std::string line(data, size * n);
    constexpr std::string_view kName = "retry-after:";
    if (line.size() > kName.size()) {
      std::string head = line.substr(0, kName.size());
      std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
      if (head == kName) *static_cast<std::string*>(out) = Trim(line.substr(kName.size()));
    }
    return size * n;
  };
  curl_easy_setopt(h, CURLOPT_URL, endpoint.spec.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, (std::string("dsh-webhooks/") + kVersion).c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &retry_after);
  auto started = clock_.MonotonicNow();
  CURLcode code = curl_easy_perform(h);
  r.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.MonotonicNow() - started).count();
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(list);
  if (code != CURLE_OK) {
    if (const auto& refusal = slot->guard.refusal(); refusal && code == CURLE_COULDNT_CONNECT) {
      r.refused = true;
      r.error = refusal->message();
    } else {
      r.error = std::string(curl_easy_strerror(code)) + (error_buffer[0] ? std::string(": ") + error_buffer : "");
    }
    return r;
  }
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  r.status = status;
  if (status == 429 || status == 503) r.retry_after_ms = RetryAfterMs(retry_after, Now());
  if (status < 200 || status >= 300) {
    std::string text = Trim(answer);
    if (!text.empty()) r.error = "HTTP " + std::to_string(status) + ": " + text;
  }
  return r;
}

void Sender::SendNow(std::string id, std::function<void(Result<agent::outbox::Message>)> done) {
  std::function<void(Worker&)> task = [this, id = std::move(id), done = std::move(done)](Worker& worker) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return done(Status(codes::kShuttingDown, "the host is stopping"));
    }
    int64_t now = Now();
    auto claimed = db_.WriteValue<std::optional<agent::outbox::Claimed>>(
        [&](store::Tx& tx) { return agent::outbox::ClaimOne(tx, id, options_.owner, now, options_.lease_ms); });
    if (!claimed.ok()) return done(claimed.status());
    if (!*claimed) return done(Status(codes::kConflict, "message " + id + " is not waiting to be sent"));
    auto [attempt, after] = Attempt(worker, **claimed);
    auto message = db_.WriteValue<std::optional<agent::outbox::Message>>(
        [&](store::Tx& tx) -> Result<std::optional<agent::outbox::Message>> {
          DSH_RETURN_IF_ERROR(agent::outbox::Record(tx, (*claimed)->num, attempt, after));
          return agent::outbox::GetMessage(tx, id);
        });
    if (options_.on_change) options_.on_change();
    if (!message.ok()) return done(message.status());
    if (!*message) return done(Status(codes::kNotFound, "message " + id + " is gone"));
    done(std::move(**message));
  };
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      urgent_.push_back(std::move(task));
      task = nullptr;
    }
  }
  if (task) return done(Status(codes::kShuttingDown, "the host is stopping"));
  cv_.notify_one();
}

void Sender::Count(const std::string& endpoint, const std::string& result) {
  if (deliveries_ != nullptr) deliveries_->WithLabels({endpoint, result}).Inc();
}

}  // namespace dsh::webhooks
