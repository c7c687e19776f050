#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/address_guard.h"
#include "agent/model.h"
#include "base/json.h"
#include "base/status.h"

namespace dsh::workspace {

struct FetchOptions {
  // Body bytes kept (after decompression), 1 to 2^30: reading stops there
  // and the result says `truncated`.
  int64_t max_bytes = 2 << 20;
  std::chrono::milliseconds timeout{30'000};          // the whole fetch, redirects included
  std::chrono::milliseconds connect_timeout{10'000};  // each connection; at most `timeout`
  bool allow_private = false;                         // loopback, private, link-local, metadata addresses
  int max_redirects = 5;                              // 0 to 50; one more is an error
  std::shared_ptr<agent::CancelToken> cancel;         // nullable
  // Tests only (see agent::AddressGuardOptions): never set from tool input.
  std::vector<agent::TestEndpoint> public_for_testing;
};

// fetch({url, max_bytes?}): an http(s) GET, blocking the calling thread
// until the response is read, the timeout passes or `cancel` fires (which
// ends it at once). Proxies are not used; redirects are followed (http and
// https only), each connection checked by an agent::AddressGuard.
//
// The result, for any HTTP status (a 404 page is a result too):
//   {url, final_url, status, content_type, bytes, truncated, text}
// `bytes` is the body's size after decompression as far as it was read;
// `text` is valid UTF-8, converted from the charset of the Content-Type (or,
// for HTML, of a <meta>): HTML (text/html, application/xhtml+xml) reduced to
// readable text (title first, "#" headings, "- " list items, links as
// "text (URL)" for absolute http(s) URLs, scripts and styles dropped, <pre>
// kept as is); other text types (text/*, JSON, XML, JavaScript, YAML) as
// they are; anything else "binary content (TYPE, N bytes) not shown".
//
// Errors: `invalid_arguments` (a URL that does not parse or is not http or
// https, options out of range), `address_not_allowed` (a connection to a
// non-public address, see agent::AddressGuard), `cancelled`, `unavailable` (DNS,
// connection, TLS, a timeout, too many redirects or a redirect to another
// scheme, with the reason).
Result<Json> Fetch(const std::string& url, const FetchOptions& options);

}  // namespace dsh::workspace
