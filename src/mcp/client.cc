#include "mcp/client.h"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdio>

#include "base/log.h"

namespace dsh::mcp {
namespace {

namespace asio = boost::asio;

std::string Seconds(std::chrono::milliseconds ms) {
  double s = static_cast<double>(ms.count()) / 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, s == static_cast<int64_t>(s) ? "%.0f s" : "%.1f s", s);
  return buf;
}

Status Unavailable(const std::string& server, const std::string& why) {
  return Status(codes::kMcpUnavailable, "MCP server " + server + " is unavailable: " + why);
}

// The member `key` of `object` when it is a string, else nullopt (missing,
// another type, `object` not an object).
std::optional<std::string> StringField(const Json& object, const char* key) {
  const std::string* s = StringMember(object, key);
  return s ? std::optional<std::string>(*s) : std::nullopt;
}

}  // namespace

McpClient::McpClient(Options options, OnTools on_tools)
    : options_(std::move(options)), on_tools_(std::move(on_tools)), backoff_timer_(io_), start_timer_(io_) {}

McpClient::~McpClient() {
  Stop();
  std::lock_guard lock(alive_->mu);
  alive_->client = nullptr;
}

void McpClient::Start() {
  {
    std::lock_guard lock(mu_);
    if (started_ || stopped_) return;
    started_ = true;
    state_ = State::kConnecting;
    work_.emplace(io_.get_executor());
    thread_ = std::thread([this] { Run(); });
    asio::post(io_, [this] { Connect(); });
  }
  NotifyStateChange();
}

void McpClient::Run() {
  // Handlers catch what they expect; anything else (a callback of the
  // caller's that throws, a bug) must not take the host down. asio lets run()
  // be called again after a handler threw.
  for (;;) {
    try {
      io_.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("mcp {}: a handler of its client failed, going on: {}", name(), e.what());
    } catch (...) {
      spdlog::error("mcp {}: a handler of its client failed with an unknown exception, going on", name());
    }
  }
}

void McpClient::Stop() {
  {
    std::unique_lock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    if (!started_) {
      state_ = State::kStopped;
      lock.unlock();
      return NotifyStateChange();
    }
  }
  // Runs after everything posted before (CallTool posts under mu_ and checks
  // stopped_), so no call is left without an answer.
  asio::post(io_, [this] {
    ++generation_;
    backoff_timer_.cancel();
    start_timer_.cancel();
    CloseTransport();
    Status why(codes::kShuttingDown, "the host is stopping");
    FailAllPending(why);
    SetState(State::kStopped);
    work_.reset();
  });
  thread_.join();
}

McpClient::State McpClient::state() const {
  std::lock_guard lock(mu_);
  return state_;
}
std::string McpClient::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}
std::string McpClient::protocol_version() const {
  std::lock_guard lock(mu_);
  return protocol_version_;
}
int64_t McpClient::connections() const {
  std::lock_guard lock(mu_);
  return connections_;
}

void McpClient::SetState(State s, std::string error) {
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    changed = state_ != s || (!error.empty() && error != last_error_);
    state_ = s;
    if (!error.empty()) last_error_ = std::move(error);
    if (s != State::kConnecting) settled_.notify_all();
  }
  if (changed) NotifyStateChange();
}

void McpClient::NotifyStateChange() {
  if (options_.on_state_change) options_.on_state_change();
}

bool McpClient::WaitSettled(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return settled_.wait_for(lock, timeout, [&] { return state_ != State::kConnecting; });
}

