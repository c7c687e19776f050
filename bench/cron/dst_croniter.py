"""Prints what python3-croniter answers for the DST cases of dst_cases.json."""
import json
import sys
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from croniter import croniter

for c in json.load(open(sys.argv[1])):
    start = datetime.fromisoformat(c["after"].replace("Z", "+00:00")).astimezone(ZoneInfo(c["zone"]))
    it = croniter(c["expr"], start)
    out = [datetime.fromtimestamp(it.get_next(float), timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
           for _ in range(c["count"])]
    print(json.dumps({"engine": "croniter", "case": c["name"], "occurrences": out}))
