#!/usr/bin/env bash
# Issue #46's figure: `gputune db merge` throughput for 8 shards of 100,000 measurements each
# (bench/make_big_db: one kernel, device and job shared, 8 contexts, 100,000 variants, 5 runs per
# shard with random uids, so every shard's runs are distinct), merged into a new OUT, then merged
# again into it (idempotent: nothing added). Writes bench/results/merge-<machine>-<date>.md.
# Usage: bash bench/run_merge_bench.sh [BUILD_DIR] [MACHINE_LABEL] [SHARDS] [MEASUREMENTS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
machine=${2:-vm}
shards=${3:-8}
per=${4:-100000}
day=$(date -u +%F)
out=$root/bench/results/merge-$machine-$day.md
cmake --build "$build" --target gputune make_big_db -j2 >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
files=()
start=$(date +%s.%N)
for i in $(seq 1 "$shards"); do
  "$build/bench/make_big_db" "$tmp/shard$i.db" "$per" 2>/dev/null
  files+=("$tmp/shard$i.db")
done
made=$(printf %.1f "$(echo "$(date +%s.%N) - $start" | bc)")
shard_mb=$(du -cm "${files[@]}" | tail -1 | cut -f1)
# Wall time of one command, in seconds.
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$tmp/last.txt" 2>/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}
first=$(timed "$build/gputune" db merge "$tmp/out.db" "${files[@]}")
first_out=$(tail -1 "$tmp/last.txt")
out_mb=$(du -m "$tmp/out.db" | cut -f1)
second=$(timed "$build/gputune" db merge "$tmp/out.db" "${files[@]}")
second_out=$(tail -1 "$tmp/last.txt")
total=$((shards * per))
integrity=$(sqlite3 "$tmp/out.db" "PRAGMA integrity_check")
count=$(sqlite3 "$tmp/out.db" "SELECT count(*) FROM measurements")
{
  echo "# gputune db merge: throughput ($machine, $day)"
  echo
  echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB, no GPU"
  echo "- commit: $(git -C "$root" rev-parse --short HEAD), command: \`bash bench/run_merge_bench.sh\` ($shards shards of $per measurements)"
  echo "- shards: \`make_big_db SHARD $per\` each ($made s for all, ${shard_mb} MB together): one kernel, device and job,"
  echo "  8 contexts and 100,000 variants shared by all shards, 5 runs per shard (random uids)"
  echo
  echo "| merge | measurements | seconds | measurements/s | OUT |"
  echo "|---|---|---|---|---|"
  echo "| $shards shards into a new OUT | $total | $(printf %.2f "$first") | $(printf %.0f "$(echo "$total / $first" | bc -l)") | ${out_mb} MB |"
  echo "| the same $shards again (nothing new) | $total | $(printf %.2f "$second") | $(printf %.0f "$(echo "$total / $second" | bc -l)") | $(du -m "$tmp/out.db" | cut -f1) MB |"
  echo
  echo "OUT after both: $count measurements, \`PRAGMA integrity_check\`: $integrity."
  echo
  echo "What each merge printed last:"
  echo
  echo '```'
  echo "$first_out" | sed "s|$tmp/||g"
  echo "$second_out" | sed "s|$tmp/||g"
  echo '```'
  echo
  echo "Both times include checking and copying every shard (SQLite's backup API, then"
  echo "\`PRAGMA quick_check\` of the copy) before OUT is opened. The second merge finds every"
  echo "run of the shards in OUT with the same counts per context and status and skips its rows"
  echo "(db/merge.cpp); the shared variants and contexts are matched by hash again."
} > "$out"
echo "wrote $out"
cat "$out"
