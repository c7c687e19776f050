#include "server/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <vector>

#include "server/websocket.h"

namespace dsh::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(120);

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      int hi = i + 1 < s.size() ? HexValue(s[i + 1]) : -1;
      int lo = i + 2 < s.size() ? HexValue(s[i + 2]) : -1;
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && s[i] == '+' ? ' ' : s[i]);
  }
  return out;
}

void SplitTarget(std::string_view target, HttpRequest& req) {
  size_t q = target.find('?');
  req.path = PercentDecode(target.substr(0, q), false);
  if (q == std::string_view::npos) return;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    size_t eq = pair.find('=');
    std::string key = PercentDecode(pair.substr(0, eq), true);
    std::string value = eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1), true);
    if (!key.empty()) req.query[key] = value;
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
}

}  // namespace

struct HttpServer::Shared {
  Shared(HttpHandler h, const Options& options)
      : handler(std::move(h)),
        websocket(options.websocket),
        websocket_limits(options.websocket_limits),
        max_body(options.max_body) {}

  const HttpHandler handler;
  const WebSocketHandler websocket;
  const WebSocketLimits websocket_limits;
  const size_t max_body;
  // Set before `mu` is taken in Stop(), read under `mu` when registering, so
  // a connection either is registered before Stop() looks or sees the flag.
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::vector<std::weak_ptr<Connection>> connections;           // GUARDED_BY(mu)
  std::vector<std::weak_ptr<WebSocketConnection>> websockets;  // GUARDED_BY(mu)
};

class HttpServer::Connection : public std::enable_shared_from_this<HttpServer::Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)), executor_(stream_.get_executor()), shared_(std::move(shared)) {}

  void Start() {
    net::dispatch(executor_, [self = shared_from_this()] { self->Read(); });
  }

  // Closes the connection if it is waiting for a request; one in flight
  // closes after its response.
  void CloseIfIdle() {
    net::post(executor_, [self = shared_from_this()] {
      if (!self->in_flight_ && !self->upgraded_) {
        beast::error_code ec;
        self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        self->stream_.close();
      }
    });
  }

 private:
  void Read() {
    if (shared_->stopping.load()) return Close();
    parser_.emplace();
    parser_->body_limit(shared_->max_body);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      drain_after_write_ = true;
      return Write(HttpResponse::FromError(
          Status("payload_too_large", "the request body is larger than " + std::to_string(shared_->max_body) +
                                          " bytes")));
    }
    if (ec) return Close();  // end of stream, timeout, reset, malformed request
    auto& msg = parser_->get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    SplitTarget(std::string_view(msg.target().data(), msg.target().size()), req);
    for (const auto& field : msg) {
      std::string name(field.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers[name] = std::string(field.value());
    }
    req.body = std::move(msg.body());
    keep_alive_ = msg.keep_alive();
    in_flight_ = true;
    auto guard = std::make_shared<net::executor_work_guard<net::any_io_executor>>(executor_);
    auto responded = std::make_shared<std::atomic<bool>>(false);
    if (shared_->websocket && beast::websocket::is_upgrade(msg)) {
      upgrade_request_.emplace(parser_->release());
      return shared_->websocket(std::move(req), [self = shared_from_this(), guard, responded](UpgradeDecision d) {
        if (responded->exchange(true)) return;
        net::post(self->executor_, [self, d = std::move(d)]() mutable { self->OnUpgradeDecided(std::move(d)); });
        guard->reset();
      });
    }
    shared_->handler(std::move(req), [self = shared_from_this(), guard, responded](HttpResponse res) {
      if (responded->exchange(true)) return;  // a handler must respond once; ignore extras
      net::post(self->executor_, [self, res = std::move(res)]() mutable { self->Write(std::move(res)); });
      guard->reset();  // the posted write now keeps the io_context busy; a tool may keep `done` alive
    });
  }

  // Hands the TCP stream to a WebSocketConnection, or refuses the upgrade
  // with the handler's response and closes.
  void OnUpgradeDecided(UpgradeDecision decision) {
    if (auto* refused = std::get_if<HttpResponse>(&decision)) {
      keep_alive_ = false;
      return Write(std::move(*refused));
    }
    auto session = std::get<std::shared_ptr<WebSocketSession>>(std::move(decision));
    if (!session) {
      keep_alive_ = false;
      return Write(HttpResponse::FromError(Status(codes::kInternal, "the upgrade handler accepted without a session")));
    }
    std::shared_ptr<WebSocketConnection> ws;
    {
      std::lock_guard lock(shared_->mu);
      if (!shared_->stopping.load()) {
        ws = std::make_shared<WebSocketConnection>(std::move(stream_), shared_->websocket_limits, std::move(session));
        std::erase_if(shared_->websockets, [](const auto& w) { return w.expired(); });
        shared_->websockets.push_back(ws);
      }
    }
    if (!ws) {
      keep_alive_ = false;
      return Write(HttpResponse::FromError(Status("shutting_down", "the host is stopping")));
    }
    upgraded_ = true;  // stream_ is moved from: never touch it again
    in_flight_ = false;
    ws->Accept(std::move(*upgrade_request_));
  }

  void Write(HttpResponse r) {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(11);
    res->result(static_cast<http::status>(r.status));
    res->set(http::field::server, "dsh");
    res->set(http::field::content_type, r.content_type);
    res->set(http::field::cache_control, "no-store");
    for (auto& [k, v] : r.headers) res->set(k, v);
    res->body() = std::move(r.body);
    bool keep = keep_alive_ && !shared_->stopping.load();
    res->keep_alive(keep);
    res->prepare_payload();
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res, keep](beast::error_code ec, size_t) {
      self->in_flight_ = false;
      if (!ec && self->drain_after_write_) return self->Drain();
      if (ec || !keep) return self->Close();
      self->Read();
    });
  }

  // After refusing a request early (413), read and discard what the client
  // is still sending so closing does not reset the connection before the
  // client has read the response. Bounded in bytes and time.
  void Drain() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(5));
    DrainSome();
  }
  void DrainSome() {
    discard_.resize(64 * 1024);
    stream_.async_read_some(net::buffer(discard_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > kMaxDrain) return self->Close();
      self->DrainSome();
    });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  net::any_io_executor executor_;  // the connection's strand
  std::shared_ptr<Shared> shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::request<http::string_body>> upgrade_request_;
  bool keep_alive_ = true;
  bool in_flight_ = false;
  bool upgraded_ = false;
  bool drain_after_write_ = false;
  std::vector<char> discard_;
  size_t drained_ = 0;
  static constexpr size_t kMaxDrain = 16 << 20;
};

