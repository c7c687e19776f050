#include "plugins/sessions/session_service.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "base/clock.h"
#include "session/conversation.h"
#include "time/rfc3339.h"

namespace dsh::plugins::sessions {
namespace {

// Events read per query while projecting a whole log.
constexpr int64_t kEventPage = 4096;

agent::AgentStatus StatusOf(const agent::AgentManager& agents, const std::string& id) {
  return agents.LiveStatus(id).value_or(agent::AgentStatus::kCold);
}

// Reads every event of a session, a page at a time, then calls `done` once.
void ReadAllEvents(session::SessionStore& store, std::string id, std::shared_ptr<std::vector<session::Event>> acc,
                   std::function<void(Result<std::vector<session::Event>>)> done) {
  int64_t after = acc->empty() ? 0 : acc->back().seq;
  store.ReadEventsAsync(id, after, kEventPage,
                        [&store, id, acc, done = std::move(done)](Result<std::vector<session::Event>> page) mutable {
                          if (!page.ok()) return done(page.status());
                          bool more = static_cast<int64_t>(page->size()) == kEventPage;
                          acc->insert(acc->end(), std::make_move_iterator(page->begin()),
                                      std::make_move_iterator(page->end()));
                          if (!more) return done(std::move(*acc));
                          ReadAllEvents(store, std::move(id), acc, std::move(done));
                        });
}

}  // namespace

Json StatusRowToJson(const SessionStatusRow& row) {
  Json j = {{"session_id", row.session_id}, {"status", std::string(agent::AgentStatusName(row.status))}};
  if (row.title) j["title"] = *row.title;
  if (row.updated_at) j["updated_at"] = FormatRfc3339Utc(FromUnixMillis(*row.updated_at));
  return j;
}

std::string ReadFooter(const ReadWindow& w) {
  auto shown = static_cast<int64_t>(w.messages.size());
  int64_t first = shown > 0 ? w.offset : 0;
  int64_t last = shown > 0 ? w.offset + shown - 1 : 0;
  return "(Showing messages " + std::to_string(first) + "-" + std::to_string(last) + " of " +
         std::to_string(w.total_messages) + ")";
}

void SessionService::Recent(int64_t n, Callback<std::vector<SessionStatusRow>> done) const {
  store_.ListRecentAsync(n, [&store = store_, &agents = agents_, done = std::move(done)](Result<std::vector<session::SessionHeader>> headers) {
    if (!headers.ok()) return done(headers.status());
    auto rows = std::make_shared<std::vector<SessionStatusRow>>();
    std::vector<std::string> ids;
    rows->reserve(headers->size());
    ids.reserve(headers->size());
    for (const auto& h : *headers) {
      rows->push_back({h.id, std::nullopt, StatusOf(agents, h.id), h.updated_at});
      ids.push_back(h.id);
    }
    store.ReadTitlesAsync(std::move(ids), [rows, done](Result<std::map<std::string, session::Titles>> titles) {
      // A failed title read keeps every row, without titles (spec 003 section 2).
      if (titles.ok()) {
        for (auto& row : *rows) {
          auto it = titles->find(row.session_id);
          if (it != titles->end()) row.title = it->second.Effective();
        }
      }
      done(std::move(*rows));
    });
  });
}

void SessionService::Exact(std::string session_id, Callback<SessionStatusRow> done) const {
  store_.GetAsync(session_id, [&store = store_, &agents = agents_, session_id, done = std::move(done)](Result<session::SessionHeader> header) {
    std::optional<agent::AgentStatus> live = agents.LiveStatus(session_id);
    SessionStatusRow row{session_id, std::nullopt, agent::AgentStatus::kMissing, std::nullopt};
    if (header.ok()) {
      row.status = live.value_or(agent::AgentStatus::kCold);
      row.updated_at = header->updated_at;
    } else if (header.status().code() == codes::kNotFound) {
      if (!live) return done(row);
      row.status = *live;  // live but not yet readable here: still not missing
    } else {
      return done(header.status());
    }
    store.ReadTitlesAsync({session_id}, [row = std::move(row), done](Result<std::map<std::string, session::Titles>> titles) mutable {
      if (titles.ok()) {
        auto it = titles->find(row.session_id);
        if (it != titles->end()) row.title = it->second.Effective();
      }
      done(std::move(row));
    });
  });
}

void SessionService::Read(std::string session_id, int64_t offset, int64_t limit, Callback<ReadWindow> done) const {
  auto acc = std::make_shared<std::vector<session::Event>>();
  ReadAllEvents(store_, session_id, acc,
                [session_id, offset, limit, done = std::move(done)](Result<std::vector<session::Event>> events) {
                  if (!events.ok()) return done(events.status());
                  auto blocks = session::ProjectConversation(session_id, *events);
                  if (!blocks.ok()) return done(blocks.status());
                  auto total = static_cast<int64_t>(blocks->size());
                  if (total > 0 && offset > total) {
                    return done(Status(codes::kInvalidArguments,
                                       "`offset` " + std::to_string(offset) + " is beyond the end of session " +
                                           session_id + ", which has " + std::to_string(total) + " messages"));
                  }
                  ReadWindow w{session_id, offset, {}, total};
                  if (offset <= total) {
                    int64_t end = std::min(total, offset - 1 + limit);
                    w.messages.assign(std::make_move_iterator(blocks->begin() + (offset - 1)),
                                      std::make_move_iterator(blocks->begin() + end));
                  }
                  done(std::move(w));
                });
}

}  // namespace dsh::plugins::sessions
