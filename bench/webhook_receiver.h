#pragma once

// A webhook receiver on loopback for the load programs in bench/ (issue 34;
// docs/PERFORMANCE.md, "Webhooks").

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/clock.h"

namespace dsh::bench {

// An HTTP/1.1 server on 127.0.0.1 (port 0) that answers every request with
// `200 OK` and an empty body, keeping connections alive, and records for
// each request its webhook-id, webhook-timestamp and webhook-signature
// headers, its body, and when it had been read in full (Unix µs, the real
// clock). It does no more than that while it serves, so that what it costs
// the machine stays small next to the sender's; callers parse and verify
// afterwards.
//
// Thread-safe. A thread accepts; each connection has its own thread (the
// sender keeps one connection per sender thread). Stop (or the destructor)
// closes the listener and every connection and joins the threads.
class WebhookReceiver {
 public:
  struct Receipt {
    int64_t at_us = 0;  // when the whole request had arrived (RealClock: whole ms)
    std::string id;     // webhook-id
    std::string timestamp;
    std::string signature;
    std::string body;
  };

  // Listens at once; throws std::runtime_error when it cannot.
  WebhookReceiver() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      int e = errno;
      ::close(listener_);
      throw std::runtime_error(std::string("listen on loopback: ") + std::strerror(e));
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~WebhookReceiver() { Stop(); }
  WebhookReceiver(const WebhookReceiver&) = delete;
  WebhookReceiver& operator=(const WebhookReceiver&) = delete;

  uint16_t port() const { return port_; }

  size_t count() const {
    std::lock_guard lock(mu_);
    return receipts_.size();
  }
  // Connections accepted so far.
  size_t connections() const {
    std::lock_guard lock(mu_);
    return connections_;
  }
  // Every request received so far, in arrival order.
  std::vector<Receipt> receipts() const {
    std::lock_guard lock(mu_);
    return receipts_;
  }
  // True once at least `n` requests arrived; false after `timeout`.
  bool WaitFor(size_t n, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return receipts_.size() >= n; });
  }

  void Stop() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      ::shutdown(listener_, SHUT_RDWR);  // accept() returns
      for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }
    acceptor_.join();
    {
      std::lock_guard lock(mu_);
      threads.swap(serving_);
    }
    for (auto& t : threads) t.join();
    ::close(listener_);
  }

 private:
  void Accept() {
    for (;;) {
      int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      std::lock_guard lock(mu_);
      if (fd < 0) {
        if (stopped_ || (errno != EINTR && errno != ECONNABORTED)) return;
        continue;
      }
      if (stopped_) {
        ::close(fd);
        return;
      }
      ++connections_;
      open_.push_back(fd);
      serving_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  static std::string Lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
  }

  // One connection: requests one after the other (the sender waits for each
  // answer), until the peer closes it or Stop.
  void Serve(int fd) {
    static constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    std::string in;
    char buffer[16384];
    // Reads until `enough` holds; false when the peer closed first.
    auto read_until = [&](auto enough) {
      while (!enough()) {
        ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) return false;
        in.append(buffer, static_cast<size_t>(n));
      }
      return true;
    };
    bool open = true;
    while (open) {
      size_t head_end = std::string::npos;
      if (!read_until([&] { return (head_end = in.find("\r\n\r\n")) != std::string::npos; })) break;
      Receipt r;
      size_t content_length = 0;
      bool close_after = false;
      size_t line_start = in.find("\r\n") + 2;  // after the request line
      while (line_start < head_end) {
        size_t line_end = in.find("\r\n", line_start);
        std::string_view line(in.data() + line_start, line_end - line_start);
        line_start = line_end + 2;
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        std::string name = Lower(line.substr(0, colon));
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
        if (name == "content-length") content_length = std::stoul(std::string(value));
        if (name == "connection" && Lower(value) == "close") close_after = true;
        if (name == "webhook-id") r.id = value;
        if (name == "webhook-timestamp") r.timestamp = value;
        if (name == "webhook-signature") r.signature = value;
      }
      const size_t total = head_end + 4 + content_length;
      if (!read_until([&] { return in.size() >= total; })) break;
      r.at_us =
          std::chrono::duration_cast<std::chrono::microseconds>(RealClock().Now().time_since_epoch()).count();
      r.body = in.substr(head_end + 4, content_length);
      in.erase(0, total);
      {
        std::lock_guard lock(mu_);
        receipts_.push_back(std::move(r));
      }
      cv_.notify_all();
      for (size_t sent = 0; sent < kOk.size();) {
        ssize_t n = ::send(fd, kOk.data() + sent, kOk.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {
          open = false;
          break;
        }
        sent += static_cast<size_t>(n);
      }
      if (close_after) open = false;
    }
    std::lock_guard lock(mu_);
    open_.erase(std::remove(open_.begin(), open_.end(), fd), open_.end());
    ::close(fd);
  }

  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stopped_ = false;              // GUARDED_BY(mu_)
  std::vector<int> open_;             // GUARDED_BY(mu_): connections being served
  std::vector<std::thread> serving_;  // GUARDED_BY(mu_)
  size_t connections_ = 0;            // GUARDED_BY(mu_)
  std::vector<Receipt> receipts_;     // GUARDED_BY(mu_)
};

}  // namespace dsh::bench
