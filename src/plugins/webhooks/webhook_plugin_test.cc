#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "base/testing/temp_dir.h"
#include "host/config.h"
#include "plugins/webhooks/webhook_endpoints.h"
#include "plugins/webhooks/webhook_sender.h"

namespace dsh::webhooks {
namespace {

constexpr const char* kSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

Response Answer(int64_t status) {
  Response r;
  r.status = status;
  return r;
}

TEST(WebhookDecide, DeliversOn2xxRetriesWhatMayPassAndFailsTheRest) {
  EXPECT_EQ(Decide(Answer(200), 0, 0, 10, 86'400'000, 0.5).state, "delivered");
  EXPECT_EQ(Decide(Answer(204), 3, 0, 10, 86'400'000, 0.5).state, "delivered");
  for (int64_t status : {408, 429, 500, 502, 503}) {
    auto after = Decide(Answer(status), 0, 0, 10, 86'400'000, 0.0);
    EXPECT_EQ(after.state, "pending") << status;
    EXPECT_EQ(after.next_at, 10 + 500) << status;  // half of the first second at jitter 0
  }
  for (int64_t status : {301, 400, 401, 403, 404, 410, 422}) {
    EXPECT_EQ(Decide(Answer(status), 0, 0, 10, 86'400'000, 0.5).state, "failed") << status;
  }
  Response network;
  network.error = "Couldn't connect to server";
  EXPECT_EQ(Decide(network, 0, 0, 10, 86'400'000, 0.5).state, "pending");
  Response refused = network;
  refused.refused = true;
  EXPECT_EQ(Decide(refused, 0, 0, 10, 86'400'000, 0.5).state, "failed");
}

TEST(WebhookDecide, HonoursRetryAfterAndGivesUpOnceTheRetryPeriodIsOver) {
  Response busy = Answer(429);
  busy.retry_after_ms = 30'000;
  EXPECT_EQ(Decide(busy, 0, 0, 10, 86'400'000, 0.9).next_at, 30'010);
  busy.retry_after_ms = 86'400'000;  // capped at the backoff's cap
  EXPECT_EQ(Decide(busy, 0, 0, 10, 86'400'000, 0.9).next_at, 10 + 3'600'000);
  // A retry that would come after created_at + retry_for fails now.
  EXPECT_EQ(Decide(Answer(500), 10, 0, 86'399'000, 86'400'000, 0.5).state, "failed");
}

TEST(WebhookBackoff, DoublesFromOneSecondUpToAnHourWithJitter) {
  EXPECT_EQ(BackoffMs(1, 0.0), 500);
  EXPECT_EQ(BackoffMs(1, 0.999999), 999);
  EXPECT_EQ(BackoffMs(2, 0.0), 1000);
  EXPECT_EQ(BackoffMs(4, 0.0), 4000);
  EXPECT_EQ(BackoffMs(13, 0.0), 1'800'000);
  EXPECT_EQ(BackoffMs(40, 0.0), 1'800'000);
  EXPECT_LE(BackoffMs(40, 0.999999), 3'600'000);
}

TEST(WebhookEndpoints, UrlsAreShownWithoutTheirSecretParts) {
  EXPECT_EQ(RedactedUrl("https://hooks.slack.com/services/T000/B000/XXXX"), "https://hooks.slack.com/…");
  EXPECT_EQ(RedactedUrl("https://user:pw@ntfy.example:8080/topic?x=1"), "https://ntfy.example:8080/…");
  EXPECT_EQ(RedactedUrl("http://127.0.0.1:9000"), "http://127.0.0.1:9000");
}

host::Config::Webhook Hook(std::string name, std::string format, std::string secret = "") {
  host::Config::Webhook w;
  w.name = std::move(name);
  w.url = "https://hooks.example.net/x";
  w.format = std::move(format);
  w.events = {"loop.run.failed"};
  w.secret = std::move(secret);
  return w;
}

TEST(WebhookEndpoints, ConfigRulesNameTheFieldAtFault) {
  EXPECT_TRUE(host::CheckWebhook(Hook("ops", "standard", kSecret), "w").ok());
  EXPECT_TRUE(host::CheckWebhook(Hook("chat", "slack"), "w").ok());
  auto no_secret = host::CheckWebhook(Hook("ops", "standard"), "w");
  EXPECT_EQ(no_secret.code(), codes::kInvalidArguments);
  EXPECT_NE(no_secret.message().find("secret"), std::string::npos);
  auto w = Hook("ops", "slack");
  w.events = {"loop.run.finished"};
  EXPECT_NE(host::CheckWebhook(w, "w").message().find("loop.run.finished"), std::string::npos);
  w = Hook("ops", "teams");
  EXPECT_NE(host::CheckWebhook(w, "w").message().find("format"), std::string::npos);
  w = Hook("ops", "slack");
  w.url = "ftp://x";
  EXPECT_NE(host::CheckWebhook(w, "w").message().find("url"), std::string::npos);

  auto config = host::ParseConfigText("dsh.yml",
                                      "notifications:\n  webhooks:\n    - {name: a, url: 'https://x.example/', format: slack,"
                                      " events: ['*']}\n    - {name: a, url: 'https://y.example/', format: slack,"
                                      " events: ['*']}\n");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("unique"), std::string::npos);
}

TEST(WebhookEndpoints, SecretFilesMustBePrivate) {
  dsh::testing::TempDir dir;
  std::string path = dir.File("secret");
  std::ofstream(path) << kSecret << "\n";
  ::chmod(path.c_str(), 0644);
  host::Config config;
  auto w = Hook("ops", "standard");
  w.secret_file = path;
  config.notifications.webhooks = {w};
  auto open = DeclaredEndpoints(config);
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("chmod 600"), std::string::npos);
  ::chmod(path.c_str(), 0600);
  auto ok = DeclaredEndpoints(config);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].spec.secret, kSecret);  // the trailing newline is not part of it
}

