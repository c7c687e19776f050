// Streamable HTTP: one worker thread drives every transfer of the transport
// through one curl multi handle. Send queues and wakes it (curl_multi_wakeup);
// curl's callbacks run on it too, so messages reach OnMessage as their bytes
// arrive, one at a time. Close wakes it to stop: transfers in flight are
// dropped at once, whatever the server is doing.

#include "mcp/http_transport.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <cctype>
#include <system_error>
#include <utility>
#include <vector>

#include "agent/sse_parser.h"
#include "base/strings.h"

namespace dsh::mcp {
namespace {

using Clock = std::chrono::steady_clock;
using internal::Excerpt;
using std::chrono::milliseconds;

constexpr size_t kMaxBody = size_t{16} << 20;  // a JSON body, or one event
constexpr size_t kMaxErrorBody = 4096;         // an error body is only quoted
// The longest the worker sleeps when nothing is due; curl's own timers and
// curl_multi_wakeup end the wait earlier.
constexpr milliseconds kMaxWait{10'000};

void GlobalInitCurl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

Status Unavailable(std::string message) { return Status(codes::kMcpUnavailable, std::move(message)); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool Is2xx(long status) { return status >= 200 && status < 300; }

// A response (result or error) to the request with `id`.
bool IsAnswerTo(const Json& message, const Json& id) {
  auto it = message.find("id");
  return it != message.end() && *it == id && !message.contains("method") &&
         (message.contains("result") || message.contains("error"));
}

size_t DiscardBody(char*, size_t size, size_t count, void*) { return size * count; }

using HeaderList = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

// `headers` as curl takes them; null when out of memory.
HeaderList MakeHeaderList(const std::vector<std::string>& headers) {
  HeaderList list(nullptr, &curl_slist_free_all);
  for (const std::string& header : headers) {
    curl_slist* head = list.release();
    curl_slist* appended = curl_slist_append(head, header.c_str());
    if (appended == nullptr) {
      curl_slist_free_all(head);
      return HeaderList(nullptr, &curl_slist_free_all);
    }
    list.reset(appended);
  }
  return list;
}

// Why a request's headers cannot be sent: curl would pass a line break on
// and split the request.
std::optional<std::string> InvalidHeader(const std::string& name, const std::string& value) {
  if (name.empty()) return "a header has an empty name";
  if (name.find_first_of(": \t\r\n") != std::string::npos) return "header `" + name + "` has an invalid name";
  if (value.find_first_of("\r\n") != std::string::npos) {
    return "header `" + name + "` has a line break in its value";
  }
  return std::nullopt;
}

}  // namespace

// One transfer and the state curl's callbacks build from its response.
// Touched only by the worker thread.
struct HttpTransport::Exchange {
  using Kind = ExchangeKind;

  Exchange(HttpTransport& transport, Kind kind) : transport(transport), kind(kind) {}

  HttpTransport& transport;
  const Kind kind;
  std::string body;                // the POST body; curl reads it in place
  OnSent sent;                     // POST only
  std::optional<Json> request_id;  // the POST carries a request: its answer is due
  bool carried_session = false;

  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy{nullptr, &curl_easy_cleanup};
  HeaderList headers{nullptr, &curl_slist_free_all};
  char error[CURL_ERROR_SIZE] = {};

  // The response, as it arrives.
  std::string content_type;  // lower case
  bool classified = false;   // status and mode are known (the first body byte came)
  long status = 0;
  bool streaming = false;  // a 2xx text/event-stream
  agent::SseParser sse;
  size_t event_bytes = 0;    // bytes since the last complete event
  std::string buffered;      // a JSON body, or the start of an error body
  bool received = false;     // a 2xx event stream's body began (a keep-alive comment counts)
  bool answered = false;     // the answer to `request_id` went to OnMessage
  Clock::time_point opened;  // the GET stream's: when it was asked for
  std::optional<Status> abort;

  std::string Reason(CURLcode code) const { return error[0] != '\0' ? error : curl_easy_strerror(code); }

  void Classify() {
    classified = true;
    curl_easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &status);
    streaming = Is2xx(status) && content_type.rfind("text/event-stream", 0) == 0;
  }

  void DeliverPayload(Json payload) {
    internal::ForEachMessage(transport.spec_.name, std::move(payload), [this](Json message) {
      if (request_id && IsAnswerTo(message, *request_id)) answered = true;
      transport.DeliverOne(std::move(message));
    });
  }

  void DeliverEvent(const agent::SseEvent& event) {
    if (IsBlank(event.data)) return;  // e.g. a priming event that only carries an id
    Result<Json> parsed = ParseJson(event.data);
    if (!parsed.ok()) {
      spdlog::warn("mcp {}: skipped an event that is not JSON ({}): {}", transport.spec_.name,
                   parsed.status().message(), Excerpt(event.data));
      return;
    }
    DeliverPayload(std::move(parsed).value());
  }

  // False aborts the transfer.
  bool OnBytes(std::string_view bytes) {
    if (transport.Stopping()) return false;
    if (!classified) Classify();
    if (streaming) {
      received = true;
      std::vector<agent::SseEvent> events = sse.Feed(bytes);
      event_bytes = events.empty() ? event_bytes + bytes.size() : 0;
      if (event_bytes > kMaxBody) {
        abort = Unavailable("MCP server " + transport.spec_.name + " sent an event over 16 MiB");
        return false;
      }
      for (const agent::SseEvent& event : events) DeliverEvent(event);
      // The request is answered: end the transfer (FinishPost reports Ok)
      // rather than wait for a server that keeps the stream open.
      return !(kind == Kind::kPost && answered);
    }
    const size_t limit = Is2xx(status) ? kMaxBody : kMaxErrorBody;
    if (buffered.size() + bytes.size() > limit) {
      if (Is2xx(status)) {
        abort = Unavailable("MCP server " + transport.spec_.name + " sent a response over 16 MiB");
        return false;
      }
      bytes = bytes.substr(0, limit - buffered.size());
    }
    buffered.append(bytes);
    return true;
  }

  static size_t OnBody(char* data, size_t size, size_t count, void* user) {
    auto& x = *static_cast<Exchange*>(user);
    try {  // nothing may unwind through curl
      return x.OnBytes(std::string_view(data, size * count)) ? size * count : 0;
    } catch (const std::exception& e) {
      x.abort = Unavailable("cannot process the response of MCP server " + x.transport.spec_.name + ": " +
                            e.what());
      return 0;
    }
  }

  static size_t OnHeader(char* data, size_t size, size_t count, void* user) {
    auto& x = *static_cast<Exchange*>(user);
    const size_t n = size * count;
    std::string_view line(data, n);
    if (line.rfind("HTTP/", 0) == 0) {  // a new response, interim or final
      x.content_type.clear();
      return n;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return n;
    std::string name = Lower(Trim(line.substr(0, colon)));
    std::string_view value = Trim(line.substr(colon + 1));
    if (name == "content-type") {
      x.content_type = Lower(value);
    } else if (name == "mcp-session-id" && !value.empty()) {
      x.transport.session_id_ = std::string(value);
    }
    return n;
  }
};

HttpTransport::HttpTransport(ServerSpec spec, Options options) : spec_(std::move(spec)), options_(options) {
  GlobalInitCurl();
  multi_ = curl_multi_init();  // here, so Send may wake it from any thread at any time
}

HttpTransport::~HttpTransport() {
  Close();
  if (multi_ != nullptr) curl_multi_cleanup(multi_);
}

Status HttpTransport::Start(OnMessage on_message, OnClosed on_closed) {
  std::lock_guard lifecycle(lifecycle_mu_);
  assert(!started_ && "HttpTransport::Start called twice");
  if (started_) return Unavailable("the transport of MCP server " + spec_.name + " was already started");
  started_ = true;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Unavailable("the transport of MCP server " + spec_.name + " is closed");
  }

  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> url(curl_url(), &curl_url_cleanup);
  if (!url) return Unavailable("cannot parse URLs (out of memory)");
  if (CURLUcode rc = curl_url_set(url.get(), CURLUPART_URL, spec_.url.c_str(), 0); rc != CURLUE_OK) {
    return Unavailable("MCP server " + spec_.name + " has an invalid URL `" + spec_.url +
                       "`: " + curl_url_strerror(rc));
  }
  char* scheme = nullptr;
  std::string scheme_text;
  if (curl_url_get(url.get(), CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK) {
    scheme_text = Lower(scheme);
    curl_free(scheme);
  }
  if (scheme_text != "http" && scheme_text != "https") {
    return Unavailable("MCP server " + spec_.name + " has a URL that is not http or https: `" + spec_.url +
                       "`");
  }
  for (const auto& [name, value] : spec_.headers) {
    if (auto problem = InvalidHeader(name, value))
      return Unavailable("MCP server " + spec_.name + ": " + *problem);
  }

  if (multi_ == nullptr) return Unavailable("cannot create a curl multi handle for MCP server " + spec_.name);
  on_message_ = std::move(on_message);
  on_closed_ = std::move(on_closed);
  try {
    worker_ = std::thread([this] { WorkerLoop(); });
  } catch (const std::system_error& e) {
    return Unavailable("cannot start a thread for MCP server " + spec_.name + ": " + e.what());
  }
  return Status::Ok();
}

void HttpTransport::Send(Json message, OnSent sent) {
  Outgoing outgoing{DumpJson(message), std::move(sent), std::nullopt};
  if (message.is_object() && message.contains("method") && message.contains("id"))
    outgoing.request_id = message["id"];
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    outbox_.push_back(std::move(outgoing));
  }
  if (multi_ != nullptr) curl_multi_wakeup(multi_);
}

void HttpTransport::SetProtocolVersion(std::string version) {
  {
    std::lock_guard lock(mu_);
    protocol_version_ = std::move(version);
  }
  if (multi_ != nullptr) curl_multi_wakeup(multi_);
}

void HttpTransport::Close() {
  std::lock_guard lifecycle(lifecycle_mu_);
  assert(std::this_thread::get_id() != worker_.get_id() && "HttpTransport::Close called from a callback");
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    outbox_.clear();
  }
  if (multi_ != nullptr) curl_multi_wakeup(multi_);
  if (!worker_.joinable()) return;
  worker_.join();
  DeleteSession();
}

bool HttpTransport::Stopping() {
  std::lock_guard lock(mu_);
  return stopping_;
}

void HttpTransport::WorkerLoop() {
  for (;;) {
    std::deque<Outgoing> outgoing;
    bool version_known = false;
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
      outgoing.swap(outbox_);
      version_known = protocol_version_.has_value();
    }
    for (Outgoing& o : outgoing) StartPost(std::move(o));
    if (stream_ == EventStream::kNotWanted && version_known) stream_ = EventStream::kWanted;
    if (stream_ == EventStream::kWanted && (!stream_retry_at_ || Clock::now() >= *stream_retry_at_)) {
      stream_retry_at_.reset();
      OpenEventStream();
    }

    int running = 0;
    if (CURLMcode mc = curl_multi_perform(multi_, &running); mc != CURLM_OK) {
      spdlog::error("mcp {}: curl_multi_perform: {}", spec_.name, curl_multi_strerror(mc));
    }
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL* easy = msg->easy_handle;  // `msg` dies with the removal below
      CURLcode code = msg->data.result;
      auto it = transfers_.find(easy);
      if (it == transfers_.end()) continue;
      std::unique_ptr<Exchange> exchange = std::move(it->second);
      transfers_.erase(it);
      curl_multi_remove_handle(multi_, easy);
      Finish(*exchange, code);
    }

