#include "agent/testing/fake_chat_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cctype>
#include <set>
#include <stdexcept>

namespace dsh::agent::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

// Splits `text` into about `parts` pieces without cutting a UTF-8 sequence.
std::vector<std::string> SplitUtf8(const std::string& text, size_t parts) {
  std::vector<std::string> out;
  size_t step = std::max<size_t>(1, (text.size() + parts - 1) / parts);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = std::min(text.size(), pos + step);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  if (out.empty()) out.emplace_back();
  return out;
}

Json Chunk(Json delta, Json finish_reason = nullptr) {
  return Json{{"id", "chatcmpl-fake"},
              {"object", "chat.completion.chunk"},
              {"created", 0},
              {"model", "fake-model"},
              {"choices", Json::array({Json{{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish_reason}}})}};
}

void AddFinish(std::vector<SseChunk>& chunks, const char* reason, std::chrono::milliseconds delay) {
  chunks.push_back({SseData(Chunk(Json::object(), reason)), delay});
  chunks.push_back({"data: [DONE]\n\n", delay});
}

}  // namespace

std::string SseData(const Json& chunk) { return "data: " + DumpJson(chunk) + "\n\n"; }

ScriptedResponse Sse(std::vector<SseChunk> chunks) {
  ScriptedResponse r;
  r.kind = ScriptedResponse::Kind::kSse;
  r.chunks = std::move(chunks);
  return r;
}

ScriptedResponse TextReply(const std::string& text, std::chrono::milliseconds delay) {
  std::vector<SseChunk> chunks;
  chunks.push_back({SseData(Chunk(Json{{"role", "assistant"}, {"content", ""}})), {}});
  for (auto& piece : SplitUtf8(text, 3)) chunks.push_back({SseData(Chunk(Json{{"content", piece}})), delay});
  AddFinish(chunks, "stop", delay);
  return Sse(std::move(chunks));
}

ScriptedResponse ToolCallReply(const std::vector<ModelToolCall>& calls) {
  std::vector<SseChunk> chunks;
  chunks.push_back({SseData(Chunk(Json{{"role", "assistant"}, {"content", nullptr}})), {}});
  std::vector<std::vector<std::string>> fragments;
  for (size_t i = 0; i < calls.size(); ++i) {
    Json head{{"index", i},
              {"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", ""}}}};
    chunks.push_back({SseData(Chunk(Json{{"tool_calls", Json::array({head})}})), {}});
    fragments.push_back(SplitUtf8(calls[i].arguments, 3));
  }
  // Round-robin over the calls so their indexes interleave; the first round
  // carries every call's fragment in one delta, and each event is written in
  // two pieces so it straddles reads on the client.
  for (size_t round = 0;; ++round) {
    Json entries = Json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
      if (round < fragments[i].size()) {
        entries.push_back(Json{{"index", i}, {"function", {{"arguments", fragments[i][round]}}}});
      }
    }
    if (entries.empty()) break;
    auto emit = [&](Json list) {
      std::string event = SseData(Chunk(Json{{"tool_calls", std::move(list)}}));
      size_t half = event.size() / 2;
      chunks.push_back({event.substr(0, half), {}});
      chunks.push_back({event.substr(half), std::chrono::milliseconds(1)});
    };
    if (round == 0) {
      emit(entries);
    } else {
      for (auto& e : entries) emit(Json::array({e}));
    }
  }
  AddFinish(chunks, "tool_calls", {});
  return Sse(std::move(chunks));
}

ScriptedResponse ReasoningThenText(const std::string& reasoning, const std::string& text) {
  std::vector<SseChunk> chunks;
  chunks.push_back({SseData(Chunk(Json{{"role", "assistant"}, {"content", nullptr}, {"reasoning_content", ""}})), {}});
  for (auto& piece : SplitUtf8(reasoning, 2)) {
    chunks.push_back({SseData(Chunk(Json{{"content", nullptr}, {"reasoning_content", piece}})), {}});
  }
  for (auto& piece : SplitUtf8(text, 2)) {
    chunks.push_back({SseData(Chunk(Json{{"content", piece}, {"reasoning_content", nullptr}})), {}});
  }
  AddFinish(chunks, "stop", {});
  return Sse(std::move(chunks));
}

ScriptedResponse Error(int status, const std::string& message, std::optional<int> retry_after_seconds) {
  ScriptedResponse r;
  r.kind = ScriptedResponse::Kind::kError;
  r.status = status;
  r.body = DumpJson(Json{{"error", {{"message", message}, {"type", "fake_error"}, {"code", nullptr}}}});
  r.retry_after_seconds = retry_after_seconds;
  return r;
}

ScriptedResponse Hang() {
  ScriptedResponse r;
  r.kind = ScriptedResponse::Kind::kHang;
  return r;
}

ScriptedResponse CloseConnection() {
  ScriptedResponse r;
  r.kind = ScriptedResponse::Kind::kClose;
  return r;
}

// Everything below runs on the server thread only.
class FakeChatServer::Impl {
 public:
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::set<std::shared_ptr<Connection>> connections;
};

