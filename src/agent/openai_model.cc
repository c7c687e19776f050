// The Chat Completions adapter: a pool of worker threads, each driving one
// streamed request at a time through its own curl multi handle. The multi
// loop polls in short slices so a cancelled token, Shutdown() and the idle
// timeout are all noticed within one slice, even while no byte arrives.

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "agent/model.h"
#include "agent/sse_parser.h"

namespace dsh::agent {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a worker wakes to look at the cancel token, shutdown and the
// idle deadline while curl has nothing to do.
constexpr milliseconds kPollSlice{20};
constexpr size_t kMaxErrorBody = 64 * 1024;
constexpr size_t kMaxQuoted = 300;

void GlobalInitCurl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Truncate(std::string_view s, size_t max = kMaxQuoted) {
  if (s.size() <= max) return std::string(s);
  return std::string(s.substr(0, max)) + "...";
}

Status Cancelled() { return Status(codes::kCancelled, "the model call was cancelled"); }

// "HTTP 401 from URL: <the provider's message>": the message of an
// OpenAI-style error body ({"error": {"message"}} or {"error": "..."}), else
// the start of the body.
std::string HttpErrorMessage(long status, const std::string& url, const std::string& body) {
  std::string message = "HTTP " + std::to_string(status) + " from " + url;
  std::string detail;
  if (auto parsed = ParseJson(body); parsed.ok() && parsed->is_object()) {
    if (auto error = parsed->find("error"); error != parsed->end()) {
      if (error->is_object()) {
        if (const std::string* m = StringMember(*error, "message")) detail = *m;
      } else if (error->is_string()) {
        detail = error->get<std::string>();
      }
    }
  }
  if (detail.empty()) detail = Truncate(body);
  if (!detail.empty()) message += ": " + detail;
  return message;
}

const char* RoleName(ModelMessage::Role role) {
  switch (role) {
    case ModelMessage::Role::kSystem:
      return "system";
    case ModelMessage::Role::kUser:
      return "user";
    case ModelMessage::Role::kAssistant:
      return "assistant";
    case ModelMessage::Role::kTool:
      return "tool";
  }
  return "user";
}

Json RequestBody(const ModelRequest& request, bool ask_usage) {
  Json messages = Json::array();
  for (const auto& m : request.messages) {
    Json j{{"role", RoleName(m.role)}};
    switch (m.role) {
      case ModelMessage::Role::kSystem:
      case ModelMessage::Role::kUser:
        j["content"] = m.text;
        break;
      case ModelMessage::Role::kAssistant: {
        j["content"] = m.text.empty() ? Json(nullptr) : Json(m.text);
        if (!m.tool_calls.empty()) {
          Json calls = Json::array();
          for (const auto& c : m.tool_calls) {
            calls.push_back(
                Json{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
          }
          j["tool_calls"] = std::move(calls);
        }
        break;
      }
      case ModelMessage::Role::kTool:
        j["tool_call_id"] = m.tool_call_id;
        j["content"] = m.text;
        break;
    }
    messages.push_back(std::move(j));
  }
  // `stream_options.include_usage`: the token counts arrive in a last
  // chunk (dsh_model_tokens_total). Most servers that do not know it ignore
  // it; one that refuses it is asked without it (OpenAiModel::Run).
  Json body{{"model", request.model}, {"messages", std::move(messages)}, {"stream", true}};
  if (ask_usage) body["stream_options"] = {{"include_usage", true}};
  if (!request.tools.empty()) {
    Json tools = Json::array();
    for (const auto& t : request.tools) {
      Json parameters = t.parameters.is_null() ? Json{{"type", "object"}, {"properties", Json::object()}} : t.parameters;
      tools.push_back(Json{{"type", "function"},
                           {"function", {{"name", t.name}, {"description", t.description}, {"parameters", parameters}}}});
    }
    body["tools"] = std::move(tools);
  }
  if (request.reasoning_effort) body["reasoning_effort"] = *request.reasoning_effort;
  return body;
}

// Ids and names usually arrive whole in the first fragment; some servers
// repeat them whole in later fragments, which must not double them.
void AppendFragment(std::string& into, const std::string& fragment) {
  if (fragment.empty() || fragment == into) return;
  into += fragment;
}

// Folds the chunks of one streamed completion into a ModelResponse.
class ChatStream {
 public:
  explicit ChatStream(const ModelAdapter::OnDelta& on_delta) : on_delta_(on_delta) {}

  // An error aborts the transfer.
  Status OnEvent(const SseEvent& event) {
    if (event.data == "[DONE]") {
      done_ = true;
      return Status::Ok();
    }
    if (done_) return Status::Ok();
    auto parsed = ParseJson(event.data);
    if (!parsed.ok()) {
      return Status(codes::kModelBadResponse,
                    "the stream has a chunk that is not JSON (" + parsed.status().message() + "): " + Truncate(event.data));
    }
    const Json& chunk = *parsed;
    if (!chunk.is_object()) return Status(codes::kModelBadResponse, "a stream chunk is not an object: " + Truncate(event.data));
    if (auto error = chunk.find("error"); error != chunk.end()) {
      const std::string* message = error->is_object() ? StringMember(*error, "message") : nullptr;
      return Status(codes::kModelError, "the provider reported an error mid-stream: " +
                                     (message ? *message : Truncate(DumpJson(*error))));
    }
    if (auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
      auto prompt = usage->find("prompt_tokens");
      auto completion = usage->find("completion_tokens");
      if (prompt != usage->end() && prompt->is_number_integer()) response_.input_tokens = prompt->get<int64_t>();
      if (completion != usage->end() && completion->is_number_integer()) {
        response_.output_tokens = completion->get<int64_t>();
      }
    }
    auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return Status::Ok();  // usage chunk
    const Json& choice = (*choices)[0];
    if (!choice.is_object()) return Status(codes::kModelBadResponse, "a stream choice is not an object");
    auto delta = choice.find("delta");
    if (delta == choice.end()) delta = choice.find("message");  // servers that ignore `stream`
    if (delta != choice.end() && delta->is_object()) DSH_RETURN_IF_ERROR(OnDelta(*delta));
    if (const std::string* reason = StringMember(choice, "finish_reason")) finish_reason_ = *reason;
    return Status::Ok();
  }

  // The transfer ended cleanly: the response, or why it is incomplete.
  Result<ModelResponse> Finish() {
    if (!done_ && finish_reason_.empty()) {
      return Status(codes::kModelBadResponse, "the stream ended before a finish_reason or [DONE]");
    }
    for (auto& [index, call] : calls_) {
      if (call.name.empty()) {
        return Status(codes::kModelBadResponse, "tool call " + std::to_string(index) + " in the stream has no function name");
      }
      response_.tool_calls.push_back(std::move(call));
    }
    response_.finish_reason =
        !finish_reason_.empty() ? finish_reason_ : (response_.tool_calls.empty() ? "stop" : "tool_calls");
    return std::move(response_);
  }

  bool finished() const { return done_ || !finish_reason_.empty(); }

 private:
  Status OnDelta(const Json& delta) {
    if (const std::string* content = StringMember(delta, "content"); content && !content->empty()) {
      response_.text += *content;
      if (on_delta_) on_delta_(ModelDelta{ModelDelta::Kind::kText, *content});
    }
    const std::string* reasoning = StringMember(delta, "reasoning_content");
    if (!reasoning) reasoning = StringMember(delta, "reasoning");
    if (reasoning && !reasoning->empty()) {
      response_.reasoning += *reasoning;
      if (on_delta_) on_delta_(ModelDelta{ModelDelta::Kind::kReasoning, *reasoning});
    }
    auto calls = delta.find("tool_calls");
    if (calls == delta.end() || calls->is_null()) return Status::Ok();
    if (!calls->is_array()) return Status(codes::kModelBadResponse, "`delta.tool_calls` is not an array");
    for (size_t i = 0; i < calls->size(); ++i) {
      const Json& entry = (*calls)[i];
      if (!entry.is_object()) return Status(codes::kModelBadResponse, "a `delta.tool_calls` entry is not an object");
      int64_t index = static_cast<int64_t>(i);
      if (auto it = entry.find("index"); it != entry.end() && it->is_number_integer()) index = it->get<int64_t>();
      ModelToolCall& call = calls_[index];
      if (const std::string* id = StringMember(entry, "id")) AppendFragment(call.id, *id);
      if (auto fn = entry.find("function"); fn != entry.end() && fn->is_object()) {
        if (const std::string* name = StringMember(*fn, "name")) AppendFragment(call.name, *name);
        if (const std::string* args = StringMember(*fn, "arguments")) call.arguments += *args;
      }
    }
    return Status::Ok();
  }

  const ModelAdapter::OnDelta& on_delta_;
  ModelResponse response_;
  std::map<int64_t, ModelToolCall> calls_;  // by the stream's `index`, which orders them
  std::string finish_reason_;
  bool done_ = false;  // [DONE] seen
};

struct Call {
  ModelRequest request;
  std::shared_ptr<CancelToken> cancel;
  ModelAdapter::OnDelta on_delta;
  ModelAdapter::Done done;
};

// The outcome of one HTTP attempt.
struct Attempt {
  Result<ModelResponse> result;
  bool retriable = false;
  std::optional<milliseconds> retry_after;
};

class OpenAiModel final : public ModelAdapter {
 public:
  explicit OpenAiModel(OpenAiOptions options) : options_(std::move(options)) {
    GlobalInitCurl();
    url_ = options_.base_url;
    while (!url_.empty() && url_.back() == '/') url_.pop_back();
    url_ += "/chat/completions";
    int workers = std::max(1, options_.workers);
    for (int i = 0; i < workers; ++i) multis_.push_back(curl_multi_init());
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, multi = multis_[i]] { WorkerLoop(multi); });
  }

  ~OpenAiModel() override {
    Shutdown();
    for (CURLM* multi : multis_) curl_multi_cleanup(multi);
  }

  void Stream(ModelRequest request, std::shared_ptr<CancelToken> cancel, OnDelta on_delta, Done done) override {
    if (!cancel) cancel = std::make_shared<CancelToken>();
    {
      std::lock_guard lock(mu_);
      if (!stopping_.load()) {
        queue_.push_back(Call{std::move(request), std::move(cancel), std::move(on_delta), std::move(done)});
        queue_cv_.notify_one();
        return;
      }
    }
    done(Status(codes::kCancelled, "the model adapter is shut down"));
  }

  std::string Describe(const std::string& model) const override {
    return model + " (Chat Completions at " + options_.base_url + ")";
  }

  // Must not be called from a worker thread (a `done` or `on_delta` callback).
  void Shutdown() override {
    for ([[maybe_unused]] auto& t : threads_) {
      assert(t.get_id() != std::this_thread::get_id() && "Shutdown() called from a model callback");
    }
    std::lock_guard join_lock(join_mu_);
    std::deque<Call> queued;
    {
      std::lock_guard lock(mu_);
      stopping_.store(true);
      queued.swap(queue_);
    }
    queue_cv_.notify_all();
    backoff_cv_.notify_all();
    for (CURLM* multi : multis_) curl_multi_wakeup(multi);
    for (auto& call : queued) call.done(Status(codes::kCancelled, "the model adapter shut down before the call started"));
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  struct Transfer;

  void WorkerLoop(CURLM* multi) {
    for (;;) {
      std::optional<Call> call;
      {
        std::unique_lock lock(mu_);
        queue_cv_.wait(lock, [&] { return stopping_.load() || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping
        call.emplace(std::move(queue_.front()));
        queue_.pop_front();
      }
      Result<ModelResponse> result = Run(multi, *call);
      call->done(std::move(result));
    }
  }

  bool Interrupted(const Call& call) const { return stopping_.load() || call.cancel->cancelled(); }

  Result<ModelResponse> Run(CURLM* multi, const Call& call) {
    bool ask_usage = !usage_refused_.load();
    std::string body = DumpJson(RequestBody(call.request, ask_usage));
    milliseconds backoff = std::max(milliseconds(1), options_.backoff_initial);
    for (int attempt = 0;; ++attempt) {
      if (Interrupted(call)) return Cancelled();
      Attempt a = Perform(multi, call, body);
      if (ask_usage && RefusedStreamOptions(a)) {
        // Older Azure OpenAI API versions, say: no token counts from this
        // server, and the same call at once without them (not an attempt).
        if (!usage_refused_.exchange(true)) {
          spdlog::warn("{} refuses `stream_options`; asking it for no token counts from now on ({})", url_,
                       a.result.status().message());
        }
        ask_usage = false;
        body = DumpJson(RequestBody(call.request, false));
        --attempt;
        continue;
      }
      if (!a.retriable || attempt >= options_.max_retries) {
        if (attempt > 0 && !a.result.ok() && a.result.status().code() != codes::kCancelled) {
          return a.result.status().WithContext("after " + std::to_string(attempt + 1) + " attempts");
        }
        return std::move(a.result);
      }
      milliseconds wait = std::min(a.retry_after.value_or(backoff), options_.backoff_max);
      backoff = std::min(backoff * 2, options_.backoff_max);
      if (!WaitForRetry(call, wait)) return Cancelled();
    }
  }

  // False when cancelled or shut down while waiting. The cancel token
  // cannot signal, so it is checked every poll slice.
  bool WaitForRetry(const Call& call, milliseconds wait) {
    auto deadline = Clock::now() + wait;
    std::unique_lock lock(mu_);
    while (!Interrupted(call)) {
      auto now = Clock::now();
      if (now >= deadline) return true;
      backoff_cv_.wait_until(lock, std::min(deadline, now + kPollSlice));
    }
    return false;
  }

  Attempt Perform(CURLM* multi, const Call& call, const std::string& body);

  static bool RefusedStreamOptions(const Attempt& a) {
    return !a.result.ok() && a.result.status().code() == codes::kModelError &&
           a.result.status().message().rfind("HTTP 400 ", 0) == 0 &&
           a.result.status().message().find("stream_options") != std::string::npos;
  }

  const OpenAiOptions options_;
  std::atomic<bool> usage_refused_{false};  // the server refused `stream_options` once
  std::string url_;
  std::mutex mu_;
  std::condition_variable queue_cv_;    // a call was queued, or stopping
  std::condition_variable backoff_cv_;  // stopping (wakes retry waits)
  std::deque<Call> queue_;              // GUARDED_BY(mu_)
  std::atomic<bool> stopping_{false};   // set under mu_, read anywhere
  std::vector<CURLM*> multis_;          // one per worker, owned
  std::vector<std::thread> threads_;
  std::mutex join_mu_;  // serializes Shutdown()
};

// State shared with curl's callbacks for one attempt; touched only by the
// worker thread running it.
struct OpenAiModel::Transfer {
  Transfer(const OpenAiModel& model, const Call& call) : model(model), call(call), stream(call.on_delta) {}

  const OpenAiModel& model;
  const Call& call;
  CURL* easy = nullptr;
  long status = 0;              // the final response's HTTP status, once the body starts
  bool responded = false;       // a byte of the response (status line) arrived
  std::optional<milliseconds> retry_after;
  std::string error_body;       // the body of a non-2xx response
  SseParser sse;
  ChatStream stream;
  std::optional<Status> abort;  // why a callback stopped the transfer
  Clock::time_point last_activity = Clock::now();
  curl_off_t uploaded = 0;

  static size_t OnHeader(char* data, size_t size, size_t count, void* user) {
    auto& t = *static_cast<Transfer*>(user);
    size_t n = size * count;
    t.responded = true;
    t.last_activity = Clock::now();
    std::string_view line(data, n);
    if (line.rfind("HTTP/", 0) == 0) {
      t.retry_after.reset();  // a new (final or interim) response
      return n;
    }
    constexpr std::string_view kRetryAfter = "retry-after:";
    if (line.size() > kRetryAfter.size() &&
        std::equal(kRetryAfter.begin(), kRetryAfter.end(), line.begin(),
                   [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
      std::string value(line.substr(kRetryAfter.size()));
      char* end = nullptr;
      long seconds = std::strtol(value.c_str(), &end, 10);
      if (end != value.c_str() && seconds >= 0) t.retry_after = milliseconds(std::min(seconds, 24L * 3600) * 1000);
    }
    return n;
  }

  static size_t OnBody(char* data, size_t size, size_t count, void* user) {
    auto& t = *static_cast<Transfer*>(user);
    size_t n = size * count;
    t.last_activity = Clock::now();
    try {  // nothing may unwind through curl
      if (t.model.Interrupted(t.call)) {
        t.abort = Cancelled();
        return 0;
      }
      if (t.status == 0) curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &t.status);
      if (t.status < 200 || t.status >= 300) {
        t.error_body.append(data, std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, t.error_body.size())));
        return n;
      }
      for (const SseEvent& event : t.sse.Feed(std::string_view(data, n))) {
        Status st = t.stream.OnEvent(event);
        if (!st.ok()) {
          t.abort = std::move(st);
          return 0;
        }
      }
      return n;
    } catch (const std::exception& e) {
      t.abort = Status(codes::kModelBadResponse, std::string("cannot process the stream: ") + e.what());
      return 0;
    }
  }

  static int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t ulnow) {
    auto& t = *static_cast<Transfer*>(user);
    if (ulnow != t.uploaded) {
      t.uploaded = ulnow;
      t.last_activity = Clock::now();
    }
    return t.model.Interrupted(t.call) ? 1 : 0;
  }
};

Attempt OpenAiModel::Perform(CURLM* multi, const Call& call, const std::string& body) {
  Transfer t(*this, call);
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
  if (!easy) return Attempt{Status(codes::kModelUnavailable, "cannot create a curl handle")};
  t.easy = easy.get();
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Accept: text/event-stream");
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip for large bodies
  if (!options_.api_key.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + options_.api_key).c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers, &curl_slist_free_all);
  char error_buffer[CURL_ERROR_SIZE] = {};

  CURL* h = easy.get();
  curl_easy_setopt(h, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "dsh");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &Transfer::OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Transfer::OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &Transfer::OnProgress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);

