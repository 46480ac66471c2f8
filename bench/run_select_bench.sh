#!/usr/bin/env bash
# Issue #48's figures without a GPU: gputune::select's lookup and open latency (select_bench) and
# leave-one-out on the measured H100 data (../shared/data/h100-2026-11-26) and on synthetic spaces
# (select_loo). Writes bench/results/select-<machine>-<date>.md.
# Usage: bash bench/run_select_bench.sh [BUILD_DIR] [MACHINE_LABEL]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
machine=${2:-vm}
day=$(date -u +%F)
out=$root/bench/results/select-$machine-$day.md
shared=$root/../shared/data/h100-2026-11-26
cmake --build "$build" --target select_bench select_loo -j2 >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The shared databases are read-only: select reads copies.
dbs=()
for f in transpose.db matmul_4096_r7.db; do
  if [[ -f $shared/$f ]]; then cp "$shared/$f" "$tmp/$f" && chmod u+w "$tmp/$f" && dbs+=("$tmp/$f"); fi
done
{
  echo "# gputune::select: lookup latency and leave-one-out ($machine, $day)"
  echo
  echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), no GPU"
  echo "- commit: $(git -C "$root" rev-parse --short HEAD), command: \`bash bench/run_select_bench.sh\`"
  echo
  echo "## Latency (google benchmark, \`select_bench --benchmark_min_time=0.5\`)"
  echo
  echo '```'
  "$build/bench/select_bench" --benchmark_min_time=0.5 2>/dev/null
  echo '```'
  echo
  echo "## Leave-one-out (\`select_loo DATABASES --synthetic\`)"
  echo
  echo "Each row hides one tuned context, selects from the others, and gives the chosen"
  echo "configuration and its measured time over the hidden context's winner (1.000 = the winner)."
  echo "The H100 rows are measured (2026-11-26); the synthetic rows use closed-form times"
  echo "(bench/synthetic_spaces.h) and test the rules, not a GPU. The matmul database holds one"
  echo "context (4096) whose run was interrupted before naming a winner: nothing to leave out."
  "$build/bench/select_loo" "${dbs[@]}" --synthetic | sed "s|$tmp/|../shared/data/h100-2026-11-26/|g"
} > "$out"
echo "wrote $out"
