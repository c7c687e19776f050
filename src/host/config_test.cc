#include "host/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/testing/temp_dir.h"
#include "agent/agent_store.h"
#include "host/host.h"
#include "store/database.h"
#include "store/sqlite_connection.h"
#include "store/testing/pg_test_server.h"

namespace dsh::host {
namespace {

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Config, DefaultsWithoutAnyFile) {
  dsh::testing::TempDir dir;
  auto c = LoadConfig({{dir.File("dsh.yml"), true}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.host, "127.0.0.1");
  EXPECT_EQ(c->server.port, 7433);
  EXPECT_TRUE(c->storage.synchronous_full);
  EXPECT_EQ(c->model, "");
  EXPECT_TRUE(c->providers.empty());
  ASSERT_EQ(c->presets.size(), 1u);
  EXPECT_EQ(c->presets[0].id, "default");
  EXPECT_EQ(c->presets[0].system_prompt, "");
  EXPECT_TRUE(c->presets[0].all_tools);
  EXPECT_EQ(c->default_preset, "default");
  EXPECT_EQ(c->FindPreset("default"), &c->presets[0]);
  EXPECT_TRUE(c->workspaces.empty());
  EXPECT_TRUE(c->interface.global_session);
  EXPECT_EQ(c->agents.idle_eviction_seconds, 600);
  EXPECT_EQ(c->agents.lease_seconds, 15);
  EXPECT_EQ(c->agents.max_steps, 50);
  EXPECT_TRUE(c->plugins.loop);
  EXPECT_TRUE(c->plugins.sessions);
  EXPECT_FALSE(c->plugins.schedule);
  EXPECT_FALSE(c->plugins.time_context);
}

// The storage tuning keys default to exactly what the store uses without a
// configuration, and reach the store's options unchanged.
TEST(Config, StorageTuningDefaultsAreTheStoresOwn) {
  Config c;
  store::DatabaseOptions db = DatabaseOptionsOf(c);
  store::DatabaseOptions store_db;
  EXPECT_EQ(c.storage.max_gather_us, 300);
  EXPECT_EQ(db.max_gather, store_db.max_gather);
  EXPECT_EQ(db.readers, store_db.readers);
  EXPECT_EQ(db.max_batch, store_db.max_batch);
  store::SqliteOptions sqlite = SqliteOptionsOf(c, "/p/dsh.db");
  store::SqliteOptions store_sqlite;
  EXPECT_EQ(sqlite.path, "/p/dsh.db");
  EXPECT_EQ(sqlite.synchronous, store::SqliteOptions::Synchronous::kFull);
  EXPECT_EQ(sqlite.busy_timeout, store_sqlite.busy_timeout);
  EXPECT_TRUE(sqlite.gather_wal_writes);
  EXPECT_TRUE(sqlite.checkpoints.background);
  EXPECT_EQ(sqlite.checkpoints.start_frames, 1000);
  EXPECT_EQ(sqlite.checkpoints.finish_frames, 64);
  EXPECT_EQ(sqlite.checkpoints.max_frames, 10000);
  EXPECT_EQ(sqlite.checkpoints.background, store_sqlite.checkpoints.background);
  EXPECT_EQ(sqlite.checkpoints.start_frames, store_sqlite.checkpoints.start_frames);
  EXPECT_EQ(sqlite.checkpoints.finish_frames, store_sqlite.checkpoints.finish_frames);
  EXPECT_EQ(sqlite.checkpoints.max_frames, store_sqlite.checkpoints.max_frames);
}

TEST(Config, StorageTuningKeysReachTheStoresOptions) {
  auto c = ParseConfigText("x.yml",
                           "storage:\n"
                           "  synchronous: normal\n"
                           "  max_gather_us: 0\n"
                           "  checkpoint:\n"
                           "    background: false\n"
                           "    start_frames: 4000\n"
                           "    finish_frames: 0\n"
                           "    max_frames: 4000\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(DatabaseOptionsOf(*c).max_gather, std::chrono::microseconds(0));
  store::SqliteOptions sqlite = SqliteOptionsOf(*c, "/p/dsh.db");
  EXPECT_EQ(sqlite.synchronous, store::SqliteOptions::Synchronous::kNormal);
  EXPECT_FALSE(sqlite.checkpoints.background);
  EXPECT_EQ(sqlite.checkpoints.start_frames, 4000);
  EXPECT_EQ(sqlite.checkpoints.finish_frames, 0);
  EXPECT_EQ(sqlite.checkpoints.max_frames, 4000);

  // A patch changes one key and keeps the others.
  dsh::testing::TempDir dir;
  Write(dir.File("dsh.yml"), "storage:\n  max_gather_us: 1000\n  checkpoint:\n    start_frames: 2000\n");
  Write(dir.File("p.yml"), "storage:\n  checkpoint:\n    max_frames: 20000\n");
  auto merged = LoadConfig({{dir.File("dsh.yml"), true}, {dir.File("p.yml")}});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(DatabaseOptionsOf(*merged).max_gather, std::chrono::microseconds(1000));
  sqlite = SqliteOptionsOf(*merged, "/p/dsh.db");
  EXPECT_TRUE(sqlite.checkpoints.background);
  EXPECT_EQ(sqlite.checkpoints.start_frames, 2000);
  EXPECT_EQ(sqlite.checkpoints.finish_frames, 64);
  EXPECT_EQ(sqlite.checkpoints.max_frames, 20000);
}

// Retention (issue 22): consumed inbox rows kept 30 days, at most 1,000 runs
// per loop and none older than 90 days, unless dsh.yml says otherwise; 0
// keeps forever.
TEST(Config, RetentionDefaultsAndKeys) {
  auto d = ParseConfigText("x.yml", "");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->retention.inbox_days, 30);
  EXPECT_EQ(d->retention.loop_runs, 1000);
  EXPECT_EQ(d->retention.loop_run_days, 90);
  auto c = ParseConfigText("x.yml", "retention:\n  inbox_days: 0\n  loop_runs: 5\n  loop_run_days: 365\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->retention.inbox_days, 0);
  EXPECT_EQ(c->retention.loop_runs, 5);
  EXPECT_EQ(c->retention.loop_run_days, 365);
}

TEST(Config, RetentionOutOfRangeNamesTheKey) {
  struct Case {
    const char* yaml;
    const char* expected;
  } cases[] = {
      {"retention:\n  inbox_days: -1\n", "x.yml: `retention.inbox_days` must be an integer from 0 to 36500 (got \"-1\")"},
      {"retention:\n  inbox_days: 30d\n", "`retention.inbox_days` must be an integer"},
      {"retention:\n  loop_runs: 1000001\n", "`retention.loop_runs` must be an integer from 0 to 1000000"},
      {"retention:\n  loop_run_days: 36501\n", "`retention.loop_run_days` must be an integer from 0 to 36500"},
      {"retention:\n  runs: 10\n", "unknown key `retention.runs`"},
      {"retention: 30\n", "`retention` must be a mapping"},
  };
  for (const auto& c : cases) {
    auto r = ParseConfigText("x.yml", c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), "invalid_config");
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
  }
}

// `server.metrics_listen` (issue 22): a second listener for GET /metrics
// only, off unless set.
TEST(Config, MetricsListenIsOffByDefaultAndTakesHostColonPort) {
  auto d = ParseConfigText("x.yml", "");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->server.metrics_listen, "");
  for (const char* ok : {"127.0.0.1:9464", "[::1]:9464", "localhost:0"}) {
    auto c = ParseConfigText("x.yml", std::string("server:\n  metrics_listen: \"") + ok + "\"\n");
    ASSERT_TRUE(c.ok()) << ok << ": " << c.status().ToString();
    EXPECT_EQ(c->server.metrics_listen, ok);
  }
  for (const char* bad : {"9464", "127.0.0.1", "::1:9464", "host:port"}) {
    auto c = ParseConfigText("x.yml", std::string("server:\n  metrics_listen: \"") + bad + "\"\n");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("`server.metrics_listen` must be HOST:PORT"), std::string::npos)
        << c.status().message();
  }
}

