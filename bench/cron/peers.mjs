// The npm peers of bench/cron/run.sh: croner and cron-parser, chained from the
// same start instants over the same rules as cron_bench. Same JSON lines.
// Usage: node peers.mjs cases.json
import { readFileSync } from "node:fs";
import { Cron } from "croner";
import { CronExpressionParser } from "cron-parser";

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const starts = cases.starts.map((s) => new Date(s));

const engines = {
  croner(expr, zone) {
    const job = new Cron(expr, { timezone: zone, paused: true });
    return (start, count, visit) => {
      let d = start;
      for (let i = 0; i < count; i++) {
        d = job.nextRun(d);
        visit(d.getTime());
      }
    };
  },
  "cron-parser"(expr, zone) {
    const it = CronExpressionParser.parse(expr, { currentDate: starts[0], tz: zone });
    return (start, count, visit) => {
      it.reset(start);
      for (let i = 0; i < count; i++) visit(it.next().getTime());
    };
  },
};

for (const [engine, make] of Object.entries(engines)) {
  for (const zone of cases.zones) {
    const chains = cases.rules.map((r) => ({ rule: r, run: make(r.expr, zone) }));
    for (const { rule, run } of chains) {
      const digests = starts.map((start) => {
        let sum = 0;
        run(start, rule.count, (ms) => (sum += Math.floor(ms / 1000)));
        return sum;
      });
      console.log(JSON.stringify({ engine, zone, rule: rule.expr, digests }));
    }
    let occurrences = 0;
    let sink = 0;
    const begin = process.hrtime.bigint();
    let elapsed = 0;
    do {
      for (const { rule, run } of chains) {
        for (const start of starts) {
          run(start, rule.count, (ms) => (sink += ms));
          occurrences += rule.count;
        }
      }
      elapsed = Number(process.hrtime.bigint() - begin) / 1e9;
    } while (elapsed < cases.min_seconds);
    if (sink === 42) console.error("unreachable");
    console.log(JSON.stringify({ engine, zone, occurrences, seconds: elapsed, per_second: occurrences / elapsed }));
  }
}