void McpClient::Connect() {
  if (state() == State::kStopped) return;
  SetState(State::kConnecting);
  uint64_t gen = ++generation_;
  listing_ = false;
  relist_again_ = false;
  transport_ = options_.make_transport(options_.spec);
  Status started = transport_->Start(
      [this, gen](Json message) {
        asio::post(io_, [this, gen, m = std::move(message)]() mutable { OnMessage(gen, std::move(m)); });
      },
      [this, gen](Status why) { asio::post(io_, [this, gen, why] { OnClosed(gen, why); }); });
  if (!started.ok()) return OnConnectFailed(gen, started);
  start_timer_.expires_after(options_.spec.start_timeout);
  start_timer_.async_wait([this, gen](boost::system::error_code ec) {
    if (ec || gen != generation_ || state() != State::kConnecting) return;
    OnConnectFailed(gen, Unavailable(name(), "it did not finish starting within " +
                                                 Seconds(options_.spec.start_timeout)));
  });
  Json init = {{"protocolVersion", kProtocolVersions[0]},
               {"capabilities", Json::object()},
               {"clientInfo", {{"name", "dsh"}, {"version", options_.client_version}}}};
  Request("initialize", std::move(init), "initialize", options_.spec.start_timeout,
          [this, gen](Result<Json> r) {
            if (gen != generation_) return;
            if (!r.ok()) return OnConnectFailed(gen, r.status());
            std::string dsh_speaks =
                std::string(", dsh speaks ") + kProtocolVersions[0] + " and " + kProtocolVersions[1];
            std::optional<std::string> version = StringField(*r, "protocolVersion");
            if (!version) {
              Json got = r->is_object() && r->contains("protocolVersion") ? (*r)["protocolVersion"] : Json();
              return OnConnectFailed(gen, Unavailable(name(), "it answered initialize with protocolVersion " +
                                                                  DescribeJson(got) + dsh_speaks));
            }
            bool known = std::any_of(std::begin(kProtocolVersions), std::end(kProtocolVersions),
                                     [&](const char* v) { return *version == v; });
            if (!known) {
              return OnConnectFailed(
                  gen, Unavailable(name(), "it speaks MCP revision '" + *version + "'" + dsh_speaks));
            }
            {
              std::lock_guard lock(mu_);
              protocol_version_ = *version;
            }
            transport_->SetProtocolVersion(*version);
            // Over HTTP each message is its own POST: tools/list goes only
            // once the server has taken `initialized`, which the spec wants
            // before any request but ping.
            transport_->Send(
                {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}, {"params", Json::object()}},
                [this, gen](Status sent) {
                  asio::post(io_, [this, gen, sent] {
                    if (gen != generation_) return;
                    if (!sent.ok()) return OnConnectFailed(gen, sent);
                    ListTools(std::nullopt, {});
                  });
                });
          });
}

void McpClient::OnConnectFailed(uint64_t gen, Status why) {
  if (gen != generation_ || state() == State::kStopped) return;
  bool was_ready = state() == State::kReady;
  ++generation_;  // whatever the old transport still reports is stale now
  start_timer_.cancel();
  CloseTransport();
  if (why.code() != codes::kMcpUnavailable) why = Unavailable(name(), why.message());
  FailAllPending(why);
  // A server that worked is restarted at once, so that the next call waits
  // for it rather than failing (up to 3 times a minute: a server that dies
  // whenever it is used is not restarted in a tight loop). One that keeps
  // failing to start waits longer each time.
  auto now = std::chrono::steady_clock::now();
  // Only a connection that lasted resets the backoff: one that starts fine
  // and crashes a second later is retried less and less often too.
  if (was_ready && now - ready_since_ >= kStableConnection) backoff_ = std::chrono::milliseconds(0);
  std::erase_if(quick_restarts_, [&](auto t) { return now - t > std::chrono::minutes(1); });
  if (was_ready && quick_restarts_.size() < 3) {
    quick_restarts_.push_back(now);
    spdlog::warn("mcp {}: {}; restarting it", name(), why.message());
    SetState(State::kDown, why.message());
    return Connect();
  }
  backoff_ = backoff_.count() == 0 ? options_.min_backoff : std::min(backoff_ * 2, options_.max_backoff);
  spdlog::warn("mcp {}: {}; retrying in {}", name(), why.message(), Seconds(backoff_));
  SetState(State::kDown, why.message());
  backoff_timer_.expires_after(backoff_);
  backoff_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Connect();
  });
}

void McpClient::OnClosed(uint64_t gen, Status why) { OnConnectFailed(gen, std::move(why)); }

void McpClient::CloseTransport() {
  if (transport_) transport_->Close();
  transport_.reset();
}

void McpClient::Request(const std::string& method, Json params, std::string what,
                        std::chrono::milliseconds timeout, Done done) {
  int64_t id = next_id_++;
  Pending p{method, std::move(what), std::move(done), std::make_unique<asio::steady_timer>(io_)};
  p.timer->expires_after(timeout);
  p.timer->async_wait([this, id, timeout](boost::system::error_code ec) {
    if (ec) return;
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    std::string what = it->second.what;
    AbandonCall(id, "timed out",
                Status(codes::kMcpTimeout,
                       "MCP server " + name() + " did not answer " + what + " within " + Seconds(timeout)));
  });
  pending_.emplace(id, std::move(p));
  Json message = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
  uint64_t gen = generation_;
  transport_->Send(std::move(message), [this, gen, id](Status sent) {
    if (sent.ok()) return;
    asio::post(io_, [this, gen, id, sent] {
      if (gen != generation_) return;
      auto it = pending_.find(id);
      if (it == pending_.end()) return;
      Done d = std::move(it->second.done);
      pending_.erase(it);
      d(sent.code() == codes::kMcpUnavailable ? sent : Unavailable(name(), sent.message()));
    });
  });
}