  if (curl_multi_add_handle(multi, h) != CURLM_OK) {
    return Attempt{Status(codes::kModelUnavailable, "cannot start a request to " + url_)};
  }
  std::optional<CURLcode> finished;
  std::optional<Status> local_error;  // cancelled or idle, found by the loop
  bool connected = false;
  for (;;) {
    int running = 0;
    CURLMcode mc = curl_multi_perform(multi, &running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) finished = msg->data.result;
    }
    if (finished) break;
    if (mc != CURLM_OK) {
      local_error = Status(codes::kModelUnavailable, std::string("curl: ") + curl_multi_strerror(mc));
      break;
    }
    if (Interrupted(call)) {
      local_error = Cancelled();
      break;
    }
    auto now = Clock::now();
    if (!connected) {
      // The idle clock starts once connected; connect_timeout covers before.
      // A reused keep-alive connection reports no connect time, only the
      // time until the transfer began.
      curl_off_t connect_us = 0, pretransfer_us = 0;
      bool fresh = curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connect_us) == CURLE_OK && connect_us > 0;
      bool reused = curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us) == CURLE_OK && pretransfer_us > 0;
      if (fresh || reused) {
        connected = true;
        t.last_activity = std::max(t.last_activity, now);
      }
    }
    if (connected && now - t.last_activity >= options_.idle_timeout) {
      local_error = Status(codes::kModelTimeout, "no data from " + url_ + " for " +
                                              std::to_string(options_.idle_timeout.count()) + " ms");
      break;
    }
    curl_multi_poll(multi, nullptr, 0, static_cast<int>(kPollSlice.count()), nullptr);
  }
  curl_multi_remove_handle(multi, h);

  if (t.abort) return Attempt{std::move(*t.abort)};
  if (local_error) return Attempt{std::move(*local_error)};
  CURLcode code = *finished;
  if (code == CURLE_ABORTED_BY_CALLBACK) return Attempt{Cancelled()};

  if (code == CURLE_OK) {
    if (t.status == 0) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &t.status);
    if (t.status >= 200 && t.status < 300) {
      for (const SseEvent& event : t.sse.Finish()) {
        Status st = t.stream.OnEvent(event);
        if (!st.ok()) return Attempt{std::move(st)};
      }
      return Attempt{t.stream.Finish()};
    }
    std::string message = HttpErrorMessage(t.status, url_, t.error_body);
    bool rate_limited = t.status == 429;
    return Attempt{Status(rate_limited ? codes::kModelRateLimited : codes::kModelError, std::move(message)),
                   rate_limited || t.status >= 500, t.retry_after};
  }

  std::string reason = error_buffer[0] ? error_buffer : curl_easy_strerror(code);
  if (!t.responded) {
    // Nothing of a response arrived, so the server did no work: retry.
    bool timed_out = code == CURLE_OPERATION_TIMEDOUT;
    return Attempt{Status(timed_out ? codes::kModelTimeout : codes::kModelUnavailable, "cannot reach " + url_ + ": " + reason),
                   true, std::nullopt};
  }
  if (t.stream.finished()) return Attempt{t.stream.Finish()};  // the connection broke after the end
  return Attempt{Status(codes::kModelUnavailable, "the connection to " + url_ + " broke mid-response: " + reason)};
}

}  // namespace

