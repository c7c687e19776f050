#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/testing/dsh_process.h"
#include "base/json.h"
#include "base/testing/temp_dir.h"
#include "server/http_client.h"

namespace dsh::testing {

// End-to-end fixture: a real `dsh web` child (the binary DSH_BINARY) on a
// fresh profile with token "t0ken", plus the CLI and the HTTP API against it.
class WebHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    web_ = std::make_unique<DshProcess>(
        DSH_BINARY, std::vector<std::string>{"web", "--home", Home(), "--port", "0"}, dir_.File("web.log"),
        std::map<std::string, std::string>{{"DSH_TOKEN", "t0ken"}});
    url_ = web_->WaitListening();
    ASSERT_FALSE(url_.empty()) << web_->Stderr();
  }

  std::string Home() const { return dir_.File("home"); }
  // `dsh GROUP ARGS... --home HOME`.
  DshRun Cli(const std::string& group, std::vector<std::string> args) {
    args.insert(args.begin(), group);
    args.insert(args.end(), {"--home", Home()});
    return RunDsh(DSH_BINARY, std::move(args), dir_.File("cli.log"));
  }
  // GET `path` with the token, expecting 200: the JSON body, null otherwise.
  Json ApiGet(const std::string& path) {
    auto r = server::HttpRequestSync("GET", url_ + path, "", {{"Authorization", "Bearer t0ken"}});
    EXPECT_TRUE(r.ok() && r->status == 200) << path << ": " << (r.ok() ? r->body : r.status().ToString());
    return r.ok() ? Json::parse(r->body, nullptr, false) : Json();
  }

  TempDir dir_;
  std::unique_ptr<DshProcess> web_;
  std::string url_;
};

}  // namespace dsh::testing