void McpClient::Notify(const std::string& method, Json params) {
  if (!transport_) return;
  transport_->Send({{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}}, nullptr);
}

void McpClient::AbandonCall(int64_t id, const std::string& reason, Status status) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Done d = std::move(it->second.done);
  // The MCP spec forbids cancelling `initialize`.
  if (it->second.method != "initialize")
    Notify("notifications/cancelled", {{"requestId", id}, {"reason", reason}});
  pending_.erase(it);
  d(std::move(status));
}

void McpClient::FailAllPending(const Status& why) {
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [_, p] : pending) p.done(why);
  auto queued = std::move(queued_);
  queued_.clear();
  for (auto& q : queued) q.done(why);
}

void McpClient::OnMessage(uint64_t gen, Json message) {
  if (gen != generation_ || !message.is_object()) return;
  auto method = message.find("method");
  auto id = message.find("id");
  if (method == message.end()) {  // a response
    if (id == message.end() || !id->is_number_integer()) return;
    auto it = pending_.find(id->get<int64_t>());
    if (it == pending_.end()) return;  // abandoned (timed out, cancelled)
    Pending p = std::move(it->second);
    pending_.erase(it);
    if (auto err = message.find("error"); err != message.end()) {
      std::string text = StringField(*err, "message").value_or("an error without a message");
      auto code = err->is_object() ? err->find("code") : err->end();
      if (code != err->end() && code->is_number_integer())
        text += " (" + std::to_string(code->get<int64_t>()) + ")";
      return p.done(Status(codes::kMcpError, "MCP server " + name() + " refused " + p.what + ": " + text));
    }
    return p.done(message.value("result", Json::object()));
  }
  if (!method->is_string()) return;
  const std::string m = method->get<std::string>();
  if (id != message.end()) {  // a request from the server
    Json reply = {{"jsonrpc", "2.0"}, {"id", *id}};
    if (m == "ping") {
      reply["result"] = Json::object();
    } else {
      reply["error"] = {{"code", -32601}, {"message", "dsh does not offer " + m}};
    }
    return transport_->Send(std::move(reply), nullptr);
  }
  if (m == "notifications/tools/list_changed") {
    // While connecting without a listing yet, the first one is still to come.
    if (listing_) {
      relist_again_ = true;
    } else if (state() == State::kReady) {
      ListTools(std::nullopt, {});
    }
  } else if (m == "notifications/message") {
    const Json& params = message.value("params", Json::object());
    spdlog::info("mcp {}: {}", name(), params.contains("data") ? DumpJson(params["data"]) : DumpJson(params));
  }
}

void McpClient::ListTools(std::optional<std::string> cursor, Listing so_far) {
  listing_ = true;
  Json params = Json::object();
  if (cursor) params["cursor"] = *cursor;
  uint64_t gen = generation_;
  Request("tools/list", std::move(params), "tools/list", options_.spec.call_timeout,
          [this, gen, so_far = std::move(so_far)](Result<Json> r) mutable {
            if (gen != generation_) return;
            listing_ = false;
            if (!r.ok()) return OnListFailed(gen, r.status());
            const Json& tools = r->is_object() ? r->value("tools", Json::array()) : Json::array();
            for (const Json& t : tools.is_array() ? tools : Json::array()) {
              std::optional<std::string> tool = StringField(t, "name");
              if (!tool) continue;
              auto schema = t.find("inputSchema");
              if (schema == t.end() || !schema->is_object()) {
                // A model provider refuses the whole request for such a tool.
                spdlog::warn("mcp {}: leaving out its tool {}: its inputSchema is {}, not an object", name(),
                             *tool, schema == t.end() ? "missing" : DescribeJson(*schema));
                continue;
              }
              ToolInfo info;
              info.name = std::move(*tool);
              info.description = StringField(t, "description").value_or(StringField(t, "title").value_or(""));
              info.input_schema = *schema;
              so_far.tools.push_back(std::move(info));
            }
            if (std::optional<std::string> next = StringField(*r, "nextCursor"); next && !next->empty()) {
              if (!so_far.cursors.insert(*next).second) {
                return OnListFailed(gen,
                                    Status(codes::kMcpError, "its tools/list repeated the cursor " +
                                                                 internal::Excerpt(DumpJson(Json(*next)))));
              }
              if (so_far.cursors.size() >= kMaxToolListPages) {
                return OnListFailed(
                    gen, Status(codes::kMcpError, "its tools/list did not end within " +
                                                      std::to_string(kMaxToolListPages) + " pages"));
              }
              return ListTools(std::move(next), std::move(so_far));
            }
            bool first = state() == State::kConnecting;
            size_t n = so_far.tools.size();
            // The tools are registered before the client says it is ready.
            if (on_tools_) on_tools_(std::move(so_far.tools));
            if (first) {
              start_timer_.cancel();
              ready_since_ = std::chrono::steady_clock::now();
              {
                std::lock_guard lock(mu_);
                ++connections_;
              }
              spdlog::info("mcp {}: connected (MCP {}), {} tools", name(), protocol_version(), n);
              SetState(State::kReady);
              StartQueuedCalls();
            }
            if (relist_again_) {
              relist_again_ = false;
              ListTools(std::nullopt, {});
            }
          });
}

