#!/usr/bin/env bash
# Runs the CPU benchmarks (space construction, compile throughput, database insert rate) and writes
# bench/results/cpu-<host>-<date>.md with the machine, the date, the commands and the numbers.
# Usage: bench/run_cpu_benchmarks.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
date=$(date -u +%Y-%m-%d)
out=$root/bench/results/cpu-$(hostname -s)-$date.md
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
{
  echo "# CPU benchmarks, $date"
  echo
  echo "- machine: $(nproc) cores ($cpu), $(free -g | awk '/Mem:/{print $2}') GiB, $(. /etc/os-release; echo "$PRETTY_NAME"), no GPU"
  echo "- commit: $(git -C "$root" rev-parse --short HEAD)"
  echo "- NVRTC: $(/usr/local/cuda/bin/nvcc --version | tail -1)"
  echo
  echo '## Space construction (`'"$build"'/bench/space_bench`)'
  echo '```'
  "$build/bench/space_bench" --benchmark_min_time=2 2>&1 | grep -E '^(BM_|Benchmark|---)'
  echo '```'
  echo
  echo '## Compile throughput (`'"$build"'/bench/compile_bench 96 sm_90`)'
  echo '```'
  "$build/bench/compile_bench" 96 sm_90
  echo '```'
  echo
  echo '## Database insert rate and what a run reads before measuring (`'"$build"'/bench/db_bench`)'
  echo '```'
  "$build/bench/db_bench" 2>&1 | grep -E '^(BM_|Benchmark|---)'
  echo '```'
} > "$out"
echo "wrote $out"
