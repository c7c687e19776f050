#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace dsh::host {

// The profile configuration: `<home>/dsh.yml` (optional) with `--patch FILE`
// overlays applied in order (maps merge key by key, everything else is
// replaced; later files win). Every file is checked on its own first, so an
// error names the file and the key. See docs/CONFIG.md for the keys.
struct Config {
  struct Server {
    std::string host = "127.0.0.1";
    int port = 7433;
  } server;
  struct Storage {
    bool synchronous_full = true;  // storage.synchronous: full | normal
  } storage;
  struct Log {
    std::string level = "info";
  } log;
};

// Loads and merges `files` (those that do not exist are skipped only when
// `optional`). Errors: `invalid_config` naming the file and the key path.
struct ConfigFile {
  std::string path;
  bool optional = false;
};
Result<Config> LoadConfig(const std::vector<ConfigFile>& files);

// Parses one YAML document given as text (for tests); `name` is used in messages.
Result<Config> ParseConfigText(const std::string& name, const std::string& text);

}  // namespace dsh::host