std::unique_ptr<ModelAdapter> MakeOpenAiModel(OpenAiOptions options) {
  return std::make_unique<OpenAiModel>(std::move(options));
}

namespace {

// One blocking request of a probe. `status` 0 with an error when nothing
// answered.
struct ProbeReply {
  long status = 0;
  std::string body;
};

size_t AppendBody(char* data, size_t size, size_t n, void* into) {
  auto* body = static_cast<std::string*>(into);
  if (body->size() < kMaxErrorBody * 16) body->append(data, size * n);
  return size * n;
}

int ProbeProgress(void* cancel, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* token = static_cast<const CancelToken*>(cancel);
  return token != nullptr && token->cancelled() ? 1 : 0;
}

Result<ProbeReply> ProbeRequest(const OpenAiOptions& options, const std::string& url, const std::string* post_body,
                                milliseconds timeout, const CancelToken* cancel) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
  if (!easy) return Status(codes::kModelUnavailable, "cannot create a curl handle");
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  if (post_body != nullptr) headers = curl_slist_append(headers, "Content-Type: application/json");
  if (!options.api_key.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + options.api_key).c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers, &curl_slist_free_all);
  char error_buffer[CURL_ERROR_SIZE] = {};
  ProbeReply reply;
  CURL* h = easy.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  if (post_body != nullptr) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, post_body->data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post_body->size()));
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "dsh");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min(options.connect_timeout, timeout).count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &ProbeProgress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, const_cast<CancelToken*>(cancel));
  CURLcode code = curl_easy_perform(h);
  if (code == CURLE_ABORTED_BY_CALLBACK) return Status(codes::kCancelled, "the test of the provider was cancelled");
  if (code != CURLE_OK) {
    std::string reason = error_buffer[0] ? error_buffer : curl_easy_strerror(code);
    return Status(code == CURLE_OPERATION_TIMEDOUT ? codes::kModelTimeout : codes::kModelUnavailable,
                  "cannot reach " + url + ": " + reason);
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

Status ProbeError(const ProbeReply& reply, const std::string& url) {
  return Status(reply.status == 429 ? codes::kModelRateLimited : codes::kModelError,
                HttpErrorMessage(reply.status, url, reply.body));
}

}  // namespace

