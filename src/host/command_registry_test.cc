#include "host/command_registry.h"

#include <gtest/gtest.h>

#include <thread>

namespace dsh::host {
namespace {

// Runs `text` and returns what `done` got; fails the test if `done` is not
// called exactly once before Run returns (these handlers are synchronous).
Result<CommandResult> RunSync(const CommandRegistry& registry, std::string_view text, CommandCall call = {}) {
  int calls = 0;
  std::optional<Result<CommandResult>> got;
  registry.Run(text, call, [&](Result<CommandResult> r) {
    ++calls;
    got.emplace(std::move(r));
  });
  EXPECT_EQ(calls, 1) << text;
  return got ? std::move(*got) : Result<CommandResult>(Internal("done not called"));
}

// Answers with its parsed input: the arguments and the calling session.
CommandRegistry::Handler Echo() {
  return [](const CommandInput& input, const CommandCall& call, CommandRegistry::Done done) {
    Json args = Json::array();
    for (const auto& a : input.args) args.push_back(a.value);
    done(CommandResult{"/" + input.name + " " + std::to_string(input.args.size()),
                       Json{{"args", args},
                            {"args_text", input.args_text},
                            {"session_id", call.session_id ? Json(*call.session_id) : Json(nullptr)}}});
  };
}

TEST(CommandRegistry, RunsTheNamedCommandWithItsArgumentsSplitShellStyle) {
  CommandRegistry registry;
  ASSERT_TRUE(registry.Register("echo", "Echo the arguments.", Echo()).ok());
  auto r = RunSync(registry, R"(/echo create "fix the parser" --preset 'a b')");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, "/echo 4");
  EXPECT_EQ(r->data["args"], (Json{"create", "fix the parser", "--preset", "a b"}));
  EXPECT_EQ(r->data["args_text"], R"( create "fix the parser" --preset 'a b')");
  EXPECT_EQ(r->data["session_id"], nullptr);
}

TEST(CommandRegistry, SurroundingWhitespaceAndRepeatedSpacesAreEquivalent) {
  CommandRegistry registry;
  ASSERT_TRUE(registry.Register("echo", "", Echo()).ok());
  Json expected = Json{"status", "--recent", "5"};
  for (std::string_view text :
       {"/echo status --recent 5", "  /echo   status  --recent     5  ", "\t/echo status\n--recent 5\n"}) {
    auto r = RunSync(registry, text);
    ASSERT_TRUE(r.ok()) << text;
    EXPECT_EQ(r->data["args"], expected) << text;
  }
  auto bare = RunSync(registry, "/echo");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->data["args"], Json::array());
}

TEST(CommandRegistry, PassesTheCallingSession) {
  CommandRegistry registry;
  ASSERT_TRUE(registry.Register("echo", "", Echo()).ok());
  auto r = RunSync(registry, "/echo", CommandCall{"ses_caller"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data["session_id"], "ses_caller");
}

TEST(CommandRegistry, UnknownCommandIsUnknownCommandNamingTheKnownOnes) {
  CommandRegistry registry;
  ASSERT_TRUE(registry.Register("sessions", "", Echo()).ok());
  ASSERT_TRUE(registry.Register("loop", "", Echo()).ok());
  auto r = RunSync(registry, "/session status");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "unknown_command");
  EXPECT_EQ(r.status().message(), "no command /session (commands: /help, /loop, /sessions)");
}

TEST(CommandRegistry, TextThatIsNotACommandIsInvalidArguments) {
  CommandRegistry registry;
  ASSERT_TRUE(registry.Register("echo", "", Echo()).ok());
  for (std::string_view text : {"", "   ", "echo status", "/", "/ echo"}) {
    auto r = RunSync(registry, text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), codes::kInvalidArguments) << text;
  }
}

