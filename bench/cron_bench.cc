// Cron occurrences per second, chained Next() from fixed start instants, for
// the rules, zones and chain lengths in bench/cron/cases.json -- the same
// input bench/cron/run.sh gives the peer engines (croner, cron-parser,
// croniter). Prints JSON lines:
//   {"engine":"dsh","zone":Z,"occurrences":N,"seconds":S,"per_second":R}
//   {"engine":"dsh","zone":Z,"rule":E,"digests":[...]}   one per rule: the sum
//     of each start's chain in Unix seconds, to check engines agree.
// Usage: cron_bench [cases.json]

#include <benchmark/benchmark.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "base/json.h"
#include "bench_cli.h"
#include "time/cron_expr.h"
#include "time/rfc3339.h"

namespace {

struct Rule {
  std::string text;
  dsh::CronExpr expr;
  int count;
};

int64_t UnixSeconds(dsh::WallTime t) {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}

int Fail(const std::string& message) {
  std::cerr << "cron_bench: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = DSH_CRON_CASES;
  CLI::App app("Cron occurrences per second, chained Next() from fixed start instants; prints JSON lines.",
               "cron_bench");
  dsh::bench::UseBenchOptionDefaults(app);
  app.add_option("cases", path, "the rules, zones, starts and chain lengths (bench/cron/cases.json)");
  if (auto exit_code = dsh::bench::ParseCommandLine(app, argc, argv)) return *exit_code;
  std::ifstream in(path);
  if (!in) return Fail("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto cases = dsh::ParseJson(text.str());
  if (!cases.ok()) return Fail(cases.status().ToString());

  std::vector<Rule> rules;
  for (const auto& r : (*cases)["rules"]) {
    auto expr = dsh::CronExpr::Parse(r["expr"].get<std::string>());
    if (!expr.ok()) return Fail(expr.status().ToString());
    rules.push_back({r["expr"].get<std::string>(), *expr, r["count"].get<int>()});
  }
  std::vector<dsh::WallTime> starts;
  for (const auto& s : (*cases)["starts"]) {
    auto t = dsh::ParseRfc3339(s.get<std::string>());
    if (!t.ok()) return Fail(t.status().ToString());
    starts.push_back(*t);
  }
  const double min_seconds = (*cases)["min_seconds"].get<double>();

  for (const auto& z : (*cases)["zones"]) {
    auto zone = dsh::ResolveTimeZone(z.get<std::string>());
    if (!zone.ok()) return Fail(zone.status().ToString());

    // Untimed pass: warms caches and yields the digests.
    for (const Rule& rule : rules) {
      dsh::Json digests = dsh::Json::array();
      for (dsh::WallTime start : starts) {
        int64_t sum = 0;
        dsh::WallTime t = start;
        for (int i = 0; i < rule.count; ++i) {
          t = *rule.expr.Next(t, *zone);
          sum += UnixSeconds(t);
        }
        digests.push_back(sum);
      }
      std::cout << dsh::Json{{"engine", "dsh"}, {"zone", zone->name()}, {"rule", rule.text}, {"digests", digests}}.dump()
                << "\n";
    }

    int64_t occurrences = 0;
    const auto begin = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      for (const Rule& rule : rules) {
        for (dsh::WallTime start : starts) {
          dsh::WallTime t = start;
          for (int i = 0; i < rule.count; ++i) {
            t = *rule.expr.Next(t, *zone);
            benchmark::DoNotOptimize(t);
          }
          occurrences += rule.count;
        }
      }
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    } while (elapsed < min_seconds);
    std::cout << dsh::Json{{"engine", "dsh"},
                           {"zone", zone->name()},
                           {"occurrences", occurrences},
                           {"seconds", elapsed},
                           {"per_second", static_cast<double>(occurrences) / elapsed}}
                     .dump()
              << "\n";
  }
  return 0;
}
