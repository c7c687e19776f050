#pragma once

#include <memory>
#include <set>
#include <string>

#include "server/http_types.h"
#include "session/event_hub.h"

namespace dsh::server {

// The profile's change feed over a WebSocket (`GET /api/changes`,
// docs/API.md): `{"type":"ready"}` once, then `{"type":"changed", ...}`
// naming the sessions whose log grew or whose live agent started or stopped
// on this host, and whether the loops or this host's MCP servers changed. It
// carries no data: a view re-reads what a message names (the browser's
// sidebar reads session_status, its automation panel GET /api/host).
//
// Coalesced by flow control: a change that arrives while a message waits to
// be written joins the next message, so a busy host sends a slow client few
// messages instead of one per commit. More than kMaxListedSessions sessions
// in one message become `"all_sessions": true`.
//
// Sequence-bound to the connection's strand from OnOpen on; the hub
// listeners (any thread) only post to it.
class ChangeFeed final : public WebSocketSession, public std::enable_shared_from_this<ChangeFeed> {
 public:
  static constexpr size_t kMaxListedSessions = 100;

  // `hub` must outlive the connection this feed is attached to.
  explicit ChangeFeed(session::EventHub& hub) : hub_(hub) {}

  void OnOpen(std::shared_ptr<WebSocketConnection> connection) override;
  void OnDrained() override;
  void OnClose() override;

 private:
  void OnSessionChanged(const std::string& session_id);
  void OnChange(const session::EventHub::Change& change);
  // Sends what is pending when nothing waits to be written.
  void Flush();

  session::EventHub& hub_;

  // Strand-only state.
  std::shared_ptr<WebSocketConnection> connection_;  // OnOpen..OnClose
  std::unique_ptr<session::EventHub::Subscription> events_;
  std::unique_ptr<session::EventHub::Subscription> changes_;
  std::set<std::string> sessions_;  // changed since the last message
  bool all_sessions_ = false;       // too many to list
  bool loops_ = false;
  bool mcp_ = false;
  bool activity_ = false;
  bool notifications_ = false;
};

}  // namespace dsh::server