TEST(Config, StorageTuningOutOfRangeOrOrderNamesTheKey) {
  struct Case {
    const char* yaml;
    const char* expected;
  } cases[] = {
      {"storage:\n  max_gather_us: -1\n", "x.yml: `storage.max_gather_us` must be an integer from 0 to 100000 (got \"-1\")"},
      {"storage:\n  max_gather_us: 100001\n", "`storage.max_gather_us` must be an integer from 0 to 100000"},
      {"storage:\n  max_gather_us: 0.3ms\n", "`storage.max_gather_us` must be an integer"},
      {"storage:\n  checkpoint: 5\n", "`storage.checkpoint` must be a mapping"},
      {"storage:\n  checkpoint:\n    background: sometimes\n", "`storage.checkpoint.background` must be true or false"},
      {"storage:\n  checkpoint:\n    start_frames: 0\n", "`storage.checkpoint.start_frames` must be an integer from 1 to 1000000"},
      {"storage:\n  checkpoint:\n    finish_frames: -1\n", "`storage.checkpoint.finish_frames` must be an integer from 0 to 1000000"},
      {"storage:\n  checkpoint:\n    max_frames: 2000000\n", "`storage.checkpoint.max_frames` must be an integer from 1 to 1000000"},
      {"storage:\n  checkpoint:\n    frames: 10\n", "unknown key `storage.checkpoint.frames`"},
      {"storage:\n  checkpoint:\n    finish_frames: 1000\n",
       "x.yml: `storage.checkpoint.finish_frames` must be less than `storage.checkpoint.start_frames` (1000; got 1000)"},
      {"storage:\n  checkpoint:\n    start_frames: 20000\n",
       "x.yml: `storage.checkpoint.max_frames` must be at least `storage.checkpoint.start_frames` (20000; got 10000)"},
  };
  for (const auto& c : cases) {
    auto r = ParseConfigText("x.yml", c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), "invalid_config");
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
  }
}

