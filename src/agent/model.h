#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace dsh::agent {

// One message of a model request, in Chat Completions terms.
struct ModelToolCall {
  std::string id;         // the call id the model chose ("call_...")
  std::string name;       // tool name
  std::string arguments;  // the JSON text exactly as the model produced it
};

struct ModelMessage {
  enum class Role { kSystem, kUser, kAssistant, kTool };
  Role role = Role::kUser;
  std::string text;                       // content ("" when none)
  std::vector<ModelToolCall> tool_calls;  // kAssistant only
  std::string tool_call_id;               // kTool only: which call this answers
  std::string name;                       // kTool only: the tool's name
};

struct ModelToolSpec {
  std::string name;
  std::string description;
  Json parameters;  // JSON Schema of the arguments
};

struct ModelRequest {
  std::string model;                            // the provider's model name
  std::optional<std::string> reasoning_effort;  // sent only when present
  std::vector<ModelMessage> messages;
  std::vector<ModelToolSpec> tools;
};

// What one model call produced once the stream ended.
struct ModelResponse {
  std::string text;                       // assistant content
  std::string reasoning;                  // `reasoning_content`, kept apart
  std::vector<ModelToolCall> tool_calls;  // in the order the model gave them
  std::string finish_reason;              // "stop", "tool_calls", "length", ...
  // Tokens the provider counted for this call (its `usage`), when it said.
  std::optional<int64_t> input_tokens;
  std::optional<int64_t> output_tokens;
};

// Streaming progress, for live presentation only (nothing durable depends on
// it). Called on the adapter's worker thread; must be quick.
struct ModelDelta {
  enum class Kind { kText, kReasoning } kind = Kind::kText;
  std::string text;
};

// Cancels one call. Thread-safe; Cancel() may be called at any time, any
// number of times; a cancelled call completes with `cancelled`.
class CancelToken {
 public:
  void Cancel() {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard lock(mu_);
      if (cancelled_.exchange(true)) return;
      callbacks.swap(callbacks_);
    }
    for (auto& fn : callbacks) fn();
  }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  // Runs `fn` once when the token is cancelled: on the cancelling thread, or
  // at once on this one if it already is.
  void OnCancel(std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      if (!cancelled_) {
        callbacks_.push_back(std::move(fn));
        return;
      }
    }
    fn();
  }

 private:
  std::mutex mu_;
  std::atomic<bool> cancelled_{false};
  std::vector<std::function<void()>> callbacks_;  // GUARDED_BY(mu_)
};

// A model provider. Implementations are thread-safe: Stream may be called
// concurrently from any thread and never blocks the caller (blocking I/O runs
// on the adapter's own worker pool).
//
// `done` is called exactly once, on any thread, with the complete response or
// an error. Error codes: `model_unavailable` (connection refused, DNS, TLS),
// `model_timeout` (no progress within the timeout), `model_rate_limited`
// (429 after the retries), `model_error` (other HTTP errors after the retries;
// the message carries the status and the provider's message),
// `model_bad_response` (a stream that does not parse), `cancelled`.
class ModelAdapter {
 public:
  using Done = std::function<void(Result<ModelResponse>)>;
  using OnDelta = std::function<void(const ModelDelta&)>;
  virtual ~ModelAdapter() = default;

  virtual void Stream(ModelRequest request, std::shared_ptr<CancelToken> cancel, OnDelta on_delta, Done done) = 0;

  // How the model is shown to people ("echo (offline echo model)", ...).
  virtual std::string Describe(const std::string& model) const = 0;
  // Stops accepting calls, cancels calls in flight (they complete with
  // `cancelled`) and joins the worker threads. Idempotent.
  virtual void Shutdown() {}
};

// Chooses the adapter of a provider. Implemented by the host from its
// configured providers. Thread-safe.
class ModelRouter {
 public:
  virtual ~ModelRouter() = default;
  // Errors: `unknown_provider`; `model_unavailable` when the provider cannot
  // be used (say, its API key variable is not set).
  virtual Result<ModelAdapter*> AdapterFor(const std::string& provider) = 0;
};

// The offline default: answers "echo: " followed by the last user message's
// text; never calls tools; completes at once on the caller's thread.
std::unique_ptr<ModelAdapter> MakeEchoModel();

// Any Chat Completions-compatible API (OpenAI, DeepSeek, vLLM, Ollama,
// llama.cpp server) over libcurl with `stream: true`.
struct OpenAiOptions {
  std::string base_url;  // "https://api.openai.com/v1"; `/chat/completions` is appended
  std::string api_key;   // sent as a Bearer token when not empty
  int workers = 4;       // concurrent requests (threads of the curl pool)
  std::chrono::milliseconds connect_timeout{10'000};
  // A stream that delivers no byte for this long fails with `model_timeout`.
  std::chrono::milliseconds idle_timeout{60'000};
  // Retries of a request that failed with 429, 5xx or a connection error
  // before any byte of the response arrived; backoff doubles from
  // `backoff_initial`, honouring Retry-After when the server sends one
  // (capped at `backoff_max`).
  int max_retries = 3;
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{8'000};
};
std::unique_ptr<ModelAdapter> MakeOpenAiModel(OpenAiOptions options);

// Whether an OpenAI-compatible provider answers, for the Settings page's
// Test button. Blocking: call it on a thread that may wait (up to about
// `timeout` per request, twice). Sends `GET {base_url}/models` (with the key
// as a Bearer token when set); a 2xx answer with `data: [{id}]` gives the
// ids (sorted). When the server has no /models (404 or 405) and
// `chat_model` is not empty, it sends one non-streamed chat request for one
// token to `chat_model` instead; a 2xx answer gives {chat_model}.
// Errors, with the provider's own message when it sent one:
// `model_unavailable` (cannot reach it: the reason), `model_error`
// ("HTTP 401 from URL: <its message>"), `model_rate_limited` (429),
// `model_timeout`, `model_bad_response` (a 2xx answer that is not the
// expected JSON), `cancelled` once `cancel` is cancelled (checked while
// waiting; may be null).
Result<std::vector<std::string>> ProbeOpenAiProvider(const OpenAiOptions& options, const std::string& chat_model,
                                                     std::chrono::milliseconds timeout, const CancelToken* cancel);

}  // namespace dsh::agent
