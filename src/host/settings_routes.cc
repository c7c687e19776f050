#include "host/settings_routes.h"

#include <algorithm>
#include <regex>
#include <set>
#include <utility>

#include "base/json.h"

namespace dsh::host {
namespace {

constexpr size_t kMaxName = 64;
constexpr size_t kMaxModels = 200;

Json SettingsBody(ModelRoutes& routes) {
  Json providers = Json::array();
  for (const auto& p : routes.Providers()) {
    Json models = Json::array();
    Json efforts = Json::object();
    for (const auto& m : p.models) {
      models.push_back(m.name);
      if (!m.reasoning_efforts.empty()) efforts[m.name] = m.reasoning_efforts;
    }
    providers.push_back({{"name", p.name},
                         {"kind", p.kind},
                         {"base_url", p.kind == "echo" ? Json(nullptr) : Json(p.base_url)},
                         {"models", std::move(models)},
                         {"efforts", std::move(efforts)},
                         {"key_set", !p.key_source.empty()},
                         {"key_source", p.key_source.empty() ? Json(nullptr) : Json(p.key_source)},
                         {"key_env", p.api_key_env.empty() ? Json(nullptr) : Json(p.api_key_env)},
                         {"source", p.source},
                         {"available", p.available}});
  }
  session::ModelRoute route = routes.default_route();
  return Json{{"providers", std::move(providers)},
              {"default_route",
               {{"provider", route.provider}, {"model", route.model}, {"source", routes.default_route_source()}}}};
}

Status CheckName(const std::string& name) {
  static const std::regex kName("[a-z0-9_-]+");
  if (name.empty()) return InvalidArguments("the provider's name is empty: give it in the path");
  if (name.size() > kMaxName || !std::regex_match(name, kName)) {
    return InvalidArguments("the provider's name \"" + name + "\" must be at most " + std::to_string(kMaxName) +
                            " lowercase letters, digits, `_` and `-`");
  }
  return Status::Ok();
}

Result<Json> ParseObject(const std::string& body, const char* example) {
  auto json = ParseJson(body);
  if (!json.ok() || !json->is_object()) {
    return InvalidArguments(std::string("the body must be a JSON object: ") + example);
  }
  return std::move(json).value();
}

// A list of distinct non-empty strings without control characters.
Result<std::vector<std::string>> StringList(const Json& value, const std::string& field) {
  if (!value.is_array()) return InvalidArguments("`" + field + "` must be an array of strings");
  if (value.size() > kMaxModels) return InvalidArguments("`" + field + "` may hold at most " + std::to_string(kMaxModels) + " names");
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& item : value) {
    if (!item.is_string() || item.get_ref<const std::string&>().empty()) {
      return InvalidArguments("`" + field + "` must hold non-empty strings, got " + DumpJson(item));
    }
    const std::string& s = item.get_ref<const std::string&>();
    if (std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
      return InvalidArguments("`" + field + "` must not hold control characters");
    }
    if (!seen.insert(s).second) return InvalidArguments("`" + field + "` names \"" + s + "\" twice");
    out.push_back(s);
  }
  return out;
}

Result<ProviderSettings::ProviderChange> ParseProvider(const std::string& body) {
  DSH_ASSIGN_OR_RETURN(Json json, ParseObject(body, "{\"kind\": \"openai\", \"base_url\": \"https://...\", "
                                                    "\"api_key\": \"...\", \"models\": [...], \"efforts\": [...]}"));
  ProviderSettings::ProviderChange change;
  bool kind = false, base_url = false, models = false;
  std::vector<std::string> model_names, efforts;
  for (const auto& [key, value] : json.items()) {
    if (key == "kind") {
      if (value != Json("openai")) {
        return InvalidArguments("`kind` must be \"openai\" (an OpenAI-compatible API), got " + DumpJson(value));
      }
      kind = true;
    } else if (key == "base_url") {
      static const std::regex kUrl("https?://[^\\s/?#]+[^\\s]*");
      if (!value.is_string() || !std::regex_match(value.get_ref<const std::string&>(), kUrl)) {
        return InvalidArguments("`base_url` must be a URL starting with http:// or https://, got " + DumpJson(value));
      }
      change.base_url = value.get<std::string>();
      base_url = true;
    } else if (key == "api_key") {
      if (value.is_null()) {
        change.api_key = std::optional<std::string>();
        continue;
      }
      if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
        return InvalidArguments("`api_key` must be a non-empty string, or null to forget the saved key");
      }
      const std::string& k = value.get_ref<const std::string&>();
      if (std::any_of(k.begin(), k.end(), [](unsigned char c) { return c < 0x21 || c == 0x7f; })) {
        return InvalidArguments("`api_key` must not hold spaces or control characters");
      }
      change.api_key = std::optional<std::string>(k);
    } else if (key == "models") {
      DSH_ASSIGN_OR_RETURN(model_names, StringList(value, "models"));
      models = true;
    } else if (key == "efforts") {
      DSH_ASSIGN_OR_RETURN(efforts, StringList(value, "efforts"));
    } else {
      return InvalidArguments("unknown property `" + key + "`: expected kind, base_url, api_key, models, efforts");
    }
  }
  if (!kind) return InvalidArguments("`kind` is required: \"openai\"");
  if (!base_url) return InvalidArguments("`base_url` is required: the provider's http:// or https:// URL");
  if (!models) return InvalidArguments("`models` is required: the model names to offer ([] for any name)");
  if (!efforts.empty() && model_names.empty()) {
    return InvalidArguments("`efforts` needs `models`: list the models that take these efforts");
  }
  std::sort(model_names.begin(), model_names.end());
  for (auto& m : model_names) change.models.push_back({std::move(m), efforts});
  return change;
}