void McpClient::OnListFailed(uint64_t gen, const Status& why) {
  if (state() == State::kConnecting) return OnConnectFailed(gen, why);
  spdlog::warn("mcp {}: could not re-list its tools, keeping the old list: {}", name(), why.message());
}

void McpClient::CallTool(const std::string& tool, Json arguments, std::shared_ptr<agent::CancelToken> cancel,
                         Done done) {
  std::unique_lock lock(mu_);
  if (!started_ || stopped_) {
    lock.unlock();
    return done(Status(codes::kShuttingDown, "MCP server " + name() + " is not running"));
  }
  asio::post(io_, [this, tool, arguments = std::move(arguments), cancel = std::move(cancel),
                   done = std::move(done)]() mutable {
    switch (state()) {
      case State::kReady:
        return SendCall(std::move(tool), std::move(arguments), std::move(cancel), std::move(done));
      case State::kConnecting: {
        int64_t key = next_queued_key_++;
        if (cancel) PostOnCancel(*cancel, [this, key] { CancelQueuedCall(key); });
        queued_.push_back({key, std::move(tool), std::move(arguments), std::move(cancel), std::move(done)});
        return;
      }
      default: {
        // last_error_ is a whole message already ("MCP server t is unavailable: ...").
        std::string why = last_error();
        return done(why.empty() ? Unavailable(name(), "it is not running")
                                : Status(codes::kMcpUnavailable, why));
      }
    }
  });
}

void McpClient::StartQueuedCalls() {
  auto queued = std::move(queued_);
  queued_.clear();
  for (auto& q : queued)
    SendCall(std::move(q.tool), std::move(q.arguments), std::move(q.cancel), std::move(q.done));
}

void McpClient::CancelQueuedCall(int64_t key) {
  auto it = std::find_if(queued_.begin(), queued_.end(), [&](const QueuedCall& q) { return q.key == key; });
  if (it == queued_.end()) return;  // sent (SendCall's own callback handles it) or answered
  Done done = std::move(it->done);
  queued_.erase(it);
  done(Status(codes::kCancelled, "the call was cancelled"));
}

void McpClient::PostOnCancel(agent::CancelToken& cancel, std::function<void()> fn) {
  // The callback only posts, and only while the client exists.
  cancel.OnCancel([alive = alive_, fn = std::move(fn)] {
    std::lock_guard lock(alive->mu);
    if (alive->client == nullptr) return;
    asio::post(alive->client->io_, fn);
  });
}

void McpClient::SendCall(std::string tool, Json arguments, std::shared_ptr<agent::CancelToken> cancel,
                         Done done) {
  if (cancel && cancel->cancelled()) return done(Status(codes::kCancelled, "the call was cancelled"));
  int64_t id = next_id_;  // the id Request gives it
  Request("tools/call", {{"name", tool}, {"arguments", std::move(arguments)}}, "tools/call " + tool,
          options_.spec.call_timeout, std::move(done));
  if (!cancel) return;
  PostOnCancel(*cancel, [this, id] {
    AbandonCall(id, "the caller cancelled", Status(codes::kCancelled, "the call was cancelled"));
  });
}

}  // namespace dsh::mcp
