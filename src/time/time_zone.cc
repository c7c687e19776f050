#include "time/time_zone.h"

#include <date/tz.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "time/civil.h"
#include "time/errors.h"
#include "time/zone_rules.h"

namespace dsh {
namespace time_internal {

struct ZoneData {
  std::string name;
  const date::time_zone* date_zone;
  ZoneRules rules;
};

}  // namespace time_internal

namespace {

using time_internal::ZoneData;
using time_internal::ZoneRules;

// date/tz reads the OS database from here when built with USE_OS_TZDB.
constexpr std::string_view kTzDir = "/usr/share/zoneinfo";
constexpr int kMaxLinkHops = 8;

Status BadZone(std::string_view input, std::string_view why) {
  std::string message = "time zone \"" + std::string(input) + "\" ";
  message += why;
  return Status(codes::kInvalidTimeZone, std::move(message));
}

// A name that can only be an abbreviation or an offset gets a pointed hint.
Status RejectShape(std::string_view name) {
  if (name.empty()) return Status(codes::kInvalidTimeZone, "time zone is empty: use UTC or an IANA name such as America/New_York");
  const bool has_digit = std::any_of(name.begin(), name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  const bool has_sign = name.find_first_of("+-") != std::string_view::npos;
  if (has_digit && (has_sign || name.find(':') != std::string_view::npos)) {
    return BadZone(name, "is a fixed UTC offset, not a time zone: use an IANA name such as Asia/Shanghai");
  }
  const bool all_upper = std::all_of(name.begin(), name.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)); });
  if (all_upper && name.size() >= 2 && name.size() <= 5) {
    return BadZone(name, "is an abbreviation, which is ambiguous: use an IANA name such as America/Chicago");
  }
  return BadZone(name, "is not a time zone: use UTC or an IANA Area/Location name such as Europe/London");
}

bool IsAreaLocationShape(std::string_view name) {
  if (name.size() > 128 || name.find('/') == std::string_view::npos) return false;
  if (name.front() == '/' || name.back() == '/' || name.find("//") != std::string_view::npos) return false;
  if (name.find("..") != std::string_view::npos || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '_' || c == '-' || c == '+';
  });
}

// "L target link" lines of tzdata.zi: link name -> target.
std::map<std::string, std::string, std::less<>> ReadLinks() {
  std::map<std::string, std::string, std::less<>> links;
  std::ifstream in(std::string(kTzDir) + "/tzdata.zi");
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 2 || line[0] != 'L' || line[1] != ' ') continue;
    size_t sp = line.find(' ', 2);
    if (sp == std::string::npos) continue;
    links.emplace(line.substr(sp + 1), line.substr(2, sp - 2));
  }
  return links;
}

class Registry {
 public:
  static Registry& Get() {
    static auto* registry = new Registry();  // intentionally leaked: zones outlive every user
    return *registry;
  }

  const ZoneData* Utc() {
    std::call_once(utc_once_, [this] {
      const date::time_zone* tz = nullptr;
      try {
        tz = date::locate_zone("Etc/UTC");
      } catch (const std::exception&) {
        tz = nullptr;  // no tzdata: UTC still works, it has no rules to read
      }
      utc_ = new ZoneData{"UTC", tz, ZoneRules::Fixed(0)};
    });
    return utc_;
  }

  Result<const ZoneData*> Resolve(std::string_view input) {
    std::lock_guard lock(mu_);
    if (auto it = by_input_.find(std::string(input)); it != by_input_.end()) return it->second;
    DSH_ASSIGN_OR_RETURN(const ZoneData* zone, ResolveLocked(input));
    if (by_input_.size() < 4096) by_input_.emplace(std::string(input), zone);
    return zone;
  }

