#include "plugins/workspace/web_fetch.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dsh::workspace {
namespace {

using std::chrono::milliseconds;

// ---------------------------------------------------------------------------
// A loopback HTTP server: each connection gets a thread that reads one
// request head and writes what the handler returns, then closes. A handler
// that returns nullopt holds the connection open, unanswered, until the
// server is destroyed.

struct Request {
  std::string target;
  std::string head;  // the request line and headers as sent
};

std::string Response(int status, const std::string& content_type, const std::string& body,
                     const std::string& extra_headers = "") {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " Test\r\nConnection: close\r\n";
  if (!content_type.empty()) head += "Content-Type: " + content_type + "\r\n";
  return head + extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string Redirect(const std::string& location) {
  return Response(302, "text/html", "<p>moved</p>", "Location: " + location + "\r\n");
}

class LoopbackServer {
 public:
  using Handler = std::function<std::optional<std::string>(const Request&)>;

  explicit LoopbackServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(listen_fd_, 16) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback: " << errno;
      return;
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~LoopbackServer() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    if (acceptor_.joinable()) acceptor_.join();
    close(listen_fd_);
    for (std::thread& t : connections_) t.join();  // the acceptor is gone: no one else touches the list
  }

  int port() const { return port_; }
  std::string url(const std::string& path = "/") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  agent::TestEndpoint endpoint() const { return agent::TestEndpoint{"127.0.0.1", port_}; }

  std::vector<Request> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  bool WaitForRequests(size_t count, milliseconds timeout) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return requests_.size() >= count; });
  }

 private:
  void AcceptLoop() {
    for (;;) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;
      }
      connections_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int fd) {
    std::string data;
    char buffer[4096];
    while (data.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fd);
        return;
      }
      data.append(buffer, static_cast<size_t>(n));
    }
    Request request;
    request.head = data.substr(0, data.find("\r\n\r\n"));
    const size_t space = request.head.find(' ');
    request.target = request.head.substr(space + 1, request.head.find(' ', space + 1) - space - 1);
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
    }
    cv_.notify_all();
    std::optional<std::string> response = handler_(request);
    if (response) {
      std::string_view rest = *response;
      while (!rest.empty()) {
        ssize_t n = send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        rest.remove_prefix(static_cast<size_t>(n));
      }
    } else {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_; });
    }
    close(fd);
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // touched by the acceptor, then by the destructor after it joined

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Request> requests_;  // GUARDED_BY(mu_)
  bool stopping_ = false;          // GUARDED_BY(mu_)
};

LoopbackServer::Handler Always(std::string response) {
  return [response](const Request&) { return response; };
}

FetchOptions Private() {
  FetchOptions options;
  options.allow_private = true;
  options.timeout = milliseconds(10'000);
  return options;
}

// ---------------------------------------------------------------------------
// Fetch's connections. The address rules and agent::AddressGuard have their
// own tests (src/agent/address_guard_test.cc); these check that Fetch is
// guarded by them.

size_t Discard(char*, size_t size, size_t count, void*) { return size * count; }

CURLcode Perform(CURL* easy, const std::string& url) {
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Discard);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 5000L);
  return curl_easy_perform(easy);
}

// Sets an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(WebFetch, IgnoresTheEnvironmentsProxy) {
  LoopbackServer proxy(Always(Response(200, "text/plain", "from the proxy")));
  LoopbackServer target(Always(Response(200, "text/plain", "from the target")));
  ScopedEnv http_proxy("http_proxy", proxy.url());
  ScopedEnv no_proxy("no_proxy", "");
  ScopedEnv no_proxy_upper("NO_PROXY", "");

  // A plain handle goes through the proxy: the environment is in effect.
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> plain(curl_easy_init(), &curl_easy_cleanup);
  ASSERT_EQ(Perform(plain.get(), target.url("/plain")), CURLE_OK);
  ASSERT_EQ(proxy.requests().size(), 1u);

  Result<Json> fetched = Fetch(target.url("/guarded"), Private());
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  EXPECT_EQ((*fetched)["text"], "from the target");
  EXPECT_EQ(proxy.requests().size(), 1u);
}

// ---------------------------------------------------------------------------
// Fetch's address rules.

void ExpectRefused(const Result<Json>& result, const std::string& named) {
  ASSERT_FALSE(result.ok()) << DumpJson(result.value());
  EXPECT_EQ(result.status().code(), agent::kAddressNotAllowed) << result.status().ToString();
  EXPECT_NE(result.status().message().find(named), std::string::npos) << result.status().message();
}