    milliseconds wait = kMaxWait;
    if (stream_retry_at_) {
      wait = std::clamp(std::chrono::ceil<milliseconds>(*stream_retry_at_ - Clock::now()), milliseconds(0),
                        wait);
    }
    curl_multi_poll(multi_, nullptr, 0, static_cast<int>(wait.count()), nullptr);
  }
  // Closing: drop whatever is in flight, without callbacks.
  for (auto& [easy, exchange] : transfers_) curl_multi_remove_handle(multi_, easy);
  transfers_.clear();
}

std::vector<std::string> HttpTransport::CommonHeaders() {
  std::vector<std::string> headers;
  for (const auto& [name, value] : spec_.headers) headers.push_back(name + ": " + value);
  if (!session_id_.empty()) headers.push_back("Mcp-Session-Id: " + session_id_);
  std::lock_guard lock(mu_);
  if (protocol_version_) headers.push_back("MCP-Protocol-Version: " + *protocol_version_);
  return headers;
}

std::unique_ptr<HttpTransport::Exchange> HttpTransport::NewExchange(ExchangeKind kind,
                                                                    std::vector<std::string> headers) {
  auto x = std::make_unique<Exchange>(*this, kind);
  x->easy.reset(curl_easy_init());
  if (!x->easy) return nullptr;
  x->carried_session = !session_id_.empty();
  for (std::string& header : CommonHeaders()) headers.push_back(std::move(header));
  x->headers = MakeHeaderList(headers);
  if (!x->headers) return nullptr;
  CURL* h = x->easy.get();
  curl_easy_setopt(h, CURLOPT_URL, spec_.url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->headers.get());
  curl_easy_setopt(h, CURLOPT_USERAGENT, "dsh");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->error);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &Exchange::OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, x.get());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Exchange::OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, x.get());
  return x;
}