TEST(Config, PatchesMergeDeeplyAndLaterWins) {
  dsh::testing::TempDir dir;
  Write(dir.File("dsh.yml"), "server:\n  host: 0.0.0.0\n  port: 9000\nlog:\n  level: debug\n");
  Write(dir.File("p1.yml"), "server:\n  port: 9100\n");
  Write(dir.File("p2.yml"), "storage:\n  synchronous: normal\nserver:\n  port: 9200\n");
  auto c = LoadConfig({{dir.File("dsh.yml"), true}, {dir.File("p1.yml")}, {dir.File("p2.yml")}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.host, "0.0.0.0");  // kept from dsh.yml
  EXPECT_EQ(c->server.port, 9200);
  EXPECT_EQ(c->log.level, "debug");
  EXPECT_FALSE(c->storage.synchronous_full);
}

TEST(Config, AnUnknownKeyNamesTheFileAndTheKey) {
  dsh::testing::TempDir dir;
  Write(dir.File("p.yml"), "server:\n  hots: x\n");
  auto c = LoadConfig({{dir.File("p.yml")}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), "invalid_config");
  EXPECT_NE(c.status().message().find(dir.File("p.yml") + ": unknown key `server.hots`"), std::string::npos)
      << c.status().message();
}

TEST(Config, ABadValueNamesTheFileAndTheKey) {
  struct Case {
    const char* yaml;
    const char* expected;
  } cases[] = {
      {"server:\n  port: 70000\n", "`server.port` must be an integer from 0 to 65535 (got \"70000\")"},
      {"server:\n  port: abc\n", "`server.port` must be an integer"},
      {"server:\n  port: 1.5\n", "`server.port` must be an integer"},
      {"storage:\n  synchronous: off\n", "`storage.synchronous` must be full or normal"},
      {"storage:\n  backend: mysql\n", "`storage.backend` must be sqlite or postgres"},
      {"storage:\n  url: /var/db\n", "`storage.url` must be a PostgreSQL URL"},
      {"server: 5\n", "`server` must be a mapping"},
      {"log:\n  level: [a]\n", "`log.level` must be one of"},
      {"- a\n- b\n", "`(top level)` must be a mapping"},
      {"server: {host: \n", "not valid YAML"},
  };
  for (const auto& c : cases) {
    auto r = ParseConfigText("x.yml", c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), "invalid_config");
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().rfind("x.yml: ", 0), 0u) << r.status().message();
  }
}

// On a database several machines share, the host's wall clock is the
// server's (Host::Open wraps the real clock); a test's own clock is kept.
TEST(HostClock, OnPostgresTheRealClockIsKeptInStepWithTheServerAndAFakeOneIsLeftAlone) {
  auto conninfo = store::testing::PgTestServer::NewDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  auto env = [&](const std::string& name) -> std::optional<std::string> {
    if (name == "DSH_DATABASE_URL") return *conninfo;
    return std::nullopt;
  };
  for (bool fake : {false, true}) {
    dsh::testing::TempDir home;
    FakeClock fake_clock;
    HostOptions options;
    options.home = home.path().string();
    options.env = env;
    options.clock = fake ? static_cast<const Clock*>(&fake_clock) : &RealClock();
    auto host = Host::Open(options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    if (fake) {
      EXPECT_EQ(&(*host)->clock(), &fake_clock);
    } else {
      EXPECT_NE(&(*host)->clock(), &RealClock()) << "a DatabaseClock over it";
      EXPECT_NEAR(static_cast<double>(ToUnixMillis((*host)->clock().Now())),
                  static_cast<double>(ToUnixMillis(RealClock().Now())), 1000.0);
    }
    (*host)->Close();
  }
  store::testing::PgTestServer::DropDatabase(*conninfo);
}

// A started host prunes consumed inbox rows older than retention.inbox_days
// on its own, and prunes nothing when every limit is 0.
TEST(HostRetention, AStartedHostPrunesOldConsumedInboxRowsInTheBackground) {
  for (int64_t days : {1, 0}) {
    dsh::testing::TempDir home;
    // days 0: every limit of the host's own tasks is 0 (the inbox's, and the
    // activity list's, which follows loop_run_days).
    Write(home.File("dsh.yml"), "interface:\n  global_session: false\nretention:\n  inbox_days: " +
                                    std::to_string(days) + "\n  loop_run_days: " + std::to_string(days * 90) + "\n");
    FakeClock clock;
    HostOptions options;
    options.home = home.path().string();
    options.clock = &clock;
    options.env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    options.pruner_options = store::PrunerOptions{.slice_rows = 7, .pause = std::chrono::milliseconds(1)};
    auto host = Host::Open(options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    auto session = (*host)->sessions().Create((*host)->DefaultNewSession());
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    int64_t now = ToUnixMillis(clock.Now());
    ASSERT_TRUE((*host)->database().WriteSync([&](store::Tx& tx) -> Status {
      for (int i = 0; i < 20; ++i) {
        agent::InboxMessage m;
        m.message_id = "msg_" + std::to_string(i);
        m.session_id = session->id;
        m.wakeup = false;
        m.text = "t";
        m.created_at = now - 3 * 86'400'000;
        DSH_RETURN_IF_ERROR(agent::agent_store::Insert(tx, m, std::nullopt).status());
        DSH_RETURN_IF_ERROR(agent::agent_store::Consume(tx, {{m.num, m.message_id}}, now - (i < 15 ? 2 : 0) * 86'400'000));
      }
      return Status::Ok();
    }).ok());
    ASSERT_TRUE((*host)->Start(1).ok());
    if (days == 0) {
      EXPECT_EQ((*host)->pruner(), nullptr);
      (*host)->Close();
      continue;
    }
    ASSERT_NE((*host)->pruner(), nullptr);
    // The pruner's own thread: wait for its first round.
    EXPECT_TRUE((*host)->pruner()->WaitFor([](const store::Pruner::Stats& s) { return s.deleted >= 15; },
                                           std::chrono::seconds(20)));
    EXPECT_EQ((*host)->pruner()->stats().deleted, 15);
    EXPECT_LE((*host)->pruner()->stats().max_slice, 7);
    (*host)->Close();
  }
}

TEST(DatabaseFactory, SqliteByDefaultPostgresByConfigOrEnvironment) {
  dsh::testing::TempDir dir;
  auto profile = Profile::Open(dir.path().string());
  ASSERT_TRUE(profile.ok());
  auto no_env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto sqlite = DatabaseFactory(Config{}, *profile, no_env);
  ASSERT_TRUE(sqlite.ok()) << sqlite.status().ToString();
  EXPECT_EQ((*sqlite)->Describe(), "sqlite " + profile->database_path());

  auto pg = ParseConfigText("x.yml", "storage:\n  backend: postgres\n  url: postgresql://dsh:pw@db1:5432/dsh\n");
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  auto configured = DatabaseFactory(*pg, *profile, no_env);
  ASSERT_TRUE(configured.ok()) << configured.status().ToString();
  EXPECT_EQ((*configured)->Describe(), "postgres db1:5432/dsh as dsh");

  auto env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "DSH_DATABASE_URL") return "postgresql://ops@db2/prod";
    return std::nullopt;
  };
  auto from_env = DatabaseFactory(*pg, *profile, env);
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ((*from_env)->Describe(), "postgres db2/prod as ops") << "DSH_DATABASE_URL wins";
  EXPECT_EQ((*DatabaseFactory(Config{}, *profile, env))->Describe(), "postgres db2/prod as ops");

  auto no_url = ParseConfigText("x.yml", "storage:\n  backend: postgres\n");
  ASSERT_TRUE(no_url.ok());
  EXPECT_EQ(DatabaseFactory(*no_url, *profile, no_env).status().code(), "invalid_config");
  auto url_for_sqlite = ParseConfigText("x.yml", "storage:\n  url: postgresql://db1/dsh\n");
  ASSERT_TRUE(url_for_sqlite.ok());
  EXPECT_EQ(DatabaseFactory(*url_for_sqlite, *profile, no_env).status().code(), "invalid_config");
}

