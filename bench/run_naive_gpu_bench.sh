#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: issue #4's figures (each naive kernel as written vs its best
# generated variant at 4096^2 / 16M, and mm, mv, tmv, transpose against cuBLAS and a
# device-to-device copy), appended to bench/results/naive-gpu-<device>-<date>.md. The runs'
# databases stay in bench/out/naive-gpu/ for `gputune export --t4` and `gputune replay`.
# Usage: bench/run_naive_gpu_bench.sh [BUILD_DIR] [--budget N] [JOB.json ...]
# JOB paths are relative to the working folder. SIGINT (bench/on_device.sh's step limit) stops
# naive_gpu_bench's run in hand; what it measured is still appended (exit 5).
set -euo pipefail
trap 'echo "run_naive_gpu_bench: stop signal: writing what was measured" >&2' INT
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
if [[ $# -gt 0 && -d $1 ]]; then build=$1; shift; fi
date=$(date -u +%Y-%m-%d)
keep=$root/bench/out/naive-gpu
mkdir -p "$keep"
tmp=$(mktemp)
rc=0
"$build/bench/naive_gpu_bench" --keep "$keep" "$@" | tee -i "$tmp" || rc=$?
if [[ $rc -eq 3 ]]; then rm -f "$tmp"; exit 3; fi
dev=$(sed -n 's/^device: \([^(]*\).*/\1/p' "$tmp" | tr -c 'A-Za-z0-9\n' '-' | sed 's/-*$//')
out=$root/bench/results/naive-gpu-${dev:-unknown}-$date.md
[[ -f $out ]] || echo "# Naive kernels on the GPU, $date" > "$out"
{
  echo
  echo "- command: \`bench/run_naive_gpu_bench.sh $*\` (exit $rc)"
  echo "- commit: ${GPUTUNE_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null || echo unknown)"
  echo
  cat "$tmp"
} >> "$out"
rm -f "$tmp"
echo "wrote $out"
exit $rc
