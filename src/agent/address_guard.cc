// The address rules and the guard on curl's open-socket callback. Only the
// callback sees the address curl really connects to (after DNS, for every
// redirect), so the check lives there rather than on the URL.

#include "agent/address_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <memory>

namespace dsh::agent {
namespace {

// Why an address is not public; kPublic when it is.
enum class AddressKind {
  kPublic,
  kUnspecified,
  kLoopback,
  kPrivate,
  kSharedCgnat,
  kLinkLocal,
  kMulticast,
  kBroadcast,
  kDocumentation,
  kReserved,
  kNotIp,
};

const char* Describe(AddressKind kind) {
  switch (kind) {
    case AddressKind::kPublic:
      return "a public address";
    case AddressKind::kUnspecified:
      return "the unspecified address";
    case AddressKind::kLoopback:
      return "a loopback address";
    case AddressKind::kPrivate:
      return "a private network address";
    case AddressKind::kSharedCgnat:
      return "a carrier-grade NAT address";
    case AddressKind::kLinkLocal:
      return "a link-local address (cloud metadata services live there)";
    case AddressKind::kMulticast:
      return "a multicast address";
    case AddressKind::kBroadcast:
      return "the broadcast address";
    case AddressKind::kDocumentation:
      return "a documentation or benchmarking address";
    case AddressKind::kReserved:
      return "a reserved address";
    case AddressKind::kNotIp:
      return "not an IP address";
  }
  return "an address";
}

struct V4Range {
  uint32_t prefix;
  int bits;
  AddressKind kind;
};

// IANA's IPv4 special-purpose registry, less what is globally reachable.
constexpr std::array<V4Range, 15> kV4Ranges{{
    {0x00000000, 32, AddressKind::kUnspecified},    // 0.0.0.0
    {0x00000000, 8, AddressKind::kReserved},        // 0/8 "this network"
    {0x0A000000, 8, AddressKind::kPrivate},         // 10/8
    {0x64400000, 10, AddressKind::kSharedCgnat},    // 100.64/10
    {0x7F000000, 8, AddressKind::kLoopback},        // 127/8
    {0xA9FE0000, 16, AddressKind::kLinkLocal},      // 169.254/16
    {0xAC100000, 12, AddressKind::kPrivate},        // 172.16/12
    {0xC0000000, 24, AddressKind::kReserved},       // 192.0.0/24 IETF protocol assignments
    {0xC0000200, 24, AddressKind::kDocumentation},  // 192.0.2/24
    {0xC0586300, 24, AddressKind::kReserved},       // 192.88.99/24 6to4 relay anycast
    {0xC0A80000, 16, AddressKind::kPrivate},        // 192.168/16
    {0xC6120000, 15, AddressKind::kDocumentation},  // 198.18/15 benchmarking
    {0xC6336400, 24, AddressKind::kDocumentation},  // 198.51.100/24
    {0xCB007100, 24, AddressKind::kDocumentation},  // 203.0.113/24
    {0xE0000000, 4, AddressKind::kMulticast},       // 224/4
}};

AddressKind ClassifyV4(uint32_t address) {  // host byte order
  for (const V4Range& range : kV4Ranges) {
    const uint32_t mask = range.bits == 0 ? 0 : ~uint32_t{0} << (32 - range.bits);
    if ((address & mask) == range.prefix) return range.kind;
  }
  if (address == 0xFFFFFFFF) return AddressKind::kBroadcast;
  if ((address & 0xF0000000) == 0xF0000000) return AddressKind::kReserved;  // 240/4
  return AddressKind::kPublic;
}

uint32_t V4At(const uint8_t* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

struct V6Range {
  const char* prefix;
  int bits;
  AddressKind kind;
};

constexpr std::array<V6Range, 9> kV6Ranges{{
    {"::", 128, AddressKind::kUnspecified},
    {"::1", 128, AddressKind::kLoopback},
    {"fc00::", 7, AddressKind::kPrivate},  // unique local
    {"fe80::", 10, AddressKind::kLinkLocal},
    {"fec0::", 10, AddressKind::kPrivate},  // site-local (deprecated)
    {"ff00::", 8, AddressKind::kMulticast},
    {"2001:db8::", 32, AddressKind::kDocumentation},
    {"3fff::", 20, AddressKind::kDocumentation},
    {"2001::", 23, AddressKind::kReserved},  // IETF protocol assignments, Teredo among them
}};

// IPv6 prefixes whose addresses embed an IPv4 address, which they reach.
struct V6Embedding {
  const char* prefix;
  int bits;
  int v4_offset;  // where the IPv4 address sits
};

constexpr std::array<V6Embedding, 3> kV6Embeddings{{
    {"::ffff:0:0", 96, 12},  // IPv4-mapped
    {"64:ff9b::", 96, 12},   // NAT64's well-known prefix
    {"2002::", 16, 2},       // 6to4
}};

bool InPrefix(const uint8_t (&address)[16], const char* prefix_text, int bits) {
  in6_addr prefix{};
  inet_pton(AF_INET6, prefix_text, &prefix);  // our own constants: always valid
  for (int i = 0; i < 16 && bits > 0; ++i, bits -= 8) {
    const auto mask = static_cast<uint8_t>(bits >= 8 ? 0xFF : 0xFF << (8 - bits));
    if ((address[i] & mask) != (prefix.s6_addr[i] & mask)) return false;
  }
  return true;
}

AddressKind ClassifyV6(const uint8_t (&b)[16]) {
  for (const V6Embedding& e : kV6Embeddings) {
    if (InPrefix(b, e.prefix, e.bits)) return ClassifyV4(V4At(b + e.v4_offset));
  }
  for (const V6Range& range : kV6Ranges) {
    if (InPrefix(b, range.prefix, range.bits)) return range.kind;
  }
  if ((b[0] & 0xE0) != 0x20) return AddressKind::kReserved;  // outside global unicast 2000::/3
  return AddressKind::kPublic;
}

AddressKind Classify(const sockaddr& address) {
  if (address.sa_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    return ClassifyV4(ntohl(v4.sin_addr.s_addr));
  }
  if (address.sa_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    return ClassifyV6(v6.sin6_addr.s6_addr);
  }
  return AddressKind::kNotIp;
}

// The numeric address and port; {"", 0} for other families.
std::pair<std::string, int> Endpoint(const sockaddr& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.sa_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    return {text, ntohs(v4.sin_port)};
  }
  if (address.sa_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    return {text, ntohs(v6.sin6_port)};
  }
  return {"", 0};
}

// The host of `url` as curl parses it; "" when it does not.
std::string HostOf(const char* url) {
  if (url == nullptr) return "";
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> parsed(curl_url(), &curl_url_cleanup);
  char* host = nullptr;
  if (!parsed || curl_url_set(parsed.get(), CURLUPART_URL, url, 0) != CURLUE_OK ||
      curl_url_get(parsed.get(), CURLUPART_HOST, &host, 0) != CURLUE_OK) {
    return "";
  }
  std::string out(host);
  curl_free(host);
  return out;
}

}  // namespace

bool IsPublicAddress(const sockaddr& address) { return Classify(address) == AddressKind::kPublic; }

Status AddressGuard::Install(CURL* easy) {
  easy_ = easy;
  if (curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, &AddressGuard::OpenSocket) != CURLE_OK ||
      curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, this) != CURLE_OK ||
      curl_easy_setopt(easy, CURLOPT_PROXY, "") != CURLE_OK ||
      curl_easy_setopt(easy, CURLOPT_NOPROXY, "*") != CURLE_OK) {
    return Internal("curl does not take the options of the address guard");
  }
  return Status::Ok();
}

