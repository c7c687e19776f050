#include "server/http_client.h"

#include <boost/asio/connect.hpp>

#include <cctype>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace dsh::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Result<HttpClientResponse> HttpRequestSync(const std::string& method, const std::string& url, const std::string& body,
                                           const std::vector<std::pair<std::string, std::string>>& headers,
                                           std::chrono::seconds timeout) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return InvalidArguments("only http:// URLs are supported: " + url);
  std::string rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  std::string target = slash == std::string::npos ? "/" : rest.substr(slash);
  size_t colon = authority.rfind(':');
  if (colon == std::string::npos) return InvalidArguments("the URL needs a port: " + url);
  std::string host = authority.substr(0, colon), port = authority.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);

  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  net::ip::tcp::resolver resolver(ioc);
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return Status(codes::kUnavailable, "cannot resolve " + authority + ": " + ec.message());
  stream.expires_after(timeout);
  stream.connect(endpoints, ec);
  if (ec) return Status(codes::kUnavailable, "cannot connect to " + authority + ": " + ec.message());

  http::verb verb = http::string_to_verb(method);
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, authority);
  req.set(http::field::user_agent, "dsh-cli");
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req, ec);
  if (ec) return Status(codes::kUnavailable, "cannot send the request to " + authority + ": " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  http::read(stream, buffer, parser, ec);
  if (ec) return Status(codes::kUnavailable, "no response from " + authority + ": " + ec.message());
  stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
  HttpClientResponse out{static_cast<int>(parser.get().result_int()), parser.get().body()};
  for (const auto& field : parser.get()) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(field.value());
  }
  return out;
}

}  // namespace dsh::server
