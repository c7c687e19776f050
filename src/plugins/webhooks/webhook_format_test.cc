#include "plugins/webhooks/webhook_format.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/strings.h"

namespace dsh::webhooks {
namespace {

// The Standard Webhooks reference libraries' test vector
// (standard-webhooks/standard-webhooks, libraries/python/tests/test_webhooks.py,
// test_sign_function; the same in the other languages' tests).
constexpr const char* kSpecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr const char* kSpecMessageId = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr int64_t kSpecTimestamp = 1614265330;
constexpr const char* kSpecPayload = R"({"test": 2432232314})";
constexpr const char* kSpecSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

constexpr int64_t kCreatedAtMs = 1796486400123;  // 2026-12-05T16:00:00.123Z
constexpr int64_t kNowMs = 1796486460999;        // a minute later

Target Standard() { return Target{"ops", "https://hooks.example.net/dsh", "standard", kSpecSecret, ""}; }

Target WithFormat(const std::string& format, const std::string& public_url = "https://dsh.example.net") {
  return Target{"t", "https://hooks.example.net/x", format, "", public_url};
}

Message RunFailed() {
  return Message{
      "msg_01", "loop.run.failed", kCreatedAtMs,
      Json{{"kind", "loop_run"},
           {"loop_id", "loop_01"},
           {"session_id", "ses_01"},
           {"seq", 17},
           {"outcome",
            {{"status", "error"}, {"error", {{"code", "model_unavailable"}, {"message", "no answer"}}}}},
           {"summary", "the model server did not answer"}}};
}

Message WithData(const std::string& event, Json data) {
  return Message{"msg_02", event, kCreatedAtMs, std::move(data)};
}

// The value of header `name`; nullopt when the request has none.
std::optional<std::string> HeaderOf(const Request& request, const std::string& name) {
  for (const auto& [key, value] : request.headers) {
    if (key == name) return value;
  }
  return std::nullopt;
}

Request RenderOk(const Target& target, const Message& message, int64_t now_ms = kNowMs) {
  Result<Request> request = Render(target, message, now_ms);
  EXPECT_TRUE(request.ok()) << request.status().ToString();
  return request.ok() ? *request : Request{};
}

Json BodyJson(const Request& request) {
  Result<Json> body = ParseJson(request.body);
  EXPECT_TRUE(body.ok()) << request.body;
  return body.ok() ? *body : Json();
}

// The text of RFC 2047 encoded-words, checking each is one well-formed
// "=?UTF-8?B?...?=" of at most 75 characters.
std::string DecodeEncodedWords(const std::string& value) {
  std::string out;
  size_t pos = 0;
  while (pos < value.size()) {
    size_t end = value.find(' ', pos);
    if (end == std::string::npos) end = value.size();
    const std::string word = value.substr(pos, end - pos);
    EXPECT_LE(word.size(), 75u) << word;
    EXPECT_EQ(word.rfind("=?UTF-8?B?", 0), 0u) << word;
    EXPECT_EQ(word.substr(word.size() - 2), "?=") << word;
    const std::string b64 = word.substr(10, word.size() - 12);
    std::string bytes(b64.size() / 4 * 3, '\0');
    const int n =
        EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                        reinterpret_cast<const unsigned char*>(b64.data()), static_cast<int>(b64.size()));
    EXPECT_GE(n, 0) << word;
    const size_t padding = b64.size() - b64.find_last_not_of('=') - 1;
    out += bytes.substr(0, static_cast<size_t>(n) - padding);
    pos = end + 1;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Secrets and signatures.

TEST(StandardSignature, MatchesTheSpecsPublishedTestVector) {
  Result<std::string> key = SecretKey(kSpecSecret);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->size(), 24u);
  EXPECT_EQ(StandardSignature(*key, kSpecMessageId, kSpecTimestamp, kSpecPayload), kSpecSignature);
}

TEST(StandardSignature, ChangesWithEverySignedPart) {
  const std::string key = *SecretKey(kSpecSecret);
  EXPECT_NE(StandardSignature(key, "msg_other", kSpecTimestamp, kSpecPayload), kSpecSignature);
  EXPECT_NE(StandardSignature(key, kSpecMessageId, kSpecTimestamp + 1, kSpecPayload), kSpecSignature);
  EXPECT_NE(StandardSignature(key, kSpecMessageId, kSpecTimestamp, R"({"test": 2432232315})"),
            kSpecSignature);
}

TEST(SecretKey, AcceptsPaddedAndUnpaddedKeysOf24To64Bytes) {
  // base64 of the bytes 0, 1, 2, ...: 24, 25 (one "=" of padding dropped or
  // kept), 32 (as `openssl rand -base64 32` makes) and 64 bytes.
  struct Case {
    const char* secret;
    size_t bytes;
  };
  const Case kCases[] = {
      {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX", 24},
      {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGA==", 25},
      {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGA", 25},
      {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", 32},
      {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw==", 64},
  };
  for (const Case& c : kCases) {
    Result<std::string> key = SecretKey(c.secret);
    ASSERT_TRUE(key.ok()) << c.secret << ": " << key.status().ToString();
    ASSERT_EQ(key->size(), c.bytes) << c.secret;
    for (size_t i = 0; i < c.bytes; ++i)
      EXPECT_EQ(size_t{static_cast<unsigned char>((*key)[i])}, i) << c.secret;
  }
}

TEST(SecretKey, RejectsBadSecretsWithClearMessagesThatDoNotQuoteThem) {
  struct Case {
    const char* secret;
    const char* says;
  };
  const Case kCases[] = {
      {"", "is empty"},
      {"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "does not start with `whsec_`"},
      {"WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "does not start with `whsec_`"},
      {"whsec_", "not valid base64"},
      {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa-w", "not valid base64"},     // URL-safe alphabet
      {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", "not valid base64"},   // a newline from a file
      {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwA", "not valid base64"},    // 4n+1 digits
      {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGA=", "not valid base64"},  // wrong padding
      {"whsec_MfKQ9r8GKYqr=TwjUPD8ILPZIo2LaLaSw", "not valid base64"},    // padding inside
      {"whsec_AAECAwQFBgcICQoLDA0ODw==", "key is 16 bytes"},
      {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRY=", "key is 23 bytes"},
      {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0A=",
       "key is 65 bytes"},
  };
  for (const Case& c : kCases) {
    Result<std::string> key = SecretKey(c.secret);
    ASSERT_FALSE(key.ok()) << c.secret;
    EXPECT_EQ(key.status().code(), codes::kInvalidConfig);
    const std::string& message = key.status().message();
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
    EXPECT_NE(message.find("24 to 64"), std::string::npos) << message;
    const std::string secret = c.secret;
    const std::string key_text = secret.substr(std::min<size_t>(6, secret.size()));
    if (key_text.size() > 4) {
      EXPECT_EQ(message.find(key_text), std::string::npos) << message;
    }
  }
}

// ---------------------------------------------------------------------------
// Links and the standard payload.

TEST(Link, PointsAtTheSessionAndTurnUnderThePublicUrl) {
  EXPECT_EQ(Link(WithFormat("slack"), RunFailed().data), "https://dsh.example.net/#/s/ses_01/17");
  EXPECT_EQ(Link(WithFormat("slack"), Json{{"session_id", "ses_01"}}), "https://dsh.example.net/#/s/ses_01");
  EXPECT_EQ(Link(WithFormat("slack", "https://dsh.example.net/"), Json{{"session_id", "ses_01"}}),
            "https://dsh.example.net/#/s/ses_01");
}

TEST(Link, IsEmptyWithoutPublicUrlOrSession) {
  EXPECT_EQ(Link(WithFormat("slack", ""), RunFailed().data), "");
  EXPECT_EQ(Link(WithFormat("slack"), Json{{"loop_id", "loop_01"}, {"seq", 3}}), "");
  EXPECT_EQ(Link(WithFormat("slack"), Json{{"session_id", ""}}), "");
  EXPECT_EQ(Link(WithFormat("slack"), Json()), "");
}

TEST(StandardPayload, HasTypeMillisecondTimestampAndDataWithUrl) {
  Target target = Standard();
  target.public_url = "https://dsh.example.net";
  const Message message = RunFailed();
  Json expected_data = message.data;
  expected_data["url"] = "https://dsh.example.net/#/s/ses_01/17";
  EXPECT_EQ(StandardPayload(message, target), (Json{{"type", "loop.run.failed"},
                                                    {"timestamp", "2026-12-05T16:00:00.123Z"},
                                                    {"data", expected_data}}));
}

TEST(StandardPayload, HasNoUrlWithoutPublicUrl) {
  const Json payload = StandardPayload(RunFailed(), Standard());
  EXPECT_EQ(payload["data"], RunFailed().data);
  EXPECT_FALSE(payload["data"].contains("url"));
}

// ---------------------------------------------------------------------------
// standard.

TEST(RenderStandard, SignsTheCompactPayloadWithTheStandardWebhooksHeaders) {
  const Request request = RenderOk(Standard(), RunFailed());
  EXPECT_EQ(request.content_type, "application/json");
  EXPECT_EQ(request.body, DumpJson(StandardPayload(RunFailed(), Standard())));
  EXPECT_EQ(request.body.find('\n'), std::string::npos);
  EXPECT_EQ(request.body.find(": "), std::string::npos) << "not compact: " << request.body;
  EXPECT_EQ(HeaderOf(request, "webhook-id"), "msg_01");
  EXPECT_EQ(HeaderOf(request, "webhook-timestamp"), "1796486460");
  EXPECT_EQ(HeaderOf(request, "webhook-signature"),
            StandardSignature(*SecretKey(kSpecSecret), "msg_01", 1796486460, request.body));
}

TEST(RenderStandard, RetriesKeepIdAndBodyAndSignAnew) {
  const Request first = RenderOk(Standard(), RunFailed(), kNowMs);
  const Request retry = RenderOk(Standard(), RunFailed(), kNowMs + 90'000);
  EXPECT_EQ(retry.body, first.body);
  EXPECT_EQ(HeaderOf(retry, "webhook-id"), HeaderOf(first, "webhook-id"));
  EXPECT_EQ(HeaderOf(retry, "webhook-timestamp"), "1796486550");
  EXPECT_NE(HeaderOf(retry, "webhook-signature"), HeaderOf(first, "webhook-signature"));
  EXPECT_EQ(HeaderOf(retry, "webhook-signature"),
            StandardSignature(*SecretKey(kSpecSecret), "msg_01", 1796486550, retry.body));
}

TEST(RenderStandard, NeedsAValidSecret) {
  Target target = Standard();
  target.secret = "";
  Result<Request> request = Render(target, RunFailed(), kNowMs);
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().code(), codes::kInvalidConfig);
  EXPECT_NE(request.status().message().find("needs a secret"), std::string::npos)
      << request.status().message();

  target.secret = "whsec_AAECAwQFBgcICQoLDA0ODw==";
  request = Render(target, RunFailed(), kNowMs);
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().code(), codes::kInvalidConfig);
  EXPECT_NE(request.status().message().find("webhook ops"), std::string::npos) << request.status().message();
}

TEST(Render, RefusesAnUnknownFormat) {
  Result<Request> request = Render(WithFormat("teams"), RunFailed(), kNowMs);
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(request.status().code(), codes::kInvalidConfig);
  EXPECT_NE(request.status().message().find("teams"), std::string::npos) << request.status().message();
}

// ---------------------------------------------------------------------------
// The human-readable formats.

TEST(Headline, SaysWhatHappened) {
  EXPECT_EQ(Headline(WithData("loop.run.completed", {{"outcome", {{"status", "completed"}}}})),
            "Loop run completed");
  EXPECT_EQ(Headline(WithData("loop.run.completed", {{"outcome", {{"status", "cancelled"}}}})),
            "Loop run cancelled");
  EXPECT_EQ(Headline(RunFailed()), "Loop run failed: model_unavailable");
  EXPECT_EQ(Headline(WithData("loop.run.failed", {{"outcome", {{"status", "none"}}}})), "Loop run failed");
  EXPECT_EQ(Headline(WithData("reminder.dispatched", {{"outcome", {{"status", "pending"}}}})),
            "Reminder fired");
  EXPECT_EQ(Headline(WithData("reminder.dispatched",
                              {{"outcome", {{"status", "none"}, {"error", {{"code", "not_found"}}}}}})),
            "Reminder failed: not_found");
  EXPECT_EQ(Headline(WithData("activity.created", {{"kind", "loop_run"}})), "New activity: loop run");
  EXPECT_EQ(Headline(WithData("activity.created", {{"kind", "reminder"}})), "New activity: reminder");
  EXPECT_EQ(Headline(WithData("activity.created", {{"kind", "agent_message"}})),
            "New activity: message from another agent");
  EXPECT_EQ(Headline(WithData("approval.requested", {{"tool", "bash"}})), "Approval needed: bash");
  EXPECT_EQ(Headline(WithData("webhook.test", {{"endpoint", "ops"}, {"message", "hello"}})),
            "Test notification from dsh");
  EXPECT_EQ(Headline(WithData("something.new", Json::object())), "something.new");
}

TEST(RenderSlack, SendsEscapedTextWithAnOpenInDshLink) {
  Message message = RunFailed();
  message.data["summary"] = "if a < b && b > c see <https://evil.example|here>";
  const Request request = RenderOk(WithFormat("slack"), message);
  EXPECT_EQ(request.content_type, "application/json");
  EXPECT_TRUE(request.headers.empty());
  EXPECT_EQ(BodyJson(request),
            (Json{{"text",
                   "Loop run failed: model_unavailable\n"
                   "if a &lt; b &amp;&amp; b &gt; c see &lt;https://evil.example|here&gt;\n"
                   "<https://dsh.example.net/#/s/ses_01/17|Open in dsh>"}}));
}

TEST(RenderSlack, FallsBackToTheErrorMessageAndLeavesTheLinkOutWithoutPublicUrl) {
  Message message = RunFailed();
  message.data.erase("summary");
  const Request request = RenderOk(WithFormat("slack", ""), message);
  EXPECT_EQ(BodyJson(request), (Json{{"text", "Loop run failed: model_unavailable\nno answer"}}));
}

TEST(RenderDiscord, SendsContentWithAPlainLinkAndNoMentions) {
  Message message = RunFailed();
  message.data["summary"] = "@everyone the model server did not answer";
  const Request request = RenderOk(WithFormat("discord"), message);
  EXPECT_EQ(request.content_type, "application/json");
  EXPECT_EQ(BodyJson(request), (Json{{"content",
                                      "Loop run failed: model_unavailable\n"
                                      "@everyone the model server did not answer\n"
                                      "https://dsh.example.net/#/s/ses_01/17"},
                                     {"allowed_mentions", {{"parse", Json::array()}}}}));
}

TEST(RenderDiscord, CutsTheSummarySoContentFitsIn2000CharactersAndKeepsTheLink) {
  Message message = RunFailed();
  std::string summary;
  for (int i = 0; i < 1500; ++i) summary += "é😀";  // 2 and 4 bytes: 1 and 2 UTF-16 units
  message.data["summary"] = summary;
  const Json body = BodyJson(RenderOk(WithFormat("discord"), message));
  const std::string content = body["content"].get<std::string>();
  EXPECT_LE(Utf16Length(content), 2000u);
  EXPECT_GE(Utf16Length(content), 1990u);  // cut, not dropped
  EXPECT_EQ(content.rfind("Loop run failed: model_unavailable\né😀", 0), 0u);
  const std::string tail = "…\nhttps://dsh.example.net/#/s/ses_01/17";
  ASSERT_GE(content.size(), tail.size());
  EXPECT_EQ(content.substr(content.size() - tail.size()), tail);
  EXPECT_EQ(content.find("\xEF\xBF\xBD"), std::string::npos) << "a character was cut";
}

TEST(Render, ReplacesInvalidUtf8FromTheDataInEveryFormat) {
  Message message = RunFailed();
  message.data["summary"] = "bad \xFF byte";
  const std::string replaced = "bad \xEF\xBF\xBD byte";
  EXPECT_EQ(RenderOk(WithFormat("ntfy"), message).body, replaced);
  EXPECT_NE(BodyJson(RenderOk(WithFormat("discord"), message))["content"].get<std::string>().find(replaced),
            std::string::npos);
  EXPECT_NE(BodyJson(RenderOk(WithFormat("slack"), message))["text"].get<std::string>().find(replaced),
            std::string::npos);
}

TEST(RenderNtfy, SendsTheSummaryWithTitleTagsPriorityClickAndToken) {
  Target target = WithFormat("ntfy");
  target.secret = "tk_abc123";
  const Request request = RenderOk(target, RunFailed());
  EXPECT_EQ(request.content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(request.body, "the model server did not answer");
  EXPECT_EQ(request.headers, (std::vector<std::pair<std::string, std::string>>{
                                 {"Title", "Loop run failed: model_unavailable"},
                                 {"Tags", "warning"},
                                 {"Priority", "high"},
                                 {"Click", "https://dsh.example.net/#/s/ses_01/17"},
                                 {"Authorization", "Bearer tk_abc123"},
                             }));
}

TEST(RenderNtfy, LeavesOutDefaultPriorityClickWithoutLinkAndTokenWithoutSecret) {
  const Request request = RenderOk(WithFormat("ntfy", ""),
                                   WithData("loop.run.completed", {{"session_id", "ses_01"}, {"seq", 4}}));
  EXPECT_EQ(request.body, "Loop run completed.");
  EXPECT_EQ(request.headers, (std::vector<std::pair<std::string, std::string>>{
                                 {"Title", "Loop run completed"},
                                 {"Tags", "white_check_mark"},
                             }));
}

TEST(RenderNtfy, TagsEachEvent) {
  const std::pair<const char*, const char*> kTags[] = {
      {"loop.run.completed", "white_check_mark"},
      {"loop.run.failed", "warning"},
      {"reminder.dispatched", "alarm_clock"},
      {"activity.created", "bell"},
      {"approval.requested", "lock"},
      {"webhook.test", "test_tube"},
  };
  for (const auto& [event, tag] : kTags) {
    EXPECT_EQ(HeaderOf(RenderOk(WithFormat("ntfy"), WithData(event, Json::object())), "Tags"), tag) << event;
  }
  EXPECT_EQ(
      HeaderOf(RenderOk(WithFormat("ntfy"), WithData("approval.requested", {{"tool", "bash"}})), "Priority"),
      "high");
}

TEST(RenderNtfy, EncodesNonAsciiHeaderValuesPerRfc2047) {
  const Request request = RenderOk(WithFormat("ntfy"), WithData("approval.requested", {{"tool", "café"}}));
  EXPECT_EQ(HeaderOf(request, "Title"), "=?UTF-8?B?QXBwcm92YWwgbmVlZGVkOiBjYWbDqQ==?=");

  // A long title becomes several encoded-words, none cutting a character.
  std::string tool;
  for (int i = 0; i < 40; ++i) tool += "ツール";
  const Request long_title = RenderOk(WithFormat("ntfy"), WithData("approval.requested", {{"tool", tool}}));
  const std::string title = *HeaderOf(long_title, "Title");
  EXPECT_GT(title.size(), 75u);
  EXPECT_EQ(DecodeEncodedWords(title), "Approval needed: " + tool);
}

TEST(RenderNtfy, HeaderValuesCannotCarryLineBreaks) {
  const Request request =
      RenderOk(WithFormat("ntfy"), WithData("approval.requested", {{"tool", "bash\r\nPriority: min"}}));
  for (const auto& [name, value] : request.headers) {
    EXPECT_EQ(value.find_first_of("\r\n"), std::string::npos) << name << ": " << value;
  }
  EXPECT_EQ(HeaderOf(request, "Title"), "Approval needed: bash  Priority: min");
}

TEST(RenderNtfy, TestNotificationSendsItsMessage) {
  const Request request = RenderOk(
      WithFormat("ntfy"), WithData("webhook.test", {{"endpoint", "phone"}, {"message", "It works."}}));
  EXPECT_EQ(request.body, "It works.");
  EXPECT_EQ(HeaderOf(request, "Title"), "Test notification from dsh");
}

}  // namespace
}  // namespace dsh::webhooks
