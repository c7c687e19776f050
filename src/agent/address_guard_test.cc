#include "agent/address_guard.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "agent/testing/fake_chat_server.h"

namespace dsh::agent {
namespace {

using agent::testing::FakeChatServer;

// ---------------------------------------------------------------------------
// The address rules.

bool IsPublic(const std::string& text) {
  sockaddr_storage storage{};
  if (inet_pton(AF_INET, text.c_str(), &reinterpret_cast<sockaddr_in&>(storage).sin_addr) == 1) {
    storage.ss_family = AF_INET;
  } else if (inet_pton(AF_INET6, text.c_str(), &reinterpret_cast<sockaddr_in6&>(storage).sin6_addr) == 1) {
    storage.ss_family = AF_INET6;
  } else {
    ADD_FAILURE() << "not an address: " << text;
  }
  return IsPublicAddress(reinterpret_cast<const sockaddr&>(storage));
}

TEST(AddressRules, PublicUnicastAddressesAreAllowed) {
  const char* const kPublic[] = {
      "8.8.8.8",
      "1.1.1.1",
      "93.184.216.34",
      "11.0.0.1",
      "126.255.255.255",
      "128.0.0.1",
      "100.63.255.255",
      "100.128.0.0",
      "169.253.255.255",
      "169.255.0.0",
      "172.15.255.255",
      "172.32.0.0",
      "192.0.1.1",
      "192.167.255.255",
      "192.169.0.0",
      "198.17.255.255",
      "198.20.0.0",
      "223.255.255.255",
      "2606:4700:4700::1111",
      "2001:4860:4860::8888",
      "2a00:1450:4001:800::200e",
      "::ffff:8.8.8.8",    // IPv4-mapped public
      "64:ff9b::808:808",  // NAT64 of a public address
      "2002:808:808::1",   // 6to4 of a public address
  };
  for (const char* address : kPublic) EXPECT_TRUE(IsPublic(address)) << address;
}

TEST(AddressRules, SpecialAddressesAreRefused) {
  struct Case {
    const char* address;
    const char* kind;
  };
  const Case kRefused[] = {
      {"0.0.0.0", "unspecified"},
      {"0.1.2.3", "this network"},
      {"127.0.0.1", "loopback"},
      {"127.255.255.254", "loopback"},
      {"10.0.0.1", "private"},
      {"10.255.255.255", "private"},
      {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},
      {"192.168.1.1", "private"},
      {"169.254.169.254", "cloud metadata"},
      {"169.254.0.1", "link-local"},
      {"100.64.0.1", "carrier-grade NAT"},
      {"100.127.255.255", "carrier-grade NAT"},
      {"224.0.0.1", "multicast"},
      {"239.255.255.250", "multicast"},
      {"255.255.255.255", "broadcast"},
      {"240.0.0.1", "reserved"},
      {"192.0.0.170", "IETF protocol assignments"},
      {"192.0.2.1", "documentation"},
      {"198.51.100.7", "documentation"},
      {"203.0.113.9", "documentation"},
      {"198.18.0.1", "benchmarking"},
      {"198.19.255.255", "benchmarking"},
      {"192.88.99.1", "6to4 relay"},
      {"::", "unspecified"},
      {"::1", "loopback"},
      {"fc00::1", "unique local"},
      {"fd12:3456::1", "unique local"},
      {"fe80::1", "link-local"},
      {"febf::1", "link-local"},
      {"fec0::1", "site-local"},
      {"ff02::1", "multicast"},
      {"ff05::2", "multicast"},
      {"::ffff:127.0.0.1", "IPv4-mapped loopback"},
      {"::ffff:10.0.0.1", "IPv4-mapped private"},
      {"::ffff:169.254.169.254", "IPv4-mapped metadata"},
      {"::ffff:0.0.0.0", "IPv4-mapped unspecified"},
      {"::127.0.0.1", "IPv4-compatible"},
      {"64:ff9b::7f00:1", "NAT64 of loopback"},
      {"64:ff9b::a9fe:a9fe", "NAT64 of metadata"},
      {"64:ff9b:1::1", "local-use NAT64"},
      {"2002:7f00:1::1", "6to4 of loopback"},
      {"2002:a00:1::", "6to4 of private"},
      {"2001:db8::1", "documentation"},
      {"3fff::1", "documentation"},
      {"2001::1", "Teredo"},
      {"2001:2::1", "benchmarking"},
      {"100::1", "discard-only"},
      {"5f00::1", "outside global unicast"},
      {"4000::1", "outside global unicast"},
  };
  for (const Case& c : kRefused) EXPECT_FALSE(IsPublic(c.address)) << c.address << " (" << c.kind << ")";
}

TEST(AddressRules, OtherFamiliesAreRefused) {
  sockaddr_un unix_address{};
  unix_address.sun_family = AF_UNIX;
  EXPECT_FALSE(IsPublicAddress(reinterpret_cast<const sockaddr&>(unix_address)));
}

// ---------------------------------------------------------------------------
// The guard on a curl handle of its own, as the webhook sender uses it. The
// fake chat server stands in for any HTTP server: it answers every request
// and records it.

size_t Discard(char*, size_t size, size_t count, void*) { return size * count; }

CURLcode Perform(CURL* easy, const std::string& url) {
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Discard);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 5000L);
  return curl_easy_perform(easy);
}

