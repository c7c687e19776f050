// `dsh service install`: the unit's content and where it goes, on a temp
// HOME / XDG_CONFIG_HOME so that nothing of the real account is touched.
#include "app/service_command.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "app/testing/run_cli.h"
#include "base/testing/temp_dir.h"

namespace dsh::app {
namespace {

namespace fs = std::filesystem;
using dsh::testing::CliRun;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string SelfExe() { return fs::read_symlink("/proc/self/exe").string(); }

// Sets environment variables for one test and puts the old values back.
class ScopedEnv {
 public:
  void Set(const std::string& name, const std::optional<std::string>& value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

class ServiceInstall : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.Set("HOME", dir_.File("home"));
    env_.Set("XDG_CONFIG_HOME", dir_.File("xdg"));
    env_.Set("DSH_HOME", std::nullopt);
    fs::create_directories(dir_.File("home"));
  }
  std::string DefaultHome() const { return dir_.File("home") + "/.dsh"; }
  std::string UserUnit(const std::string& name = "dsh") const {
    return dir_.File("xdg") + "/systemd/user/" + name + ".service";
  }
  CliRun Run(std::vector<const char*> args) { return dsh::testing::RunCliWith(std::move(args)); }

  dsh::testing::TempDir dir_;
  ScopedEnv env_;
};

TEST_F(ServiceInstall, UserUnitRunsDshWebOnTheProfileAndSaysWhatToRunNext) {
  CliRun r = Run({"service", "install", "--user"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(UserUnit())) << r.out;
  std::string unit = ReadAll(UserUnit());
  EXPECT_NE(unit.find("\nExecStart=" + SelfExe() + " web --home " + DefaultHome() + "\n"), std::string::npos)
      << unit;
  EXPECT_NE(unit.find("\nWorkingDirectory=" + DefaultHome() + "\n"), std::string::npos) << unit;
  for (const char* line :
       {"Description=dsh agent session host", "\nWants=network-online.target\n",
        "\nAfter=network-online.target\n", "\nRestart=on-failure\n", "\nRestartSec=2\n", "\nKillMode=mixed\n",
        "\nTimeoutStopSec=30\n", "\n[Install]\nWantedBy=default.target\n"}) {
    EXPECT_NE(unit.find(line), std::string::npos) << line << " missing from\n" << unit;
  }
  EXPECT_EQ(unit.find("User="), std::string::npos) << unit;
  EXPECT_EQ(unit.find("Environment="), std::string::npos) << unit;
  EXPECT_TRUE(fs::is_directory(DefaultHome())) << "WorkingDirectory must exist for systemd";
  EXPECT_EQ(fs::status(UserUnit()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  EXPECT_NE(r.out.find("wrote " + UserUnit()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("systemctl --user daemon-reload && systemctl --user enable --now dsh\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("loginctl enable-linger $USER"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("journalctl --user -u dsh -f\n"), std::string::npos) << r.out;
}

TEST_F(ServiceInstall, AnotherProfileGetsAUnitNamedAfterItsDirectory) {
  env_.Set("XDG_CONFIG_HOME", std::nullopt);  // then ~/.config
  std::string home = dir_.File("team work");
  CliRun r = Run({"service", "install", "--user", "--home", home.c_str()});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string path = dir_.File("home") + "/.config/systemd/user/dsh-team-work.service";
  ASSERT_TRUE(fs::exists(path)) << r.out;
  std::string unit = ReadAll(path);
  // The space needs quotes in ExecStart= and none in WorkingDirectory=.
  EXPECT_NE(unit.find("\nExecStart=" + SelfExe() + " web --home \"" + home + "\"\n"), std::string::npos)
      << unit;
  EXPECT_NE(unit.find("\nWorkingDirectory=" + home + "\n"), std::string::npos) << unit;
  EXPECT_NE(r.out.find("systemctl --user enable --now dsh-team-work\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("journalctl --user -u dsh-team-work -f"), std::string::npos) << r.out;

  EXPECT_EQ(ServiceUnitName("/root/.dsh", "/root/.dsh"), "dsh");
  EXPECT_EQ(ServiceUnitName("/srv/.dsh-work/", "/root/.dsh"), "dsh-dsh-work");
  EXPECT_EQ(ServiceUnitName("/srv/a%b", "/root/.dsh"), "dsh-a-b");
}

TEST_F(ServiceInstall, PrintWritesTheUnitToStdoutAndTouchesNothing) {
  CliRun r = Run({"service", "install", "--user", "--print"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("# Written by `dsh service install` --user", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\nExecStart=" + SelfExe() + " web --home " + DefaultHome() + "\n"),
            std::string::npos);
  EXPECT_EQ(r.out.find("systemctl"), std::string::npos) << "stdout is the unit alone: " << r.out;
  EXPECT_NE(r.err.find(UserUnit()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_.File("xdg")));
  EXPECT_FALSE(fs::exists(DefaultHome()));
}

TEST_F(ServiceInstall, RefusesToReplaceADifferentUnitUnlessForced) {
  ASSERT_EQ(Run({"service", "install", "--user"}).code, 0);
  const std::string original = ReadAll(UserUnit());

  CliRun same = Run({"service", "install", "--user"});
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_NE(same.out.find("already installed"), std::string::npos) << same.out;

  std::ofstream(UserUnit()) << original << "# my own edit\n";
  CliRun refused = Run({"service", "install", "--user"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_EQ(refused.err.rfind("error: already_exists: " + UserUnit() + " exists and differs", 0), 0u)
      << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(ReadAll(UserUnit()), original + "# my own edit\n");

  CliRun forced = Run({"service", "install", "--user", "--force"});
  EXPECT_EQ(forced.code, 0) << forced.err;
  EXPECT_EQ(ReadAll(UserUnit()), original);
  EXPECT_FALSE(fs::exists(UserUnit() + ".tmp"));
}

TEST_F(ServiceInstall, EnvCopiesOnlyTheNamedVariablesAndRefusesUnsetOnes) {
  env_.Set("DSH_MODEL", "openai/gpt-5");
  env_.Set("OPENAI_API_KEY", "sk-\"quoted\" 100%");
  env_.Set("ANTHROPIC_API_KEY", "sk-ant-never-copied");
  env_.Set("DSH_DATABASE_URL", std::nullopt);

  CliRun unset = Run({"service", "install", "--user", "--env", "DSH_MODEL", "--env", "DSH_DATABASE_URL"});
  EXPECT_EQ(unset.code, 2);
  EXPECT_EQ(unset.err,
            "error: invalid_arguments: --env DSH_DATABASE_URL: the variable is not set in this shell\n");
  EXPECT_FALSE(fs::exists(UserUnit()));
  CliRun bad = Run({"service", "install", "--user", "--env", "A=B"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--env takes a variable name"), std::string::npos) << bad.err;

  CliRun r = Run({"service", "install", "--user", "--env", "DSH_MODEL", "--env", "OPENAI_API_KEY"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string unit = ReadAll(UserUnit());
  EXPECT_NE(unit.find("\nEnvironment=\"DSH_MODEL=openai/gpt-5\"\n"), std::string::npos) << unit;
  EXPECT_NE(unit.find("\nEnvironment=\"OPENAI_API_KEY=sk-\\\"quoted\\\" 100%%\"\n"), std::string::npos)
      << unit;
  EXPECT_EQ(unit.find("ANTHROPIC"), std::string::npos) << unit;
  EXPECT_EQ(unit.find("sk-ant"), std::string::npos) << unit;
  // Secrets inside: the owner alone reads it.
  EXPECT_EQ(fs::status(UserUnit()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(ServiceInstall, SystemUnitRunsAsTheInvokingUser) {
  ServiceInstallFlags flags;
  flags.home = dir_.File("profile");
  ServiceEnvironment env{.system_unit_dir = dir_.File("system"), .binary = "/opt/dsh $1/dsh"};
  fs::create_directories(env.system_unit_dir);
  std::ostringstream out, err;
  FakeClock clock;
  CommandContext ctx{out, err, clock};
  ASSERT_EQ(RunServiceInstall(flags, env, ctx), 0) << err.str();
  std::string unit = ReadAll(env.system_unit_dir + "/dsh-profile.service");
  EXPECT_NE(unit.find("\nUser=" + std::string(getpwuid(geteuid())->pw_name) + "\n"), std::string::npos)
      << unit;
  EXPECT_NE(unit.find("\nExecStart=\"/opt/dsh $$1/dsh\" web --home " + dir_.File("profile") + "\n"),
            std::string::npos)
      << unit;
  EXPECT_NE(unit.find("\nWantedBy=multi-user.target\n"), std::string::npos) << unit;
  EXPECT_NE(out.str().find("systemctl daemon-reload && systemctl enable --now dsh-profile\n"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("journalctl -u dsh-profile -f\n"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("--user"), std::string::npos) << out.str();
}

// An account that cannot write the unit directory: a 0555 directory, and
// `nobody` when the tests run as root (root writes any directory). In a
// forked child, so that dropping root ends with it.
TEST_F(ServiceInstall, SystemInstallWithoutPermissionFailsClearly) {
  const std::string system_dir = dir_.File("system");
  fs::create_directories(system_dir);
  fs::permissions(system_dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                  fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const std::string unit = system_dir + "/dsh-nowhere.service";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipe_fds[0]);
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) _exit(99);
    ServiceInstallFlags flags;
    flags.home = "/nonexistent/nowhere";
    ServiceEnvironment env{.system_unit_dir = system_dir, .binary = "/usr/bin/dsh"};
    std::ostringstream out, err;
    FakeClock clock;
    CommandContext ctx{out, err, clock};
    int code = RunServiceInstall(flags, env, ctx);
    std::string output = out.str() + err.str();
    (void)!write(pipe_fds[1], output.data(), output.size());
    _exit(code);
  }
  close(pipe_fds[1]);
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) output.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_NE(WEXITSTATUS(status), 99) << "running as root, but cannot become nobody (65534)";
  EXPECT_EQ(WEXITSTATUS(status), 1) << output;
  EXPECT_EQ(output.rfind("error: io_error: cannot write " + unit + ": Permission denied", 0), 0u) << output;
  EXPECT_NE(output.find("--user"), std::string::npos) << output;
  EXPECT_NE(output.find("dsh service install --print | sudo tee " + unit), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(unit));
  EXPECT_FALSE(fs::exists("/nonexistent/nowhere"));
}

}  // namespace
}  // namespace dsh::app