TEST(WebFetch, RefusesLoopbackUnlessPrivateAddressesAreAllowed) {
  LoopbackServer server(Always(Response(200, "text/plain", "hello")));
  ExpectRefused(Fetch(server.url(), FetchOptions{}), "127.0.0.1");
  EXPECT_TRUE(server.requests().empty());

  Result<Json> fetched = Fetch(server.url("/page"), Private());
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  EXPECT_EQ(*fetched, (Json{{"url", server.url("/page")},
                            {"final_url", server.url("/page")},
                            {"status", 200},
                            {"content_type", "text/plain"},
                            {"bytes", 5},
                            {"truncated", false},
                            {"text", "hello"}}));
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].target, "/page");
  EXPECT_NE(server.requests()[0].head.find("\r\nUser-Agent: dsh-fetch/1\r\n"), std::string::npos);
  EXPECT_NE(server.requests()[0].head.find("\r\nAccept-Encoding: "), std::string::npos);
}

TEST(WebFetch, RefusesPrivateLinkLocalAndMappedAddressesWithoutConnecting) {
  FetchOptions options;
  options.timeout = milliseconds(5000);  // a connection attempt would take this long, or fail otherwise
  for (const char* url :
       {"http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/", "http://192.168.0.1:8080/",
        "http://100.64.0.1/", "http://0.0.0.0/", "http://[::1]/", "http://[::ffff:127.0.0.1]/",
        "http://[fd00::1]/", "https://10.1.2.3/"}) {
    const auto start = std::chrono::steady_clock::now();
    Result<Json> result = Fetch(url, options);
    std::string host = std::string(url).substr(std::string(url).find("//") + 2);
    host = host.substr(0, host.find_first_of(":/", host[0] == '[' ? host.find(']') : 0));
    if (host[0] == '[') host = host.substr(1, host.size() - 2);
    ExpectRefused(result, host);
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(4000)) << url;
  }
}

TEST(WebFetch, RefusesANameThatResolvesToLoopback) {
  LoopbackServer server(Always(Response(200, "text/plain", "hello")));
  Result<Json> result = Fetch("http://localhost:" + std::to_string(server.port()) + "/", FetchOptions{});
  ExpectRefused(result, "localhost");
  EXPECT_TRUE(server.requests().empty());
}

TEST(WebFetch, RefusesARedirectFromAPublicSiteToLoopback) {
  LoopbackServer inside(Always(Response(200, "text/plain", "secret")));
  LoopbackServer site([&](const Request& r) -> std::optional<std::string> {
    if (r.target == "/by-address") return Redirect(inside.url("/secret"));
    return Redirect("http://localhost:" + std::to_string(inside.port()) + "/secret");
  });
  FetchOptions options;
  options.public_for_testing = {site.endpoint()};

  ExpectRefused(Fetch(site.url("/by-address"), options), "127.0.0.1");
  ExpectRefused(Fetch(site.url("/by-name"), options), "localhost");
  EXPECT_EQ(site.requests().size(), 2u);
  EXPECT_TRUE(inside.requests().empty());
}

TEST(WebFetch, FollowsRedirectsAndReportsTheFinalUrl) {
  LoopbackServer target(Always(Response(200, "text/plain", "arrived")));
  LoopbackServer site(Always(Redirect(target.url("/end"))));
  FetchOptions options;
  options.public_for_testing = {site.endpoint(), target.endpoint()};

  Result<Json> fetched = Fetch(site.url("/start"), options);
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  EXPECT_EQ((*fetched)["url"], site.url("/start"));
  EXPECT_EQ((*fetched)["final_url"], target.url("/end"));
  EXPECT_EQ((*fetched)["status"], 200);
  EXPECT_EQ((*fetched)["text"], "arrived");
}

TEST(WebFetch, StopsAfterTooManyRedirects) {
  LoopbackServer site(Always(Redirect("/again")));
  FetchOptions options = Private();
  options.max_redirects = 2;
  Result<Json> result = Fetch(site.url(), options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), codes::kUnavailable);
  EXPECT_NE(result.status().message().find("more than 2"), std::string::npos) << result.status().message();
  EXPECT_EQ(site.requests().size(), 3u);
}

