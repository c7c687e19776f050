// The pure core of session-local reminders: the schedule/change format and
// its fold (schedule_log.h), and the tool arguments (schedule_request.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/json.h"
#include "plugins/schedule/schedule_log.h"
#include "plugins/schedule/schedule_request.h"

namespace dsh::plugins::schedule {
namespace {

constexpr int64_t kNow = 1'767'225'600'000;  // 2026-01-01T00:00:00.000Z

Json J(const char* text) {
  auto parsed = ParseJson(text);
  EXPECT_TRUE(parsed.ok()) << text;
  return parsed.ok() ? *parsed : Json();
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Record After(int64_t n, int64_t seconds, std::string prompt = "stretch") {
  return Record{FormatScheduleId(n), Kind::kAfter, std::move(prompt), seconds, kNow + seconds * 1000};
}
Record At(int64_t n, int64_t at_ms, std::string prompt = "call mom") {
  return Record{FormatScheduleId(n), Kind::kAt, std::move(prompt), std::nullopt, at_ms};
}

// A session log: appends drafts with consecutive seqs.
class Log {
 public:
  Log& Add(const session::EventDraft& draft) {
    events_.push_back(session::Event{static_cast<int64_t>(events_.size()) + 1, draft.type, kNow, draft.data});
    return *this;
  }
  Log& Add(std::string type, Json data) { return Add(session::EventDraft{std::move(type), std::move(data)}); }
  const std::vector<session::Event>& events() const { return events_; }

 private:
  std::vector<session::Event> events_;
};

std::vector<std::string> Ids(const ScheduleState& state) {
  std::vector<std::string> ids;
  for (const Record& r : state.active) ids.push_back(r.id);
  return ids;
}

// ---- the schedule/change format ----

TEST(ScheduleLog, EachShapeIsWrittenExactlyAndReadsBack) {
  const Record after = After(1, 30);
  session::EventDraft create = CreateEvent(after);
  EXPECT_EQ(create.type, "schedule/change");
  EXPECT_EQ(create.data, J(R"({"version": 1, "op": "create", "schedule": {"id": "schedule-1", "kind": "after",
      "prompt": "stretch", "after_seconds": 30, "scheduled_at": "2026-01-01T00:00:30.000Z"}})"));
  auto decoded = DecodeChange(create.data);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, (Change{Op::kCreate, "schedule-1", after}));

  const Record at = At(12, kNow + 3'600'500);
  create = CreateEvent(at);
  EXPECT_EQ(create.data, J(R"({"version": 1, "op": "create", "schedule": {"id": "schedule-12", "kind": "at",
      "prompt": "call mom", "scheduled_at": "2026-01-01T01:00:00.500Z"}})"));
  decoded = DecodeChange(create.data);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, (Change{Op::kCreate, "schedule-12", at}));

  session::EventDraft del = DeleteEvent("schedule-3");
  EXPECT_EQ(del.type, "schedule/change");
  EXPECT_EQ(del.data, J(R"({"version": 1, "op": "delete", "id": "schedule-3"})"));
  decoded = DecodeChange(del.data);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, (Change{Op::kDelete, "schedule-3", Record{}}));

  session::EventDraft dispatch = DispatchEvent("schedule-4");
  EXPECT_EQ(dispatch.data, J(R"({"version": 1, "op": "dispatch", "id": "schedule-4"})"));
  decoded = DecodeChange(dispatch.data);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, (Change{Op::kDispatch, "schedule-4", Record{}}));
}

