#!/usr/bin/env bash
# Static instruction counts of generated naive-kernel variants, from their PTX (no GPU needed):
# global loads, shared loads and FMAs per variant. Shows what thread merge's once-per-thread
# loads and the shared-memory paths do to the code, before any measurement.
#   bench/naive_ptx_counts.sh configs/naive/mm_sgemm.json [LIMIT] [ARCH]
# Needs build/gputune and nvcc (CUDA toolkit at /usr/local/cuda).
set -euo pipefail
job=${1:?usage: $0 JOB.json [LIMIT] [ARCH]}
limit=${2:-12}
arch=${3:-sm_90}
root=$(cd "$(dirname "$0")/.." && pwd)
gputune=${GPUTUNE:-$root/build/gputune}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
kernel=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['KernelSpecification']['KernelName'])" "$job")
file=$(python3 -c "import json,sys,os; j=json.load(open(sys.argv[1])); print(os.path.join(os.path.dirname(sys.argv[1]), j['KernelSpecification']['KernelFile']))" "$job")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$gputune" generate "$file" --kernel "$kernel" --job "$job" --out "$tmp/cu" --limit "$limit" >/dev/null
printf "%-70s %9s %9s %6s %14s\n" variant ld.global ld.shared fma "fma/ld.shared"
for cu in "$tmp"/cu/*.cu; do
  "$nvcc" -ptx -arch="$arch" -O3 -w -o "$tmp/v.ptx" "$cu"
  g=$(grep -c "ld\.global" "$tmp/v.ptx" || true)
  s=$(grep -c "ld\.shared" "$tmp/v.ptx" || true)
  f=$(grep -c "fma\.rn\.f32" "$tmp/v.ptx" || true)
  r=$(awk -v f="$f" -v s="$s" 'BEGIN { if (s > 0) printf "%.2f", f / s; else print "-" }')
  printf "%-70s %9s %9s %6s %14s\n" "$(basename "$cu" .cu)" "$g" "$s" "$f" "$r"
done
