#include "plugins/webhooks/webhook_format.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/strings.h"
#include "time/rfc3339.h"

namespace dsh::webhooks {
namespace {

constexpr std::string_view kSecretPrefix = "whsec_";
constexpr size_t kMinKeyBytes = 24;
constexpr size_t kMaxKeyBytes = 64;
// Discord refuses a longer content (its API's limit).
constexpr size_t kDiscordMaxChars = 2000;
// RFC 2047 §2: an encoded-word is at most 75 characters; "=?UTF-8?B?" and
// "?=" leave 63 for base64, 60 of them whole quanta: 45 bytes of text.
constexpr size_t kEncodedWordBytes = 45;

Status InvalidConfig(std::string message) { return Status(codes::kInvalidConfig, std::move(message)); }

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');  // EVP_EncodeBlock adds a NUL
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

// Standard-alphabet base64, with or without its padding; nullopt when it is
// not that. EVP_DecodeBlock wants whole quanta and counts padding as zero
// bytes, so the padding is completed before and its bytes dropped after.
std::optional<std::string> DecodeBase64(std::string_view text) {
  size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
  const std::string_view digits = text.substr(0, text.size() - padding);
  if (digits.empty() || digits.size() % 4 == 1) return std::nullopt;
  for (char c : digits) {
    if (!IsBase64Char(c)) return std::nullopt;
  }
  const size_t missing = (4 - digits.size() % 4) % 4;
  if (padding != 0 && padding != missing) return std::nullopt;
  const std::string padded = std::string(digits) + std::string(missing, '=');
  std::string out(padded.size() / 4 * 3, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(padded.data()), static_cast<int>(padded.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<size_t>(n) - missing);
  return out;
}

// ---------------------------------------------------------------------------
// Reading the data object without exceptions: producers leave members out
// when unknown.

// Valid UTF-8: what a receiver will see once the JSON body replaced bad
// bytes, and what the character counts and cuts below assume.
std::string ValidUtf8(const std::string& text) {
  Result<Json> round_trip = ParseJson(DumpJson(Json(text)));
  return round_trip.ok() && round_trip->is_string() ? round_trip->get<std::string>() : "";
}

std::string StringAt(const Json& object, std::string_view key) {
  const std::string* value = StringMember(object, key);
  return value != nullptr ? ValidUtf8(*value) : "";
}

const Json& ObjectAt(const Json& object, std::string_view key) {
  static const Json kEmpty = Json::object();
  if (!object.is_object()) return kEmpty;
  const auto it = object.find(key);
  return it != object.end() && it->is_object() ? *it : kEmpty;
}

const Json& OutcomeError(const Json& data) { return ObjectAt(ObjectAt(data, "outcome"), "error"); }

std::string OutcomeStatus(const Json& data) { return StringAt(ObjectAt(data, "outcome"), "status"); }

// "Loop run failed" + ": CODE" when there is a code (or a tool's name).
std::string WithDetail(const std::string& headline, const std::string& detail) {
  return detail.empty() ? headline : headline + ": " + detail;
}

std::string ActivityKind(const std::string& kind) {
  if (kind == "loop_run") return "loop run";
  if (kind == "agent_message") return "message from another agent";
  std::string words = kind;  // "reminder", and kinds added later
  for (char& c : words) {
    if (c == '_') c = ' ';
  }
  return words;
}

std::string SummaryLine(const Message& message) {
  const Json& data = message.data;
  if (std::string summary = StringAt(data, "summary"); !summary.empty()) return summary;
  if (std::string error = StringAt(OutcomeError(data), "message"); !error.empty()) return error;
  return message.event == "webhook.test" ? StringAt(data, "message") : "";
}

// ---------------------------------------------------------------------------
// Slack and Discord.

// Slack's control characters in text (api.slack.com, "Escaping text").
std::string SlackEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A URL inside <URL|text>: the characters that would end it are
// percent-encoded.
std::string SlackUrl(std::string_view url) {
  std::string out;
  for (char c : url) {
    if (c == '|') {
      out += "%7C";
    } else if (c == '<') {
      out += "%3C";
    } else if (c == '>') {
      out += "%3E";
    } else {
      out += c;
    }
  }
  return out;
}

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) {
    if (line.empty()) continue;
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

// The longest prefix of UTF-8 `s` of at most `max` UTF-16 code units that
// does not end inside a character.
std::string_view Utf16Prefix(std::string_view s, size_t max) {
  size_t units = 0;
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    const size_t bytes = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const size_t cost = bytes == 4 ? 2 : 1;
    if (units + cost > max) break;
    units += cost;
    i = std::min(s.size(), i + bytes);
  }
  return s.substr(0, i);
}

std::string Ellipsized(std::string_view s, size_t max) {
  if (Utf16Length(s) <= max) return std::string(s);
  if (max == 0) return "";
  return std::string(Utf16Prefix(s, max - 1)) + "\xE2\x80\xA6";  // "…"
}

// The summary gives way first, so the headline and the link survive.
std::string DiscordContent(const std::string& headline, const std::string& summary, const std::string& link) {
  const size_t fixed = Utf16Length(headline) + Utf16Length(link) + 2;  // two newlines
  const size_t room = fixed < kDiscordMaxChars ? kDiscordMaxChars - fixed : 0;
  return Ellipsized(JoinLines({headline, Ellipsized(summary, room), link}), kDiscordMaxChars);
}

// ---------------------------------------------------------------------------
// ntfy.

bool IsAscii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// RFC 2047 encoded-words of at most 75 characters, none splitting a
// character, separated by spaces (which decoders drop between words).
std::string EncodedWords(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    std::string_view word = Utf8Prefix(text, kEncodedWordBytes);
    if (word.empty()) word = text.substr(0, kEncodedWordBytes);  // not UTF-8: cut anywhere rather than loop
    if (!out.empty()) out += ' ';
    out += "=?UTF-8?B?" + Base64(word) + "?=";
    text.remove_prefix(word.size());
  }
  return out;
}

// A header value cannot carry a line break (it would start a header of
// the summary's choosing) nor, for most servers, anything but ASCII.
std::string HeaderValue(std::string_view value) {
  std::string clean(value);
  for (char& c : clean) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
  }
  return IsAscii(clean) ? clean : EncodedWords(clean);
}