HttpServer::HttpServer(net::io_context& ioc, Options options, HttpHandler handler)
    : ioc_(ioc),
      options_(std::move(options)),
      acceptor_(net::make_strand(ioc)),
      shared_(std::make_shared<Shared>(std::move(handler), options_)) {}

HttpServer::~HttpServer() = default;

Result<uint16_t> HttpServer::Listen() {
  beast::error_code ec;
  auto address = net::ip::make_address(options_.host, ec);
  if (ec) return Status(codes::kInvalidConfig, "'" + options_.host + "' is not an IP address: " + ec.message());
  tcp::endpoint endpoint(address, options_.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status(codes::kIo, "cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " +
                                  ec.message());
  }
  uint16_t port = acceptor_.local_endpoint().port();
  Accept();
  return port;
}

void HttpServer::Accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || shared_->stopping.load()) return;
    if (!ec) {
      auto conn = std::make_shared<Connection>(std::move(socket), shared_);
      {
        std::lock_guard lock(shared_->mu);
        std::erase_if(shared_->connections, [](const auto& w) { return w.expired(); });
        shared_->connections.push_back(conn);
      }
      conn->Start();
    } else {
      spdlog::warn("accept failed: {}", ec.message());
    }
    Accept();
  });
}

void HttpServer::Stop() {
  if (shared_->stopping.exchange(true)) return;
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ec;
    acceptor_.close(ec);
  });
  std::vector<std::shared_ptr<Connection>> live;
  std::vector<std::shared_ptr<WebSocketConnection>> websockets;
  {
    std::lock_guard lock(shared_->mu);
    for (auto& w : shared_->connections) {
      if (auto c = w.lock()) live.push_back(std::move(c));
    }
    for (auto& w : shared_->websockets) {
      if (auto ws = w.lock()) websockets.push_back(std::move(ws));
    }
    shared_->connections.clear();
    shared_->websockets.clear();
  }
  for (auto& c : live) c->CloseIfIdle();
  for (auto& ws : websockets) {
    net::post(ws->executor(), [ws] { ws->Close(WebSocketCloseCode::kGoingAway, "the host is stopping"); });
  }
}

}  // namespace dsh::server