void HttpTransport::StartPost(Outgoing outgoing) {
  std::unique_ptr<Exchange> x = NewExchange(
      ExchangeKind::kPost, {"Content-Type: application/json", "Accept: application/json, text/event-stream",
                            "Expect:"});  // no 100-continue round trip for large bodies
  if (!x) {
    if (outgoing.sent && !Stopping())
      outgoing.sent(Unavailable("cannot create a curl handle for MCP server " + spec_.name));
    return;
  }
  x->body = std::move(outgoing.body);
  x->sent = std::move(outgoing.sent);
  x->request_id = std::move(outgoing.request_id);
  CURL* h = x->easy.get();
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, x->body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(x->body.size()));
  Launch(std::move(x));
}

void HttpTransport::OpenEventStream() {
  std::unique_ptr<Exchange> x = NewExchange(ExchangeKind::kEventStream, {"Accept: text/event-stream"});
  if (!x) {
    stream_ = EventStream::kOff;
    return;
  }
  curl_easy_setopt(x->easy.get(), CURLOPT_HTTPGET, 1L);
  x->opened = Clock::now();
  stream_ = EventStream::kOpen;
  Launch(std::move(x));
}

void HttpTransport::Launch(std::unique_ptr<Exchange> x) {
  CURL* easy = x->easy.get();
  if (CURLMcode mc = curl_multi_add_handle(multi_, easy); mc != CURLM_OK) {
    Status error =
        Unavailable("cannot start a request to MCP server " + spec_.name + ": " + curl_multi_strerror(mc));
    if (x->kind == ExchangeKind::kEventStream) {
      stream_ = EventStream::kOff;
      spdlog::warn("mcp {}: {}", spec_.name, error.message());
    }
    Report(*x, std::move(error));
    return;
  }
  transfers_.emplace(easy, std::move(x));
}

