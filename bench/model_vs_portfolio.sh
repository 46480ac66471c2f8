#!/usr/bin/env bash
# model_guided with the model against the same search without predictions (the portfolio), on
# every recorded space whose kernel gputune has: the H100 examples (../shared/data/h100-2026-11-26,
# measured by gputune), the benchmark hub's convolution and dedispersion on the RTX A4000. Each
# line: the space, then `gputune replay`'s rows for portfolio (no model: N seeds) and
# model_guided with the model (--device, M seeds), measurements to 1/5/10% of the optimum.
#
# Usage: bash bench/model_vs_portfolio.sh [--seeds N] [--model-seeds M] [--only NAME] [--cache-dir D]
# Needs build/gputune and ../shared/data. No GPU: replay predicts for the named device and
# compiles what the search asks for (the hub's convolution: ~2.5 s a compile, minutes a seed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${GPUTUNE_SHARED_DATA:-$root/../shared/data}
seeds=100
model_seeds=5
only=""
cache=""
while (($#)); do
  case $1 in
    --seeds) seeds=$2; shift 2 ;;
    --model-seeds) model_seeds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --cache-dir) cache=$2; shift 2 ;;
    *) echo "model_vs_portfolio.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
gputune=$root/build/gputune
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The matmul job as measured, its kernel the example's.
python3 - "$data/h100-2026-11-26/matmul_4096_r7.json" "$root/configs/examples/matmul.cu" \
  "$tmp/matmul.json" <<'EOF'
import json, sys
job = json.load(open(sys.argv[1]))
job["KernelSpecification"]["KernelFile"] = sys.argv[2]
json.dump(job, open(sys.argv[3], "w"))
EOF
h100="NVIDIA H100 80GB HBM3"
hub=$root/configs/community/benchmark-hub
# name | job | measurements | device | extra replay options
spaces=(
  "matmul-h100|$tmp/matmul.json|$data/h100-2026-11-26/matmul_4096_r7.4096.t4.json|$h100|"
  "transpose-4096-h100|$root/configs/examples/transpose.json|$data/h100-2026-11-26/transpose.4096x4096.t4.json|$h100|--context 4096x4096"
  "transpose-1000x3000-h100|$root/configs/examples/transpose.json|$data/h100-2026-11-26/transpose.1000x3000.t4.json|$h100|--context 1000x3000"
  "dedispersion-a4000|$hub/dedispersion_milo_corrected.json|$data/kernel-tuner-cache/dedispersion_A4000.json.gz|rtx-a4000|"
  "convolution-a4000|$hub/convolution_milo.json|$data/community-spaces/benchmark-hub/cachefiles/convolution_milo_A4000.json.gz|rtx-a4000|"
)
echo "# $(date -u +%Y-%m-%dT%H:%MZ); gputune $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo '+changes'); $(nproc) cores"
for line in "${spaces[@]}"; do
  IFS='|' read -r name job meas device extra <<<"$line"
  [ -n "$only" ] && [ "$only" != "$name" ] && continue
  echo "== $name"
  # shellcheck disable=SC2086
  "$gputune" replay "$job" --measurements "$meas" --seeds "$seeds" --within 1,5,10 \
    --strategies portfolio $extra 2>/dev/null | grep -E "^portfolio "
  start=$(date +%s)
  # shellcheck disable=SC2086
  "$gputune" replay "$job" --measurements "$meas" --seeds "$seeds" --within 1,5,10 \
    --device "$device" --model-seeds "$model_seeds" --strategies model_guided $extra \
    ${cache:+--cache-dir "$cache"} 2>/dev/null | grep -E "^model_guided |^model:|compiled"
  echo "(with the model: $(($(date +%s) - start)) s)"
done