TEST(WebhookEndpoints, SavedEndpointsPersistWithTheirSecretsApartAndDeclaredOnesAreReadOnly) {
  dsh::testing::TempDir home;
  agent::outbox::SubscriptionSource subs;
  {
    EndpointSet set(home.path(), {Endpoint{Hook("ops", "slack"), false}}, {}, subs);
    ASSERT_TRUE(subs.Get()->Wants("loop.run.failed"));
    EXPECT_EQ(set.Put(Hook("ops", "discord"), std::nullopt).code(), codes::kConflict);
    EXPECT_EQ(set.Delete("ops").code(), codes::kConflict);
    EXPECT_EQ(set.Put(Hook("mine", "standard"), std::nullopt).code(), codes::kInvalidArguments);  // no secret
    EXPECT_EQ(set.Put(Hook("mine", "standard"), std::optional<std::string>("whsec_short")).code(),
              codes::kInvalidArguments);
    auto mine = Hook("mine", "standard");
    mine.events = {"reminder.dispatched"};
    mine.url = "https://hooks.example.net/mine/t0ken";
    ASSERT_TRUE(set.Put(mine, std::optional<std::string>(kSecret)).ok());
    EXPECT_TRUE(subs.Get()->Wants("reminder.dispatched"));
    // Saved again without a secret: the saved one is kept.
    ASSERT_TRUE(set.Put(mine, std::nullopt).ok());
    EXPECT_EQ(set.Get()->at("mine").spec.secret, kSecret);
    // And without a URL: the saved one is kept (the API never shows it whole).
    auto without_url = mine;
    without_url.url.clear();
    ASSERT_TRUE(set.Put(without_url, std::nullopt).ok());
    EXPECT_EQ(set.Get()->at("mine").spec.url, mine.url);
    // A new endpoint needs one.
    auto other = Hook("other", "slack");
    other.url.clear();
    Status no_url = set.Put(other, std::nullopt);
    EXPECT_EQ(no_url.code(), codes::kInvalidArguments);
    EXPECT_NE(no_url.message().find("`url` is required"), std::string::npos) << no_url.message();
  }
  struct stat st {};
  ASSERT_EQ(::stat((home.path() / "webhook-secrets").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream yml(home.path() / "webhooks.yml");
  std::string text((std::istreambuf_iterator<char>(yml)), {});
  EXPECT_EQ(text.find("whsec_"), std::string::npos);
  auto saved = LoadSaved(home.path());
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  ASSERT_EQ(saved->size(), 1u);
  EXPECT_EQ((*saved)[0].spec.name, "mine");
  EXPECT_EQ((*saved)[0].spec.secret, kSecret);
  EXPECT_EQ((*saved)[0].spec.events, std::vector<std::string>{"reminder.dispatched"});
  EndpointSet again(home.path(), {}, std::move(*saved), subs);
  ASSERT_TRUE(again.Delete("mine").ok());
  EXPECT_EQ(subs.Get(), nullptr);
  EXPECT_EQ(again.Delete("mine").code(), codes::kNotFound);
  EXPECT_TRUE(LoadSaved(home.path())->empty());
}

}  // namespace
}  // namespace dsh::webhooks