std::string NtfyTag(const std::string& event) {
  if (event == "loop.run.completed") return "white_check_mark";
  if (event == "loop.run.failed") return "warning";
  if (event == "reminder.dispatched") return "alarm_clock";
  if (event == "activity.created") return "bell";
  if (event == "approval.requested") return "lock";
  if (event == "webhook.test") return "test_tube";
  return "";
}

Request RenderNtfy(const Target& target, const Message& message) {
  const std::string headline = Headline(message);
  std::string body = SummaryLine(message);
  if (body.empty()) body = headline + ".";
  Request request{"text/plain; charset=utf-8", {{"Title", HeaderValue(headline)}}, std::move(body)};
  if (std::string tag = NtfyTag(message.event); !tag.empty()) request.headers.emplace_back("Tags", tag);
  if (message.event == "loop.run.failed" || message.event == "approval.requested") {
    request.headers.emplace_back("Priority", "high");
  }
  if (std::string link = Link(target, message.data); !link.empty()) {
    request.headers.emplace_back("Click", HeaderValue(link));
  }
  if (!target.secret.empty()) {
    request.headers.emplace_back("Authorization", HeaderValue("Bearer " + target.secret));
  }
  return request;
}

Request RenderSlack(const Target& target, const Message& message) {
  const std::string link = Link(target, message.data);
  const std::string text = JoinLines({SlackEscape(Headline(message)), SlackEscape(SummaryLine(message)),
                                      link.empty() ? "" : "<" + SlackUrl(link) + "|Open in dsh>"});
  return Request{"application/json", {}, DumpJson(Json{{"text", text}})};
}

Request RenderDiscord(const Target& target, const Message& message) {
  const std::string content =
      DiscordContent(Headline(message), SummaryLine(message), Link(target, message.data));
  const Json body{{"content", content}, {"allowed_mentions", {{"parse", Json::array()}}}};
  return Request{"application/json", {}, DumpJson(body)};
}

