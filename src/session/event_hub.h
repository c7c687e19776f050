#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "session/event.h"

namespace dsh::session {

// Fans committed events out to in-process listeners (the live event stream,
// plugins that react to events). SessionStore publishes every append after
// its COMMIT returned, from the database writer thread, in commit order, so
// a listener sees each session's events in seq order. Events appended by
// another host on the same profile are not published here; a listener that
// sees a seq gap reads the missing events from the store.
//
// Listeners run on the publishing thread: they must be quick and must not
// block or call back into the hub (post to your own strand instead).
//
// Thread-safe.
class EventHub {
 public:
  using Listener = std::function<void(const std::string& session_id, const std::vector<Event>& events)>;
  // A piece of a model answer being generated, not an event: it is never
  // stored, a listener may miss it, and the committed event replaces it.
  // `after_seq` is the seq of the session's last event when the model call
  // began.
  //
  // `offset` is how much of this kind the model call had streamed before
  // this piece, in UTF-16 code units (a browser's String#length); the hub
  // sets it. With it a viewer that joined late or reconnected, and got what
  // was streamed so far first (StreamedSoFar), drops what it already holds.
  struct Delta {
    int64_t after_seq = 0;
    std::string kind;  // "text" or "reasoning"
    std::string text;
    int64_t offset = 0;
  };
  // What the session's current model call has streamed so far, by kind.
  struct Streamed {
    int64_t after_seq = 0;
    std::string text;
    std::string reasoning;
    int64_t text_units = 0;  // their lengths in UTF-16 code units
    int64_t reasoning_units = 0;
  };
  using DeltaListener = std::function<void(const std::string& session_id, const Delta& delta)>;
  // Something a view shows changed without an event in a session's log: a
  // session's live agent started or stopped here (topic "session", id = the
  // session), a plugin's state changed (topic "loops"), or an MCP server of
  // the host changed its state or tools (topic "mcp"), or the activity list
  // changed (topic "activity", id = the session), or a webhook message was
  // written, sent or failed (topic "notifications"). Best effort and
  // in-process, like deltas: a listener re-reads what the change names.
  struct Change {
    std::string topic;
    std::string id;  // may be empty
  };
  using ChangeListener = std::function<void(const Change& change)>;

  // Unsubscribes when destroyed; after the destructor returns the listener
  // is not running and will not run again.
  class Subscription {
   public:
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

   private:
    friend class EventHub;
    Subscription(EventHub& hub, uint64_t id) : hub_(hub), id_(id) {}
    EventHub& hub_;
    uint64_t id_;
  };

  // Another host on the profile's database committed events of a session
  // (its store's notice, docs/STORAGE.md): they are not in hand, so a
  // listener reads them from the store.
  using RemoteListener = std::function<void(const std::string& session_id)>;

  // Listens to one session's events (and, when given, its deltas and other
  // hosts' appends).
  std::unique_ptr<Subscription> Subscribe(const std::string& session_id, Listener listener,
                                          DeltaListener deltas = nullptr, RemoteListener remote = nullptr);
  // Listens to every session's events.
  std::unique_ptr<Subscription> SubscribeAll(Listener listener);
  // Listens to every Change.
  std::unique_ptr<Subscription> SubscribeChanges(ChangeListener listener);

  void Publish(const std::string& session_id, const std::vector<Event>& events);
  // Best effort, from the model's thread: the session's delta listeners.
  // The hub keeps what was streamed until an event that stands for it
  // (an answer, reasoning, a tool call or the turn's end) is published.
  void PublishDelta(const std::string& session_id, Delta delta);
  // What the session's model call in progress has streamed, if any.
  std::optional<Streamed> StreamedSoFar(const std::string& session_id);
  // From any thread.
  void PublishChange(const Change& change);
  // From any thread: the session's remote listeners, then a "session" Change.
  void PublishRemote(const std::string& session_id);

 private:
  struct Entry {
    std::string session_id;  // empty = all sessions
    Listener listener;
    DeltaListener deltas;    // may be null
    RemoteListener remote;   // may be null
    ChangeListener changes;  // set only for a change subscription (then listener is null)
  };
  void Unsubscribe(uint64_t id);

  // Held while listeners run, so Unsubscribe waits for a running listener.
  std::mutex mu_;
  uint64_t next_id_ = 1;                                 // GUARDED_BY(mu_)
  std::map<uint64_t, Entry> entries_;                     // GUARDED_BY(mu_)
  std::multimap<std::string, uint64_t> by_session_;       // GUARDED_BY(mu_)
  std::vector<uint64_t> change_listeners_;                // GUARDED_BY(mu_)
  std::map<std::string, Streamed> streamed_;              // GUARDED_BY(mu_)
};

}  // namespace dsh::session
