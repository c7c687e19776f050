#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace dsh::mcp::testing {

// One request as the server read it.
struct HttpRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  // The header's value, "" when absent. `name` in lower case.
  std::string Header(const std::string& name) const;
};

// Writes the response to one request. Every response has `Connection:
// close`: one request per connection.
class HttpResponder {
 public:
  explicit HttpResponder(int fd) : fd_(fd) {}

  // A whole response with its Content-Length.
  void Reply(int status, const std::string& content_type, const std::string& body,
             const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Starts a response whose body ends when the handler returns and the
  // connection closes (an event stream); Write sends its pieces.
  void Begin(int status, const std::string& content_type,
             const std::vector<std::pair<std::string, std::string>>& headers = {});
  void Write(std::string_view bytes);
  // True once the client closed the connection (read end of file or a
  // reset); false when it is still open after `timeout`.
  bool WaitForClientClose(std::chrono::milliseconds timeout);

 private:
  int fd_;
};

// A loopback HTTP/1.1 server for transport tests: each connection gets its
// own thread, which reads one request, records it and passes it to the
// handler. Handlers may block (to hold a stream open) but must return before
// the server is destroyed. Thread-safe.
class CannedHttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpResponder&)>;

  explicit CannedHttpServer(Handler handler);
  // Stops accepting, shuts open connections down and joins their threads.
  ~CannedHttpServer();

  CannedHttpServer(const CannedHttpServer&) = delete;
  CannedHttpServer& operator=(const CannedHttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }

  // Every request so far, in arrival order.
  std::vector<HttpRequest> requests() const;
  // False when fewer than `count` requests arrived within `timeout`.
  bool WaitForRequests(size_t count, std::chrono::milliseconds timeout) const;

 private:
  void AcceptLoop();
  void Serve(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<HttpRequest> requests_;  // GUARDED_BY(mu_)
  std::vector<int> open_fds_;          // GUARDED_BY(mu_): connections being served
  std::vector<std::thread> servers_;   // GUARDED_BY(mu_)
  bool stopping_ = false;              // GUARDED_BY(mu_)
};

}  // namespace dsh::mcp::testing
