#!/usr/bin/env bash
# Cron occurrences/second: dsh's engine beside croner and cron-parser (npm) and
# python3-croniter (Debian), on the same rules, zones, start instants and chain
# lengths (cases.json), in one run. Prints a markdown table (docs/PERFORMANCE.md).
# Usage: bench/cron/run.sh [BUILD_DIR]   (default: build/, configured if missing)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build}"

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target cron_bench -j2 >/dev/null
if [ ! -d "$here/node_modules" ]; then
  (cd "$here" && npm ci --no-audit --no-fund >/dev/null)
fi

results="$(mktemp)"
trap 'rm -f "$results"' EXIT
"$build/bench/cron_bench" "$here/cases.json" >>"$results"
node "$here/peers.mjs" "$here/cases.json" >>"$results"
/usr/bin/python3 "$here/peer_croniter.py" "$here/cases.json" >>"$results"
echo "node $(node --version), croner $(node -p 'require("'"$here"'/node_modules/croner/package.json").version'), cron-parser $(node -p 'require("'"$here"'/node_modules/cron-parser/package.json").version'), croniter $(dpkg-query -W -f='${Version}' python3-croniter 2>/dev/null || echo '?'), $(nproc) cores"
echo
/usr/bin/python3 "$here/report.py" "$results"