void HttpTransport::Finish(Exchange& x, int curl_code) {
  if (x.kind == ExchangeKind::kPost) {
    FinishPost(x, curl_code);
  } else {
    FinishEventStream(x, curl_code);
  }
}

void HttpTransport::FinishPost(Exchange& x, int curl_code) {
  const auto code = static_cast<CURLcode>(curl_code);
  if (x.abort) return Report(x, std::move(*x.abort));
  if (code != CURLE_OK) {
    if (x.answered) return Report(x, Status::Ok());  // what mattered arrived
    if (x.streaming) {
      return Report(
          x, Unavailable("the event stream of MCP server " + spec_.name + " broke: " + x.Reason(code)));
    }
    return Report(
        x, Unavailable("cannot reach MCP server " + spec_.name + " at " + spec_.url + ": " + x.Reason(code)));
  }
  if (!x.classified) x.Classify();  // no body at all
  if (!Is2xx(x.status)) {
    std::string message = "MCP server " + spec_.name + " answered HTTP " + std::to_string(x.status);
    if (!IsBlank(x.buffered)) message += ": " + Excerpt(Trim(x.buffered));
    Report(x, Unavailable(std::move(message)));
    if (x.status == 404 && x.carried_session) SessionExpired();
    return;
  }
  if (x.streaming) {
    for (const agent::SseEvent& event : x.sse.Finish()) x.DeliverEvent(event);
  } else if (!IsBlank(x.buffered)) {
    Result<Json> parsed = ParseJson(x.buffered);
    if (!parsed.ok()) {
      return Report(x, Unavailable("MCP server " + spec_.name + " answered with a body that is not JSON (" +
                                   parsed.status().message() + "): " + Excerpt(x.buffered)));
    }
    x.DeliverPayload(std::move(parsed).value());
  }
  if (x.request_id && !x.answered) {
    return Report(
        x, Unavailable("MCP server " + spec_.name + " ended its response (HTTP " + std::to_string(x.status) +
                       ") without answering request " + DumpJson(*x.request_id)));
  }
  Report(x, Status::Ok());
}

