#pragma once

#include <curl/curl.h>
#include <sys/socket.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

// The rules for where dsh may connect out to on behalf of its users: the
// workspace `fetch` tool and the webhook sender share them, so a change to
// what counts as public changes both at once.

namespace dsh::agent {

// Error code of a request whose target address the rules refuse.
inline constexpr const char* kAddressNotAllowed = "address_not_allowed";

// True when `address` is a public unicast address an outbound request from
// dsh may connect to. False for every other kind: loopback (127/8, ::1),
// private (10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10), link-local
// (169.254/16 with the cloud metadata service 169.254.169.254, fe80::/10),
// unspecified (0.0.0.0, ::), "this network" 0/8, shared CGNAT 100.64/10,
// multicast, broadcast and the reserved 240/4, documentation and benchmark
// ranges, the IETF special purpose 192.0.0/24 and 2001::/23, and IPv6
// outside the global unicast 2000::/3. An IPv6 address that embeds an IPv4
// one (IPv4-mapped ::ffff:a.b.c.d, NAT64 64:ff9b::a.b.c.d, 6to4 2002:ab:cd::)
// is judged by the IPv4 address. Families other than AF_INET and AF_INET6
// are not public. `address` must be backed by storage of its family's size
// (sockaddr_in, sockaddr_in6).
bool IsPublicAddress(const sockaddr& address);

// An address and port the guard treats as public although it is not.
struct TestEndpoint {
  std::string address;  // numeric, as inet_ntop writes it: "127.0.0.1", "::1"
  int port = 0;
};

struct AddressGuardOptions {
  bool allow_private = false;  // allow every address: the guard refuses nothing
  // Tests only: the seam that lets a loopback server play a public site.
  // Each entry opens exactly one address and port, nothing else; empty in
  // production, and no tool input reaches it.
  std::vector<TestEndpoint> public_for_testing;
};

// Holds one curl easy handle to public addresses (IsPublicAddress). The
// check is made in curl's open-socket callback on the address curl is about
// to connect to, after name resolution and for every connection of every
// transfer on the handle, redirects included: a name that resolves (or
// rebinds) to a private address is refused, and no connection is opened.
// Connections that curl reuses were checked when they were opened.
//
// Use: construct, Install on the handle, run the transfer; when it fails,
// refusal() says whether the guard was the reason. Thread-compatible: the
// callback runs on the thread that drives the handle's transfers.
class AddressGuard {
 public:
  explicit AddressGuard(AddressGuardOptions options) : options_(std::move(options)) {}

  // curl keeps this object's address for its callback.
  AddressGuard(const AddressGuard&) = delete;
  AddressGuard& operator=(const AddressGuard&) = delete;

  // Sets CURLOPT_OPENSOCKETFUNCTION and CURLOPT_OPENSOCKETDATA on `easy`,
  // and turns proxies off (CURLOPT_PROXY "", CURLOPT_NOPROXY "*"), the
  // environment's included: through a proxy the address connected to would
  // be the proxy's, not the target's. The caller must not set those options
  // again. `*this` must outlive every transfer on `easy`; one handle per
  // guard. Sockets it opens are close-on-exec. Errors: `internal` when curl
  // does not take an option (the handle must then not be used).
  Status Install(CURL* easy);

  // Set when the last connection curl tried on the handle was refused: an
  // `address_not_allowed` Status naming the URL's host and the address.
  // A transfer that then failed (curl says CURLE_COULDNT_CONNECT) failed
  // because of the refusal; report this Status rather than curl's error.
  const std::optional<Status>& refusal() const { return refusal_; }

 private:
  static curl_socket_t OpenSocket(void* guard, curlsocktype purpose, curl_sockaddr* address);
  bool Allows(const sockaddr& address) const;

  const AddressGuardOptions options_;
  CURL* easy_ = nullptr;
  std::optional<Status> refusal_;
};

}  // namespace dsh::agent