TEST(WebFetch, RefusesARedirectToAnotherScheme) {
  LoopbackServer site([](const Request& r) -> std::optional<std::string> {
    return Redirect(r.target == "/file" ? "file:///etc/passwd" : "ftp://127.0.0.1/");
  });
  for (const char* path : {"/file", "/ftp"}) {
    Result<Json> result = Fetch(site.url(path), Private());
    ASSERT_FALSE(result.ok()) << DumpJson(result.value());
    EXPECT_EQ(result.status().code(), codes::kUnavailable);
    EXPECT_NE(result.status().message().find("not http or https"), std::string::npos)
        << result.status().message();
  }
}

TEST(WebFetch, RefusesOtherSchemesAndBadUrls) {
  for (const char* url : {"file:///etc/passwd", "ftp://example.com/file", "gopher://example.com/",
                          "not a url", "example.com/page", "http://"}) {
    Result<Json> result = Fetch(url, FetchOptions{});
    ASSERT_FALSE(result.ok()) << url;
    EXPECT_EQ(result.status().code(), codes::kInvalidArguments) << url;
    EXPECT_NE(result.status().message().find(url), std::string::npos) << result.status().message();
  }
  Result<Json> empty = Fetch("", FetchOptions{});
  EXPECT_EQ(empty.status().code(), codes::kInvalidArguments);
}

TEST(WebFetch, RefusesOptionsOutOfRange) {
  FetchOptions options;
  options.max_bytes = 0;
  Result<Json> result = Fetch("http://example.com/", options);
  EXPECT_EQ(result.status().code(), codes::kInvalidArguments);
  EXPECT_NE(result.status().message().find("max_bytes"), std::string::npos);
  options = FetchOptions{};
  options.max_redirects = -1;
  EXPECT_EQ(Fetch("http://example.com/", options).status().code(), codes::kInvalidArguments);
}

// ---------------------------------------------------------------------------
// Responses.

Json FetchFrom(const std::string& response, FetchOptions options = Private()) {
  LoopbackServer server(Always(response));
  Result<Json> fetched = Fetch(server.url(), options);
  EXPECT_TRUE(fetched.ok()) << fetched.status().ToString();
  return fetched.ok() ? *fetched : Json();
}

TEST(WebFetch, ReducesHtmlToReadableText) {
  const std::string page = R"(<!DOCTYPE html>
<html><head><title>  The   Title </title>
<style>body { color: red }</style><script>var hidden = 1;</script></head>
<body>
<noscript>enable scripts</noscript>
<h1>Main heading</h1>
<p>First   paragraph
   with <b>bold</b> and <a href="https://example.com/docs">the docs</a>,
   <a href="/relative">a relative link</a> and <a href="https://example.com/">example.com</a>.</p>
<h2>Lists</h2>
<ul><li>one</li><li>two<ul><li>nested</li></ul></li></ul>
<div>a div</div><div>another&nbsp;div &amp; more</div>
<pre>
line 1
    indented  line 2
</pre>
<p>before<br>after break</p>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
<script>document.write("no")</script>
<template><p>template</p></template>
<p hidden>hidden paragraph</p>
</body></html>)";
  Json result = FetchFrom(Response(200, "text/html; charset=utf-8", page));
  EXPECT_EQ(result["content_type"], "text/html; charset=utf-8");
  EXPECT_EQ(result["text"],
            "The Title\n"
            "\n"
            "# Main heading\n"
            "\n"
            "First paragraph with bold and the docs (https://example.com/docs), a relative link and "
            "example.com.\n"
            "\n"
            "## Lists\n"
            "\n"
            "- one\n"
            "- two\n"
            "  - nested\n"
            "\n"
            "a div\n"
            "another div & more\n"
            "\n"
            "line 1\n"
            "    indented  line 2\n"
            "\n"
            "before\n"
            "after break\n"
            "\n"
            "k | v\n"
            "a | 1")
      << result["text"].get<std::string>();
}

TEST(WebFetch, DecodesHtmlInTheCharsetOfTheHeaderOrTheMeta) {
  Json by_header = FetchFrom(Response(200, "text/html; charset=ISO-8859-1", "<p>caf\xE9</p>"));
  EXPECT_EQ(by_header["text"], "caf\xC3\xA9");
  Json by_meta = FetchFrom(
      Response(200, "text/html",
               "<html><head><meta charset=\"iso-8859-1\"></head><body><p>na\xEFve</p></body></html>"));
  EXPECT_EQ(by_meta["text"], "na\xC3\xAFve");
  Json unsaid = FetchFrom(Response(200, "text/html", "<p>caf\xC3\xA9 \xE2\x9C\x93</p>"));  // UTF-8 is assumed
  EXPECT_EQ(unsaid["text"], "caf\xC3\xA9 \xE2\x9C\x93");
  Json unknown = FetchFrom(Response(200, "text/html; charset=no-such-charset", "<p>plain</p>"));
  EXPECT_EQ(unknown["text"], "plain");
}

