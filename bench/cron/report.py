"""Turns the JSON lines of cron_bench and its peers into the comparison
table of docs/PERFORMANCE.md. Usage: report.py results.jsonl"""
import json
import sys

rows, digests = [], {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if "digests" in r:
        digests[(r["engine"], r["zone"], r["rule"])] = r["digests"]
    else:
        rows.append(r)

ours = {r["zone"]: r["per_second"] for r in rows if r["engine"] == "dsh"}
print("| engine | zone | occurrences/s | dsh ÷ engine | rules whose occurrences equal dsh's |")
print("|---|---|---:|---:|---|")
for r in rows:
    rules = [k[2] for k in digests if k[0] == r["engine"] and k[1] == r["zone"]]
    differ = [rule for rule in rules if digests[(r["engine"], r["zone"], rule)] != digests.get(("dsh", r["zone"], rule))]
    agree = f"{len(rules) - len(differ)}/{len(rules)}" + (f" (differs: {', '.join(differ)})" if differ else "")
    ratio = ours[r["zone"]] / r["per_second"]
    print(f"| {r['engine']} | {r['zone']} | {r['per_second']:,.0f} | {ratio:,.1f}× | {agree} |")
