#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/stream.hpp>

#include <deque>
#include <memory>
#include <string>

#include "server/http_types.h"

namespace dsh::server {

// The server end of one WebSocket connection: a Beast websocket stream on
// the strand of the TCP connection it was upgraded from, a read loop (the
// client's pings and close frames are answered; its messages go to
// WebSocketSession::OnMessage), and a bounded outgoing queue written one
// message at a time. A dead peer is detected by Beast's keep-alive pings.
//
// Created by HttpServer once a WebSocketHandler accepted an upgrade; the
// application sees it through WebSocketSession::OnOpen.
//
// Sequence-bound: every method must be called on executor() (post there
// from other threads). Kept alive by its own pending operations; the
// session holds it from OnOpen to OnClose.
class WebSocketConnection : public std::enable_shared_from_this<WebSocketConnection> {
 public:
  using Stream = boost::beast::websocket::stream<boost::beast::tcp_stream>;
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  WebSocketConnection(boost::beast::tcp_stream stream, WebSocketLimits limits,
                      std::shared_ptr<WebSocketSession> session);
  ~WebSocketConnection();
  WebSocketConnection(const WebSocketConnection&) = delete;
  WebSocketConnection& operator=(const WebSocketConnection&) = delete;

  // Answers the upgrade `request` (101), then calls the session's OnOpen and
  // starts reading. A failed handshake drops the session without OnOpen.
  // Call once.
  void Accept(Request request);

  // The connection's strand; the session's callbacks run on it.
  const boost::asio::any_io_executor& executor() const { return executor_; }
  bool RunningOnStrand() const;

  // Queues a text message. Returns false and sends nothing when the
  // connection is closing, or when queueing it would pass the limits; the
  // latter starts a close with kPolicyViolation.
  [[nodiscard]] bool Send(std::string text);

  // Starts the close handshake with `code` once the write in flight (if
  // any) finished; queued messages are dropped. The TCP connection is cut
  // when the handshake takes longer than WebSocketLimits::close_timeout.
  // Ends with the session's OnClose. Idempotent; the first code wins.
  void Close(WebSocketCloseCode code, std::string reason);

  bool closing() const { return state_ != State::kOpen; }
  size_t queued_messages() const { return queue_.size(); }
  size_t queued_bytes() const { return queued_bytes_; }

 private:
  enum class State { kHandshake, kOpen, kClosing, kClosed };

  void OnAccept(boost::beast::error_code ec);
  void Read();
  void OnRead(boost::beast::error_code ec);
  void WriteNext();
  void OnWrite(boost::beast::error_code ec);
  void SendClose();
  // Cuts the TCP connection (if still open) and tells the session, once.
  void Finish();

  Stream ws_;
  boost::asio::any_io_executor executor_;
  WebSocketLimits limits_;
  std::shared_ptr<WebSocketSession> session_;  // reset by Finish
  boost::asio::steady_timer close_timer_;
  boost::beast::flat_buffer read_buffer_;
  std::deque<std::string> queue_;  // front() is being written when writing_
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  State state_ = State::kHandshake;
  bool opened_ = false;      // OnOpen was called
  bool close_sent_ = false;  // async_close started
  boost::beast::websocket::close_reason close_reason_;
};

}  // namespace dsh::server
