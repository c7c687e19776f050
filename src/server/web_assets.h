#pragma once

#include <string_view>

namespace dsh::server {

// One file of the browser UI (web/), embedded into the binary at build time
// (cmake/embed_web.py over Vite's output).
struct WebAsset {
  std::string_view path;          // "/index.html", "/assets/index-1a2b3c.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8", ...
  std::string_view body;
  std::string_view gzip;          // the body gzip-compressed; empty when that is not smaller
  bool immutable;                 // a content-hashed name: cache it for good
};

// The embedded file at `path`, or nullptr. Thread-safe (constant data).
const WebAsset* FindWebAsset(std::string_view path);

}  // namespace dsh::server