TEST(Config, AMissingPatchFileIsAnError) {
  auto c = LoadConfig({{"/nonexistent/patch.yml"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "/nonexistent/patch.yml: no such file");
}

TEST(Config, EmptyFileAndEmptySectionsAreFine) {
  EXPECT_TRUE(ParseConfigText("x.yml", "").ok());
  EXPECT_TRUE(ParseConfigText("x.yml", "server:\n").ok());
}

const char* kFull = R"(
model: local/qwen3
providers:
  local:
    type: openai
    base_url: http://127.0.0.1:8080/v1
    api_key_env: LOCAL_KEY
    models:
      qwen3: {reasoning_efforts: [low, medium, high]}
      llama: ~
      gpt-4.1: {}
  offline:
    type: echo
presets:
  coder:
    system_prompt: "You write code."
    tools: [sessions, loop]
  quiet:
    tools: []
default_preset: coder
workspaces:
  dsh: /home/me/src/dsh/
  odd: /home/me/./x/../y
interface:
  global_session: false
agents:
  idle_eviction: 30
  lease: 6
  max_steps: 7
)";

TEST(Config, ReadsModelProvidersPresetsWorkspacesInterfaceAndAgents) {
  auto c = ParseConfigText("x.yml", kFull);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model, "local/qwen3");

  ASSERT_EQ(c->providers.size(), 2u);  // in name order
  const Config::Provider* local = c->FindProvider("local");
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local, &c->providers[0]);
  EXPECT_EQ(local->type, "openai");
  EXPECT_EQ(local->base_url, "http://127.0.0.1:8080/v1");
  EXPECT_EQ(local->api_key_env, "LOCAL_KEY");
  ASSERT_EQ(local->models.size(), 3u);  // in name order
  EXPECT_EQ(local->models[0].name, "gpt-4.1");
  EXPECT_TRUE(local->models[0].reasoning_efforts.empty());
  EXPECT_EQ(local->models[1].name, "llama");
  EXPECT_TRUE(local->models[1].reasoning_efforts.empty());
  EXPECT_EQ(local->models[2].name, "qwen3");
  EXPECT_EQ(local->models[2].reasoning_efforts, (std::vector<std::string>{"low", "medium", "high"}));
  const Config::Provider* offline = c->FindProvider("offline");
  ASSERT_NE(offline, nullptr);
  EXPECT_EQ(offline->type, "echo");
  EXPECT_EQ(offline->base_url, "");
  EXPECT_EQ(offline->api_key_env, "");
  EXPECT_TRUE(offline->models.empty());
  EXPECT_EQ(c->FindProvider("openai"), nullptr);  // built-ins live in ModelRoutes

  // The built-in default stays beside the declared presets.
  ASSERT_EQ(c->presets.size(), 3u);
  EXPECT_EQ(c->presets[0].id, "coder");
  EXPECT_EQ(c->presets[1].id, "default");
  EXPECT_EQ(c->presets[2].id, "quiet");
  const Config::Preset* coder = c->FindPreset("coder");
  ASSERT_NE(coder, nullptr);
  EXPECT_EQ(coder->system_prompt, "You write code.");
  EXPECT_FALSE(coder->all_tools);
  EXPECT_EQ(coder->tool_groups, (std::vector<std::string>{"sessions", "loop"}));
  const Config::Preset* quiet = c->FindPreset("quiet");
  ASSERT_NE(quiet, nullptr);
  EXPECT_FALSE(quiet->all_tools);  // [] = no tools at all
  EXPECT_TRUE(quiet->tool_groups.empty());
  EXPECT_EQ(quiet->system_prompt, "");
  EXPECT_EQ(c->FindPreset("nope"), nullptr);
  EXPECT_EQ(c->default_preset, "coder");

  ASSERT_EQ(c->workspaces.size(), 2u);
  EXPECT_EQ(c->workspaces[0].id, "dsh");
  EXPECT_EQ(c->workspaces[0].path, "/home/me/src/dsh");
  EXPECT_EQ(c->workspaces[1].id, "odd");
  EXPECT_EQ(c->workspaces[1].path, "/home/me/y");

  EXPECT_FALSE(c->interface.global_session);
  EXPECT_EQ(c->agents.idle_eviction_seconds, 30);
  EXPECT_EQ(c->agents.lease_seconds, 6);
  EXPECT_EQ(c->agents.max_steps, 7);
}

