#include "app/cron_command.h"

#include <memory>
#include <ostream>
#include <string>

#include "time/cron_expr.h"
#include "time/rfc3339.h"
#include "time/time_zone.h"

namespace dsh::app {
namespace {

constexpr int kMaxCount = 1000;

struct CronOptions {
  std::string expr;
  std::string tz;
  std::string from;
  int count = 5;
};

int Fail(CommandContext& ctx, const Status& status) {
  ctx.err << "error: " << status.code() << ": " << status.message() << "\n";
  return kExitUsage;
}

int RunNext(CommandContext& ctx, const CronOptions& o) {
  if (o.count < 1 || o.count > kMaxCount) {
    return Fail(ctx, InvalidArguments("--count must be between 1 and " + std::to_string(kMaxCount) + ", got " +
                                      std::to_string(o.count)));
  }
  auto expr = CronExpr::Parse(o.expr);
  if (!expr.ok()) return Fail(ctx, expr.status());
  auto zone = o.tz.empty() ? Result<TimeZone>(HostTimeZone()) : ResolveTimeZone(o.tz);
  if (!zone.ok()) return Fail(ctx, zone.status());
  WallTime t = ctx.clock.Now();
  if (!o.from.empty()) {
    auto from = ParseRfc3339(o.from);
    if (!from.ok()) return Fail(ctx, from.status().WithContext("--from"));
    t = *from;
  }
  for (int i = 0; i < o.count; ++i) {
    std::optional<WallTime> next = expr->Next(t, *zone);
    if (!next) break;  // no later occurrence before the year 10000
    ctx.out << FormatRfc3339InZone(*next, *zone) << "\n";
    t = *next;
  }
  return kExitOk;
}

int RunDescribe(CommandContext& ctx, const CronOptions& o) {
  auto expr = CronExpr::Parse(o.expr);
  if (!expr.ok()) return Fail(ctx, expr.status());
  ctx.out << expr->Describe() << "\n";
  return kExitOk;
}

}  // namespace

void AddCronCommand(CLI::App& root, CommandContext& ctx) {
  // Owned by the command tree for as long as the callbacks can run.
  auto opts = std::make_shared<CronOptions>();
  CLI::App* cron = root.add_subcommand("cron", "Inspect cron rules (local, no host needed)");
  cron->require_subcommand(1);

  CLI::App* next = cron->add_subcommand("next", "Print the next occurrences of a cron rule");
  next->add_option("expr", opts->expr, "Five-field cron rule or @macro, quoted")->required();
  next->add_option("--tz", opts->tz, "IANA time zone (default: the host zone)");
  next->add_option("--from", opts->from, "RFC 3339 instant to start after (default: now)");
  next->add_option("--count", opts->count, "How many occurrences to print (default 5)");
  next->callback([&ctx, opts] { ctx.exit_code = RunNext(ctx, *opts); });

  CLI::App* describe = cron->add_subcommand("describe", "Describe a cron rule in English");
  describe->add_option("expr", opts->expr, "Five-field cron rule or @macro, quoted")->required();
  describe->callback([&ctx, opts] { ctx.exit_code = RunDescribe(ctx, *opts); });
}

}  // namespace dsh::app