TEST(ScheduleLog, AnythingOffTheFormatIsCorrupt) {
  const std::string good_after =
      R"("id": "schedule-1", "kind": "after", "prompt": "p", "after_seconds": 30, "scheduled_at": "2026-01-01T00:00:30.000Z")";
  auto create = [](const std::string& record) {
    return R"({"version": 1, "op": "create", "schedule": {)" + record + "}}";
  };
  struct Case {
    std::string data;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"[]", "must be an object"},
           {R"({"op": "delete", "id": "schedule-1"})", "missing field `version`"},
           {R"({"version": 2, "op": "delete", "id": "schedule-1"})", "unsupported `version` integer 2"},
           {R"({"version": "1", "op": "delete", "id": "schedule-1"})", "unsupported `version`"},
           {R"({"version": 1.0, "op": "delete", "id": "schedule-1"})", "unsupported `version`"},
           {R"({"version": 1, "id": "schedule-1"})", "missing field `op`"},
           {R"({"version": 1, "op": "update", "id": "schedule-1"})", "`op` must be"},
           {R"({"version": 1, "op": "delete"})", "missing field `id`"},
           {R"({"version": 1, "op": "delete", "id": "schedule-1", "at": 5})", "unexpected field `at`"},
           {R"({"version": 1, "op": "dispatch", "id": "schedule-1", "schedule": {}})", "unexpected field `schedule`"},
           {R"({"version": 1, "op": "create", "schedule": {)" + good_after + R"(}, "why": "x"})",
            "unexpected field `why`"},
           {R"({"version": 1, "op": "create"})", "missing field `schedule`"},
           {R"({"version": 1, "op": "create", "schedule": "schedule-1"})", "`schedule` must be an object"},
           // Records.
           {create(good_after + R"(, "time_zone": "UTC")"), "unexpected field `schedule.time_zone`"},
           {create(R"("id": "schedule-1", "kind": "at", "prompt": "p", "after_seconds": 30, "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "unexpected field `schedule.after_seconds`"},
           {create(R"("id": "schedule-1", "kind": "after", "prompt": "p", "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "missing field `schedule.after_seconds`"},
           {create(R"("id": "schedule-1", "kind": "every", "prompt": "p", "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "`schedule.kind` must be"},
           {create(R"("id": "schedule-1", "prompt": "p", "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "missing field `schedule.kind`"},
           // Wrong types and ranges.
           {create(R"("id": "schedule-1", "kind": "after", "prompt": 7, "after_seconds": 30, "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "`schedule.prompt` must be a string"},
           {create(R"("id": "schedule-1", "kind": "after", "prompt": "p", "after_seconds": "30", "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "`schedule.after_seconds` must be an integer"},
           {create(R"("id": "schedule-1", "kind": "after", "prompt": "p", "after_seconds": 30.0, "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "`schedule.after_seconds` must be an integer"},
           {create(R"("id": "schedule-1", "kind": "after", "prompt": "p", "after_seconds": 0, "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "`schedule.after_seconds` must be an integer"},
           {create(R"("id": "schedule-1", "kind": "after", "prompt": "p", "after_seconds": 9007199254740992, "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "`schedule.after_seconds` must be an integer"},
           // Bad ids.
           {R"({"version": 1, "op": "delete", "id": "schedule-0"})", "`id` must be \"schedule-N\""},
           {R"({"version": 1, "op": "delete", "id": "schedule-01"})", "`id` must be"},
           {R"({"version": 1, "op": "delete", "id": "schedule-"})", "`id` must be"},
           {R"({"version": 1, "op": "delete", "id": "schedule-+1"})", "`id` must be"},
           {R"({"version": 1, "op": "delete", "id": "schedule-1a"})", "`id` must be"},
           {R"({"version": 1, "op": "delete", "id": "Schedule-1"})", "`id` must be"},
           {R"({"version": 1, "op": "delete", "id": "schedule-9007199254740992"})", "`id` must be"},
           {R"({"version": 1, "op": "dispatch", "id": 1})", "`id` must be"},
           {create(R"("id": "loop-1", "kind": "at", "prompt": "p", "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "`schedule.id` must be"},
           // Blank or untrimmed prompts.
           {create(R"("id": "schedule-1", "kind": "at", "prompt": "", "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "`schedule.prompt` must be non-empty and trimmed"},
           {create(R"("id": "schedule-1", "kind": "at", "prompt": " \n ", "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "`schedule.prompt` must be non-empty and trimmed"},
           {create(R"("id": "schedule-1", "kind": "at", "prompt": "p ", "scheduled_at": "2026-01-01T00:00:30.000Z")"),
            "`schedule.prompt` must be non-empty and trimmed"},
           // Non-canonical targets.
           {create(R"("id": "schedule-1", "kind": "at", "prompt": "p", "scheduled_at": "2026-01-01T00:00:30Z")"),
            "`schedule.scheduled_at` must be a canonical UTC"},
           {create(R"("id": "schedule-1", "kind": "at", "prompt": "p", "scheduled_at": "2026-01-01T08:00:30.000+08:00")"),
            "`schedule.scheduled_at` must be a canonical UTC"},
           {create(R"("id": "schedule-1", "kind": "at", "prompt": "p", "scheduled_at": "2026-01-01t00:00:30.000z")"),
            "`schedule.scheduled_at` must be a canonical UTC"},
           {create(R"("id": "schedule-1", "kind": "at", "prompt": "p", "scheduled_at": "2026-01-01T00:00:30.0000Z")"),
            "`schedule.scheduled_at` must be a canonical UTC"},
           {create(R"("id": "schedule-1", "kind": "at", "prompt": "p", "scheduled_at": 1767225630000)"),
            "`schedule.scheduled_at` must be a canonical UTC"},
       }) {
    auto decoded = DecodeChange(J(c.data.c_str()));
    ASSERT_FALSE(decoded.ok()) << c.data;
    EXPECT_EQ(decoded.status().code(), "corrupt_schedule_log") << c.data;
    EXPECT_TRUE(Contains(decoded.status().message(), c.says)) << c.data << " -> " << decoded.status().message();
  }
}

TEST(ScheduleLog, IdsAreScheduleDashPositiveInteger) {
  EXPECT_EQ(FormatScheduleId(7), "schedule-7");
  EXPECT_EQ(ParseScheduleId("schedule-7"), 7);
  EXPECT_EQ(ParseScheduleId("schedule-9007199254740991"), 9'007'199'254'740'991);
  for (const char* bad : {"schedule-0", "schedule-007", "schedule--1", "schedule-", "schedule-1 ", "7",
                          "schedule-99999999999999999999", "schedule-9007199254740992"}) {
    EXPECT_FALSE(ParseScheduleId(bad)) << bad;
  }
}

// ---- the fold ----

TEST(ScheduleFold, KeepsActiveRemindersInCreationOrder) {
  Log log;
  log.Add(CreateEvent(After(1, 600))).Add(CreateEvent(At(2, kNow + 60'000))).Add(CreateEvent(After(3, 600)));
  auto state = Fold("ses_a", 0, log.events());
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(Ids(*state), (std::vector<std::string>{"schedule-1", "schedule-2", "schedule-3"}));
  EXPECT_EQ(state->active[1], At(2, kNow + 60'000));
  EXPECT_EQ(state->next_id, 4);
  ASSERT_NE(state->Earliest(), nullptr);
  EXPECT_EQ(state->Earliest()->id, "schedule-2");
  ASSERT_NE(state->Find("schedule-3"), nullptr);
  EXPECT_EQ(state->Find("schedule-4"), nullptr);
}

TEST(ScheduleFold, EarliestBreaksTiesByCreationOrder) {
  Log log;
  log.Add(CreateEvent(After(1, 60))).Add(CreateEvent(After(2, 30))).Add(CreateEvent(At(3, kNow + 30'000)));
  auto state = Fold("ses_a", 0, log.events());
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->Earliest()->id, "schedule-2");
}

TEST(ScheduleFold, DeleteAndDispatchEndAReminder) {
  Log log;
  log.Add(CreateEvent(After(1, 10)))
      .Add(CreateEvent(After(2, 20)))
      .Add(CreateEvent(After(3, 30)))
      .Add(DeleteEvent("schedule-2"))
      .Add(DispatchEvent("schedule-1"));
  auto state = Fold("ses_a", 0, log.events());
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(Ids(*state), (std::vector<std::string>{"schedule-3"}));
  EXPECT_EQ(state->Find("schedule-1"), nullptr);
}

TEST(ScheduleFold, NextIdIsNeverReusedAfterDeleteOrDispatch) {
  Log log;
  log.Add(CreateEvent(After(1, 10))).Add(CreateEvent(After(2, 20))).Add(DeleteEvent("schedule-2"));
  log.Add(DispatchEvent("schedule-1"));
  auto state = Fold("ses_a", 0, log.events());
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->active.empty());
  EXPECT_EQ(state->next_id, 3);
  EXPECT_EQ(state->Earliest(), nullptr);

  auto empty = Fold("ses_a", 0, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->next_id, 1);

  Log gap;  // ids need not be consecutive; the largest decides
  gap.Add(CreateEvent(After(5, 10))).Add(CreateEvent(After(2, 10)));
  auto state2 = Fold("ses_a", 0, gap.events());
  ASSERT_TRUE(state2.ok());
  EXPECT_EQ(state2->next_id, 6);
}

TEST(ScheduleFold, BadTransitionsAreCorruptNamingSessionAndEvent) {
  struct Case {
    Log log;
    const char* want;
  };
  std::vector<Case> cases;
  cases.push_back({Log().Add(CreateEvent(After(1, 10))).Add("message/user", J(R"({"text": "hi"})")).Add(CreateEvent(After(1, 20))),
                   "session ses_a: event 3: create of schedule-1, which event 1 already created"});
  cases.push_back({Log().Add(CreateEvent(After(1, 10))).Add(DeleteEvent("schedule-1")).Add(CreateEvent(After(1, 20))),
                   "session ses_a: event 3: create of schedule-1, which event 1 already created"});
  cases.push_back({Log().Add(CreateEvent(After(1, 10))).Add(DeleteEvent("schedule-2")),
                   "session ses_a: event 2: delete of schedule-2, which was never created"});
  cases.push_back({Log().Add(DispatchEvent("schedule-1")),
                   "session ses_a: event 1: dispatch of schedule-1, which was never created"});
  cases.push_back({Log().Add(CreateEvent(After(1, 10))).Add(DeleteEvent("schedule-1")).Add(DispatchEvent("schedule-1")),
                   "session ses_a: event 3: dispatch of schedule-1, which is not active (event 2 deleted it)"});
  cases.push_back({Log().Add(CreateEvent(After(1, 10))).Add(DispatchEvent("schedule-1")).Add(DeleteEvent("schedule-1")),
                   "session ses_a: event 3: delete of schedule-1, which is not active (event 2 dispatched it)"});
  cases.push_back({Log().Add(CreateEvent(After(1, 10))).Add(DispatchEvent("schedule-1")).Add(DispatchEvent("schedule-1")),
                   "session ses_a: event 3: dispatch of schedule-1, which is not active (event 2 dispatched it)"});
  cases.push_back({Log().Add(CreateEvent(After(1, 10))).Add("schedule/change", J(R"({"version": 2, "op": "delete", "id": "schedule-1"})")),
                   "session ses_a: event 2: unsupported `version` integer 2"});
  for (const Case& c : cases) {
    auto state = Fold("ses_a", 0, c.log.events());
    ASSERT_FALSE(state.ok()) << c.want;
    EXPECT_EQ(state.status().code(), "corrupt_schedule_log");
    EXPECT_TRUE(StartsWith(state.status().message(), c.want)) << state.status().message();
  }
}

TEST(ScheduleFold, IgnoresOtherEventTypes) {
  Log log;
  log.Add("message/user", J(R"({"text": "remind me"})"))
      .Add("loop/change", J(R"({"version": 7, "op": "create"})"))
      .Add("schedule/other", J("[]"))
      .Add(CreateEvent(After(1, 10)))
      .Add("tool/result", J(R"({"call_id": "c", "name": "schedule_create", "result": {}})"));
  auto state = Fold("ses_a", 0, log.events());
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(Ids(*state), (std::vector<std::string>{"schedule-1"}));
}

TEST(ScheduleFold, AForkInheritsNoneOfItsParentsReminders) {
  // Events 1..4 are the parent's prefix: two creates (one still active) and a
  // corrupt event the fork never reads.
  Log log;
  log.Add(CreateEvent(After(1, 10)))
      .Add(CreateEvent(After(2, 20)))
      .Add(DispatchEvent("schedule-1"))
      .Add("schedule/change", J(R"({"version": 9})"))
      .Add(CreateEvent(At(1, kNow + 5'000, "the fork's own")));  // may reuse the parent's id
  auto fork = Fold("ses_fork", 4, log.events());
  ASSERT_TRUE(fork.ok()) << fork.status().ToString();
  ASSERT_EQ(fork->active.size(), 1u);
  EXPECT_EQ(fork->active[0], At(1, kNow + 5'000, "the fork's own"));
  EXPECT_EQ(fork->next_id, 2);

  auto prefix_only = Fold("ses_fork", 4, std::vector<session::Event>(log.events().begin(), log.events().begin() + 4));
  ASSERT_TRUE(prefix_only.ok());
  EXPECT_TRUE(prefix_only->active.empty());
  EXPECT_EQ(prefix_only->next_id, 1);

  // The parent's active schedule-2 is not the fork's to end.
  log.Add(DeleteEvent("schedule-2"));
  auto ends_parents = Fold("ses_fork", 4, log.events());
  ASSERT_FALSE(ends_parents.ok());
  EXPECT_EQ(ends_parents.status().code(), "corrupt_schedule_log");
  EXPECT_TRUE(StartsWith(ends_parents.status().message(),
                         "session ses_fork: event 6: delete of schedule-2, which was never created in this fork"))
      << ends_parents.status().message();
}

// ---- what the tools show and what a due reminder sends ----

TEST(ScheduleView, ShowsTargetStateAndDeliveryMode) {
  EXPECT_EQ(RecordView(After(1, 30), kNow + 29'999),
            J(R"({"id": "schedule-1", "kind": "after", "prompt": "stretch", "after_seconds": 30,
                  "scheduled_at": "2026-01-01T00:00:30.000Z", "state": "scheduled", "delivery_mode": "session-local"})"));
  EXPECT_EQ(RecordView(After(1, 30), kNow + 30'000)["state"], "overdue");
  EXPECT_EQ(RecordView(At(2, kNow + 1'500), kNow + 90'000),
            J(R"({"id": "schedule-2", "kind": "at", "prompt": "call mom",
                  "scheduled_at": "2026-01-01T00:00:01.500Z", "state": "overdue", "delivery_mode": "session-local"})"));
}

TEST(ScheduleView, ReminderFrameIsOneFixedLine) {
  EXPECT_EQ(ReminderFrame(After(1, 30, "the prompt")),
            "[SCHEDULE REMINDER] schedule_id: \"schedule-1\" occurrence_at: 2026-01-01T00:00:30.000Z "
            "prompt: \"the prompt\"");
  // A prompt cannot forge the frame: quotes, backslashes, newlines and
  // control characters are escaped; other text is kept as is.
  EXPECT_EQ(ReminderFrame(At(3, kNow + 1, "say \"hi\" \\ then\nprompt: \"x\"\t\x01 — 好")),
            "[SCHEDULE REMINDER] schedule_id: \"schedule-3\" occurrence_at: 2026-01-01T00:00:00.001Z "
            "prompt: \"say \\\"hi\\\" \\\\ then\\nprompt: \\\"x\\\"\\t\\u0001 — 好\"");
  EXPECT_EQ(ReminderKey("ses_a", "schedule-3"), "schedule:ses_a:schedule-3");
}

// ---- schedule_create arguments ----

CreateContext Context(std::string session_zone = "UTC", std::optional<std::string> client_zone = std::nullopt,
                      std::string host_zone = "UTC") {
  return CreateContext{kNow, std::move(session_zone), std::move(client_zone), std::move(host_zone)};
}

TEST(ScheduleCreateArgs, AfterSecondsTargetsNowPlusTheDelay) {
  auto r = ResolveScheduleCreate(J(R"({"prompt": "  stretch\n", "after_seconds": 30})"), Context());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (Record{"", Kind::kAfter, "stretch", 30, kNow + 30'000}));
  // A whole number written as 30.0 is the integer 30 (as JSON Schema's "integer").
  r = ResolveScheduleCreate(J(R"({"prompt": "p", "after_seconds": 30.0})"), Context());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->after_seconds, 30);
}

TEST(ScheduleCreateArgs, RejectsBadAfterSecondsNamingTheField) {
  for (const char* v : {"0", "-1", "1.5", "\"30\"", "null", "true", "9007199254740992", "1e300", "[30]"}) {
    auto r = ResolveScheduleCreate(J((std::string(R"({"prompt": "p", "after_seconds": )") + v + "}").c_str()),
                                   Context());
    ASSERT_FALSE(r.ok()) << v;
    EXPECT_EQ(r.status().code(), "invalid_arguments") << v;
    EXPECT_TRUE(StartsWith(r.status().message(), "schedule_create: `after_seconds` must be a positive whole number"))
        << r.status().message();
  }
  // A safe integer whose target is past the year 9999.
  auto r = ResolveScheduleCreate(J(R"({"prompt": "p", "after_seconds": 9007199254740991})"), Context());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "invalid_arguments");
  EXPECT_TRUE(Contains(r.status().message(), "`after_seconds` 9007199254740991 puts the reminder after "
                                             "9999-12-31T23:59:59.999Z"))
      << r.status().message();
}

TEST(ScheduleCreateArgs, RejectsBadPromptsAndSelectors) {
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c : {
           Case{R"([])", "schedule_create: arguments must be a JSON object (got array)"},
           Case{R"({"after_seconds": 30})", "schedule_create: `prompt` is required"},
           Case{R"({"prompt": "", "after_seconds": 30})", "schedule_create: `prompt` must not be empty or blank"},
           Case{R"({"prompt": " \t\n", "after_seconds": 30})", "schedule_create: `prompt` must not be empty or blank"},
           Case{R"({"prompt": 5, "after_seconds": 30})", "schedule_create: `prompt` must be a string (got integer 5)"},
           Case{R"({"prompt": "p"})",
                "schedule_create: one of `after_seconds` (seconds from now) or `at` (an absolute time) is required"},
           Case{R"({"prompt": "p", "after_seconds": 30, "at": "2026-01-02T00:00:00Z"})",
                "schedule_create: give exactly one of `after_seconds` or `at`, not both"},
       }) {
    auto r = ResolveScheduleCreate(J(c.args), Context());
    ASSERT_FALSE(r.ok()) << c.args;
    EXPECT_EQ(r.status().code(), "invalid_arguments");
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST(ScheduleCreateArgs, RejectsRecurringRulesAndUnknownProperties) {
  struct Case {
    const char* args;
    std::vector<const char*> says;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"prompt": "p", "every_seconds": 60})", {"`every_seconds` is not supported", "recurring", "loop_create"}},
           {R"({"prompt": "p", "cron": "0 9 * * *"})", {"`cron` is not supported", "recurring", "loop_create"}},
           {R"({"prompt": "p", "after_seconds": 30, "schedule": {"kind": "after"}})", {"unknown property `schedule`"}},
           {R"({"prompt": "p", "at": "2026-01-02T00:00:00Z", "time_zone": "UTC"})",
            {"unknown property `time_zone`", "inside `at`"}},
           {R"({"prompt": "p", "after_seconds": 30, "repeat": true})", {"unknown property `repeat`"}},
       }) {
    auto r = ResolveScheduleCreate(J(c.args), Context());
    ASSERT_FALSE(r.ok()) << c.args;
    EXPECT_EQ(r.status().code(), "invalid_arguments");
    EXPECT_TRUE(StartsWith(r.status().message(), "schedule_create: ")) << r.status().message();
    for (const char* part : c.says) EXPECT_TRUE(Contains(r.status().message(), part)) << r.status().message();
  }
}

TEST(ScheduleCreateArgs, AtStringIsAStrictRfc3339InstantWithAnOffset) {
  auto r = ResolveScheduleCreate(J(R"({"prompt": "p", "at": "2026-01-01T09:00:00+08:00"})"), Context());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (Record{"", Kind::kAt, "p", std::nullopt, kNow + 3'600'000}));
  r = ResolveScheduleCreate(J(R"({"prompt": "p", "at": "2026-01-01T00:00:00.001Z"})"), Context());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->scheduled_at, kNow + 1);

  for (const char* at : {"2026-01-02T09:00:00", "2026-01-02 09:00:00Z", "2026-01-02", "tomorrow", ""}) {
    r = ResolveScheduleCreate(Json{{"prompt", "p"}, {"at", at}}, Context());
    ASSERT_FALSE(r.ok()) << at;
    EXPECT_EQ(r.status().code(), "invalid_timestamp") << at;
    EXPECT_TRUE(StartsWith(r.status().message(), "schedule_create: `at`: ")) << r.status().message();
  }
}

TEST(ScheduleCreateArgs, ATargetNotAfterNowIsNotFuture) {
  auto r = ResolveScheduleCreate(J(R"({"prompt": "p", "at": "2026-01-01T08:00:00+08:00"})"), Context());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "not_future");
  EXPECT_EQ(r.status().message(),
            "schedule_create: `at` \"2026-01-01T08:00:00+08:00\" is 2026-01-01T00:00:00.000Z, which is not after "
            "now (2026-01-01T00:00:00.000Z); give a time in the future");
  r = ResolveScheduleCreate(J(R"({"prompt": "p", "at": "2025-12-31T23:59:59.999Z"})"), Context());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "not_future");

  r = ResolveScheduleCreate(J(R"({"prompt": "p", "at": {"date": "2025-12-31", "time": "18:00", "time_zone": "America/New_York"}})"),
                            Context());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), "not_future");
  EXPECT_EQ(r.status().message(),
            "schedule_create: `at` (2025-12-31 18:00 in America/New_York) is 2025-12-31T23:00:00.000Z, which is not "
            "after now (2026-01-01T00:00:00.000Z); give a time in the future");
}

TEST(ScheduleCreateArgs, LocalAtWithATimeZoneUsesThatZone) {
  auto r = ResolveScheduleCreate(
      J(R"({"prompt": "p", "at": {"date": "2026-01-02", "time": "09:00", "time_zone": "Asia/Shanghai"}})"),
      Context("America/New_York", "Europe/London", "UTC"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (Record{"", Kind::kAt, "p", std::nullopt, kNow + 25 * 3'600'000}));  // 2026-01-02T01:00:00Z
  r = ResolveScheduleCreate(
      J(R"({"prompt": "p", "at": {"date": "2026-01-02", "time": "09:00:30", "time_zone": "US/Eastern"}})"), Context());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->scheduled_at, kNow + 38 * 3'600'000 + 30'000);  // 14:00:30Z
}

TEST(ScheduleCreateArgs, RejectsMalformedLocalAtNamingTheField) {
  struct Case {
    const char* at;
    const char* code;
    const char* says;
  };
  for (const Case& c : {
           Case{R"(5)", "invalid_arguments", "`at` must be an RFC 3339 string with an offset or an object"},
           Case{R"(["2026-01-02", "09:00"])", "invalid_arguments", "`at` must be an RFC 3339 string"},
           Case{R"({"date": "2026-01-02", "time": "09:00", "zone": "UTC"})", "invalid_arguments",
                "unknown property `at.zone`"},
           Case{R"({"time": "09:00"})", "invalid_arguments", "`at.date` is required"},
           Case{R"({"date": "2026-01-02"})", "invalid_arguments", "`at.time` is required"},
           Case{R"({"date": 20260102, "time": "09:00"})", "invalid_arguments", "`at.date` must be a string"},
           Case{R"({"date": "2026-01-02", "time": 900})", "invalid_arguments", "`at.time` must be a string"},
           Case{R"({"date": "2026-01-02", "time": "09:00", "time_zone": 8})", "invalid_arguments",
                "`at.time_zone` must be an IANA time zone name string"},
           Case{R"({"date": "2026-02-30", "time": "09:00", "time_zone": "UTC"})", "invalid_local_time",
                "`at`: date 2026-02-30 does not exist"},
           Case{R"({"date": "2026-1-2", "time": "09:00", "time_zone": "UTC"})", "invalid_local_time",
                "`at`: date \"2026-1-2\" must be YYYY-MM-DD"},
           Case{R"({"date": "2026-01-02", "time": "24:00", "time_zone": "UTC"})", "invalid_local_time",
                "`at`: hour 24"},
           Case{R"({"date": "2026-01-02", "time": "9:30", "time_zone": "UTC"})", "invalid_local_time",
                "`at`: time \"9:30\" must be HH:MM or HH:MM:SS"},
           Case{R"({"date": "2026-01-02", "time": "09:00", "time_zone": "CST"})", "invalid_time_zone",
                "`at.time_zone`: "},
           Case{R"({"date": "2026-01-02", "time": "09:00", "time_zone": "+08:00"})", "invalid_time_zone",
                "`at.time_zone`: "},
           // Past the last instant dsh can write: out of range, not a gap.
           Case{R"({"date": "9999-12-31", "time": "23:00", "time_zone": "America/New_York"})", "invalid_local_time",
                "outside the supported range"},
           // Shape errors come before the zone question.
           Case{R"({"date": "2026-02-30", "time": "09:00"})", "invalid_local_time", "does not exist"},
       }) {
    auto r = ResolveScheduleCreate(J((std::string(R"({"prompt": "p", "at": )") + c.at + "}").c_str()),
                                   Context("Asia/Shanghai", "America/New_York"));
    ASSERT_FALSE(r.ok()) << c.at;
    EXPECT_EQ(r.status().code(), c.code) << c.at << " -> " << r.status().ToString();
    EXPECT_TRUE(StartsWith(r.status().message(), "schedule_create: ")) << r.status().message();
    EXPECT_TRUE(Contains(r.status().message(), c.says)) << c.at << " -> " << r.status().message();
  }
}

TEST(ScheduleCreateArgs, LocalAtWithoutZoneNeedsThePersonsZoneToBeTheSessions) {
  const Json args = J(R"({"prompt": "p", "at": {"date": "2026-01-02", "time": "09:00"}})");
  const int64_t shanghai_nine = kNow + 25 * 3'600'000;  // 2026-01-02T01:00:00Z
  struct Case {
    CreateContext context;
    const char* situation;  // nullptr: accepted in the session's zone
  };
  for (const Case& c : std::vector<Case>{
           {Context("Asia/Shanghai", "Asia/Shanghai", "UTC"), nullptr},
           {Context("Asia/Shanghai", std::nullopt, "Asia/Shanghai"), nullptr},
           {Context("Asia/Kolkata", "Asia/Calcutta", "UTC"), nullptr},  // an alias of the same zone
           {Context("Asia/Shanghai", "America/New_York", "Asia/Shanghai"),
            "the session's zone is Asia/Shanghai and this request came from America/New_York"},
           {Context("Asia/Shanghai", std::nullopt, "Europe/Paris"),
            "the session's zone is Asia/Shanghai and this request carried no zone and the host's zone is Europe/Paris"},
           {Context("", "UTC", "UTC"), "this session has no recorded time zone (this request came from UTC)"},
           {Context("", std::nullopt, "UTC"), "this session has no recorded time zone"},
           {Context("Asia/Shanghai", "Mars/Olympus", "Asia/Shanghai"),
            "the session's zone is Asia/Shanghai and this request came from an unrecognized zone \"Mars/Olympus\""},
           {Context("Asia/Shanghai", "", "Asia/Shanghai"), "this request came from an unrecognized zone \"\""},
       }) {
    auto r = ResolveScheduleCreate(args, c.context);
    if (!c.situation) {
      ASSERT_TRUE(r.ok()) << c.context.session_zone << ": " << r.status().ToString();
      if (c.context.session_zone == "Asia/Shanghai") {
        EXPECT_EQ(r->scheduled_at, shanghai_nine);
      }
      continue;
    }
    ASSERT_FALSE(r.ok()) << c.situation;
    EXPECT_EQ(r.status().code(), "timezone_confirmation_required");
    const std::string& m = r.status().message();
    EXPECT_TRUE(StartsWith(m, "schedule_create: `at` has no `time_zone`, and ")) << m;
    EXPECT_TRUE(Contains(m, c.situation)) << m;
    EXPECT_TRUE(Contains(m, "Ask the person which time zone they mean, then retry with `at.time_zone`")) << m;
  }
  // With time_zone the session's zone does not matter.
  auto r = ResolveScheduleCreate(
      J(R"({"prompt": "p", "at": {"date": "2026-01-02", "time": "09:00", "time_zone": "Asia/Shanghai"}})"),
      Context("", "America/New_York"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->scheduled_at, shanghai_nine);
}

// Daylight saving for local `at`: a gap is rejected, an overlap takes its
// first instant. The same dates as src/time/local_time_test.cc, and 2027.
TEST(ScheduleCreateArgs, LocalAtDaylightSavingTable) {
  struct Case {
    const char* zone;
    const char* date;
    const char* time;
    const char* want;  // the canonical UTC target, or "nonexistent_local_time"
  };
  for (const Case& c : {
           // America/New_York: gap 02:00-03:00 in March, 01:00-02:00 twice in November.
           Case{"America/New_York", "2026-03-08", "02:30", "nonexistent_local_time"},
           Case{"America/New_York", "2026-03-08", "03:00", "2026-03-08T07:00:00.000Z"},
           Case{"America/New_York", "2026-11-01", "01:30", "2026-11-01T05:30:00.000Z"},
           Case{"America/New_York", "2026-07-04", "12:00", "2026-07-04T16:00:00.000Z"},
           Case{"America/New_York", "2027-03-14", "02:00", "nonexistent_local_time"},
           Case{"America/New_York", "2027-11-07", "01:30", "2027-11-07T05:30:00.000Z"},
           // Europe/London: gap 01:00-02:00 in March, 01:00-02:00 twice in October.
           Case{"Europe/London", "2026-03-29", "01:30", "nonexistent_local_time"},
           Case{"Europe/London", "2026-10-25", "01:30", "2026-10-25T00:30:00.000Z"},
           Case{"Europe/London", "2026-07-01", "09:00", "2026-07-01T08:00:00.000Z"},
           Case{"Europe/London", "2027-03-28", "01:59:59", "nonexistent_local_time"},
           Case{"Europe/London", "2027-10-31", "01:30", "2027-10-31T00:30:00.000Z"},
           // Australia/Lord_Howe shifts by 30 minutes: gap 02:00-02:30, overlap 01:30-02:00.
           Case{"Australia/Lord_Howe", "2026-10-04", "02:15", "nonexistent_local_time"},
           Case{"Australia/Lord_Howe", "2026-10-04", "02:30", "2026-10-03T15:30:00.000Z"},
           Case{"Australia/Lord_Howe", "2026-04-05", "01:45", "2026-04-04T14:45:00.000Z"},
           Case{"Australia/Lord_Howe", "2026-07-01", "09:00", "2026-06-30T22:30:00.000Z"},
           Case{"Australia/Lord_Howe", "2027-10-03", "02:15", "nonexistent_local_time"},
           Case{"Australia/Lord_Howe", "2027-04-04", "01:45", "2027-04-03T14:45:00.000Z"},
           // Asia/Shanghai has no daylight saving: New York's gap hour exists there.
           Case{"Asia/Shanghai", "2026-03-08", "02:30", "2026-03-07T18:30:00.000Z"},
           Case{"Asia/Shanghai", "2026-11-01", "01:30", "2026-10-31T17:30:00.000Z"},
       }) {
    // Once with an explicit zone, once through the session's zone.
    const Json local = Json{{"date", c.date}, {"time", c.time}};
    Json explicit_zone = local;
    explicit_zone["time_zone"] = c.zone;
    for (const auto& [at, context] : {std::pair{explicit_zone, Context("UTC", "UTC")},
                                     std::pair{local, Context(c.zone, c.zone)}}) {
      auto r = ResolveScheduleCreate(Json{{"prompt", "p"}, {"at", at}}, context);
      const std::string where = std::string(c.zone) + " " + c.date + " " + c.time;
      if (std::string(c.want) == "nonexistent_local_time") {
        ASSERT_FALSE(r.ok()) << where;
        EXPECT_EQ(r.status().code(), "nonexistent_local_time") << where << ": " << r.status().ToString();
        EXPECT_TRUE(StartsWith(r.status().message(), "schedule_create: `at`: ")) << r.status().message();
        EXPECT_TRUE(Contains(r.status().message(), std::string("does not exist in ") + c.zone)) << r.status().message();
        EXPECT_TRUE(Contains(r.status().message(), "jump from")) << r.status().message();
      } else {
        ASSERT_TRUE(r.ok()) << where << ": " << r.status().ToString();
        EXPECT_EQ(RecordView(*r, kNow)["scheduled_at"], c.want) << where;
      }
    }
  }
}

TEST(ScheduleCreateArgs, GapMessageNamesTheGap) {
  auto r = ResolveScheduleCreate(
      J(R"({"prompt": "p", "at": {"date": "2026-03-08", "time": "02:30", "time_zone": "America/New_York"}})"),
      Context());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ToString(),
            "nonexistent_local_time: schedule_create: `at`: 2026-03-08 02:30:00 does not exist in America/New_York: "
            "the clocks in America/New_York jump from 02:00 to 03:00 at 2026-03-08T07:00:00.000Z; choose a time "
            "outside the gap");
}

// ---- schedule_delete / schedule_list arguments ----

TEST(ScheduleDeleteArgs, TakesExactlyANonEmptyId) {
  auto id = DecodeScheduleDelete(J(R"({"id": "schedule-2"})"));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "schedule-2");
  id = DecodeScheduleDelete(J(R"({"id": "whatever"})"));  // unknown ids are an answer, not an error
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "whatever");
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c : {
           Case{R"({})", "schedule_delete: `id` is required"},
           Case{R"({"id": ""})", "schedule_delete: `id` must not be empty"},
           Case{R"({"id": 2})", "schedule_delete: `id` must be a string (got integer 2)"},
           Case{R"({"id": "schedule-1", "force": true})", "schedule_delete: unknown property `force`"},
           Case{R"("schedule-1")", "schedule_delete: arguments must be a JSON object (got string \"schedule-1\")"},
       }) {
    auto r = DecodeScheduleDelete(J(c.args));
    ASSERT_FALSE(r.ok()) << c.args;
    EXPECT_EQ(r.status().code(), "invalid_arguments");
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST(ScheduleListArgs, TakesNoArguments) {
  EXPECT_TRUE(DecodeScheduleList(J("{}")).ok());
  Status bad = DecodeScheduleList(J(R"({"session_id": "global"})"));
  EXPECT_EQ(bad.code(), "invalid_arguments");
  EXPECT_EQ(bad.message(), "schedule_list: unknown property `session_id`");
  EXPECT_EQ(DecodeScheduleList(J("null")).code(), "invalid_arguments");
}

// ---- what models see ----

TEST(ScheduleSchemas, CreateOffersExactlyOneOfTwoAbsoluteSelectors) {
  const Json s = ScheduleCreateParameters();
  EXPECT_EQ(s["type"], "object");
  EXPECT_EQ(s["additionalProperties"], false);
  EXPECT_EQ(s["required"], J(R"(["prompt"])"));
  std::vector<std::string> properties;
  for (const auto& [name, value] : s["properties"].items()) properties.push_back(name);
  EXPECT_EQ(properties, (std::vector<std::string>{"after_seconds", "at", "prompt"}));
  EXPECT_EQ(s["oneOf"], J(R"([{"required": ["after_seconds"]}, {"required": ["at"]}])"));
  EXPECT_EQ(s["properties"]["after_seconds"]["type"], "integer");
  EXPECT_EQ(s["properties"]["after_seconds"]["minimum"], 1);
  EXPECT_EQ(s["properties"]["after_seconds"]["maximum"], 9'007'199'254'740'991);
  const Json& at = s["properties"]["at"]["oneOf"];
  ASSERT_EQ(at.size(), 2u);
  EXPECT_EQ(at[0]["type"], "string");
  EXPECT_EQ(at[1]["type"], "object");
  EXPECT_EQ(at[1]["additionalProperties"], false);
  EXPECT_EQ(at[1]["required"], J(R"(["date", "time"])"));
  EXPECT_TRUE(at[1]["properties"].contains("time_zone"));

  const std::string description = s["description"];
  EXPECT_EQ(description, ScheduleCreateDescription());
  for (const char* part : {"session-local", "absolute", "time_zone", "loop_create", "no recurring"}) {
    EXPECT_TRUE(Contains(description, part)) << part;
  }
}

TEST(ScheduleSchemas, DeleteAndListAreClosedObjects) {
  const Json del = ScheduleDeleteParameters();
  EXPECT_EQ(del["additionalProperties"], false);
  EXPECT_EQ(del["required"], J(R"(["id"])"));
  EXPECT_EQ(del["properties"]["id"]["type"], "string");
  EXPECT_EQ(del["description"], ScheduleDeleteDescription());
  const Json list = ScheduleListParameters();
  EXPECT_EQ(list["type"], "object");
  EXPECT_EQ(list["additionalProperties"], false);
  EXPECT_EQ(list["properties"], Json::object());
  EXPECT_EQ(list["description"], ScheduleListDescription());
}

}  // namespace
}  // namespace dsh::plugins::schedule
