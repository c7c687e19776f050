#include "server/websocket.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>

#include <cassert>

namespace dsh::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

namespace {
// RFC 6455: a close frame's payload is at most 125 bytes, 2 of them the code.
constexpr size_t kMaxCloseReason = 123;
}  // namespace

WebSocketConnection::WebSocketConnection(beast::tcp_stream stream, WebSocketLimits limits,
                                         std::shared_ptr<WebSocketSession> session)
    : ws_(std::move(stream)),
      executor_(ws_.get_executor()),
      limits_(limits),
      session_(std::move(session)),
      close_timer_(executor_) {
  // Beast's own timeouts replace the HTTP idle timer: a handshake limit and
  // keep-alive pings that fail a peer which stopped answering.
  beast::get_lowest_layer(ws_).expires_never();
  ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws_.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(beast::http::field::server, "dsh"); }));
  ws_.read_message_max(limits_.max_incoming_message);
  ws_.text(true);
}

WebSocketConnection::~WebSocketConnection() = default;

bool WebSocketConnection::RunningOnStrand() const {
  const auto* strand = executor_.target<net::strand<net::io_context::executor_type>>();
  return strand != nullptr && strand->running_in_this_thread();
}

void WebSocketConnection::Accept(Request request) {
  assert(RunningOnStrand());
  ws_.async_accept(request, [self = shared_from_this()](beast::error_code ec) { self->OnAccept(ec); });
}

void WebSocketConnection::OnAccept(beast::error_code ec) {
  if (ec || state_ != State::kHandshake) return Finish();  // failed, or Close() cut it meanwhile
  state_ = State::kOpen;
  opened_ = true;
  session_->OnOpen(shared_from_this());
  Read();  // also while closing: the peer's close frame ends the handshake
}

void WebSocketConnection::Read() {
  ws_.async_read(read_buffer_,
                 [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
}

void WebSocketConnection::OnRead(beast::error_code ec) {
  // websocket::error::closed (either side closed), a timeout, a reset, a
  // message over the limit: the connection is over.
  if (ec) return Finish();
  std::string message = beast::buffers_to_string(read_buffer_.data());
  read_buffer_.consume(read_buffer_.size());
  if (state_ == State::kOpen) session_->OnMessage(std::move(message));
  Read();
}

bool WebSocketConnection::Send(std::string text) {
  assert(RunningOnStrand());
  if (state_ != State::kOpen) return false;
  if (queue_.size() + 1 > limits_.max_queued_messages ||
      queued_bytes_ + text.size() > limits_.max_queued_bytes) {
    Close(WebSocketCloseCode::kPolicyViolation,
          "the client fell too far behind (over " + std::to_string(limits_.max_queued_messages) +
              " messages or " + std::to_string(limits_.max_queued_bytes) + " bytes waiting)");
    return false;
  }
  queued_bytes_ += text.size();
  queue_.push_back(std::move(text));
  if (!writing_) WriteNext();
  return true;
}

void WebSocketConnection::WriteNext() {
  if (queue_.empty()) {
    writing_ = false;
    if (state_ == State::kClosing) return SendClose();
    if (state_ == State::kOpen) session_->OnDrained();
    return;
  }
  writing_ = true;
  ws_.async_write(net::buffer(queue_.front()),
                  [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
}

void WebSocketConnection::OnWrite(beast::error_code ec) {
  if (state_ == State::kClosed) return;
  queued_bytes_ -= queue_.front().size();
  queue_.pop_front();
  if (ec) return Finish();
  WriteNext();
}

void WebSocketConnection::Close(WebSocketCloseCode code, std::string reason) {
  assert(RunningOnStrand());
  if (state_ == State::kClosing || state_ == State::kClosed) return;
  if (state_ == State::kHandshake) {
    state_ = State::kClosing;
    beast::get_lowest_layer(ws_).close();  // the handshake fails; OnAccept finishes
    return;
  }
  state_ = State::kClosing;
  if (reason.size() > kMaxCloseReason) reason.resize(kMaxCloseReason);
  close_reason_ = websocket::close_reason(static_cast<websocket::close_code>(code), reason);
  // Drop what waits; the message being written must stay until it is done.
  while (queue_.size() > (writing_ ? 1u : 0u)) {
    queued_bytes_ -= queue_.back().size();
    queue_.pop_back();
  }
  close_timer_.expires_after(limits_.close_timeout);
  close_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->Finish();  // the peer did not complete the close handshake in time
  });
  if (!writing_) SendClose();
}

void WebSocketConnection::SendClose() {
  if (close_sent_) return;
  close_sent_ = true;
  // On success the pending read completes with websocket::error::closed
  // when the peer's close frame arrives, and finishes the connection.
  ws_.async_close(close_reason_, [self = shared_from_this()](beast::error_code ec) {
    if (ec) self->Finish();
  });
}

void WebSocketConnection::Finish() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  close_timer_.cancel();
  beast::get_lowest_layer(ws_).close();  // aborts whatever is still pending
  if (opened_) session_->OnClose();
  session_.reset();
}

}  // namespace dsh::server
