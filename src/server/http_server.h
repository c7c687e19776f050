#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "server/http_types.h"

namespace dsh::server {

// An HTTP/1.1 server on Boost.Beast. Each connection runs on its own strand;
// the handler is called on that strand and may respond later from any
// thread (the response is posted back). A request body over `max_body` gets
// 413 `payload_too_large` and the connection is closed.
//
// WebSocket: when Options::websocket is set, a request with `Upgrade:
// websocket` goes to it instead of the HTTP handler (http_types.h describes
// the seam). An accepted upgrade becomes a WebSocketConnection on the same
// strand; Stop() closes it with 1001 (going away).
//
// Thread-safe: Stop() may be called from any thread.
class HttpServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    uint16_t port = 0;  // 0 picks a free port
    size_t max_body = 1 << 20;
    // Decides WebSocket upgrades; when empty they reach the HTTP handler
    // like any other request.
    WebSocketHandler websocket;
    WebSocketLimits websocket_limits;
  };

  HttpServer(boost::asio::io_context& ioc, Options options, HttpHandler handler);
  ~HttpServer();

  // Binds and starts accepting; returns the bound port. Errors: `io_error`.
  Result<uint16_t> Listen();

  // Stops accepting and closes idle connections; requests in flight finish
  // and get their response, then their connections close. WebSocket
  // connections get a close frame (1001 going away; the TCP connection is
  // cut if the client does not answer within close_timeout), and upgrades
  // still being decided are refused with 503 `shutting_down`. The io_context
  // runs out of work once the last connection is gone.
  void Stop();

  class Connection;
  struct Shared;

 private:
  void Accept();

  boost::asio::io_context& ioc_;
  Options options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  // What connections share with the server; they may outlive it.
  std::shared_ptr<Shared> shared_;
};

}  // namespace dsh::server
