#include "app/service_command.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>

#include "host/profile.h"

namespace dsh::app {
namespace fs = std::filesystem;
namespace {

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

bool HasControlCharacter(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

bool IsEnvName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (unsigned char c : name) {
    if (!std::isalnum(c) && c != '_') return false;
  }
  return true;
}

// `%` starts a specifier in almost every unit setting.
std::string EscapeSpecifiers(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '%') out += '%';
    out += c;
  }
  return out;
}

// One word of ExecStart=: quoted when it holds anything but safe characters;
// `$` would start a variable expansion and is doubled.
std::string ExecWord(const std::string& s) {
  bool safe = !s.empty();
  for (unsigned char c : s) {
    if (!std::isalnum(c) && std::strchr("/_.,:@+=-", c) == nullptr) safe = false;
  }
  if (safe) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '$' || c == '%') out += c;
    out += c;
  }
  return out + "\"";
}

// `Environment="NAME=value"`: unquoted and C-unescaped by systemd; no `$`
// expansion there.
std::string EnvironmentLine(const std::string& name, const std::string& value) {
  std::string out = "Environment=\"";
  for (char c : name + "=" + value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '%') out += '%';
    out += c;
  }
  return out + "\"\n";
}

int Fail(CommandContext& ctx, const Status& status, int code) {
  ctx.err << "error: " << status.code() << ": " << status.message() << "\n";
  return code;
}

Result<std::string> RunningBinary() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return Status(codes::kIo, "cannot find the running dsh binary (/proc/self/exe): " + ec.message());
  std::string s = p.string();
  // The binary was replaced or removed while running (an upgrade in place).
  if (s.ends_with(" (deleted)")) {
    return Status(codes::kIo, "the running dsh binary was deleted (" + s + "); run the installed one");
  }
  return s;
}

// The account's home: $HOME, else the password database's.
std::optional<std::string> UserHome() {
  if (auto h = Env("HOME"); h && !h->empty()) return h;
  if (const passwd* pw = getpwuid(geteuid()); pw != nullptr && pw->pw_dir != nullptr)
    return std::string(pw->pw_dir);
  return std::nullopt;
}

Result<std::string> ResolveHome(const std::optional<std::string>& flag,
                                const std::optional<std::string>& user_home) {
  fs::path home;
  if (flag && !flag->empty()) {
    home = *flag;
  } else if (auto env = Env("DSH_HOME"); env && !env->empty()) {
    home = *env;
  } else if (user_home) {
    home = fs::path(*user_home) / ".dsh";
  } else {
    return Status(codes::kIo, "cannot find the profile: set --home, $DSH_HOME or $HOME");
  }
  std::error_code ec;
  home = fs::absolute(home, ec).lexically_normal();
  if (ec) return Status(codes::kIo, "cannot resolve the profile directory: " + ec.message());
  std::string s = home.string();
  if (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(codes::kIo, "cannot read " + path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool IsPermissionError(int err) { return err == EACCES || err == EPERM || err == EROFS; }

// Writes `content` to `path` through `path.tmp` + fsync + rename. Returns
// the errno of the failure (0 on success) and fills `what`.
int WriteFileAtomically(const std::string& path, const std::string& content, mode_t mode, std::string& what) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    int err = errno;
    what = "cannot write " + path + ": " + std::strerror(err);
    return err;
  }
  int err = 0;
  if (::fchmod(fd, mode) != 0 ||
      ::write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size()) ||
      ::fsync(fd) != 0) {
    err = errno != 0 ? errno : EIO;
  }
  ::close(fd);
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    what = "cannot write " + path + ": " + std::strerror(err);
  }
  return err;
}

void PrintNextSteps(const ServiceUnit& unit, CommandContext& ctx) {
  if (unit.user_unit) {
    ctx.out << "next:\n"
            << "  systemctl --user daemon-reload && systemctl --user enable --now " << unit.name << "\n"
            << "  loginctl enable-linger $USER   # run it without a login session, and from boot\n"
            << "logs:\n"
            << "  journalctl --user -u " << unit.name << " -f\n";
  } else {
    ctx.out << "next:\n"
            << "  systemctl daemon-reload && systemctl enable --now " << unit.name << "\n"
            << "logs:\n"
            << "  journalctl -u " << unit.name << " -f\n";
  }
}

}  // namespace

