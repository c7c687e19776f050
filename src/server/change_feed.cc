#include "server/change_feed.h"

#include <boost/asio/post.hpp>

#include <cassert>

#include "base/json.h"
#include "server/websocket.h"

namespace dsh::server {

namespace net = boost::asio;

void ChangeFeed::OnOpen(std::shared_ptr<WebSocketConnection> connection) {
  connection_ = std::move(connection);
  assert(connection_->RunningOnStrand());
  // Subscribed before `ready`: a client that reads its views after `ready`
  // misses no change.
  events_ = hub_.SubscribeAll([weak = weak_from_this(), ex = connection_->executor()](
                                  const std::string& session_id, const std::vector<session::Event>&) {
    net::post(ex, [weak, session_id] {
      if (auto self = weak.lock()) self->OnSessionChanged(session_id);
    });
  });
  changes_ = hub_.SubscribeChanges(
      [weak = weak_from_this(), ex = connection_->executor()](const session::EventHub::Change& change) {
        net::post(ex, [weak, change] {
          if (auto self = weak.lock()) self->OnChange(change);
        });
      });
  (void)connection_->Send(DumpJson(Json{{"type", "ready"}}));
}

void ChangeFeed::OnDrained() { Flush(); }

void ChangeFeed::OnClose() {
  events_.reset();
  changes_.reset();
  connection_.reset();
}

void ChangeFeed::OnSessionChanged(const std::string& session_id) {
  if (!connection_) return;
  if (!all_sessions_) {
    sessions_.insert(session_id);
    if (sessions_.size() > kMaxListedSessions) {
      all_sessions_ = true;
      sessions_.clear();
    }
  }
  Flush();
}

void ChangeFeed::OnChange(const session::EventHub::Change& change) {
  if (!connection_) return;
  if (change.topic == "session" && !change.id.empty()) return OnSessionChanged(change.id);
  if (change.topic == "loops") loops_ = true;
  if (change.topic == "mcp") mcp_ = true;
  if (change.topic == "activity") activity_ = true;
  if (change.topic == "notifications") notifications_ = true;
  Flush();
}

void ChangeFeed::Flush() {
  if (!connection_ || connection_->closing() || connection_->queued_messages() > 0) return;
  if (sessions_.empty() && !all_sessions_ && !loops_ && !mcp_ && !activity_ && !notifications_) return;
  Json message{{"type", "changed"}};
  if (all_sessions_) {
    message["all_sessions"] = true;
  } else if (!sessions_.empty()) {
    message["sessions"] = sessions_;
  }
  if (loops_) message["loops"] = true;
  if (mcp_) message["mcp"] = true;
  if (activity_) message["activity"] = true;
  if (notifications_) message["notifications"] = true;
  sessions_.clear();
  all_sessions_ = false;
  loops_ = false;
  mcp_ = false;
  activity_ = false;
  notifications_ = false;
  (void)connection_->Send(DumpJson(message));
}

}  // namespace dsh::server
