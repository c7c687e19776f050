#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "server/http_types.h"
#include "session/event.h"
#include "session/event_hub.h"
#include "session/session_store.h"

namespace dsh::server {

// The live event stream of one session over a WebSocket
// (`GET /api/sessions/{id}/stream`, docs/API.md): the events after
// `after_seq` from the store, then `{"type":"ready","last_seq":N}`, then
// every event as it commits — each event exactly once, in seq order.
//
// It subscribes to the EventHub before it reads the backlog, so an event
// committed meanwhile arrives live if not in the backlog; events at or below
// the last seq sent are dropped; a gap between the last seq sent and a live
// event (events appended by another host, live events that outran a store
// read, or live events dropped from a full buffer) is read from the store
// first. Store reads are paged and wait while the outgoing queue holds a page
// or more, so a long backlog is not held against the client's queue limits;
// live events are queued as they come, so a client that cannot keep up is
// closed by WebSocketConnection (1008). A failed store read closes the
// stream with 1011.
//
// Sequence-bound to the connection's strand from OnOpen on; the hub
// listener (DB writer thread) and store callbacks (DB reader threads) only
// post to it, holding a weak or shared reference.
class EventStream final : public WebSocketSession, public std::enable_shared_from_this<EventStream> {
 public:
  struct Options {
    int64_t page = 200;               // events per store read
    size_t max_buffered_live = 1000;  // live events held during a store read; more are re-read from the store
  };

  // `store` and `hub` must outlive the connection this stream is attached
  // to. `after_seq` >= 0.
  EventStream(session::SessionStore& store, session::EventHub& hub, std::string session_id, int64_t after_seq,
              Options options);

  void OnOpen(std::shared_ptr<WebSocketConnection> connection) override;
  void OnDrained() override;
  void OnClose() override;

 private:
  void OnLive(const std::vector<session::Event>& events);
  // A model delta: sent as {"type": "delta", ...} only when the client is
  // caught up; dropped otherwise (docs/API.md).
  void OnDelta(const session::EventHub::Delta& delta);
  // Sends what can be sent, then starts the store read that is due, if any.
  void Pump();
  // `remote`: a read for another host's appends (which may find nothing new).
  void OnStoreRead(int64_t asked, bool remote, Result<std::vector<session::Event>> read);
  [[nodiscard]] bool SendEvent(const session::Event& e);
  void SendDelta(int64_t after_seq, std::string_view kind, std::string_view text, int64_t offset);
  // Once caught up: what the model call in progress streamed so far.
  void CatchUpOnDeltas();
  void Fail(const Status& error);

  session::SessionStore& store_;
  session::EventHub& hub_;
  const std::string session_id_;
  const Options options_;

  // Strand-only state.
  std::shared_ptr<WebSocketConnection> connection_;  // OnOpen..OnClose
  std::unique_ptr<session::EventHub::Subscription> subscription_;
  int64_t last_sent_seq_;
  int64_t known_seq_ = 0;            // the highest seq known to exist
  std::deque<session::Event> live_;  // from the hub, ascending, not yet sent
  bool backlog_done_ = false;        // `ready` was sent
  bool reading_ = false;             // a store read is in flight
  bool waiting_drain_ = false;       // a store read waits for the outgoing queue
  bool remote_pending_ = false;      // another host appended: read past known_seq_
  // A delta was not sent (or none yet): once caught up, send what the model
  // call in progress streamed so far, and the client drops what it holds.
  bool behind_on_deltas_ = true;
};

}  // namespace dsh::server