 private:
  Result<const ZoneData*> ResolveLocked(std::string_view input) {
    if (input != "UTC" && !IsAreaLocationShape(input)) return RejectShape(input);
    std::call_once(links_once_, [this] { links_ = ReadLinks(); });
    std::string name(input);
    for (int hop = 0; hop < kMaxLinkHops; ++hop) {
      auto it = links_.find(name);
      if (it == links_.end()) break;
      name = it->second;
    }
    if (name == "UTC" || name == "Etc/UTC") return Utc();
    if (name.rfind("Etc/", 0) == 0) {
      return BadZone(input, "is a fixed-offset zone: use UTC or an IANA Area/Location name such as Asia/Tokyo");
    }
    if (input != "UTC" && !IsAreaLocationShape(name)) return RejectShape(input);
    if (auto it = zones_.find(name); it != zones_.end()) return it->second.get();

    const date::time_zone* tz = nullptr;
    try {
      tz = date::locate_zone(name);
    } catch (const std::runtime_error&) {
      return BadZone(input, "is not in the time zone database: use UTC or an IANA name such as America/New_York");
    } catch (const std::exception& e) {
      return Status(codes::kInvalidTimeZone, "time zone database unavailable: " + std::string(e.what()));
    }
    DSH_ASSIGN_OR_RETURN(ZoneRules rules, ZoneRules::Compile(*tz, kTzDir));
    auto data = std::make_unique<ZoneData>(ZoneData{name, tz, std::move(rules)});
    const ZoneData* result = data.get();
    zones_.emplace(name, std::move(data));
    return result;
  }

  std::once_flag utc_once_;
  const ZoneData* utc_ = nullptr;
  std::once_flag links_once_;
  std::map<std::string, std::string, std::less<>> links_;  // written once under links_once_

  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<ZoneData>> zones_;  // GUARDED_BY(mu_)
  std::unordered_map<std::string, const ZoneData*> by_input_;        // GUARDED_BY(mu_)
};

std::optional<TimeZone> TryName(std::string_view name) {
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.remove_suffix(1);
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.front()))) name.remove_prefix(1);
  if (!name.empty() && name.front() == ':') name.remove_prefix(1);
  // "/usr/share/zoneinfo/Europe/Paris" (a TZ path or a link target).
  if (size_t at = name.find("zoneinfo/"); at != std::string_view::npos) name.remove_prefix(at + 9);
  auto zone = ResolveTimeZone(name);
  if (!zone.ok()) return std::nullopt;
  return *zone;
}

}  // namespace

TimeZone::TimeZone() : zone_(Registry::Get().Utc()) {}
TimeZone TimeZone::Utc() { return TimeZone(); }
const std::string& TimeZone::name() const { return zone_->name; }
const date::time_zone* TimeZone::date_zone() const { return zone_->date_zone; }
const time_internal::ZoneRules& TimeZone::rules() const { return zone_->rules; }

std::chrono::seconds TimeZone::OffsetAt(WallTime t) const {
  auto secs = std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
  return std::chrono::seconds(zone_->rules.OffsetAt(secs));
}

Result<TimeZone> ResolveTimeZone(std::string_view name) {
  DSH_ASSIGN_OR_RETURN(const time_internal::ZoneData* zone, Registry::Get().Resolve(name));
  return TimeZone(zone);
}

TimeZone HostTimeZoneFrom(const HostZoneSources& sources) {
  if (sources.tz_env && !sources.tz_env->empty()) {
    if (auto zone = TryName(*sources.tz_env)) return *zone;
  }
  std::error_code ec;
  std::filesystem::path target = std::filesystem::read_symlink(sources.localtime_path, ec);
  if (!ec) {
    if (auto zone = TryName(target.string())) return *zone;
  }
  std::ifstream in(sources.timezone_path);
  std::string line;
  if (in && std::getline(in, line)) {
    if (auto zone = TryName(line)) return *zone;
  }
  return TimeZone::Utc();
}

TimeZone HostTimeZone() {
  HostZoneSources sources;
  if (const char* tz = std::getenv("TZ")) sources.tz_env = tz;
  return HostTimeZoneFrom(sources);
}

}  // namespace dsh
