#include "agent/sse_parser.h"

namespace dsh::agent {

std::vector<SseEvent> SseParser::Feed(std::string_view bytes) {
  std::vector<SseEvent> out;
  for (char c : bytes) {
    if (skip_next_lf_) {
      skip_next_lf_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      skip_next_lf_ = c == '\r';
      ProcessLine(line_, out);
      line_.clear();
      continue;
    }
    line_.push_back(c);
  }
  return out;
}

std::vector<SseEvent> SseParser::Finish() {
  std::vector<SseEvent> out;
  if (!line_.empty()) ProcessLine(line_, out);
  Dispatch(out);
  *this = SseParser();
  return out;
}

void SseParser::ProcessLine(std::string_view line, std::vector<SseEvent>& out) {
  if (line.empty()) return Dispatch(out);
  if (line.front() == ':') return;  // comment (keep-alive)
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_.assign(value);
  }
}

void SseParser::Dispatch(std::vector<SseEvent>& out) {
  if (has_data_) out.push_back(SseEvent{std::move(event_), std::move(data_)});
  has_data_ = false;
  event_.clear();
  data_.clear();
}

}  // namespace dsh::agent
