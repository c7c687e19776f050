#include "session/export.h"

#include <algorithm>

#include "base/clock.h"
#include "base/json.h"
#include "base/strings.h"
#include "session/titles.h"
#include "time/rfc3339.h"
#include "time/time_zone.h"

namespace dsh::session {
namespace {

namespace et = event_types;

// A code fence longer than any run of backticks in `text`.
std::string Fence(const std::string& text) {
  size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<size_t>(3, longest + 1), '`');
}

std::string CodeBlock(const std::string& text, const std::string& language = "") {
  std::string fence = Fence(text);
  return fence + language + "\n" + text + (text.empty() || text.back() != '\n' ? "\n" : "") + fence + "\n";
}

// Every line of `text` as a Markdown quote.
std::string Quote(const std::string& text) {
  std::string out = "> ";
  for (char c : text) {
    out.push_back(c);
    if (c == '\n') out += "> ";
  }
  return out + "\n";
}

std::string Pretty(const Json& value) {
  if (value.is_string()) {
    auto parsed = ParseJson(value.get<std::string>());
    if (parsed.ok() && (parsed->is_object() || parsed->is_array())) return parsed->dump(2);
    return value.get<std::string>();
  }
  return value.dump(2);
}

// The prompt of a reminder's follow-up frame (schedule_log.cc ReminderFrame).
std::string ReminderPrompt(const std::string& text) {
  size_t at = text.find(" prompt: ");
  if (at == std::string::npos) return text;
  auto prompt = ParseJson(std::string_view(text).substr(at + 9));
  return prompt.ok() && prompt->is_string() ? prompt->get<std::string>() : text;
}

class Writer {
 public:
  explicit Writer(const SessionHeader& header) {
    auto zone = ResolveTimeZone(header.time_zone);
    zone_ = zone.ok() ? *zone : TimeZone::Utc();
  }

  // To the second: milliseconds are noise to a reader.
  std::string When(int64_t at) const { return FormatRfc3339InZone(FromUnixMillis(at - at % 1000), zone_); }

  void Section(const std::string& who, const Event& e, const std::string& body) {
    out_ += "## " + who + " · " + When(e.at) + "\n\n" + body;
    if (!body.empty() && body.back() != '\n') out_ += "\n";
    out_ += "\n";
  }
  void Line(const std::string& text) { out_ += text + "\n\n"; }
  std::string& out() { return out_; }

 private:
  TimeZone zone_ = TimeZone::Utc();
  std::string out_;
};

}  // namespace

std::string ExportMarkdown(const SessionHeader& header, const std::optional<std::string>& title,
                           const std::vector<Event>& events) {
  Writer w(header);
  w.out() += "# " + (title && !title->empty() ? *title : header.id) + "\n\n";
  std::string about = "Session `" + header.id + "` · created " + w.When(header.created_at) + " · model `" +
                      header.route.provider + "/" + header.route.model + "` · zone " + header.time_zone;
  if (header.parent_id) {
    about += " · forked from `" + *header.parent_id + "` after event " + std::to_string(header.seed_length);
  }
  w.Line(about);
  for (const Event& e : events) {
    const Json& d = e.data;
    auto text = [&] { return d.is_object() && d.contains("text") && d["text"].is_string() ? d["text"].get<std::string>() : ""; };
    const bool partial = d.is_object() && d.value("partial", false);
    if (e.type == et::kUserMessage) {
      const Json meta = d.is_object() ? d.value("meta", Json::object()) : Json::object();
      const std::string origin = meta.is_object() ? meta.value("origin", "") : "";
      if (origin == "loop") {
        std::string loop = meta.value("loop_id", "");
        w.Section("Loop run" + (loop.empty() ? "" : " `" + loop + "`"), e, Quote(LoopPrompt(text())));
      } else if (origin == "schedule") {
        w.Section("Reminder `" + meta.value("schedule_id", std::string()) + "`", e, Quote(ReminderPrompt(text())));
      } else {
        w.Section(origin.empty() || origin == "api" || origin == "user" ? "You" : "Message (" + origin + ")", e,
                  text());
      }
    } else if (e.type == et::kAssistantMessage) {
      if (IsBlank(text())) continue;
      w.Section(partial ? "Assistant (stopped — partial answer)" : "Assistant", e, text());
    } else if (e.type == et::kReasoning) {
      if (IsBlank(text())) continue;
      w.out() += "<details><summary>Reasoning</summary>\n\n" + CodeBlock(text(), "text") + "\n</details>\n\n";
    } else if (e.type == et::kToolCall) {
      w.out() += "<details><summary>Tool call <code>" + (d.is_object() ? d.value("name", std::string()) : "") +
                 "</code></summary>\n\n" + CodeBlock(Pretty(d.is_object() ? d.value("arguments", Json()) : Json()), "json") +
                 "\n</details>\n\n";
    } else if (e.type == et::kToolResult) {
      const bool failed = d.is_object() && d.contains("error");
      std::string name = d.is_object() ? d.value("name", std::string()) : "";
      w.out() += std::string("<details><summary>") + (failed ? "Tool error" : "Tool result") + " <code>" + name +
                 "</code></summary>\n\n" + CodeBlock(Pretty(failed ? d["error"] : d.value("result", Json())), "json") +
                 "\n</details>\n\n";
    } else if (e.type == et::kTurnEnd && d.is_object() && d.value("status", "") == "error") {
      const Json error = d.value("error", Json::object());
      const std::string code = error.is_object() ? error.value("code", "error") : "error";
      if (code == "cancelled") {
        w.Line("*Stopped.*");
      } else {
        w.Line("*The turn ended with an error:* `" + code + "` " +
               (error.is_object() ? error.value("message", std::string()) : ""));
      }
    }
  }
  return std::move(w.out());
}

}  // namespace dsh::session
