// Prints what croner and cron-parser answer for the DST cases of
// dst_cases.json, as JSON lines {engine, case, occurrences: [UTC ISO...]}.
import { readFileSync } from "node:fs";
import { Cron } from "croner";
import { CronExpressionParser } from "cron-parser";

for (const c of JSON.parse(readFileSync(process.argv[2], "utf8"))) {
  const job = new Cron(c.expr, { timezone: c.zone, paused: true });
  let d = new Date(c.after);
  const croner = [];
  for (let i = 0; i < c.count; i++) croner.push((d = job.nextRun(d)).toISOString());
  console.log(JSON.stringify({ engine: "croner", case: c.name, occurrences: croner }));
  const it = CronExpressionParser.parse(c.expr, { currentDate: new Date(c.after), tz: c.zone });
  const parser = [];
  for (let i = 0; i < c.count; i++) parser.push(it.next().toDate().toISOString());
  console.log(JSON.stringify({ engine: "cron-parser", case: c.name, occurrences: parser }));
}
