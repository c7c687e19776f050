#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mcp/transport.h"

namespace dsh::mcp {

struct HttpTransportOptions {
  std::chrono::milliseconds connect_timeout{10'000};
  // How long Close waits for the server to answer the session's DELETE.
  std::chrono::milliseconds delete_timeout{2'000};
  // How long before a dropped GET stream is reopened: `stream_retry_delay`
  // after a stream that received something or stayed open at least
  // `stream_retry_max_delay`; doubled after each attempt that did neither,
  // up to `stream_retry_max_delay`.
  std::chrono::milliseconds stream_retry_delay{1'000};
  std::chrono::milliseconds stream_retry_max_delay{30'000};
};

// The MCP "Streamable HTTP" transport (revision 2025-06-18, compatible with
// 2025-03-26) over libcurl.
//
// Each Send is one POST of the message to `spec.url` with `Content-Type:
// application/json`, `Accept: application/json, text/event-stream`,
// `spec.headers`, `Mcp-Session-Id` once a response carried one, and
// `MCP-Protocol-Version` once SetProtocolVersion was called. The answer:
// - 202 (or any 2xx without a body): `sent` gets Ok.
// - 2xx `application/json`: the message, or each of a batch, goes to
//   OnMessage, then `sent` gets Ok.
// - 2xx `text/event-stream`: each event's `data` goes to OnMessage as it
//   arrives (notifications may precede the response). Once the response to
//   the request arrived, the transfer ends (a server that keeps the stream
//   open would otherwise hold a connection per call; later events on it are
//   dropped) and `sent` gets Ok; for a message that is not a request, when
//   the stream ends. `mcp_unavailable` if it broke before.
// - other statuses: `sent` gets `mcp_unavailable` "MCP server NAME answered
//   HTTP 500: <start of the body>"; a 404 to a request that carried the
//   session id also calls OnClosed ("... session expired"), once.
// - no connection (refused, DNS, 10 s connect timeout): `mcp_unavailable`.
// There is no overall request timeout; the client times calls out.
//
// After SetProtocolVersion, a GET on `spec.url` asks for the server's own
// stream of requests and notifications: 405 means it offers none. A stream
// that drops (a proxy's idle timeout, say), cannot connect, or is answered
// 5xx, 408 or 429 is reopened for as long as the transport lives, after the
// backoff of the options (1 s, doubling up to 30 s; back to 1 s after a
// stream that got bytes, keep-alive comments too). Any other answer that is
// no event stream ends the attempts: 405, a 404 that expired the session
// (OnClosed), a refusal. Events are not resumed (no `Last-Event-ID`).
//
// One worker thread drives every transfer through one curl multi handle, so
// requests run concurrently (a slow tools/call blocks nothing) and every
// callback runs on that thread: they never overlap. Send only queues.
// Responses over 16 MiB (a JSON body, or one event) fail the request.
//
// Thread-safe: Send and SetProtocolVersion from any thread, also inside the
// callbacks. Close from any thread but a callback's (it joins the worker; it
// also waits for a callback already running, so do not hold a lock that
// callbacks take while calling it).
class HttpTransport final : public Transport {
 public:
  using Options = HttpTransportOptions;

  explicit HttpTransport(ServerSpec spec, Options options = {});
  ~HttpTransport() override;

  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Starts the worker; connects nothing yet. `mcp_unavailable` when the URL
  // is not http(s) or a header cannot be sent. Call once.
  Status Start(OnMessage on_message, OnClosed on_closed) override;
  // Queues one POST (see the class comment). A Send before Start waits for
  // Start; once Close has begun, messages are dropped and `sent` is not
  // called.
  void Send(Json message, OnSent sent) override;
  void SetProtocolVersion(std::string version) override;
  // Aborts every transfer, joins the worker, then sends DELETE for the
  // session (when the server gave one), waiting at most `delete_timeout`
  // and ignoring the answer.
  void Close() override;

 private:
  struct Exchange;  // one HTTP transfer (http_transport.cc)
  enum class ExchangeKind { kPost, kEventStream };
  struct Outgoing {
    std::string body;
    OnSent sent;
    std::optional<Json> request_id;  // when the message is a request
  };
  // The GET stream for server-initiated messages.
  enum class EventStream { kNotWanted, kWanted, kOpen, kOff };

  // The worker thread and what it alone calls.
  void WorkerLoop();
  // A configured transfer with the common headers after `headers`; null
  // when curl is out of memory.
  std::unique_ptr<Exchange> NewExchange(ExchangeKind kind, std::vector<std::string> headers);
  void StartPost(Outgoing outgoing);
  void OpenEventStream();
  // Adds the transfer to the multi handle, or reports why it cannot start.
  void Launch(std::unique_ptr<Exchange> exchange);
  // `curl_code` is the transfer's CURLcode.
  void Finish(Exchange& exchange, int curl_code);
  void FinishPost(Exchange& exchange, int curl_code);
  void FinishEventStream(Exchange& exchange, int curl_code);
  // Reopens the GET stream `stream` after the next backoff delay.
  void ScheduleStreamRetry(const Exchange& stream, const std::string& why);
  void SessionExpired();
  void DeliverOne(Json message);
  // Calls the POST's `sent` (once, and not once Close has begun).
  void Report(Exchange& exchange, Status status);
  // The request headers every transfer carries: spec.headers, session id,
  // protocol version. Worker thread (or Close after the join).
  std::vector<std::string> CommonHeaders();
  void DeleteSession();
  bool Stopping();

  const ServerSpec spec_;
  const Options options_;
  OnMessage on_message_;  // set by Start before the worker starts
  OnClosed on_closed_;

  std::mutex mu_;
  std::deque<Outgoing> outbox_;                  // GUARDED_BY(mu_): taken by the worker
  std::optional<std::string> protocol_version_;  // GUARDED_BY(mu_)
  bool stopping_ = false;                        // GUARDED_BY(mu_): Close has begun

  std::mutex lifecycle_mu_;  // serializes Start and Close
  bool started_ = false;     // GUARDED_BY(lifecycle_mu_)
  void* multi_ = nullptr;    // CURLM*, owned, made by the constructor; curl_multi_wakeup is thread-safe
  std::thread worker_;

  // The worker's alone (Close reads them after the join).
  std::string session_id_;
  bool closed_reported_ = false;
  std::map<void*, std::unique_ptr<Exchange>> transfers_;  // by CURL*
  EventStream stream_ = EventStream::kNotWanted;
  std::chrono::milliseconds stream_retry_delay_ = options_.stream_retry_delay;  // the next reopen's
  std::optional<std::chrono::steady_clock::time_point> stream_retry_at_;
};

}  // namespace dsh::mcp
