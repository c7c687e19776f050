#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/model.h"
#include "base/json.h"
#include "base/status.h"

namespace dsh::workspace {

// Error code of a request whose target address the rules refuse.
inline constexpr const char* kAddressNotAllowed = "address_not_allowed";

struct FetchOptions {
  int64_t max_bytes = 2 << 20;
  std::chrono::milliseconds timeout{30'000};
  bool allow_private = false;  // loopback, private, link-local, metadata addresses
  int max_redirects = 5;
  std::shared_ptr<agent::CancelToken> cancel;  // nullable
};

// fetch({url, max_bytes?}): an http(s) GET; HTML reduced to readable text.
// The address rules are checked on the address actually connected to, and
// again for every redirect. Blocking.
Result<Json> Fetch(const std::string& url, const FetchOptions& options);

}  // namespace dsh::workspace
