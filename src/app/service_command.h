#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/command.h"
#include "base/status.h"

namespace dsh::app {

// `dsh service install [--user] [--home DIR] [--env NAME]... [--print] [--force]`
// writes a systemd unit that runs `dsh web --home HOME` (docs/DEPLOY.md,
// "Running as a service"). It never runs systemctl: the user decides when
// to reload and enable, and machines without systemd (containers, CI) can
// still produce the file. Exit 0 when written or already identical; 1 when
// the file cannot be written or a different unit is there (without
// --force); 2 for bad input (an unset --env variable, a bad name).
void AddServiceCommand(CLI::App& root, CommandContext& ctx);

struct ServiceInstallFlags {
  bool user = false;                // a user unit instead of a system one
  std::optional<std::string> home;  // --home; else $DSH_HOME, else $HOME/.dsh
  std::vector<std::string> env;     // --env NAME: variables copied into Environment=
  bool print = false;               // write the unit to stdout, touch nothing
  bool force = false;               // replace a different unit
};

// What the unit is made of, resolved from the flags and the process.
struct ServiceUnit {
  std::string name;                      // "dsh" or "dsh-<home's directory name>", without ".service"
  std::string binary;                    // absolute path of the dsh binary
  std::string home;                      // absolute profile directory
  std::optional<std::string> user_name;  // User= (system units only)
  std::vector<std::pair<std::string, std::string>> environment;  // --env, in the order given
  bool user_unit = false;
};

// The unit file's text. Values are quoted and escaped for systemd (`%`
// specifiers, `$` expansion, quotes and backslashes), so any path works.
std::string RenderServiceUnit(const ServiceUnit& unit);

// The unit's name for a profile: "dsh" when `home` is `default_home`
// ($HOME/.dsh), else "dsh-" + the last component of `home` without leading
// dots, any character outside [A-Za-z0-9_.-] replaced by '-' (so
// /srv/dsh-work → "dsh-dsh-work", /home/bob/team → "dsh-team").
std::string ServiceUnitName(const std::string& home, const std::string& default_home);

// Where the machine's pieces are; the defaults are the real ones. Tests
// point them elsewhere.
struct ServiceEnvironment {
  std::string system_unit_dir = "/etc/systemd/system";
  // The running binary; empty: readlink("/proc/self/exe").
  std::string binary;
};

// Runs `dsh service install` with `flags`, reading HOME, XDG_CONFIG_HOME,
// DSH_HOME and the --env variables from the process environment.
int RunServiceInstall(const ServiceInstallFlags& flags, const ServiceEnvironment& env, CommandContext& ctx);

}  // namespace dsh::app