void HttpTransport::FinishEventStream(Exchange& x, int curl_code) {
  const auto code = static_cast<CURLcode>(curl_code);
  stream_ = EventStream::kOff;
  if (Stopping()) return;
  if (x.abort) return ScheduleStreamRetry(x, x.abort->message());
  if (code == CURLE_OK && !x.classified) x.Classify();
  if (code == CURLE_OK && !x.streaming) {  // refused
    if (x.status == 405) {
      spdlog::debug("mcp {}: the server offers no event stream (HTTP 405)", spec_.name);
      return;
    }
    if (x.status == 404 && x.carried_session) return SessionExpired();
    std::string why = "HTTP " + std::to_string(x.status);
    if (!IsBlank(x.buffered)) why += ": " + Excerpt(Trim(x.buffered));
    // A server error or a proxy's may pass; any other answer will not.
    if (x.status >= 500 || x.status == 408 || x.status == 429) return ScheduleStreamRetry(x, why);
    spdlog::warn("mcp {}: the server refused the event stream ({}); not reopening it", spec_.name, why);
    return;
  }
  if (code == CURLE_OK) {
    for (const agent::SseEvent& event : x.sse.Finish()) x.DeliverEvent(event);
  }
  // The stream dropped, or could not connect.
  ScheduleStreamRetry(x, code == CURLE_OK ? "the server ended it" : x.Reason(code));
}

void HttpTransport::ScheduleStreamRetry(const Exchange& stream, const std::string& why) {
  // A stream that got bytes (keep-alive comments too) or lasted was no
  // failed attempt: a proxy's idle timeout, say. The backoff starts over.
  if (!stream.abort && (stream.received || Clock::now() - stream.opened >= options_.stream_retry_max_delay)) {
    stream_retry_delay_ = options_.stream_retry_delay;
  }
  const milliseconds delay = stream_retry_delay_;
  stream_retry_delay_ = std::min(stream_retry_delay_ * 2, options_.stream_retry_max_delay);
  spdlog::info("mcp {}: the event stream dropped ({}); reopening it in {} ms", spec_.name, why,
               delay.count());
  stream_ = EventStream::kWanted;
  stream_retry_at_ = Clock::now() + delay;
}

void HttpTransport::SessionExpired() {
  if (closed_reported_ || Stopping()) return;
  closed_reported_ = true;
  on_closed_(Unavailable("MCP server " + spec_.name + " answered HTTP 404: session expired"));
}

void HttpTransport::DeliverOne(Json message) {
  if (!Stopping()) on_message_(std::move(message));
}

void HttpTransport::Report(Exchange& x, Status status) {
  if (!x.sent || Stopping()) return;
  OnSent sent = std::move(x.sent);
  sent(std::move(status));
}

// Best effort: the server may free the session early. Runs on Close's
// thread after the worker is gone, bounded by `delete_timeout`.
void HttpTransport::DeleteSession() {
  if (session_id_.empty()) return;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
  if (!easy) return;
  HeaderList list = MakeHeaderList(CommonHeaders());
  if (!list) return;
  const long timeout_ms = static_cast<long>(options_.delete_timeout.count());
  CURL* h = easy.get();
  curl_easy_setopt(h, CURLOPT_URL, spec_.url.c_str());
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list.get());
  curl_easy_setopt(h, CURLOPT_USERAGENT, "dsh");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   std::min(timeout_ms, static_cast<long>(options_.connect_timeout.count())));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &DiscardBody);
  CURLcode code = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  spdlog::debug("mcp {}: DELETE of the session: {} (HTTP {})", spec_.name, curl_easy_strerror(code), status);
  session_id_.clear();
}

}  // namespace dsh::mcp
