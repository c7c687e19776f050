#include "server/testing/ws_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace dsh::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

Result<std::unique_ptr<WsClient>> WsClient::Connect(uint16_t port, const std::string& target,
                                                    const Headers& headers,
                                                    std::chrono::milliseconds timeout) {
  std::unique_ptr<WsClient> c(new WsClient());
  net::ip::tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), port);
  bool done = false;
  beast::error_code result;
  beast::get_lowest_layer(c->ws_).async_connect(endpoint, [&](beast::error_code ec) {
    result = ec;
    done = true;
  });
  if (!c->RunUntil(done, timeout) || result) {
    return Status(codes::kUnavailable,
                  "cannot connect to port " + std::to_string(port) + ": " + result.message());
  }
  c->ws_.set_option(websocket::stream_base::decorator([headers](websocket::request_type& req) {
    for (const auto& [k, v] : headers) req.set(k, v);
  }));
  websocket::response_type res;
  done = false;
  std::string host = "127.0.0.1:" + std::to_string(port);
  c->ws_.async_handshake(res, host, target, [&](beast::error_code ec) {
    result = ec;
    done = true;
  });
  if (!c->RunUntil(done, timeout)) return Status("timeout", "the WebSocket handshake timed out");
  if (result == websocket::error::upgrade_declined) {
    auto body = Json::parse(res.body(), nullptr, false);
    std::string code = body.is_object() && body.contains("error") ? body["error"].value("code", "") : "";
    return Status(code.empty() ? "upgrade_declined" : code,
                  "HTTP " + std::to_string(res.result_int()) + ": " + res.body());
  }
  if (result) return Status(codes::kUnavailable, "WebSocket handshake failed: " + result.message());
  return c;
}

WsClient::~WsClient() {
  beast::error_code ec;
  beast::get_lowest_layer(ws_).socket().close(ec);
}

bool WsClient::RunUntil(const bool& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  ioc_.restart();
  while (!done && std::chrono::steady_clock::now() < deadline) {
    ioc_.run_one_until(deadline);
  }
  if (done) return true;
  beast::get_lowest_layer(ws_).close();  // the pending operation completes with an error
  ioc_.restart();
  ioc_.run();
  return false;
}

Result<std::string> WsClient::Read(std::chrono::milliseconds timeout) {
  bool done = false;
  beast::error_code result;
  buffer_.clear();
  ws_.async_read(buffer_, [&](beast::error_code ec, size_t) {
    result = ec;
    done = true;
  });
  if (!RunUntil(done, timeout)) return Status("timeout", "no message within the timeout");
  if (result == websocket::error::closed) {
    return Status("closed",
                  "the server closed the connection: " + std::to_string(close_code()) + " " + close_reason());
  }
  if (result) return Status(codes::kUnavailable, "read failed: " + result.message());
  return beast::buffers_to_string(buffer_.data());
}

Result<Json> WsClient::ReadJson(std::chrono::milliseconds timeout) {
  auto text = Read(timeout);
  if (!text.ok()) return text.status();
  return ParseJson(*text);
}

Status WsClient::Close(std::chrono::milliseconds timeout) {
  bool done = false;
  beast::error_code result;
  ws_.async_close(websocket::close_code::normal, [&](beast::error_code ec) {
    result = ec;
    done = true;
  });
  if (!RunUntil(done, timeout)) return Status("timeout", "the close handshake timed out");
  if (result) return Status(codes::kUnavailable, "close failed: " + result.message());
  return Status::Ok();
}

}  // namespace dsh::testing