TEST(WebFetch, PassesTextAndJsonThroughAsValidUtf8) {
  EXPECT_EQ(FetchFrom(Response(200, "application/json", R"({"a": [1, 2]})"))["text"], R"({"a": [1, 2]})");
  EXPECT_EQ(FetchFrom(Response(200, "text/plain; charset=utf-8", "ok \xFF\xFE end"))["text"],
            "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
  EXPECT_EQ(FetchFrom(Response(200, "text/plain; charset=\"latin1\"", "gr\xFC\xDF"))["text"],
            "gr\xC3\xBC\xC3\x9F");
  EXPECT_EQ(FetchFrom(Response(200, "", "no type given"))["text"], "no type given");
}

TEST(WebFetch, DescribesBinaryContentInsteadOfShowingIt) {
  const std::string png("\x89PNG\r\n\x1A\n\0\0\0\rIHDR", 16);
  Json result = FetchFrom(Response(200, "image/png", png));
  EXPECT_EQ(result["text"], "binary content (image/png, 16 bytes) not shown");
  EXPECT_EQ(result["bytes"], 16);
}

TEST(WebFetch, DecompressesTheBody) {
  const std::string gzipped(
      "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xcb\x48\xcd\xc9\xc9\x57\x48\x2b\xca\xcf\x55\x48\x54\x48\xaf"
      "\xca\x2c"
      "\x28\x48\x4d\x51\x48\xca\x4f\xa9\xe4\x02\x00\xbf\x4a\x0a\xde\x1a\x00\x00\x00",
      46);
  Json result = FetchFrom(Response(200, "text/plain", gzipped, "Content-Encoding: gzip\r\n"));
  EXPECT_EQ(result["text"], "hello from a gzipped body\n");
  EXPECT_EQ(result["bytes"], 26);
}

TEST(WebFetch, StopsReadingAtMaxBytes) {
  FetchOptions options = Private();
  options.max_bytes = 100;
  Json result = FetchFrom(Response(200, "text/plain", std::string(10'000, 'x')), options);
  EXPECT_EQ(result["truncated"], true);
  EXPECT_EQ(result["bytes"], 100);
  EXPECT_EQ(result["text"], std::string(100, 'x'));

  // A character cut in two at the limit is dropped, not replaced.
  options.max_bytes = 4;
  result = FetchFrom(Response(200, "text/plain", "abc\xC3\xA9xyz"), options);
  EXPECT_EQ(result["truncated"], true);
  EXPECT_EQ(result["text"], "abc");
}

TEST(WebFetch, ReturnsNonSuccessStatusesWithTheirPage) {
  Json result = FetchFrom(Response(404, "text/html",
                                   "<html><head><title>Not Found</title></head>"
                                   "<body><p>No such page.</p></body></html>"));
  EXPECT_EQ(result["status"], 404);
  EXPECT_EQ(result["text"], "Not Found\n\nNo such page.");
}

TEST(WebFetch, TimesOutOnAServerThatNeverAnswers) {
  LoopbackServer silent([](const Request&) -> std::optional<std::string> { return std::nullopt; });
  FetchOptions options = Private();
  options.timeout = milliseconds(300);
  Result<Json> result = Fetch(silent.url(), options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), codes::kUnavailable);
  EXPECT_NE(result.status().message().find("timed out"), std::string::npos) << result.status().message();
}

TEST(WebFetch, CancelEndsTheFetch) {
  LoopbackServer silent([](const Request&) -> std::optional<std::string> { return std::nullopt; });
  FetchOptions options = Private();
  options.timeout = milliseconds(30'000);
  options.cancel = std::make_shared<agent::CancelToken>();
  std::thread canceller([&] {
    if (silent.WaitForRequests(1, milliseconds(10'000))) options.cancel->Cancel();
  });
  const auto start = std::chrono::steady_clock::now();
  Result<Json> result = Fetch(silent.url(), options);
  canceller.join();
  EXPECT_EQ(result.status().code(), codes::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(10'000));

  // Already cancelled: nothing is sent.
  Result<Json> again = Fetch(silent.url("/again"), options);
  EXPECT_EQ(again.status().code(), codes::kCancelled);
  EXPECT_EQ(silent.requests().size(), 1u);
}

}  // namespace
}  // namespace dsh::workspace
