#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace dsh::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path without the query: "/api/tools/x"
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;

  const std::string* Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? nullptr : &it->second;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  static HttpResponse FromJson(int status, const Json& body);
  // `{"error": {"code", "message"}}` with the HTTP status that fits the code.
  static HttpResponse FromError(const Status& error);
};

// Called once per response; may be called from any thread.
using Respond = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest, Respond)>;

// The HTTP status for an error code (docs/API.md has the table).
int HttpStatusFor(const std::string& code);

// --- WebSocket upgrades -------------------------------------------------
//
// A request with `Upgrade: websocket` goes to the server's WebSocketHandler
// (when it has one) instead of the HttpHandler. The handler decides, possibly
// later and from any thread, by calling its UpgradeRespond once with either
// an HttpResponse (the upgrade is refused with that response and the
// connection closes) or a WebSocketSession (the server completes the
// handshake and drives the session on the connection's strand).

// Close codes (RFC 6455 section 7.4.1) dsh sends.
enum class WebSocketCloseCode : uint16_t {
  kNormal = 1000,
  kGoingAway = 1001,        // the host is stopping
  kPolicyViolation = 1008,  // the client fell too far behind
  kInternalError = 1011,    // the server could not go on (e.g. a storage error)
};

// Bounds of one WebSocket connection.
struct WebSocketLimits {
  // Messages waiting to be written. A Send that would pass either bound
  // closes the connection with kPolicyViolation instead of growing memory.
  size_t max_queued_messages = 10'000;
  size_t max_queued_bytes = 4 << 20;
  // A bigger message from the client fails the connection.
  size_t max_incoming_message = 64 << 10;
  // How long a close handshake may take before the TCP connection is cut.
  std::chrono::milliseconds close_timeout{5'000};
};

class WebSocketConnection;  // server/websocket.h

// The application side of one accepted WebSocket connection. The server
// calls these on the connection's strand (WebSocketConnection::executor()),
// never concurrently. OnOpen and OnClose are called at most once each, and
// OnClose only after OnOpen: a session whose handshake fails is dropped
// without either.
class WebSocketSession {
 public:
  virtual ~WebSocketSession() = default;

  // The handshake completed. The session may keep `connection` until
  // OnClose (the two then reference each other; OnClose breaks the cycle).
  virtual void OnOpen(std::shared_ptr<WebSocketConnection> connection) = 0;
  // A complete message from the client.
  virtual void OnMessage(std::string message) { (void)message; }
  // The outgoing queue became empty (for flow control).
  virtual void OnDrained() {}
  // The connection ended (either side closed it, it failed, or the server
  // stopped). Release the connection and anything tied to it here.
  virtual void OnClose() = 0;
};

using UpgradeDecision = std::variant<HttpResponse, std::shared_ptr<WebSocketSession>>;
// Called once per upgrade request; may be called from any thread.
using UpgradeRespond = std::function<void(UpgradeDecision)>;
using WebSocketHandler = std::function<void(HttpRequest, UpgradeRespond)>;

}  // namespace dsh::server
