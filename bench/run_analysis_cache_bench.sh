#!/usr/bin/env bash
# Times `gputune prune` with the traffic-analysis cache cold and warm (the cubins cached in both,
# so the difference is the model's clang parses), and writes
# bench/results/analysis-cache-<host>-<date>.md with the machine, the commands and the numbers.
# Usage: [CACHE=DIR] bench/run_analysis_cache_bench.sh [BUILD_DIR] [JOB...]
# CACHE: a cache folder to use (its cubins save the first compile; its traffic/ is removed);
# default: a new temporary one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(configs/naive/transpose.json configs/naive/jacobi.json configs/examples/matmul.json)
gputune=$build/gputune
date=$(date -u +%Y-%m-%d)
out=$root/bench/results/analysis-cache-$(hostname -s)-$date.md
if [ -n "${CACHE:-}" ]; then
  cache=$CACHE
else
  cache=$(mktemp -d)
  trap 'rm -rf "$cache"' EXIT
fi
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
seconds() {  # wall seconds of one prune
  local start end
  start=$(date +%s.%N)
  (cd "$root" && "$gputune" prune "$1" --device h100-sxm --no-store --cache-dir "$cache" >/dev/null 2>&1)
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
{
  echo "# Traffic-analysis cache: prune cold and warm, $date"
  echo
  echo "- machine: $(nproc) cores ($cpu), $(free -g | awk '/Mem:/{print $2}') GiB, $(. /etc/os-release; echo "$PRETTY_NAME"), no GPU"
  echo "- commit: $(git -C "$root" rev-parse --short HEAD)"
  echo "- command: \`gputune prune JOB --device h100-sxm --no-store --cache-dir DIR\`, after one"
  echo "  \`--no-model\` prune filled DIR with the cubins; cold: DIR/traffic removed first"
  echo
  echo "| job | configurations | analysis cache cold | warm | speedup |"
  echo "|---|---|---|---|---|"
  for job in "${jobs[@]}"; do
    (cd "$root" && "$gputune" prune "$job" --device h100-sxm --no-store --no-model --cache-dir "$cache" >/dev/null 2>&1)
    n=$(cd "$root" && "$gputune" space "$job" --count)
    rm -rf "$cache/traffic"
    cold=$(seconds "$job")
    warm=$(seconds "$job")
    printf '| %s | %s | %.1f s | %.1f s | %.1fx |\n' "$job" "$n" "$cold" "$warm" "$(echo "$cold / $warm" | bc -l)"
  done
} | tee "$out"
