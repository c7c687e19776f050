"""The Python peer of bench/cron/run.sh: Debian's python3-croniter, chained
from the same start instants over the same rules as cron_bench. Same JSON
lines. Usage: /usr/bin/python3 peer_croniter.py cases.json"""
import json
import sys
import time
from datetime import datetime
from zoneinfo import ZoneInfo

from croniter import croniter

cases = json.load(open(sys.argv[1]))
utc = ZoneInfo("UTC")
starts_utc = [datetime.fromisoformat(s.replace("Z", "+00:00")) for s in cases["starts"]]

for zone_name in cases["zones"]:
    zone = ZoneInfo(zone_name)
    starts = [s.astimezone(zone) for s in starts_utc]
    chains = [(r, croniter(r["expr"], starts[0])) for r in cases["rules"]]

    def run(it, start, count):
        it.set_current(start, force=True)
        return [it.get_next(float) for _ in range(count)]

    for rule, it in chains:
        digests = [sum(int(x) for x in run(it, s, rule["count"])) for s in starts]
        print(json.dumps({"engine": "croniter", "zone": zone_name, "rule": rule["expr"], "digests": digests}))
    occurrences = 0
    begin = time.perf_counter()
    elapsed = 0.0
    while True:
        for rule, it in chains:
            for s in starts:
                run(it, s, rule["count"])
                occurrences += rule["count"]
        elapsed = time.perf_counter() - begin
        if elapsed >= cases["min_seconds"]:
            break
    print(json.dumps({"engine": "croniter", "zone": zone_name, "occurrences": occurrences,
                      "seconds": elapsed, "per_second": occurrences / elapsed}))
