#include "server/event_stream.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cassert>

#include "base/json.h"
#include "server/websocket.h"

namespace dsh::server {

namespace net = boost::asio;
using session::Event;

EventStream::EventStream(session::SessionStore& store, session::EventHub& hub, std::string session_id,
                         int64_t after_seq, Options options)
    : store_(store),
      hub_(hub),
      session_id_(std::move(session_id)),
      options_(options),
      last_sent_seq_(after_seq),
      known_seq_(after_seq) {}

void EventStream::OnOpen(std::shared_ptr<WebSocketConnection> connection) {
  connection_ = std::move(connection);
  assert(connection_->RunningOnStrand());
  // Subscribe first, then read: every event commits either before the
  // backlog read starts (and is in it) or after the subscription (and is
  // published to it); duplicates are dropped by seq.
  subscription_ = hub_.Subscribe(
      session_id_,
      [weak = weak_from_this(), ex = connection_->executor()](const std::string&, const std::vector<Event>& events) {
        net::post(ex, [weak, events] {
          if (auto self = weak.lock()) self->OnLive(events);
        });
      },
      [weak = weak_from_this(), ex = connection_->executor()](const std::string&, const session::EventHub::Delta& d) {
        net::post(ex, [weak, d] {
          if (auto self = weak.lock()) self->OnDelta(d);
        });
      },
      [weak = weak_from_this(), ex = connection_->executor()](const std::string&) {
        net::post(ex, [weak] {
          if (auto self = weak.lock()) {
            self->remote_pending_ = true;
            self->Pump();
          }
        });
      });
  Pump();
}

void EventStream::OnDrained() {
  if (!waiting_drain_) return;
  waiting_drain_ = false;
  Pump();
}

void EventStream::OnClose() {
  subscription_.reset();  // the listener will not run again
  connection_.reset();
  live_.clear();
}

void EventStream::OnLive(const std::vector<Event>& events) {
  if (!connection_) return;
  assert(connection_->RunningOnStrand());
  for (const Event& e : events) {
    known_seq_ = std::max(known_seq_, e.seq);
    if (e.seq > last_sent_seq_) live_.push_back(e);
  }
  // Too many waiting behind a store read: forget them; known_seq_ remembers
  // how far to read.
  if (live_.size() > options_.max_buffered_live) live_.clear();
  Pump();
}

void EventStream::OnDelta(const session::EventHub::Delta& d) {
  if (!connection_ || connection_->closing()) return;
  // Only on top of what the client has: a delta never overtakes an event.
  // Dropped, not queued, when the client is slow: the events are the record,
  // and CatchUpOnDeltas sends what was streamed once the client has caught up.
  if (!backlog_done_ || !live_.empty() || d.after_seq > last_sent_seq_ || known_seq_ > last_sent_seq_ ||
      connection_->queued_messages() >= static_cast<size_t>(options_.page)) {
    behind_on_deltas_ = true;
    return;
  }
  SendDelta(d.after_seq, d.kind, d.text, d.offset);
}

void EventStream::SendDelta(int64_t after_seq, std::string_view kind, std::string_view text, int64_t offset) {
  (void)connection_->Send(DumpJson(
      Json{{"type", "delta"}, {"after_seq", after_seq}, {"kind", kind}, {"offset", offset}, {"text", text}}));
}

void EventStream::CatchUpOnDeltas() {
  if (!behind_on_deltas_) return;
  behind_on_deltas_ = false;
  auto so_far = hub_.StreamedSoFar(session_id_);
  if (!so_far || so_far->after_seq > last_sent_seq_) return;
  if (!so_far->reasoning.empty()) SendDelta(so_far->after_seq, "reasoning", so_far->reasoning, 0);
  if (!so_far->text.empty()) SendDelta(so_far->after_seq, "text", so_far->text, 0);
}

void EventStream::Pump() {
  if (!connection_ || connection_->closing() || reading_ || waiting_drain_) return;
  if (backlog_done_) {
    while (!live_.empty()) {
      const Event& e = live_.front();
      if (e.seq > last_sent_seq_ + 1) break;  // a gap: read it first
      if (e.seq == last_sent_seq_ + 1 && !SendEvent(e)) return;
      live_.pop_front();
    }
  }
  int64_t want = options_.page;
  bool remote = false;
  if (backlog_done_) {
    int64_t upto = live_.empty() ? known_seq_ : live_.front().seq - 1;
    if (upto > last_sent_seq_) {
      want = std::min(want, upto - last_sent_seq_);
    } else if (remote_pending_ && live_.empty()) {
      remote = true;  // another host appended: read what is there
    } else {
      return CatchUpOnDeltas();  // caught up
    }
  }
  if (connection_->queued_messages() >= static_cast<size_t>(options_.page)) {
    waiting_drain_ = true;  // OnDrained resumes
    return;
  }
  reading_ = true;
  if (remote) remote_pending_ = false;
  auto guard = std::make_shared<net::executor_work_guard<net::any_io_executor>>(connection_->executor());
  store_.ReadEventsAsync(session_id_, last_sent_seq_, want,
                         [self = shared_from_this(), ex = connection_->executor(), guard,
                          want, remote](Result<std::vector<Event>> read) {
                           net::post(ex, [self, want, remote, read = std::move(read)]() mutable {
                             self->OnStoreRead(want, remote, std::move(read));
                           });
                           guard->reset();
                         });
}

void EventStream::OnStoreRead(int64_t asked, bool remote, Result<std::vector<Event>> read) {
  reading_ = false;
  if (!connection_ || connection_->closing()) return;
  if (!read.ok()) return Fail(read.status());
  for (const Event& e : *read) {
    if (e.seq <= last_sent_seq_) continue;
    if (e.seq != last_sent_seq_ + 1) {
      return Fail(Internal("the store skipped from seq " + std::to_string(last_sent_seq_) + " to " +
                           std::to_string(e.seq)));
    }
    known_seq_ = std::max(known_seq_, e.seq);
    if (!SendEvent(e)) return;
  }
  if (!backlog_done_) {
    if (static_cast<int64_t>(read->size()) < asked) {
      backlog_done_ = true;
      if (!connection_->Send(DumpJson(Json{{"type", "ready"}, {"last_seq", last_sent_seq_}}))) return;
    }
  } else if (remote) {
    // A full page: there may be more.
    if (static_cast<int64_t>(read->size()) == asked) remote_pending_ = true;
  } else if (read->empty()) {
    // The hub announced events the store does not have: reading again
    // would spin.
    return Fail(
        Internal("events up to seq " + std::to_string(known_seq_) + " were published but are not stored"));
  }
  Pump();
}

bool EventStream::SendEvent(const Event& e) {
  if (!connection_->Send(DumpJson(Json{{"type", "event"}, {"event", session::EventToJson(e)}}))) return false;
  last_sent_seq_ = e.seq;
  return true;
}

void EventStream::Fail(const Status& error) {
  connection_->Close(WebSocketCloseCode::kInternalError, error.code() + ": " + error.message());
}

}  // namespace dsh::server
