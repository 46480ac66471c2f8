#!/usr/bin/env bash
# API latency under load (wrk from a second process on loopback) and dashboard page-load time
# (headless Chromium) against a database of one million measurements. Writes
# bench/results/web-<host>-<date>.md. Usage: bench/run_web_benchmarks.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out_dir=$root/bench/out
mkdir -p "$out_dir"
db=$out_dir/big.db
if [ ! -f "$db" ]; then
  echo "building $db (1,000,000 measurements)..."
  "$build/bench/make_big_db" "$db" 1000000
fi
port=18123
"$build/gputune" serve --db "$db" --port $port --no-gpu > "$out_dir/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/api/devices" >/dev/null && break; sleep 0.2; done
date=$(date -u +%Y-%m-%d)
result=$root/bench/results/web-$(hostname -s)-$date.md
endpoints=(
  "/api/runs/1/measurements?limit=50"
  "/api/runs/1/measurements?limit=50&status=correct&sort=occupancy&order=desc"
  "/api/runs/1/measurements?limit=50&context=3&sort=time_ms"
  "/api/runs/1/measurements?limit=50&offset=5000&sort=registers"
  "/api/runs?limit=20"
  "/api/runs/1"
  "/api/best?kernel=bench_kernel&context=ctx-3"
  "/api/winners?limit=20"
  "/api/kernels/1"
  "/api/runs/1/best.svg"
)
{
  echo "# Web benchmarks, $date"
  echo
  echo "- machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), no GPU; wrk and the server share these cores"
  echo "- commit: $(git -C "$root" rev-parse --short HEAD)"
  echo "- database: $(sqlite3 "$db" 'select count(*) from runs') runs, $(sqlite3 "$db" 'select count(*) from measurements') measurements ($(du -h "$db" | cut -f1)); run 1 holds 600,000"
  echo "- load: \`wrk -t2 -c16 -d10s --latency URL\` per endpoint, from a second process on loopback"
  echo
  echo "| endpoint | requests/s | p50 | p90 | p99 |"
  echo "|---|---|---|---|---|"
  for e in "${endpoints[@]}"; do
    w=$(wrk -t2 -c16 -d10s --latency "http://127.0.0.1:$port$e")
    rps=$(echo "$w" | awk '/Requests\/sec/{print $2}')
    p50=$(echo "$w" | awk '$1=="50%"{print $2}')
    p90=$(echo "$w" | awk '$1=="90%"{print $2}')
    p99=$(echo "$w" | awk '$1=="99%"{print $2}')
    non2xx=$(echo "$w" | awk '/Non-2xx/{print " (non-2xx: "$NF")"}')
    echo "| \`$e\` | $rps$non2xx | $p50 | $p90 | $p99 |"
  done
  echo
  echo "## Dashboard page load (headless Chromium, navigation start to data drawn, median of 5 after a warm-up)"
  echo '```'
  "$build/bench/dashboard_bench" "http://127.0.0.1:$port" "/" "/kernel.html?id=1" "/run.html?id=1" "/history.html?context=1"
  echo '```'
} > "$result"
echo "wrote $result"
