#include "mcp/testing/canned_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace dsh::mcp::testing {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

void SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away; the test will notice
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

std::string Head(int status, const std::string& content_type,
                 const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " Canned\r\nConnection: close\r\n";
  if (!content_type.empty()) head += "Content-Type: " + content_type + "\r\n";
  for (const auto& [name, value] : headers) head += name + ": " + value + "\r\n";
  return head;
}

// Reads one request (headers, then Content-Length bytes of body); false when
// the connection ended first.
bool ReadRequest(int fd, HttpRequest& request) {
  std::string data;
  char buffer[16384];
  size_t header_end = std::string::npos;
  while ((header_end = data.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.append(buffer, static_cast<size_t>(n));
  }
  std::string head = data.substr(0, header_end);
  std::string rest = data.substr(header_end + 4);
  size_t line_end = head.find("\r\n");
  std::string request_line = head.substr(0, line_end);
  size_t space1 = request_line.find(' ');
  size_t space2 = request_line.find(' ', space1 + 1);
  request.method = request_line.substr(0, space1);
  request.target = request_line.substr(space1 + 1, space2 - space1 - 1);
  size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t end = head.find("\r\n", pos);
    if (end == std::string::npos) end = head.size();
    std::string line = head.substr(pos, end - pos);
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      request.headers[Lower(Trim(line.substr(0, colon)))] = Trim(line.substr(colon + 1));
    }
    pos = end + 2;
  }
  size_t length = std::strtoul(request.Header("content-length").c_str(), nullptr, 10);
  while (rest.size() < length) {
    ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    rest.append(buffer, static_cast<size_t>(n));
  }
  request.body = rest.substr(0, length);
  return true;
}

}  // namespace

std::string HttpRequest::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

void HttpResponder::Reply(int status, const std::string& content_type, const std::string& body,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  SendAll(fd_, Head(status, content_type, headers) + "Content-Length: " + std::to_string(body.size()) +
                   "\r\n\r\n" + body);
}

void HttpResponder::Begin(int status, const std::string& content_type,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  SendAll(fd_, Head(status, content_type, headers) + "Cache-Control: no-cache\r\n\r\n");
}

void HttpResponder::Write(std::string_view bytes) { SendAll(fd_, bytes); }

bool HttpResponder::WaitForClientClose(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) return false;
    pollfd p{.fd = fd_, .events = POLLIN | POLLRDHUP, .revents = 0};
    int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char buffer[4096];
    ssize_t n = recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
    // Bytes after the request (none expected): keep waiting.
  }
}

CannedHttpServer::CannedHttpServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listen_fd_, 64) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(listen_fd_);
    throw std::runtime_error("cannot listen on loopback");
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

CannedHttpServer::~CannedHttpServer() {
  std::vector<std::thread> servers;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
  }
  shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  close(listen_fd_);
  {
    std::lock_guard lock(mu_);
    servers.swap(servers_);
  }
  for (std::thread& t : servers) t.join();
}

void CannedHttpServer::AcceptLoop() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    std::lock_guard lock(mu_);
    if (stopping_) {
      close(fd);
      return;
    }
    open_fds_.push_back(fd);
    servers_.emplace_back([this, fd] { Serve(fd); });
  }
}

void CannedHttpServer::Serve(int fd) {
  HttpRequest request;
  if (ReadRequest(fd, request)) {
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
    }
    cv_.notify_all();
    HttpResponder responder(fd);
    handler_(request, responder);
  }
  std::lock_guard lock(mu_);
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
  close(fd);
}

std::vector<HttpRequest> CannedHttpServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

bool CannedHttpServer::WaitForRequests(size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= count; });
}

}  // namespace dsh::mcp::testing