class FakeChatServer::Connection : public std::enable_shared_from_this<FakeChatServer::Connection> {
 public:
  Connection(tcp::socket socket, FakeChatServer& server)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), server_(server) {}

  void Read() {
    parser_.emplace();
    parser_->body_limit(64 << 20);
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    server_.impl_->connections.erase(shared_from_this());
  }

 private:
  struct Step {
    std::chrono::milliseconds delay;
    std::string bytes;
  };

  void OnRead(beast::error_code ec) {
    if (ec) return Close();
    auto& msg = parser_->get();
    RecordedRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    for (const auto& field : msg) {
      std::string name(field.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers[name] = std::string(field.value());
    }
    req.body = msg.body();
    if (auto parsed = ParseJson(req.body); parsed.ok()) req.json = std::move(*parsed);
    req.received = std::chrono::steady_clock::now();
    keep_alive_ = msg.keep_alive();
    Play(server_.TakeResponse(std::move(req)));
  }

  void Play(ScriptedResponse r) {
    steps_.clear();
    next_step_ = 0;
    switch (r.kind) {
      case ScriptedResponse::Kind::kClose:
        return Close();
      case ScriptedResponse::Kind::kHang:
        return WatchForClientClose();
      case ScriptedResponse::Kind::kError: {
        std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " +
                           std::string(http::obsolete_reason(static_cast<http::status>(r.status))) + "\r\n";
        head += "Content-Type: application/json\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n";
        if (r.retry_after_seconds) head += "Retry-After: " + std::to_string(*r.retry_after_seconds) + "\r\n";
        head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
        steps_.push_back({{}, head + r.body});
        break;
      }
      case ScriptedResponse::Kind::kSse: {
        std::string head =
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            "Transfer-Encoding: chunked\r\n";
        head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
        steps_.push_back({{}, std::move(head)});
        for (auto& chunk : r.chunks) {
          std::string framed;
          if (!chunk.bytes.empty()) {
            char size[32];
            std::snprintf(size, sizeof size, "%zx\r\n", chunk.bytes.size());
            framed = size + chunk.bytes + "\r\n";
          }
          steps_.push_back({chunk.delay, std::move(framed)});
        }
        steps_.push_back({{}, "0\r\n\r\n"});
        break;
      }
    }
    NextStep();
  }

  void NextStep() {
    if (closed_) return;
    if (next_step_ == steps_.size()) {
      if (!keep_alive_) return Close();
      return Read();
    }
    Step& step = steps_[next_step_];
    if (step.delay.count() > 0) {
      timer_.expires_after(step.delay);
      step.delay = {};
      timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (ec) return self->Close();
        self->NextStep();
      });
      return;
    }
    if (step.bytes.empty()) {
      ++next_step_;
      return NextStep();
    }
    net::async_write(socket_, net::buffer(step.bytes), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      ++self->next_step_;
      self->NextStep();
    });
  }

  // A hanging response still notices the client going away, so connections
  // do not pile up until Stop().
  void WatchForClientClose() {
    discard_.resize(4096);
    socket_.async_read_some(net::buffer(discard_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      self->WatchForClientClose();
    });
  }

  tcp::socket socket_;
  net::steady_timer timer_;
  FakeChatServer& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = true;
  bool closed_ = false;
  std::vector<Step> steps_;
  size_t next_step_ = 0;
  std::vector<char> discard_;
};

FakeChatServer::FakeChatServer() : FakeChatServer(Options()) {}

FakeChatServer::FakeChatServer(Options options)
    : default_response_(std::move(options.default_response)), impl_(std::make_unique<Impl>()) {
  beast::error_code ec;
  tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("FakeChatServer cannot listen on 127.0.0.1: " + ec.message());
  port_ = impl_->acceptor.local_endpoint().port();
  AcceptNext();
  thread_ = std::thread([this] { impl_->ioc.run(); });
}

FakeChatServer::~FakeChatServer() { Stop(); }

void FakeChatServer::AcceptNext() {
  impl_->acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !impl_->acceptor.is_open()) return;
    if (!ec) {
      auto conn = std::make_shared<Connection>(std::move(socket), *this);
      impl_->connections.insert(conn);
      conn->Read();
    }
    AcceptNext();
  });
}

std::string FakeChatServer::base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

void FakeChatServer::Enqueue(ScriptedResponse response) {
  std::lock_guard lock(mu_);
  script_.push_back(std::move(response));
}

void FakeChatServer::SetDefault(ScriptedResponse response) {
  std::lock_guard lock(mu_);
  default_response_ = std::move(response);
}

std::vector<RecordedRequest> FakeChatServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

bool FakeChatServer::WaitForRequests(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
}

ScriptedResponse FakeChatServer::TakeResponse(RecordedRequest request) {
  std::lock_guard lock(mu_);
  requests_.push_back(std::move(request));
  cv_.notify_all();
  if (script_.empty()) return default_response_;
  ScriptedResponse next = std::move(script_.front());
  script_.pop_front();
  return next;
}

void FakeChatServer::Stop() {
  std::lock_guard lock(stop_mu_);
  if (!thread_.joinable()) return;
  net::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    auto live = impl_->connections;  // Close() erases from the set
    for (auto& c : live) c->Close();
    impl_->ioc.stop();
  });
  thread_.join();
}

}  // namespace dsh::agent::testing