TEST(CommandRegistry, AnUnterminatedQuoteIsInvalidArgumentsAndTheHandlerDoesNotRun) {
  CommandRegistry registry;
  bool ran = false;
  ASSERT_TRUE(registry
                  .Register("echo", "",
                            [&](const CommandInput&, const CommandCall&, CommandRegistry::Done done) {
                              ran = true;
                              done(CommandResult{});
                            })
                  .ok());
  auto r = RunSync(registry, "/echo create 'fix it");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), codes::kInvalidArguments);
  EXPECT_EQ(r.status().message(), "/echo: unterminated single quote at column 9");
  EXPECT_FALSE(ran);
}

TEST(CommandRegistry, HelpListsEveryCommandWithItsDescriptionOneLineEach) {
  CommandRegistry registry;
  ASSERT_TRUE(registry.Register("sessions", "Inspect sessions.", Echo()).ok());
  ASSERT_TRUE(registry.Register("loop", "Manage loops.", Echo()).ok());
  ASSERT_TRUE(registry.Register("quiet", "", Echo()).ok());
  auto r = RunSync(registry, "  /help ");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text,
            "Slash commands (run by dsh, never sent to the model):\n"
            "/help — List the slash commands, one line each.\n"
            "/loop — Manage loops.\n"
            "/quiet\n"
            "/sessions — Inspect sessions.");
  EXPECT_EQ(r->data,
            (Json{{"commands",
                   Json::array({
                       Json{{"name", "help"}, {"description", "List the slash commands, one line each."}},
                       Json{{"name", "loop"}, {"description", "Manage loops."}},
                       Json{{"name", "quiet"}, {"description", ""}},
                       Json{{"name", "sessions"}, {"description", "Inspect sessions."}},
                   })}}));
}

TEST(CommandRegistry, HelpIsThereWithNothingElseRegisteredAndTakesNoArguments) {
  CommandRegistry registry;
  auto r = RunSync(registry, "/help");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text,
            "Slash commands (run by dsh, never sent to the model):\n/help — List the slash commands, one "
            "line each.");
  auto extra = RunSync(registry, "/help sessions");
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), codes::kInvalidArguments);
  EXPECT_EQ(extra.status().message(), "/help takes no arguments (usage: /help)");
}

TEST(CommandRegistry, RegisterRefusesDuplicatesBadNamesAndEmptyHandlers) {
  CommandRegistry registry;
  ASSERT_TRUE(registry.Register("sessions", "Sessions.", Echo()).ok());
  EXPECT_EQ(registry.Register("sessions", "again", Echo()).code(), codes::kAlreadyExists);
  EXPECT_EQ(registry.Register("/sessions", "", Echo()).code(), codes::kInvalidArguments);
  EXPECT_EQ(registry.Register("Sessions", "", Echo()).code(), codes::kInvalidArguments);
  EXPECT_EQ(registry.Register("", "", Echo()).code(), codes::kInvalidArguments);
  EXPECT_EQ(registry.Register("x", "", nullptr).code(), codes::kInvalidArguments);
  EXPECT_EQ(registry.Register("help", "another help", Echo()).code(), codes::kAlreadyExists);
  ASSERT_EQ(registry.List().size(), 2u);
  EXPECT_EQ(registry.List()[0].name, "help");
  EXPECT_EQ(registry.List()[1].name, "sessions");
  EXPECT_EQ(registry.List()[1].description, "Sessions.");
}

TEST(CommandRegistry, PassesHandlerErrorsThroughUnchanged) {
  CommandRegistry registry;
  ASSERT_TRUE(registry
                  .Register("fail", "",
                            [](const CommandInput&, const CommandCall&, CommandRegistry::Done done) {
                              done(Status("storage_error", "disk on fire"));
                            })
                  .ok());
  auto r = RunSync(registry, "/fail");
  EXPECT_EQ(r.status(), Status("storage_error", "disk on fire"));
}

TEST(CommandRegistry, RunsConcurrentlyFromManyThreads) {
  CommandRegistry registry;
  ASSERT_TRUE(registry.Register("echo", "", Echo()).ok());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        std::string arg = std::to_string(t * 1000 + i);
        registry.Run("/echo " + arg, {}, [&, arg](Result<CommandResult> r) {
          if (r.ok() && r->data["args"] == Json{arg}) ++ok;
        });
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 400);
}

}  // namespace
}  // namespace dsh::host
