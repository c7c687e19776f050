#include "plugins/loop/v1_import.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

#include "base/ids.h"
#include "plugins/loop/loop_registry.h"
#include "time/rfc3339.h"

namespace dsh::plugins::loop {
namespace {

std::optional<int64_t> InstantOf(const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) return static_cast<int64_t>(v.get<double>());
  if (v.is_string()) {
    auto t = ParseRfc3339(v.get<std::string>());
    if (t.ok()) return ToUnixMillis(*t);
  }
  return std::nullopt;
}

std::optional<std::string> IdOf(const Json& data) {
  auto it = data.find("id");
  if (it == data.end()) return std::nullopt;
  if (it->is_string() && !it->get<std::string>().empty()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return std::nullopt;
}

std::string ActionOf(const Json& data) {
  for (const char* key : {"action", "op", "kind"}) {
    auto it = data.find(key);
    if (it != data.end() && it->is_string()) return it->get<std::string>();
  }
  if (data.contains("prompt") || data.contains("time_in_seconds")) return "create";
  if (data.contains("next_at")) return "dispatch";
  return "delete";
}

}  // namespace

std::vector<V1Loop> FoldV1Loops(const std::string& session_id, const std::vector<session::Event>& events) {
  std::vector<V1Loop> active;
  auto find = [&](const std::string& id) {
    return std::find_if(active.begin(), active.end(), [&](const V1Loop& l) { return l.id == id; });
  };
  for (const session::Event& e : events) {
    if (e.type != kV1EventType) continue;
    auto skip = [&](const char* why) {
      spdlog::warn("session {}: v1 loop event seq {} is skipped: {}", session_id, e.seq, why);
    };
    if (!e.data.is_object()) {
      skip("its data is not an object");
      continue;
    }
    auto id = IdOf(e.data);
    if (!id) {
      skip("it has no id");
      continue;
    }
    std::string action = ActionOf(e.data);
    auto it = find(*id);
    if (action == "create") {
      auto prompt = e.data.find("prompt");
      auto every = e.data.find("time_in_seconds");
      if (prompt == e.data.end() || !prompt->is_string() || every == e.data.end() || !every->is_number_integer() ||
          every->get<int64_t>() <= 0) {
        skip("a create needs a prompt and a positive integer time_in_seconds");
        continue;
      }
      std::string text = prompt->get<std::string>();
      auto first = text.find_first_not_of(" \t\r\n");
      auto last = text.find_last_not_of(" \t\r\n");
      if (first == std::string::npos) {
        skip("its prompt is blank");
        continue;
      }
      V1Loop l{*id, text.substr(first, last - first + 1), every->get<int64_t>(), std::nullopt, e.at};
      if (auto n = e.data.find("next_at"); n != e.data.end()) l.next_at = InstantOf(*n);
      if (it != active.end()) {
        *it = std::move(l);  // re-created under the same id: the last one counts
      } else {
        active.push_back(std::move(l));
      }
    } else if (action == "delete") {
      if (it != active.end()) active.erase(it);
    } else if (action == "dispatch") {
      if (it != active.end()) {
        if (auto n = e.data.find("next_at"); n != e.data.end()) it->next_at = InstantOf(*n);
      }
    } else {
      skip("its action is not create, delete or dispatch");
    }
  }
  return active;
}

Result<V1ImportReport> ImportV1Loops(store::Database& db, session::SessionStore& sessions, const Clock& clock) {
  V1ImportReport report;
  DSH_ASSIGN_OR_RETURN(bool done, db.ReadValue<bool>([](store::Tx& tx) -> Result<bool> {
    bool found = false;
    DSH_RETURN_IF_ERROR(tx.Query("SELECT 1 FROM loop_settings WHERE key = 'v1_import'", {}, [&](const store::Row&) {
      found = true;
      return Status::Ok();
    }));
    return found;
  }));
  if (done) {
    report.already_done = true;
    return report;
  }
  DSH_ASSIGN_OR_RETURN(auto ids, sessions.SessionsWithEventType(kV1EventType));
  for (const std::string& session_id : ids) {
    ++report.sessions;
    DSH_ASSIGN_OR_RETURN(auto events, sessions.ReadEvents(session_id, 0, std::numeric_limits<int64_t>::max()));
    std::vector<V1Loop> active = FoldV1Loops(session_id, events);
    if (active.empty()) continue;
    DSH_ASSIGN_OR_RETURN(int64_t added, db.WriteValue<int64_t>([&](store::Tx& tx) -> Result<int64_t> {
      int64_t n = 0;
      for (const V1Loop& v1 : active) {
        LoopRecord l;
        l.loop_id = NewId("loop_", clock);
        DSH_ASSIGN_OR_RETURN(int64_t claimed,
                             tx.Exec("INSERT INTO loop_v1_imports (session_id, v1_id, loop_id) VALUES (?, ?, ?)"
                                     " ON CONFLICT (session_id, v1_id) DO NOTHING",
                                     {std::string_view(session_id), std::string_view(v1.id), std::string_view(l.loop_id)}));
        if (claimed != 1) continue;  // imported before
        l.prompt = v1.prompt;
        l.schedule = Schedule{ScheduleKind::kEvery, v1.time_in_seconds, "", std::nullopt};
        l.target = session_id;
        l.created_by = session_id;
        l.created_at = v1.created_at;
        if (v1.next_at) {
          l.due_at = *v1.next_at;
        } else {
          DSH_ASSIGN_OR_RETURN(Timetable t, Timetable::Make(l.schedule, TimeZone::Utc()));
          DSH_ASSIGN_OR_RETURN(l.due_at, t.First(v1.created_at));
        }
        DSH_RETURN_IF_ERROR(registry::Insert(tx, l));
        ++n;
      }
      return n;
    }));
    report.imported += added;
  }
  DSH_RETURN_IF_ERROR(db.WriteValue<bool>([](store::Tx& tx) -> Result<bool> {
                          DSH_RETURN_IF_ERROR(tx.Exec("INSERT INTO loop_settings (key, value) VALUES ('v1_import', 'done')"
                                                      " ON CONFLICT (key) DO NOTHING")
                                                  .status());
                          return true;
                        })
                          .status());
  if (report.imported > 0) {
    spdlog::info("imported {} active v1 loop(s) from {} session(s) into the loop registry", report.imported,
                 report.sessions);
  }
  return report;
}

}  // namespace dsh::plugins::loop
