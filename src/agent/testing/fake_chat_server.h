#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/model.h"
#include "base/json.h"

namespace dsh::agent::testing {

// One write of a streamed response, sent after waiting `delay`.
struct SseChunk {
  std::string bytes;  // raw event-stream text, e.g. "data: {...}\n\n"
  std::chrono::milliseconds delay{0};
};

// What the fake answers to one request.
struct ScriptedResponse {
  enum class Kind {
    kSse,    // 200 text/event-stream, `chunks` as separate chunked writes
    kError,  // `status` with the JSON `body` (and Retry-After when set)
    kHang,   // reads the request and never answers until the server stops
    kClose,  // closes the connection without answering
  };
  Kind kind = Kind::kSse;
  std::vector<SseChunk> chunks;
  int status = 200;
  std::string body;
  std::optional<int> retry_after_seconds;
};

// "data: <json>\n\n".
std::string SseData(const Json& chunk);
// A streamed reply: `text` in a few content deltas, then finish_reason
// "stop" and [DONE]; `delay` before every chunk after the first.
ScriptedResponse TextReply(const std::string& text, std::chrono::milliseconds delay = {});
// Streams the calls with interleaved indexes, each call's arguments split
// into several fragments across chunks, then finish_reason "tool_calls".
ScriptedResponse ToolCallReply(const std::vector<ModelToolCall>& calls);
// `reasoning_content` deltas first, then content deltas, stop, [DONE].
ScriptedResponse ReasoningThenText(const std::string& reasoning, const std::string& text);
// An OpenAI-style error body {"error":{"message":...,"type":...}}.
ScriptedResponse Error(int status, const std::string& message, std::optional<int> retry_after_seconds = {});
ScriptedResponse Hang();
ScriptedResponse CloseConnection();
// Raw chunks, for malformed or unusual streams.
ScriptedResponse Sse(std::vector<SseChunk> chunks);

struct RecordedRequest {
  std::string method;
  std::string target;                          // "/v1/chat/completions"
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  Json json;  // the parsed body; null when it is not JSON
  std::chrono::steady_clock::time_point received;
};

// A scripted Chat Completions server on 127.0.0.1 (port 0) for hermetic
// tests of model adapters and everything above them. It answers requests in
// arrival order from a FIFO of ScriptedResponses (the default response once
// the FIFO is empty) and records every request.
//
// Thread-safe: all methods may be called from any thread. Serves on its own
// thread; HTTP/1.1 with keep-alive; streamed responses use chunked encoding.
class FakeChatServer {
 public:
  struct Options {
    ScriptedResponse default_response = TextReply("ok");
  };

  // Listens at once; aborts the test (throws std::runtime_error) when it
  // cannot listen on loopback.
  FakeChatServer();
  explicit FakeChatServer(Options options);
  ~FakeChatServer();  // Stop()
  FakeChatServer(const FakeChatServer&) = delete;
  FakeChatServer& operator=(const FakeChatServer&) = delete;

  // "http://127.0.0.1:PORT/v1".
  std::string base_url() const;
  uint16_t port() const { return port_; }

  // Appends to the script; requests take responses in FIFO order.
  void Enqueue(ScriptedResponse response);
  void SetDefault(ScriptedResponse response);

  // Every request received so far, in arrival order.
  std::vector<RecordedRequest> requests() const;
  // True once at least `n` requests arrived; false after `timeout`.
  bool WaitForRequests(size_t n, std::chrono::milliseconds timeout) const;

  // Closes the listener and every connection (hanging ones included) and
  // joins the server thread. Idempotent.
  void Stop();

 private:
  class Impl;
  class Connection;

  void AcceptNext();  // server thread
  // Records `request` and returns the response to play for it.
  ScriptedResponse TakeResponse(RecordedRequest request);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<ScriptedResponse> script_;  // GUARDED_BY(mu_)
  ScriptedResponse default_response_;    // GUARDED_BY(mu_)
  std::vector<RecordedRequest> requests_;  // GUARDED_BY(mu_)
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex stop_mu_;
};

}  // namespace dsh::agent::testing
