#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "server/http_types.h"

namespace dsh::server {

// An HTTP/1.1 server on Boost.Beast. Each connection runs on its own strand;
// the handler is called on that strand and may respond later from any
// thread (the response is posted back). A request body over `max_body` gets
// 413 `payload_too_large` and the connection is closed.
//
// Thread-safe: Stop() may be called from any thread.
class HttpServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    uint16_t port = 0;  // 0 picks a free port
    size_t max_body = 1 << 20;
  };

  HttpServer(boost::asio::io_context& ioc, Options options, HttpHandler handler);
  ~HttpServer();

  // Binds and starts accepting; returns the bound port. Errors: `io_error`.
  Result<uint16_t> Listen();

  // Stops accepting and closes idle connections; requests in flight finish
  // and get their response, then their connections close. The io_context
  // runs out of work once the last one did.
  void Stop();

  class Connection;

 private:
  void Accept();

  boost::asio::io_context& ioc_;
  Options options_;
  HttpHandler handler_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<std::atomic<bool>> stopping_;
  std::mutex mu_;
  std::vector<std::weak_ptr<Connection>> connections_;  // GUARDED_BY(mu_)
};

}  // namespace dsh::server