TEST(Config, ReadsToolPermissionsNetworkRootsAndTheApprovalTimeout) {
  auto c = ParseConfigText("x.yml",
                           "presets:\n  reviewer:\n    permissions: {write: deny, edit: deny, bash: deny, read: allow}\n"
                           "  trusted:\n    permissions: {bash: allow}\n    network: true\n    fetch_private: true\n"
                           "    roots: [/srv/data/, /opt/./x]\n"
                           "tools:\n  approval_timeout: 60\n  sandbox: false\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Config::Preset* reviewer = c->FindPreset("reviewer");
  ASSERT_NE(reviewer, nullptr);
  EXPECT_EQ(reviewer->permissions, (std::map<std::string, std::string>{
                                       {"bash", "deny"}, {"edit", "deny"}, {"read", "allow"}, {"write", "deny"}}));
  EXPECT_FALSE(reviewer->network);
  EXPECT_FALSE(reviewer->fetch_private);
  EXPECT_TRUE(reviewer->roots.empty());
  const Config::Preset* trusted = c->FindPreset("trusted");
  ASSERT_NE(trusted, nullptr);
  EXPECT_TRUE(trusted->network);
  EXPECT_TRUE(trusted->fetch_private);
  EXPECT_EQ(trusted->roots, (std::vector<std::string>{"/srv/data", "/opt/x"}));
  EXPECT_EQ(c->tools.approval_timeout_seconds, 60);
  EXPECT_FALSE(c->tools.sandbox);

  auto defaults = ParseConfigText("x.yml", "");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->tools.approval_timeout_seconds, 900);
  EXPECT_TRUE(defaults->tools.sandbox);

  auto bad = ParseConfigText("x.yml", "presets:\n  p:\n    permissions: {bash: sometimes}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("presets.p.permissions.bash"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("allow, ask or deny"), std::string::npos);
  EXPECT_FALSE(ParseConfigText("x.yml", "presets:\n  p:\n    roots: [relative/dir]\n").ok());
  EXPECT_FALSE(ParseConfigText("x.yml", "tools:\n  approval_timeout: 0\n").ok());
}

TEST(Config, ADeclaredDefaultPresetReplacesTheBuiltIn) {
  auto c = ParseConfigText("x.yml", "presets:\n  default:\n    system_prompt: hi\n    tools: [loop]\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->presets.size(), 1u);
  EXPECT_EQ(c->presets[0].system_prompt, "hi");
  EXPECT_FALSE(c->presets[0].all_tools);
  EXPECT_EQ(c->presets[0].tool_groups, std::vector<std::string>{"loop"});
}

TEST(Config, EmptyProviderModelAndPresetEntriesTakeTheDefaults) {
  auto c = ParseConfigText("x.yml",
                           "presets:\n  a: ~\n  b: {}\n  c:\n    system_prompt: \"\"\n"
                           "providers:\n  e: {type: echo}\n  f: {type: echo, models: ~}\n"
                           "workspaces: ~\ninterface:\nagents:\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (const char* id : {"a", "b", "c"}) {
    const Config::Preset* p = c->FindPreset(id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_TRUE(p->all_tools);
    EXPECT_EQ(p->system_prompt, "");
  }
  ASSERT_NE(c->FindProvider("f"), nullptr);
  EXPECT_TRUE(c->FindProvider("f")->models.empty());
  EXPECT_TRUE(c->workspaces.empty());
}

TEST(Config, ABadNewKeyValueNamesTheFileAndTheFullKeyPath) {
  struct Case {
    const char* yaml;
    const char* expected;
  } cases[] = {
      {"model: deepseek\n", "`model` must be provider/model"},
      {"model: deepseek/\n", "`model` must be provider/model"},
      {"model: /chat\n", "`model` must be provider/model"},
      {"model: Deep/chat\n", "`model` must be provider/model"},
      {"model: [a]\n", "`model` must be provider/model"},
      {"providers: [a]\n", "`providers` must be a mapping of provider names to providers (got a list)"},
      {"providers:\n  Local: {type: echo}\n",
       "`providers.Local` is not a valid provider name: use lowercase letters"},
      {"providers:\n  a.b: {type: echo}\n", "`providers.a.b` is not a valid provider name"},
      {"providers:\n  x: 5\n", "`providers.x` must be a mapping (got \"5\")"},
      {"providers:\n  x: {type: anthropic}\n",
       "`providers.x.type` must be openai or echo (got \"anthropic\")"},
      {"providers:\n  x: {base_url: ftp://h/}\n",
       "`providers.x.base_url` must be a URL starting with http:// or https://"},
      {"providers:\n  x: {base_url: \"\"}\n", "`providers.x.base_url` must be a URL"},
      {"providers:\n  x: {base_url: \"http://\"}\n", "`providers.x.base_url` must be a URL"},
      {"providers:\n  x: {api_key_env: my-key}\n",
       "`providers.x.api_key_env` must be an environment variable name"},
      {"providers:\n  x: {api_key_env: 1KEY}\n",
       "`providers.x.api_key_env` must be an environment variable name"},
      {"providers:\n  x: {key: K}\n",
       "unknown key `providers.x.key` (known here: api_key_env, base_url, models, type)"},
      {"providers:\n  x: {models: [a, b]}\n",
       "`providers.x.models` must be a mapping of model names to their settings"},
      {"providers:\n  x: {models: {m: {effort: [a]}}}\n", "unknown key `providers.x.models.m.effort`"},
      {"providers:\n  x: {models: {m: {reasoning_efforts: low}}}\n",
       "`providers.x.models.m.reasoning_efforts` must be a list of distinct strings (got \"low\")"},
      {"providers:\n  x: {models: {m: {reasoning_efforts: [low, low]}}}\n",
       "`providers.x.models.m.reasoning_efforts` lists \"low\" twice"},
      {"providers:\n  x: {models: {m: {reasoning_efforts: [low, \"\"]}}}\n",
       "`providers.x.models.m.reasoning_efforts[1]` must be a non-empty string (got \"\")"},
      {"presets: 3\n", "`presets` must be a mapping of preset ids to presets"},
      {"presets:\n  Coder: {}\n", "`presets.Coder` is not a valid preset id: use lowercase"},
      {"presets:\n  coder: {prompt: x}\n",
       "unknown key `presets.coder.prompt` (known here: fetch_private, network, permissions, roots, system_prompt, tools)"},
      {"presets:\n  coder: {system_prompt: [x]}\n", "`presets.coder.system_prompt` must be a string"},
      {"presets:\n  coder: {tools: sessions}\n",
       "`presets.coder.tools` must be a list of distinct tool group names"},
      {"presets:\n  coder: {tools: ~}\n",
       "`presets.coder.tools` must be a list of distinct tool group names (got nothing)"},
      {"presets:\n  coder: {tools: [loop, Loop]}\n", "`presets.coder.tools[1]` must be a tool group name"},
      {"presets:\n  coder: {tools: [loop, loop]}\n", "`presets.coder.tools` lists \"loop\" twice"},
      {"presets:\n  coder: {tools: [[a]]}\n", "`presets.coder.tools[0]` must be a tool group name"},
      {"default_preset: \"\"\n", "`default_preset` must be a preset id"},
      {"default_preset: Big\n", "`default_preset` must be a preset id"},
      {"workspaces:\n  dsh: src/dsh\n", "`workspaces.dsh` must be an absolute path (got \"src/dsh\")"},
      {"workspaces:\n  dsh: {path: /x}\n", "`workspaces.dsh` must be an absolute path (got a mapping)"},
      {"workspaces:\n  my ws: /x\n", "`workspaces.my ws` is not a valid workspace id"},
      {"providers:\n  x: {models: {\"\": {}}}\n", "`providers.x.models.` is not a valid model name"},
      {"workspaces: [/x]\n", "`workspaces` must be a mapping of workspace ids to absolute paths"},
      {"interface:\n  global_session: maybe\n",
       "`interface.global_session` must be true or false (got \"maybe\")"},
      {"interface:\n  global: true\n", "unknown key `interface.global`"},
      {"agents:\n  idle_eviction: 0\n",
       "`agents.idle_eviction` must be an integer from 1 to 31536000 (got \"0\")"},
      {"agents:\n  idle_eviction: 31536001\n",
       "`agents.idle_eviction` must be an integer from 1 to 31536000"},
      {"agents:\n  max_steps: 0\n", "`agents.max_steps` must be an integer from 1 to 10000 (got \"0\")"},
      {"agents:\n  max_steps: 10001\n", "`agents.max_steps` must be an integer from 1 to 10000"},
      {"agents:\n  max_steps: ten\n", "`agents.max_steps` must be an integer"},
      {"agents:\n  lease: 2\n", "`agents.lease` must be an integer from 3 to 3600 (got \"2\")"},
      {"agents:\n  lease: 3601\n", "`agents.lease` must be an integer from 3 to 3600"},
      {"agents:\n  steps: 3\n", "unknown key `agents.steps` (known here: idle_eviction, lease, max_steps)"},
      {"plugins:\n  reminders: {enabled: true}\n",
       "unknown key `plugins.reminders` (known here: loop, schedule, sessions, time_context, workspace)"},
      {"plugins:\n  schedule: {enabled: true, every: 5}\n",
       "unknown key `plugins.schedule.every` (known here: enabled)"},
      {"plugins:\n  schedule: {enabled: maybe}\n",
       "`plugins.schedule.enabled` must be true or false (got \"maybe\")"},
      {"plugins:\n  time_context: {enabled: [true]}\n",
       "`plugins.time_context.enabled` must be true or false (got a list)"},
      {"plugins:\n  loop: true\n", "`plugins.loop` must be a mapping (got \"true\")"},
      {"plugins: [schedule]\n", "`plugins` must be a mapping (got a list)"},
      // Checked once the files are merged.
      {"providers:\n  x: {api_key_env: K}\n",
       "`providers.x.base_url` is required for a provider of type openai"},
      {"providers:\n  x: ~\n", "`providers.x.base_url` is required for a provider of type openai"},
      {"default_preset: coder\n", "`default_preset` names no preset: \"coder\" (presets: default)"},
      {"presets:\n  a: {}\ndefault_preset: b\n",
       "`default_preset` names no preset: \"b\" (presets: a, default)"},
  };
  for (const auto& c : cases) {
    auto r = ParseConfigText("x.yml", c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), "invalid_config");
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << c.yaml << "\n"
                                                                        << r.status().message();
    EXPECT_EQ(r.status().message().rfind("x.yml: ", 0), 0u) << r.status().message();
  }
}

TEST(Config, APatchAddsAPresetAndChangesAnotherKeyByKey) {
  dsh::testing::TempDir dir;
  Write(
      dir.File("dsh.yml"),
      "presets:\n  coder:\n    system_prompt: base\n    tools: [sessions, loop]\n"
      "providers:\n  local:\n    base_url: http://h/v1\n    models:\n      a: {reasoning_efforts: [low]}\n");
  Write(dir.File("p.yml"),
        "presets:\n  coder:\n    tools: [loop]\n  reviewer:\n    system_prompt: review\n"
        "default_preset: reviewer\n"
        "providers:\n  local:\n    api_key_env: K\n    models:\n      b: ~\n");
  auto c = LoadConfig({{dir.File("dsh.yml"), true}, {dir.File("p.yml")}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->presets.size(), 3u);
  const Config::Preset* coder = c->FindPreset("coder");
  ASSERT_NE(coder, nullptr);
  EXPECT_EQ(coder->system_prompt, "base");                          // kept from dsh.yml
  EXPECT_EQ(coder->tool_groups, std::vector<std::string>{"loop"});  // lists are replaced
  ASSERT_NE(c->FindPreset("reviewer"), nullptr);
  EXPECT_EQ(c->FindPreset("reviewer")->system_prompt, "review");
  EXPECT_NE(c->FindPreset("default"), nullptr);
  EXPECT_EQ(c->default_preset, "reviewer");
  const Config::Provider* local = c->FindProvider("local");
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local->base_url, "http://h/v1");
  EXPECT_EQ(local->api_key_env, "K");
  ASSERT_EQ(local->models.size(), 2u);
  EXPECT_EQ(local->models[0].reasoning_efforts, std::vector<std::string>{"low"});
  EXPECT_EQ(local->models[1].name, "b");
}

TEST(Config, ADefaultPresetDeclaredInAnotherFileIsFound) {
  dsh::testing::TempDir dir;
  Write(dir.File("dsh.yml"), "default_preset: coder\n");
  Write(dir.File("p.yml"), "presets:\n  coder: {}\n");
  auto c = LoadConfig({{dir.File("dsh.yml"), true}, {dir.File("p.yml")}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->default_preset, "coder");
}

TEST(Config, AMergedErrorNamesTheFileThatSetTheKey) {
  dsh::testing::TempDir dir;
  Write(dir.File("dsh.yml"), "presets:\n  coder: {}\nproviders:\n  local: {type: echo}\n");
  Write(dir.File("p1.yml"), "default_preset: codr\n");
  Write(dir.File("p2.yml"), "server:\n  port: 1\n");
  auto c = LoadConfig({{dir.File("dsh.yml"), true}, {dir.File("p1.yml")}, {dir.File("p2.yml")}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), "invalid_config");
  EXPECT_EQ(c.status().message(),
            dir.File("p1.yml") + ": `default_preset` names no preset: \"codr\" (presets: coder, default)");

  // The patch turns an echo provider into an openai one without a base_url.
  Write(dir.File("p3.yml"), "providers:\n  local: {type: openai}\n");
  c = LoadConfig({{dir.File("dsh.yml"), true}, {dir.File("p3.yml")}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            dir.File("p3.yml") + ": `providers.local.base_url` is required for a provider of type openai");
}

TEST(Config, AListInAPatchReplacesTheWholeList) {
  dsh::testing::TempDir dir;
  Write(dir.File("dsh.yml"), "presets:\n  coder:\n    tools: [sessions, loop]\n");
  Write(dir.File("p.yml"), "presets:\n  coder:\n    tools: []\n");
  auto c = LoadConfig({{dir.File("dsh.yml"), true}, {dir.File("p.yml")}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->FindPreset("coder")->all_tools);
  EXPECT_TRUE(c->FindPreset("coder")->tool_groups.empty());
}

TEST(Config, PluginsAreSwitchedOnAndOffByName) {
  auto c = ParseConfigText("x.yml",
                           "plugins:\n  loop: {enabled: false}\n  sessions: {enabled: false}\n"
                           "  schedule: {enabled: true}\n  time_context: {enabled: true}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->plugins.loop);
  EXPECT_FALSE(c->plugins.sessions);
  EXPECT_TRUE(c->plugins.schedule);
  EXPECT_TRUE(c->plugins.time_context);
  // An empty section or an entry without `enabled` keeps the default.
  auto empty = ParseConfigText("x.yml", "plugins:\n  schedule: {}\n  loop: ~\n");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->plugins.loop);
  EXPECT_FALSE(empty->plugins.schedule);
}

TEST(Config, APatchTurnsOnePluginOnAndKeepsTheOthers) {
  dsh::testing::TempDir dir;
  Write(dir.File("dsh.yml"), "plugins:\n  loop: {enabled: false}\n  time_context: {enabled: true}\n");
  Write(dir.File("p.yml"), "plugins:\n  schedule: {enabled: true}\n  time_context: {enabled: false}\n");
  auto c = LoadConfig({{dir.File("dsh.yml"), true}, {dir.File("p.yml")}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->plugins.loop);          // kept from dsh.yml
  EXPECT_TRUE(c->plugins.sessions);       // the default
  EXPECT_TRUE(c->plugins.schedule);       // turned on by the patch
  EXPECT_FALSE(c->plugins.time_context);  // the patch wins
}

// The overlay of spec 001's README: `dsh web --patch examples/web-schedule/cordis.yml`.
TEST(Config, TheWebScheduleExampleTurnsOnScheduleAndTimeContext) {
  const char* env = std::getenv("DSH_SOURCE_DIR");  // set by CTest (cmake/dsh.cmake)
  std::filesystem::path root =
      env ? std::filesystem::path(env) : std::filesystem::path(DSH_SOURCE_DIR_FALLBACK);
  std::string example = (root / "examples/web-schedule/cordis.yml").string();
  ASSERT_TRUE(std::filesystem::exists(example)) << example;
  dsh::testing::TempDir dir;
  auto c = LoadConfig({{dir.File("dsh.yml"), true}, {example}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->plugins.schedule);
  EXPECT_TRUE(c->plugins.time_context);
  EXPECT_TRUE(c->plugins.loop);
  EXPECT_TRUE(c->plugins.sessions);
  // Nothing else changes: the rest is the default configuration.
  auto defaults = LoadConfig({{dir.File("dsh.yml"), true}});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(c->server.port, defaults->server.port);
  EXPECT_EQ(c->presets.size(), defaults->presets.size());
  EXPECT_EQ(c->model, defaults->model);
}

}  // namespace
}  // namespace dsh::host

namespace dsh::host {
namespace {

TEST(Config, McpServersAreReadWithTheirTransportAndTimeouts) {
  auto c = ParseConfigText("x.yml",
                           "mcp:\n  servers:\n"
                           "    fs:\n      command: [npx, -y, server-filesystem, /srv]\n"
                           "      env: {LOG_LEVEL: debug}\n      cwd: /srv\n      timeout: 5\n"
                           "    web:\n      url: http://127.0.0.1:9000/mcp\n"
                           "      headers: {Authorization: Bearer x}\n      start_timeout: 7\n"
                           "presets:\n  files: {tools: [mcp:fs, sessions]}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->mcp_servers.size(), 2u);
  const auto& fs = c->mcp_servers[0];
  EXPECT_EQ(fs.name, "fs");
  EXPECT_TRUE(fs.stdio());
  EXPECT_EQ(fs.command, (std::vector<std::string>{"npx", "-y", "server-filesystem", "/srv"}));
  EXPECT_EQ(fs.env.at("LOG_LEVEL"), "debug");
  EXPECT_EQ(fs.cwd, "/srv");
  EXPECT_EQ(fs.call_timeout, std::chrono::seconds(5));
  EXPECT_EQ(fs.start_timeout, std::chrono::seconds(30));  // the default
  const auto& web = c->mcp_servers[1];
  EXPECT_FALSE(web.stdio());
  EXPECT_EQ(web.url, "http://127.0.0.1:9000/mcp");
  EXPECT_EQ(web.headers.at("Authorization"), "Bearer x");
  EXPECT_EQ(web.call_timeout, std::chrono::seconds(60));
  EXPECT_EQ(web.start_timeout, std::chrono::seconds(7));
  EXPECT_EQ(c->FindPreset("files")->tool_groups, (std::vector<std::string>{"mcp:fs", "sessions"}));
}

TEST(Config, ABadMcpServerIsNamedWithWhatIsWrong) {
  struct Case {
    const char* yaml;
    const char* expected;
  } cases[] = {
      {"mcp:\n  servers:\n    Fs: {command: [a]}\n", "`mcp.servers.Fs` is not a valid MCP server name"},
      {"mcp:\n  servers:\n    fs: {command: []}\n", "`mcp.servers.fs.command` must be a list of strings"},
      {"mcp:\n  servers:\n    fs: {command: a}\n", "`mcp.servers.fs.command` must be a list of strings"},
      {"mcp:\n  servers:\n    fs: {}\n", "`mcp.servers.fs` needs either `command`"},
      {"mcp:\n  servers:\n    fs: {command: [a], url: http://h/mcp}\n", "`mcp.servers.fs` needs either `command`"},
      {"mcp:\n  servers:\n    fs: {url: ftp://h/mcp}\n", "`mcp.servers.fs.url` must be a URL"},
      {"mcp:\n  servers:\n    fs: {url: http://h/mcp, env: {A: b}}\n", "`env` and `cwd` are for `command` servers"},
      {"mcp:\n  servers:\n    fs: {command: [a], headers: {A: b}}\n", "`mcp.servers.fs.headers` is for `url` servers"},
      {"mcp:\n  servers:\n    fs: {command: [a], cwd: rel}\n", "`mcp.servers.fs.cwd` must be an absolute path"},
      {"mcp:\n  servers:\n    fs: {command: [a], timeout: 0}\n", "`mcp.servers.fs.timeout` must be an integer from 1"},
      {"mcp:\n  servers:\n    fs: {command: [a], tools: [x]}\n", "unknown key `mcp.servers.fs.tools`"},
      {"presets:\n  p: {tools: [\"mcp:\"]}\n", "`presets.p.tools[0]` must be a tool group name"},
      {"mcp:\n  servers:\n    fs:\n", "`mcp.servers.fs` needs either `command`"},
      {"mcp:\n  servers:\n    fs: {command: [\"\", x]}\n", "`mcp.servers.fs.command` must start with the program"},
      {"mcp:\n  servers:\n    fs: {command: [a]}\npresets:\n  p: {tools: [mcp:fz]}\n",
       "`presets.p.tools` names the MCP server `fz`, which `mcp.servers` does not declare (declared: fs)"},
      {"presets:\n  p: {tools: [mcp:fs]}\n",
       "`presets.p.tools` names the MCP server `fs`, which `mcp.servers` does not declare (declared: none)"},
      {"mcp:\n  servers:\n    a234567890123456789012345678901234567890: {command: [a]}\n",
       "`mcp.servers.a234567890123456789012345678901234567890` is a name of 40 characters: at most 32"},
  };
  for (const auto& c : cases) {
    auto r = ParseConfigText("x.yml", c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), "invalid_config");
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos) << c.yaml << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace dsh::host