std::string UrlOf(const FakeChatServer& server, const std::string& path = "/") {
  return "http://127.0.0.1:" + std::to_string(server.port()) + path;
}

TestEndpoint EndpointOf(const FakeChatServer& server) { return TestEndpoint{"127.0.0.1", server.port()}; }

TEST(AddressGuard, RefusesLoopbackOnAnyHandleAndSaysWhy) {
  FakeChatServer server;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
  AddressGuard guard(AddressGuardOptions{});
  ASSERT_TRUE(guard.Install(easy.get()).ok());

  EXPECT_EQ(Perform(easy.get(), UrlOf(server)), CURLE_COULDNT_CONNECT);
  ASSERT_TRUE(guard.refusal().has_value());
  EXPECT_EQ(guard.refusal()->code(), kAddressNotAllowed);
  EXPECT_NE(guard.refusal()->message().find("127.0.0.1"), std::string::npos) << guard.refusal()->message();
  EXPECT_TRUE(server.requests().empty());
}

TEST(AddressGuard, TheTestSeamOpensExactlyOneAddressAndPort) {
  FakeChatServer allowed;
  FakeChatServer other;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
  AddressGuard guard(AddressGuardOptions{.public_for_testing = {EndpointOf(allowed)}});
  ASSERT_TRUE(guard.Install(easy.get()).ok());

  EXPECT_EQ(Perform(easy.get(), UrlOf(allowed)), CURLE_OK);
  EXPECT_FALSE(guard.refusal().has_value());
  EXPECT_EQ(allowed.requests().size(), 1u);
  EXPECT_EQ(Perform(easy.get(), UrlOf(other)), CURLE_COULDNT_CONNECT);  // same address, another port
  EXPECT_TRUE(guard.refusal().has_value());
  EXPECT_TRUE(other.requests().empty());
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

TEST(AddressGuard, TurnsOffTheEnvironmentsProxy) {
  FakeChatServer proxy;
  FakeChatServer target;
  ScopedEnv http_proxy("http_proxy", UrlOf(proxy));
  ScopedEnv no_proxy("no_proxy", "");
  ScopedEnv no_proxy_upper("NO_PROXY", "");

  // A plain handle goes through the proxy: the environment is in effect.
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> plain(curl_easy_init(), &curl_easy_cleanup);
  ASSERT_EQ(Perform(plain.get(), UrlOf(target, "/plain")), CURLE_OK);
  ASSERT_EQ(proxy.requests().size(), 1u);

  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
  AddressGuard guard(AddressGuardOptions{.allow_private = true});
  ASSERT_TRUE(guard.Install(easy.get()).ok());
  EXPECT_EQ(Perform(easy.get(), UrlOf(target, "/guarded")), CURLE_OK);
  EXPECT_EQ(proxy.requests().size(), 1u);
  ASSERT_EQ(target.requests().size(), 1u);
  EXPECT_EQ(target.requests()[0].target, "/guarded");
}

}  // namespace
}  // namespace dsh::agent
