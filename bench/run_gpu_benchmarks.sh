#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: end-to-end variants/s and the tuned matmul next to cuBLAS SGEMM
# at 4096^3, written to bench/results/gpu-<device>-<date>.md. Usage: bench/run_gpu_benchmarks.sh [BUILD_DIR]
# Stopped by SIGINT (bench/on_device.sh's step limit), it still writes what gpu_bench printed.
set -euo pipefail
trap 'echo "run_gpu_benchmarks: stop signal: writing what was measured" >&2' INT
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
date=$(date -u +%Y-%m-%d)
tmp=$(mktemp)
rc=0
"$build/bench/gpu_bench" 4096 | tee -i "$tmp" || rc=$?
if [[ $rc -eq 3 ]]; then rm -f "$tmp"; exit 3; fi  # no CUDA device: nothing measured
dev=$(sed -n 's/^device: \([^(]*\).*/\1/p' "$tmp" | tr -c 'A-Za-z0-9\n' '-' | sed 's/-*$//')
out=$root/bench/results/gpu-${dev:-unknown}-$date.md
{
  echo "# GPU benchmarks, $date"
  echo
  echo "- command: \`bench/run_gpu_benchmarks.sh\` (\`$build/bench/gpu_bench 4096\`, exit $rc)"
  echo "- commit: ${GPUTUNE_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null || echo unknown)"
  echo
  echo '```'
  cat "$tmp"
  echo '```'
} > "$out"
rm -f "$tmp"
echo "wrote $out"
exit $rc
