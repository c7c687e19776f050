#pragma once

#include <vector>

#include "host/http_route.h"
#include "host/model_routes.h"
#include "host/provider_settings.h"

namespace dsh::host {

// The Settings page's routes (docs/API.md, "Settings"):
//   GET    /api/settings
//          -> {"providers": [{name, kind, base_url, models, efforts, key_set,
//              key_source, key_env, source, available}],
//              "default_route": {provider, model, source}}
//   PUT    /api/settings/providers/{name}
//          {"kind": "openai", "base_url", "api_key"?, "models": [...], "efforts"?}
//   DELETE /api/settings/providers/{name}
//   POST   /api/settings/providers/{name}/test
//          -> {"ok": true, "models": [...]} | {"ok": false, "error": {code, message}}
//   PUT    /api/settings/default_route  {"provider", "model"}
// Every change answers with the GET body. A body with an unknown property,
// a wrong type, an empty name or a base URL that is not http(s) is
// `invalid_arguments` and changes nothing. No response ever holds a key.
// The borrowed objects must outlive the routes.
std::vector<HttpRoute> SettingsRoutes(ProviderSettings& settings, ModelRoutes& routes);

}  // namespace dsh::host
