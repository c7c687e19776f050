#include "session/event_hub.h"

#include "base/strings.h"

namespace dsh::session {

EventHub::Subscription::~Subscription() { hub_.Unsubscribe(id_); }

std::unique_ptr<EventHub::Subscription> EventHub::Subscribe(const std::string& session_id, Listener listener,
                                                            DeltaListener deltas, RemoteListener remote) {
  std::lock_guard lock(mu_);
  uint64_t id = next_id_++;
  entries_.emplace(id, Entry{session_id, std::move(listener), std::move(deltas), std::move(remote)});
  by_session_.emplace(session_id, id);
  return std::unique_ptr<Subscription>(new Subscription(*this, id));
}

std::unique_ptr<EventHub::Subscription> EventHub::SubscribeAll(Listener listener) {
  return Subscribe("", std::move(listener));
}

std::unique_ptr<EventHub::Subscription> EventHub::SubscribeChanges(ChangeListener listener) {
  std::lock_guard lock(mu_);
  uint64_t id = next_id_++;
  entries_.emplace(id, Entry{.changes = std::move(listener)});
  change_listeners_.push_back(id);
  return std::unique_ptr<Subscription>(new Subscription(*this, id));
}

void EventHub::Unsubscribe(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (it->second.changes) {
    std::erase(change_listeners_, id);
    entries_.erase(it);
    return;
  }
  auto [lo, hi] = by_session_.equal_range(it->second.session_id);
  for (auto s = lo; s != hi; ++s) {
    if (s->second == id) {
      by_session_.erase(s);
      break;
    }
  }
  entries_.erase(it);
}

namespace {

// The events that replace what a model call streamed.
bool EndsStreaming(const Event& e) {
  using namespace event_types;
  return e.type == kAssistantMessage || e.type == kReasoning || e.type == kToolCall || e.type == kTurnEnd;
}

}  // namespace

void EventHub::Publish(const std::string& session_id, const std::vector<Event>& events) {
  if (events.empty()) return;
  std::lock_guard lock(mu_);
  if (auto it = streamed_.find(session_id); it != streamed_.end()) {
    for (const Event& e : events) {
      if (e.seq > it->second.after_seq && EndsStreaming(e)) {
        streamed_.erase(it);
        break;
      }
    }
  }
  for (const std::string* key : {&session_id, static_cast<const std::string*>(nullptr)}) {
    static const std::string kAll;
    auto [lo, hi] = by_session_.equal_range(key ? *key : kAll);
    for (auto s = lo; s != hi; ++s) entries_.at(s->second).listener(session_id, events);
  }
}

void EventHub::PublishDelta(const std::string& session_id, Delta delta) {
  std::lock_guard lock(mu_);
  Streamed& so_far = streamed_[session_id];
  if (so_far.after_seq != delta.after_seq) so_far = Streamed{.after_seq = delta.after_seq};
  const bool reasoning = delta.kind == "reasoning";
  int64_t& units = reasoning ? so_far.reasoning_units : so_far.text_units;
  delta.offset = units;
  units += static_cast<int64_t>(Utf16Length(delta.text));
  (reasoning ? so_far.reasoning : so_far.text) += delta.text;
  auto [lo, hi] = by_session_.equal_range(session_id);
  for (auto s = lo; s != hi; ++s) {
    const Entry& e = entries_.at(s->second);
    if (e.deltas) e.deltas(session_id, delta);
  }
}

std::optional<EventHub::Streamed> EventHub::StreamedSoFar(const std::string& session_id) {
  std::lock_guard lock(mu_);
  auto it = streamed_.find(session_id);
  if (it == streamed_.end()) return std::nullopt;
  return it->second;
}

void EventHub::PublishRemote(const std::string& session_id) {
  {
    std::lock_guard lock(mu_);
    auto [lo, hi] = by_session_.equal_range(session_id);
    for (auto s = lo; s != hi; ++s) {
      const Entry& e = entries_.at(s->second);
      if (e.remote) e.remote(session_id);
    }
  }
  PublishChange({"session", session_id});
}

void EventHub::PublishChange(const Change& change) {
  std::lock_guard lock(mu_);
  for (uint64_t id : change_listeners_) entries_.at(id).changes(change);
}

}  // namespace dsh::session
