#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/stream.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace dsh::testing {

// A blocking WebSocket client for tests, on its own io_context: every call
// gives up after its timeout instead of hanging the test.
//
// Thread-affine: use it from one thread at a time.
class WsClient {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;

  // Connects to 127.0.0.1:`port` and upgrades `target` ("/api/...?after=3").
  // A refused upgrade fails with the error code of the server's JSON body
  // (e.g. `unauthorized`) and a message starting "HTTP <status>: ".
  // Other failures: `unavailable`.
  static Result<std::unique_ptr<WsClient>> Connect(
      uint16_t port, const std::string& target, const Headers& headers = {},
      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~WsClient();

  // The next message. Errors: `closed` when the server closed the
  // connection (close_code() says how), `timeout`, `unavailable`.
  Result<std::string> Read(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // The next message parsed as JSON.
  Result<Json> ReadJson(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Sends a close frame (1000) and waits for the server's answer.
  Status Close(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // The server's close code once Read returned `closed`; 0 before.
  int close_code() const { return static_cast<int>(ws_.reason().code); }
  std::string close_reason() const { return std::string(ws_.reason().reason.c_str()); }

 private:
  WsClient() : ws_(ioc_) {}
  // Runs the io_context until `done` or the timeout; on timeout cuts the
  // connection and lets the operation finish with an error.
  bool RunUntil(const bool& done, std::chrono::milliseconds timeout);

  boost::asio::io_context ioc_;
  boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
  boost::beast::flat_buffer buffer_;
};

}  // namespace dsh::testing
