#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dsh::agent {

// One dispatched server-sent event. `data` joins the event's `data:` lines
// with "\n"; `event` is the last `event:` field ("" when none).
struct SseEvent {
  std::string event;
  std::string data;
};

// Splits a `text/event-stream` into events, following the WHATWG rules the
// Chat Completions streams use: lines end in LF, CRLF or CR (a CRLF may be
// split between two Feed calls), a blank line dispatches the pending event,
// lines starting with ':' are comments, one optional space after the field's
// colon is dropped, unknown fields (`id`, `retry`, ...) are ignored, and an
// event without any `data` line is not dispatched.
//
// Bytes may arrive in arbitrary pieces. Thread-compatible (one stream each).
class SseParser {
 public:
  // Consumes `bytes` and returns the events they complete, in order.
  std::vector<SseEvent> Feed(std::string_view bytes);

  // At the end of the stream: returns the last event when the server closed
  // without the blank line that should have ended it (lenient, since some
  // servers do). Call once; the parser is reset afterwards.
  std::vector<SseEvent> Finish();

 private:
  void ProcessLine(std::string_view line, std::vector<SseEvent>& out);
  void Dispatch(std::vector<SseEvent>& out);

  std::string line_;           // the incomplete current line
  bool skip_next_lf_ = false;  // the previous byte was a CR ending a line
  bool has_data_ = false;
  std::string event_;
  std::string data_;
};

}  // namespace dsh::agent
