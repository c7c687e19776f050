#include "host/config.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>

namespace dsh::host {
namespace {

// A tiny schema for YAML: what keys exist and what their values must be.
struct Spec {
  enum class Kind { kMap, kString, kInt, kBool } kind = Kind::kString;
  std::map<std::string, Spec> keys;     // kMap
  std::vector<std::string> one_of;      // kString
  int64_t min = 0, max = 0;             // kInt
  std::string hint;                     // what a good value looks like
};

Spec Map(std::map<std::string, Spec> keys) { return Spec{Spec::Kind::kMap, std::move(keys), {}, 0, 0, "a mapping"}; }
Spec Str(std::vector<std::string> one_of = {}, std::string hint = "a string") {
  return Spec{Spec::Kind::kString, {}, std::move(one_of), 0, 0, std::move(hint)};
}
Spec Int(int64_t min, int64_t max) {
  return Spec{Spec::Kind::kInt, {}, {}, min, max,
              "an integer from " + std::to_string(min) + " to " + std::to_string(max)};
}

const Spec& RootSpec() {
  static const Spec* spec = new Spec(Map({
      {"server", Map({{"host", Str({}, "a host name or IP address")}, {"port", Int(0, 65535)}})},
      {"storage", Map({{"synchronous", Str({"full", "normal"}, "full or normal")}})},
      {"log", Map({{"level", Str({"trace", "debug", "info", "warn", "error", "off"},
                                 "one of trace, debug, info, warn, error, off")}})},
  }));
  return *spec;
}

std::string Join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

Status Bad(const std::string& file, const std::string& path, const std::string& why) {
  return Status(codes::kInvalidConfig, file + ": `" + path + "` " + why);
}

std::string Shown(const YAML::Node& n) {
  if (n.IsScalar()) return "\"" + n.Scalar() + "\"";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

Status Check(const std::string& file, const std::string& path, const YAML::Node& node, const Spec& spec) {
  switch (spec.kind) {
    case Spec::Kind::kMap: {
      if (node.IsNull()) return Status::Ok();  // an empty section
      if (!node.IsMap()) return Bad(file, path.empty() ? "(top level)" : path, "must be a mapping (got " + Shown(node) + ")");
      for (const auto& kv : node) {
        std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
        auto it = spec.keys.find(key);
        if (it == spec.keys.end()) {
          std::string known;
          for (const auto& [k, _] : spec.keys) known += (known.empty() ? "" : ", ") + k;
          return Status(codes::kInvalidConfig,
                        file + ": unknown key `" + Join(path, key) + "` (known here: " + known + ")");
        }
        DSH_RETURN_IF_ERROR(Check(file, Join(path, key), kv.second, it->second));
      }
      return Status::Ok();
    }
    case Spec::Kind::kString: {
      if (!node.IsScalar() || node.Scalar().empty()) return Bad(file, path, "must be " + spec.hint + " (got " + Shown(node) + ")");
      if (!spec.one_of.empty()) {
        for (const auto& v : spec.one_of) {
          if (v == node.Scalar()) return Status::Ok();
        }
        return Bad(file, path, "must be " + spec.hint + " (got " + Shown(node) + ")");
      }
      return Status::Ok();
    }
    case Spec::Kind::kInt: {
      int64_t v = 0;
      if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, v) || v < spec.min || v > spec.max) {
        return Bad(file, path, "must be " + spec.hint + " (got " + Shown(node) + ")");
      }
      return Status::Ok();
    }
    case Spec::Kind::kBool: {
      bool b = false;
      if (!node.IsScalar() || !YAML::convert<bool>::decode(node, b)) {
        return Bad(file, path, "must be true or false (got " + Shown(node) + ")");
      }
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// Later wins; mappings merge key by key.
YAML::Node Merge(const YAML::Node& base, const YAML::Node& over) {
  if (!base.IsMap() || !over.IsMap()) return YAML::Clone(over.IsNull() ? base : over);
  YAML::Node out = YAML::Clone(base);
  for (const auto& kv : over) {
    std::string key = kv.first.Scalar();
    out[key] = out[key] ? Merge(out[key], kv.second) : YAML::Clone(kv.second);
  }
  return out;
}

Result<YAML::Node> Parse(const std::string& name, const std::string& text) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status(codes::kInvalidConfig, name + ": not valid YAML: " + e.what());
  }
  DSH_RETURN_IF_ERROR(Check(name, "", node, RootSpec()));
  return node;
}

Config Decode(const YAML::Node& root) {
  Config c;
  if (!root || !root.IsMap()) return c;
  if (auto s = root["server"]; s && s.IsMap()) {
    if (s["host"]) c.server.host = s["host"].as<std::string>();
    if (s["port"]) c.server.port = s["port"].as<int>();
  }
  if (auto s = root["storage"]; s && s.IsMap()) {
    if (s["synchronous"]) c.storage.synchronous_full = s["synchronous"].as<std::string>() == "full";
  }
  if (auto s = root["log"]; s && s.IsMap()) {
    if (s["level"]) c.log.level = s["level"].as<std::string>();
  }
  return c;
}

}  // namespace

Result<Config> ParseConfigText(const std::string& name, const std::string& text) {
  DSH_ASSIGN_OR_RETURN(YAML::Node node, Parse(name, text));
  return Decode(node);
}

Result<Config> LoadConfig(const std::vector<ConfigFile>& files) {
  YAML::Node merged(YAML::NodeType::Map);
  for (const auto& f : files) {
    std::error_code ec;
    if (!std::filesystem::exists(f.path, ec)) {
      if (f.optional) continue;
      return Status(codes::kInvalidConfig, f.path + ": no such file");
    }
    YAML::Node node;
    try {
      node = YAML::LoadFile(f.path);
    } catch (const YAML::BadFile& e) {
      return Status(codes::kInvalidConfig, f.path + ": cannot read the file");
    } catch (const YAML::Exception& e) {
      return Status(codes::kInvalidConfig, f.path + ": not valid YAML: " + e.what());
    }
    DSH_RETURN_IF_ERROR(Check(f.path, "", node, RootSpec()));
    merged = Merge(merged, node);
  }
  return Decode(merged);
}

}  // namespace dsh::host