bool AddressGuard::Allows(const sockaddr& address) const {
  if (options_.allow_private || IsPublicAddress(address)) return true;
  if (options_.public_for_testing.empty()) return false;
  const std::pair<std::string, int> endpoint = Endpoint(address);
  return std::any_of(
      options_.public_for_testing.begin(), options_.public_for_testing.end(),
      [&](const TestEndpoint& e) { return e.address == endpoint.first && e.port == endpoint.second; });
}

curl_socket_t AddressGuard::OpenSocket(void* guard, curlsocktype /*purpose*/, curl_sockaddr* address) {
  auto& self = *static_cast<AddressGuard*>(guard);
  try {  // nothing may unwind through curl
    if (!self.Allows(address->addr)) {
      char* url = nullptr;
      curl_easy_getinfo(self.easy_, CURLINFO_EFFECTIVE_URL, &url);
      const std::string host = HostOf(url);
      const std::string ip = Endpoint(address->addr).first;
      const std::string target =
          host.empty() || host == ip || host == "[" + ip + "]" ? ip : host + " (" + ip + ")";
      self.refusal_ = Status(kAddressNotAllowed, "refused to connect to " + target + ": it is " +
                                                     Describe(Classify(address->addr)) +
                                                     ", and only public addresses may be fetched");
      return CURL_SOCKET_BAD;
    }
  } catch (const std::exception&) {
    self.refusal_ = Status(kAddressNotAllowed, "refused a connection: the address could not be checked");
    return CURL_SOCKET_BAD;
  }
  self.refusal_.reset();
  // Close-on-exec: tools run child processes while fetches are under way.
  return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

}  // namespace dsh::agent