Result<Request> RenderStandard(const Target& target, const Message& message, int64_t now_ms) {
  if (target.secret.empty()) {
    return InvalidConfig(
        "webhook " + target.name +
        ": a `standard` endpoint needs a secret (`secret` or `secret_file`) to sign its requests");
  }
  Result<std::string> key = SecretKey(target.secret);
  if (!key.ok()) return key.status().WithContext("webhook " + target.name);
  std::string body = DumpJson(StandardPayload(message, target));
  // Floor, not truncation: a clock before 1970 still names its second.
  const int64_t seconds = now_ms / 1000 - (now_ms % 1000 < 0 ? 1 : 0);
  std::string signature = StandardSignature(*key, message.id, seconds, body);
  return Request{"application/json",
                 {{"webhook-id", message.id},
                  {"webhook-timestamp", std::to_string(seconds)},
                  {"webhook-signature", std::move(signature)}},
                 std::move(body)};
}

}  // namespace

Result<std::string> SecretKey(std::string_view secret) {
  const std::string how =
      ": it must be `whsec_` followed by the base64 of 24 to 64 random bytes (make one with "
      "`echo whsec_$(openssl rand -base64 32)`)";
  if (secret.empty()) return InvalidConfig("the webhook secret is empty" + how);
  if (secret.substr(0, kSecretPrefix.size()) != kSecretPrefix) {
    return InvalidConfig("the webhook secret does not start with `whsec_`" + how);
  }
  std::optional<std::string> key = DecodeBase64(secret.substr(kSecretPrefix.size()));
  if (!key) return InvalidConfig("the webhook secret is not valid base64 after `whsec_`" + how);
  if (key->size() < kMinKeyBytes || key->size() > kMaxKeyBytes) {
    return InvalidConfig("the webhook secret's key is " + std::to_string(key->size()) + " bytes" + how);
  }
  return *std::move(key);
}

std::string StandardSignature(std::string_view key, std::string_view id, int64_t timestamp_seconds,
                              std::string_view body) {
  std::string signed_content;
  signed_content.reserve(id.size() + body.size() + 24);
  signed_content.append(id).append(".").append(std::to_string(timestamp_seconds)).append(".").append(body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(signed_content.data()), signed_content.size(), mac, &mac_size);
  return "v1," + Base64(std::string_view(reinterpret_cast<const char*>(mac), mac_size));
}

std::string Link(const Target& target, const Json& data) {
  std::string base = target.public_url;
  while (!base.empty() && base.back() == '/') base.pop_back();  // tolerated, though the caller strips it
  const std::string session = StringAt(data, "session_id");
  if (base.empty() || session.empty()) return "";
  std::string link = base + "/#/s/" + session;
  if (const auto seq = data.find("seq"); seq != data.end() && seq->is_number_integer()) {
    link += "/" + std::to_string(seq->get<int64_t>());
  }
  return link;
}

Json StandardPayload(const Message& message, const Target& target) {
  Json data = message.data.is_null() ? Json::object() : message.data;
  if (data.is_object()) {
    if (std::string link = Link(target, data); !link.empty()) data["url"] = std::move(link);
  }
  return Json{{"type", message.event},
              {"timestamp", FormatRfc3339Utc(FromUnixMillis(message.created_at_ms))},
              {"data", std::move(data)}};
}

std::string Headline(const Message& message) {
  const std::string& event = message.event;
  const Json& data = message.data;
  if (event == "loop.run.completed") {
    return OutcomeStatus(data) == "cancelled" ? "Loop run cancelled" : "Loop run completed";
  }
  if (event == "loop.run.failed") return WithDetail("Loop run failed", StringAt(OutcomeError(data), "code"));
  if (event == "reminder.dispatched") {
    return OutcomeStatus(data) == "none" ? WithDetail("Reminder failed", StringAt(OutcomeError(data), "code"))
                                         : "Reminder fired";
  }
  if (event == "activity.created") {
    const std::string kind = StringAt(data, "kind");
    return kind.empty() ? "New activity" : "New activity: " + ActivityKind(kind);
  }
  if (event == "approval.requested") return WithDetail("Approval needed", StringAt(data, "tool"));
  if (event == "webhook.test") return "Test notification from dsh";
  return event;
}

Result<Request> Render(const Target& target, const Message& message, int64_t now_ms) {
  if (target.format == "standard") return RenderStandard(target, message, now_ms);
  if (target.format == "slack") return RenderSlack(target, message);
  if (target.format == "discord") return RenderDiscord(target, message);
  if (target.format == "ntfy") return RenderNtfy(target, message);
  return InvalidConfig("webhook " + target.name + ": unknown format \"" + target.format +
                       "\" (standard, slack, discord or ntfy)");
}

}  // namespace dsh::webhooks