Result<session::ModelRoute> ParseRoute(const std::string& body) {
  DSH_ASSIGN_OR_RETURN(Json json, ParseObject(body, "{\"provider\": \"...\", \"model\": \"...\"}"));
  session::ModelRoute route;
  bool provider = false, model = false;
  for (const auto& [key, value] : json.items()) {
    if (key != "provider" && key != "model") {
      return InvalidArguments("unknown property `" + key + "`: expected provider, model");
    }
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
      return InvalidArguments("`" + key + "` must be a non-empty string");
    }
    (key == "provider" ? route.provider : route.model) = value.get<std::string>();
    (key == "provider" ? provider : model) = true;
  }
  if (!provider || !model) return InvalidArguments("give both `provider` and `model`");
  return route;
}

Status CheckEmptyBody(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return Status::Ok();
  auto json = ParseJson(body);
  if (!json.ok() || !json->is_object()) return InvalidArguments("the body must be empty or {}");
  if (!json->empty()) return InvalidArguments("unknown property `" + json->begin().key() + "`: a test takes no arguments");
  return Status::Ok();
}

HttpRoute EmptyName(const std::string& method, const std::string& pattern) {
  return HttpRoute{.method = method, .pattern = pattern, .handler = [](HttpRouteRequest, HttpRouteDone done) {
                     done(InvalidArguments("the provider's name is empty: use /api/settings/providers/NAME"));
                   }};
}

}  // namespace

std::vector<HttpRoute> SettingsRoutes(ProviderSettings& settings, ModelRoutes& routes) {
  std::vector<HttpRoute> out;
  out.push_back(HttpRoute{.method = "GET", .pattern = "/api/settings", .handler = [&routes](HttpRouteRequest, HttpRouteDone done) {
                            done(HttpRouteResponse{200, SettingsBody(routes)});
                          }});
  out.push_back(HttpRoute{
      .method = "PUT",
      .pattern = "/api/settings/providers/{name}",
      .handler =
          [&settings, &routes](HttpRouteRequest req, HttpRouteDone done) {
            const std::string name = req.path_params.at("name");
            if (Status st = CheckName(name); !st.ok()) return done(st);
            auto change = ParseProvider(req.body);
            if (!change.ok()) return done(change.status());
            if (Status st = settings.PutProvider(name, std::move(change).value()); !st.ok()) return done(st);
            done(HttpRouteResponse{200, SettingsBody(routes)});
          },
  });
  out.push_back(HttpRoute{
      .method = "DELETE",
      .pattern = "/api/settings/providers/{name}",
      .handler =
          [&settings, &routes](HttpRouteRequest req, HttpRouteDone done) {
            if (Status st = CheckEmptyBody(req.body); !st.ok()) return done(st);
            if (Status st = settings.DeleteProvider(req.path_params.at("name")); !st.ok()) return done(st);
            done(HttpRouteResponse{200, SettingsBody(routes)});
          },
  });
  for (const char* pattern : {"/api/settings/providers", "/api/settings/providers/"}) {
    out.push_back(EmptyName("PUT", pattern));
    out.push_back(EmptyName("DELETE", pattern));
  }
  out.push_back(HttpRoute{
      .method = "POST",
      .pattern = "/api/settings/providers/{name}/test",
      .handler =
          [&settings](HttpRouteRequest req, HttpRouteDone done) {
            if (Status st = CheckEmptyBody(req.body); !st.ok()) return done(st);
            settings.Test(req.path_params.at("name"), [done](Result<std::vector<std::string>> r) {
              // No such provider, or no test ran (too many wait, the host stops): an error.
              if (!r.ok() && (r.status().code() == codes::kNotFound || r.status().code() == codes::kUnavailable ||
                              r.status().code() == codes::kShuttingDown)) {
                return done(r.status());
              }
              if (!r.ok()) {
                return done(HttpRouteResponse{
                    200, Json{{"ok", false},
                              {"error", {{"code", r.status().code()}, {"message", r.status().message()}}}}});
              }
              done(HttpRouteResponse{200, Json{{"ok", true}, {"models", *r}}});
            });
          },
  });
  out.push_back(HttpRoute{
      .method = "PUT",
      .pattern = "/api/settings/default_route",
      .handler =
          [&settings, &routes](HttpRouteRequest req, HttpRouteDone done) {
            auto route = ParseRoute(req.body);
            if (!route.ok()) return done(route.status());
            if (Status st = settings.SetDefaultRoute(*route); !st.ok()) return done(st);
            done(HttpRouteResponse{200, SettingsBody(routes)});
          },
  });
  return out;
}

}  // namespace dsh::host
