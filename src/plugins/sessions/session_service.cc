#include "plugins/sessions/session_service.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <utility>

#include "base/clock.h"
#include "time/rfc3339.h"

namespace dsh::plugins::sessions {
namespace {

agent::AgentStatus StatusOf(const agent::AgentManager& agents, const std::string& id) {
  return agents.LiveStatus(id).value_or(agent::AgentStatus::kCold);
}

// The title snapshots of `ids` in one read; when that read fails, one read
// per id, leaving out the ids whose snapshot cannot be read (a failed title
// read drops that row's title, never the row: spec 003 section 2).
void ReadTitlesEach(session::SessionStore& store, std::vector<std::string> ids,
                    std::function<void(std::map<std::string, session::Titles>)> done) {
  auto batch = ids;
  store.ReadTitlesAsync(std::move(batch), [&store, ids = std::move(ids), done = std::move(done)](
                                              Result<std::map<std::string, session::Titles>> all) mutable {
    if (all.ok()) return done(std::move(all).value());
    if (ids.empty()) return done({});
    struct Gather {
      std::mutex mu;
      std::map<std::string, session::Titles> titles;  // GUARDED_BY(mu)
      std::atomic<size_t> left{0};
      std::function<void(std::map<std::string, session::Titles>)> done;
    };
    auto gather = std::make_shared<Gather>();
    gather->left = ids.size();
    gather->done = std::move(done);
    for (auto& id : ids) {
      store.ReadTitlesAsync({id}, [gather](Result<std::map<std::string, session::Titles>> one) {
        if (one.ok()) {
          std::lock_guard lock(gather->mu);
          gather->titles.merge(*one);
        }
        if (gather->left.fetch_sub(1) == 1) gather->done(std::move(gather->titles));
      });
    }
  });
}

void SetTitle(SessionStatusRow& row, const session::Titles& titles) {
  row.title = titles.Effective();
  if (auto source = titles.Source()) row.title_source = std::string(*source);
}

}  // namespace

Json StatusRowToJson(const SessionStatusRow& row) {
  Json j = {{"session_id", row.session_id}, {"status", std::string(agent::AgentStatusName(row.status))}};
  if (row.title) j["title"] = *row.title;
  if (row.awaiting_approval) j["awaiting_approval"] = true;
  if (row.updated_at) {
    // Both come from the header: a missing session has neither.
    j["updated_at"] = FormatRfc3339Utc(FromUnixMillis(*row.updated_at));
    j["archived"] = row.archived;
    j["title_source"] = row.title && row.title_source ? Json(*row.title_source) : Json();
    j["parent_id"] = row.parent_id ? Json(*row.parent_id) : Json();
  }
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
      rows->push_back({.session_id = h.id,
                       .status = StatusOf(agents, h.id),
                       .updated_at = h.updated_at,
                       .archived = h.archived,
                       .parent_id = h.parent_id,
                       .awaiting_approval = agents.AwaitingApproval(h.id)});
      ids.push_back(h.id);
    }
    ReadTitlesEach(store, std::move(ids), [rows, done](std::map<std::string, session::Titles> titles) {
      for (auto& row : *rows) {
        auto it = titles.find(row.session_id);
        if (it != titles.end()) SetTitle(row, it->second);
      }
      done(std::move(*rows));
    });
  });
}

void SessionService::Exact(std::string session_id, Callback<SessionStatusRow> done) const {
  store_.GetAsync(session_id, [&store = store_, &agents = agents_, session_id, done = std::move(done)](Result<session::SessionHeader> header) {
    std::optional<agent::AgentStatus> live = agents.LiveStatus(session_id);
    SessionStatusRow row{.session_id = session_id};
    if (header.ok()) {
      row.status = live.value_or(agent::AgentStatus::kCold);
      row.updated_at = header->updated_at;
      row.archived = header->archived;
      row.parent_id = header->parent_id;
      row.awaiting_approval = agents.AwaitingApproval(session_id);
    } else if (header.status().code() == codes::kNotFound) {
      if (!live) return done(row);
      row.status = *live;  // live but not yet readable here: still not missing
    } else {
      return done(header.status());
    }
    store.ReadTitlesAsync({session_id}, [row = std::move(row), done](Result<std::map<std::string, session::Titles>> titles) mutable {
      if (titles.ok()) {
        auto it = titles->find(row.session_id);
        if (it != titles->end()) SetTitle(row, it->second);
      }
      done(std::move(row));
    });
  });
}

void SessionService::Read(std::string session_id, int64_t offset, int64_t limit, Callback<ReadWindow> done) const {
  index_->Read(session_id, offset, limit,
               [session_id, offset, done = std::move(done)](Result<ConversationIndex::Window> window) {
                 if (!window.ok()) return done(window.status());
                 const int64_t total = window->total;
                 if (total > 0 && offset > total) {
                   return done(Status(codes::kInvalidArguments,
                                      "`offset` " + std::to_string(offset) + " is beyond the end of session " +
                                          session_id + ", which has " + std::to_string(total) + " messages"));
                 }
                 done(ReadWindow{session_id, offset, std::move(window->blocks), total});
               });
}

}  // namespace dsh::plugins::sessions
