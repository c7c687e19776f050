#include "session/conversation.h"

#include <optional>

namespace dsh::session {
namespace {

class Projector {
 public:
  explicit Projector(const std::string& session_id) : session_id_(session_id) {}

  Status Add(const Event& e) {
    const std::string& t = e.type;
    if (t == event_types::kUserMessage) {
      DSH_ASSIGN_OR_RETURN(std::string text, Text(e, "text"));
      Close();
      blocks_.push_back({{"role", "user"}, {"content", std::move(text)}});
    } else if (t == event_types::kReasoning) {
      DSH_ASSIGN_OR_RETURN(std::string text, Text(e, "text"));
      Json& b = OpenAssistant([](const Json& a) { return !a.contains("reasoning") && a["content"] == "" && !a.contains("tool_calls"); });
      b["reasoning"] = std::move(text);
    } else if (t == event_types::kAssistantMessage) {
      DSH_ASSIGN_OR_RETURN(std::string text, Text(e, "text"));
      Json& b = OpenAssistant([](const Json& a) { return a["content"] == "" && !a.contains("tool_calls"); });
      b["content"] = std::move(text);
    } else if (t == event_types::kToolCall) {
      DSH_ASSIGN_OR_RETURN(std::string id, Text(e, "call_id"));
      DSH_ASSIGN_OR_RETURN(std::string name, Text(e, "name"));
      Json args = e.data.contains("arguments") ? e.data["arguments"] : Json::object();
      Json& b = OpenAssistant([](const Json&) { return true; });
      b["tool_calls"].push_back({{"id", std::move(id)}, {"name", std::move(name)}, {"arguments", std::move(args)}});
    } else if (t == event_types::kToolResult) {
      DSH_ASSIGN_OR_RETURN(std::string id, Text(e, "call_id"));
      DSH_ASSIGN_OR_RETURN(std::string name, Text(e, "name"));
      Json content;
      if (e.data.contains("error")) {
        content = {{"error", e.data["error"]}};
      } else if (e.data.contains("result")) {
        content = e.data["result"];
      } else {
        return Corrupt(e, "needs `result` or `error`");
      }
      Close();
      blocks_.push_back({{"role", "tool"},
                         {"tool_call_id", std::move(id)},
                         {"name", std::move(name)},
                         {"content", content.is_string() ? content.get<std::string>() : DumpJson(content)}});
    }
    return Status::Ok();
  }

  std::vector<Json> Take() { return std::move(blocks_); }

 private:
  // The assistant block of the current model step when `fits` accepts it,
  // else a new one.
  template <typename Fits>
  Json& OpenAssistant(Fits fits) {
    if (!open_ || !fits(blocks_[*open_])) {
      blocks_.push_back({{"role", "assistant"}, {"content", ""}});
      open_ = blocks_.size() - 1;
    }
    return blocks_[*open_];
  }
  void Close() { open_.reset(); }

  Result<std::string> Text(const Event& e, const char* field) {
    auto it = e.data.find(field);
    if (it == e.data.end() || !it->is_string()) {
      return Corrupt(e, std::string("needs a string `") + field + "`");
    }
    return it->get<std::string>();
  }

  Status Corrupt(const Event& e, const std::string& why) {
    return Status(codes::kCorruptEvent,
                  "session " + session_id_ + " seq " + std::to_string(e.seq) + ": a '" + e.type + "' event " + why);
  }

  const std::string& session_id_;
  std::vector<Json> blocks_;
  std::optional<size_t> open_;
};

}  // namespace

Result<std::vector<Json>> ProjectConversation(const std::string& session_id, const std::vector<Event>& events) {
  Projector p(session_id);
  for (const auto& e : events) DSH_RETURN_IF_ERROR(p.Add(e));
  return p.Take();
}

}  // namespace dsh::session
