#!/usr/bin/env bash
# Runs the DST cases of dst_cases.json through `dsh cron next` and the peers
# (croner, cron-parser, croniter) and prints one markdown table per case, in
# UTC; docs/TIME.md quotes the result. Usage: bench/cron/dst_compare.sh [BUILD_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build}"
cmake --build "$build" --target dsh -j2 >/dev/null
if [ ! -d "$here/node_modules" ]; then (cd "$here" && npm ci --no-audit --no-fund >/dev/null); fi
results="$(mktemp)"
trap 'rm -f "$results"' EXIT
DSH="$build/dsh" /usr/bin/python3 - "$here/dst_cases.json" >>"$results" <<'PY'
import json, os, subprocess, sys
from datetime import datetime, timezone
for c in json.load(open(sys.argv[1])):
    out = subprocess.run([os.environ["DSH"], "cron", "next", c["expr"], "--tz", c["zone"], "--from", c["after"],
                          "--count", str(c["count"])], check=True, capture_output=True, text=True).stdout.split()
    utc = [datetime.fromisoformat(x).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z") for x in out]
    print(json.dumps({"engine": "dsh", "case": c["name"], "occurrences": utc, "local": out}))
PY
node "$here/dst_peers.mjs" "$here/dst_cases.json" >>"$results"
/usr/bin/python3 "$here/dst_croniter.py" "$here/dst_cases.json" >>"$results"
/usr/bin/python3 - "$here/dst_cases.json" "$results" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))
rows = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
for c in cases:
    print(f"**{c['name']}**: `{c['expr']}` in {c['zone']} after {c['after']}\n")
    print("| engine | occurrences (UTC) |\n|---|---|")
    ours = None
    for r in rows:
        if r["case"] != c["name"]:
            continue
        if r["engine"] == "dsh":
            ours = r["occurrences"]
            print(f"| dsh | {', '.join(x[:16] for x in r['occurrences'])} (local: {', '.join(x[11:16] + ' ' + x[19:] for x in r['local'])}) |")
        else:
            mark = "same" if r["occurrences"] == ours else "differs"
            print(f"| {r['engine']} | {', '.join(x[:16] for x in r['occurrences'])} ({mark}) |")
    print()
PY