std::string ServiceUnitName(const std::string& home, const std::string& default_home) {
  if (fs::path(home).lexically_normal() == fs::path(default_home).lexically_normal()) return "dsh";
  fs::path normal = fs::path(home).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();  // "/srv/work/"
  std::string base = normal.filename().string();
  size_t dots = base.find_first_not_of('.');
  base = dots == std::string::npos ? "" : base.substr(dots);
  for (char& c : base) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '-';
  }
  return base.empty() ? "dsh-profile" : "dsh-" + base;
}

std::string RenderServiceUnit(const ServiceUnit& unit) {
  std::ostringstream u;
  u << "# Written by `dsh service install`" << (unit.user_unit ? " --user" : "")
    << "; run it again (with --force) to replace this file.\n"
    << "[Unit]\n"
    << "Description=" << EscapeSpecifiers("dsh agent session host (profile " + unit.home + ")") << "\n"
    << "Wants=network-online.target\n"
    << "After=network-online.target\n"
    << "\n"
    << "[Service]\n"
    << "Type=simple\n";
  if (unit.user_name) u << "User=" << EscapeSpecifiers(*unit.user_name) << "\n";
  u << "WorkingDirectory=" << EscapeSpecifiers(unit.home) << "\n"
    << "ExecStart=" << ExecWord(unit.binary) << " web --home " << ExecWord(unit.home) << "\n";
  for (const auto& [name, value] : unit.environment) u << EnvironmentLine(name, value);
  u << "Restart=on-failure\n"
    << "RestartSec=2\n"
    << "# Stopping: SIGTERM goes to dsh alone (KillMode=mixed). dsh then stops\n"
    << "# taking requests, finishes those in flight and the queued database\n"
    << "# commits, stops its agents and its MCP server children (stdin closed,\n"
    << "# then SIGTERM, then SIGKILL, 2 s apart) and exits 0, which is not a\n"
    << "# failure to restart. Whatever still runs after TimeoutStopSec gets\n"
    << "# SIGKILL, the children included.\n"
    << "KillMode=mixed\n"
    << "KillSignal=SIGTERM\n"
    << "TimeoutStopSec=30\n"
    << "\n"
    << "[Install]\n"
    << "WantedBy=" << (unit.user_unit ? "default.target" : "multi-user.target") << "\n";
  return u.str();
}

