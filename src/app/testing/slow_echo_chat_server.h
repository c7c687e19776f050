#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "base/json.h"
#include "server/http_server.h"

namespace dsh::testing {

// A Chat Completions server on 127.0.0.1 that answers every request the way
// the offline echo model does ("echo: " + the request's last user message),
// streamed, but only after `delay`. For end-to-end tests of real `dsh web`
// processes that need turns to take time (so that a host killed at random
// is likely to be killed mid-turn) and more requests than a script could
// hold (agent::testing::FakeChatServer answers from a FIFO and records every
// request; this one keeps nothing).
//
// Thread-safe. Serves on its own thread; requests wait concurrently.
class SlowEchoChatServer {
 public:
  explicit SlowEchoChatServer(std::chrono::milliseconds delay) : delay_(delay) {
    server::HttpServer::Options options;
    options.max_body = 64 << 20;  // the whole conversation comes with every request
    server_ = std::make_unique<server::HttpServer>(
        ioc_, options, [this](server::HttpRequest request, server::Respond respond) {
          auto timer = std::make_shared<boost::asio::steady_timer>(ioc_, delay_);
          timer->async_wait([this, timer, body = std::move(request.body),
                             respond = std::move(respond)](const boost::system::error_code&) {
            ++answered_;
            respond(Answer(body));
          });
        });
    auto port = server_->Listen();
    if (port.ok()) base_url_ = "http://127.0.0.1:" + std::to_string(*port) + "/v1";
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~SlowEchoChatServer() {
    server_->Stop();
    ioc_.stop();  // answers still waiting go nowhere: their clients are gone or going
    thread_.join();
  }
  SlowEchoChatServer(const SlowEchoChatServer&) = delete;
  SlowEchoChatServer& operator=(const SlowEchoChatServer&) = delete;

  // "http://127.0.0.1:PORT/v1" (OPENAI_BASE_URL); empty when it could not listen.
  const std::string& base_url() const { return base_url_; }
  int64_t answered() const { return answered_; }

 private:
  static server::HttpResponse Answer(const std::string& body) {
    Json request = Json::parse(body, nullptr, false);
    std::string last_user;
    if (request.is_object() && request.contains("messages") && request["messages"].is_array()) {
      for (const Json& m : request["messages"]) {
        if (m.is_object() && m.value("role", "") == "user" && m.contains("content") &&
            m["content"].is_string()) {
          last_user = m["content"].get<std::string>();
        }
      }
    }
    Json text = {{"choices", Json::array({{{"index", 0}, {"delta", {{"content", "echo: " + last_user}}}}})}};
    Json stop = {
        {"choices", Json::array({{{"index", 0}, {"delta", Json::object()}, {"finish_reason", "stop"}}})}};
    server::HttpResponse r;
    r.content_type = "text/event-stream";
    r.body = "data: " + DumpJson(text) + "\n\ndata: " + DumpJson(stop) + "\n\ndata: [DONE]\n\n";
    return r;
  }

  const std::chrono::milliseconds delay_;
  boost::asio::io_context ioc_;
  std::unique_ptr<server::HttpServer> server_;
  std::string base_url_;
  std::atomic<int64_t> answered_{0};
  std::thread thread_;
};

}  // namespace dsh::testing