Result<std::vector<std::string>> ProbeOpenAiProvider(const OpenAiOptions& options, const std::string& chat_model,
                                                     milliseconds timeout, const CancelToken* cancel) {
  GlobalInitCurl();
  std::string base = options.base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string models_url = base + "/models";
  DSH_ASSIGN_OR_RETURN(ProbeReply listed, ProbeRequest(options, models_url, nullptr, timeout, cancel));
  if (listed.status >= 200 && listed.status < 300) {
    auto json = ParseJson(listed.body);
    std::vector<std::string> ids;
    bool ok = json.ok() && json->is_object() && json->contains("data") && (*json)["data"].is_array();
    if (ok) {
      for (const auto& m : (*json)["data"]) {
        const std::string* id = m.is_object() ? StringMember(m, "id") : nullptr;
        if (id != nullptr) ids.push_back(*id);
      }
    }
    if (!ok) {
      return Status(codes::kModelBadResponse,
                    models_url + " answered HTTP " + std::to_string(listed.status) +
                        " but not with a list of models ({\"data\": [{\"id\": ...}]}): " + Truncate(listed.body));
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  if ((listed.status != 404 && listed.status != 405) || chat_model.empty()) return ProbeError(listed, models_url);

  // No /models: one token of a chat answer shows the URL, the key and the model work.
  const std::string chat_url = base + "/chat/completions";
  const std::string body =
      Json{{"model", chat_model}, {"messages", Json::array({Json{{"role", "user"}, {"content", "Say OK."}}})},
           {"max_tokens", 1}, {"stream", false}}
          .dump();
  DSH_ASSIGN_OR_RETURN(ProbeReply chat, ProbeRequest(options, chat_url, &body, timeout, cancel));
  if (chat.status < 200 || chat.status >= 300) return ProbeError(chat, chat_url);
  auto json = ParseJson(chat.body);
  if (!json.ok() || !json->is_object() || !json->contains("choices")) {
    return Status(codes::kModelBadResponse, chat_url + " answered HTTP " + std::to_string(chat.status) +
                                                " but not with a chat completion: " + Truncate(chat.body));
  }
  return std::vector<std::string>{chat_model};
}

}  // namespace dsh::agent