int RunServiceInstall(const ServiceInstallFlags& flags, const ServiceEnvironment& env, CommandContext& ctx) {
  ServiceUnit unit;
  unit.user_unit = flags.user;
  for (const auto& name : flags.env) {
    if (!IsEnvName(name)) {
      return Fail(ctx, InvalidArguments("--env takes a variable name, got \"" + name + "\""), kExitUsage);
    }
    bool seen = false;
    for (const auto& [n, v] : unit.environment) seen = seen || n == name;
    if (seen) continue;
    std::optional<std::string> value = Env(name.c_str());
    if (!value) {
      return Fail(ctx, InvalidArguments("--env " + name + ": the variable is not set in this shell"),
                  kExitUsage);
    }
    if (HasControlCharacter(*value)) {
      return Fail(ctx, InvalidArguments("--env " + name + ": the value holds a newline or control character"),
                  kExitUsage);
    }
    unit.environment.emplace_back(name, *value);
  }

  std::optional<std::string> user_home = UserHome();
  auto home = ResolveHome(flags.home, user_home);
  if (!home.ok()) return Fail(ctx, home.status(), kExitFailure);
  if (HasControlCharacter(*home)) {
    return Fail(ctx, InvalidArguments("the profile directory's name holds a control character"), kExitUsage);
  }
  unit.home = *home;
  unit.name = ServiceUnitName(unit.home, user_home ? (fs::path(*user_home) / ".dsh").string() : "");

  if (!env.binary.empty()) {
    unit.binary = env.binary;
  } else {
    auto binary = RunningBinary();
    if (!binary.ok()) return Fail(ctx, binary.status(), kExitFailure);
    unit.binary = *binary;
  }

  std::string dir;
  if (flags.user) {
    auto xdg = Env("XDG_CONFIG_HOME");
    if (xdg && !xdg->empty() && xdg->front() == '/') {
      dir = (fs::path(*xdg) / "systemd" / "user").string();
    } else if (user_home) {
      dir = (fs::path(*user_home) / ".config" / "systemd" / "user").string();
    } else {
      return Fail(ctx,
                  Status(codes::kIo, "cannot find the user's unit directory: set $HOME or $XDG_CONFIG_HOME"),
                  kExitFailure);
    }
  } else {
    const passwd* pw = getpwuid(geteuid());
    if (pw == nullptr || pw->pw_name == nullptr) {
      return Fail(ctx, Status(codes::kIo, "cannot find the name of user " + std::to_string(geteuid())),
                  kExitFailure);
    }
    unit.user_name = pw->pw_name;
    dir = env.system_unit_dir;
  }
  const std::string path = (fs::path(dir) / (unit.name + ".service")).string();
  const std::string text = RenderServiceUnit(unit);

  if (flags.print) {
    ctx.out << text;
    ctx.err << "# not written; `dsh service install" << (flags.user ? " --user" : "") << "` would write "
            << path << "\n";
    return kExitOk;
  }

  std::error_code ec;
  if (fs::exists(path, ec)) {
    auto existing = ReadFile(path);
    if (!existing.ok()) return Fail(ctx, existing.status(), kExitFailure);
    if (*existing == text) {
      ctx.out << unit.name << ".service is already installed at " << path << " (unchanged)\n";
      PrintNextSteps(unit, ctx);
      return kExitOk;
    }
    if (!flags.force) {
      return Fail(ctx,
                  Status(codes::kAlreadyExists, path + " exists and differs from the unit this would write; "
                                                       "--force replaces it (--print shows the new one)"),
                  kExitFailure);
    }
  }

  auto write_failed = [&](int err, const std::string& what) {
    std::string hint;
    if (!flags.user && IsPermissionError(err)) {
      hint =
          ". A system unit needs root: install a user unit with --user, or write this one as root with "
          "`dsh service install --print | sudo tee " +
          path + "` (it runs as " + unit.user_name.value_or("you") +
          " on this profile; `sudo dsh service install` would make it root's)";
    }
    return Fail(ctx, Status(codes::kIo, what + hint), kExitFailure);
  };
  // Before anything is created: a directory this account may not write.
  if (::access(dir.c_str(), W_OK) != 0 && errno != ENOENT) {
    int err = errno;
    return write_failed(err, "cannot write " + path + ": " + std::strerror(err));
  }

  // The unit's WorkingDirectory must exist before systemd starts it; `dsh
  // web` would create the profile the same way.
  if (!fs::exists(unit.home, ec)) {
    auto profile = host::Profile::Open(unit.home);
    if (!profile.ok()) return Fail(ctx, profile.status(), kExitFailure);
  }

  fs::create_directories(dir, ec);
  if (ec) return write_failed(ec.value(), "cannot create " + dir + ": " + ec.message());
  std::string what;
  // With copied variables (API keys, a database password) only the owner reads it.
  const mode_t mode = unit.environment.empty() ? 0644 : 0600;
  if (int err = WriteFileAtomically(path, text, mode, what); err != 0) return write_failed(err, what);
  ctx.out << "wrote " << path << "\n";
  PrintNextSteps(unit, ctx);
  return kExitOk;
}

void AddServiceCommand(CLI::App& root, CommandContext& ctx) {
  auto flags = std::make_shared<ServiceInstallFlags>();
  auto home = std::make_shared<std::string>();
  CLI::App* service = root.add_subcommand("service", "Run dsh web as a systemd service");
  service->require_subcommand(1);
  CLI::App* install = service->add_subcommand(
      "install", "Write a systemd unit for `dsh web` on the profile (never runs systemctl)");
  install->add_flag("--user", flags->user, "A user unit (~/.config/systemd/user) instead of a system one");
  install->add_option("--home", *home, "Profile directory (default $DSH_HOME, else ~/.dsh)");
  install->add_option("--env", flags->env, "Copy this variable's current value into the unit (repeatable)");
  install->add_flag("--print", flags->print, "Print the unit on stdout and write nothing");
  install->add_flag("--force", flags->force, "Replace an existing, different unit");
  install->callback([flags, home, &ctx] {
    if (!home->empty()) flags->home = *home;
    ctx.exit_code = RunServiceInstall(*flags, ServiceEnvironment{}, ctx);
  });
}

}  // namespace dsh::app
