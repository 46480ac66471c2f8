#!/usr/bin/env bash
# Static SASS instruction counts of named configurations of the sgemm example (no GPU needed):
# FFMA, shared loads (LDS, of which LDS.128), global loads (LDG, of which 64- and 128-bit), shared
# stores, barriers, registers and spill bytes, and FFMA per shared-load instruction. A fast SGEMM has
# ~8-16 FFMA per LDS.128 in its main loop and no spills.
#   bench/sgemm_sass_counts.sh [NAME=KEY ...]
# KEY: the configuration's values in the job's parameter order, comma-separated, as gputune
# prints them (BM,BN,BK,WM,WN,TM,TN,vector_width,stages), e.g. top1=128,256,8,32,64,8,8,2,2;
# "default" for the job's defaults. Without arguments: the default and the configurations named
# in bench/results/sgemm-model-h100-2026-11-27.md.
# Needs nvcc (CUDA toolkit at /usr/local/cuda) and cuobjdump with nvdisasm (CUOBJDUMP=...; the
# PyPI wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm have them where the toolkit lacks
# them: put their bin folder on PATH).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
job=${JOB:-$root/configs/examples/sgemm.json}
arch=${ARCH:-sm_90}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
if [ $# -eq 0 ]; then
  set -- default \
    top1=128,256,8,32,64,8,8,2,2 \
    top3=256,128,8,64,32,8,8,2,2 \
    top5=128,256,8,64,32,8,8,1,2 \
    top9=128,256,8,64,32,8,8,2,1 \
    bk16=128,128,16,64,32,8,8,4,2 \
    thread8x16=128,128,8,64,64,8,16,4,2 \
    stages1=128,128,8,64,32,8,8,4,1
fi
names=$(python3 -c "import json,sys; print(' '.join(p['Name'] for p in json.load(open(sys.argv[1]))['ConfigurationSpace']['TuningParameters']))" "$job")
defaults=$(python3 -c "import json,sys; print(','.join(str(p['Default']) for p in json.load(open(sys.argv[1]))['ConfigurationSpace']['TuningParameters']))" "$job")
file=$(python3 -c "import json,sys,os; j=json.load(open(sys.argv[1])); print(os.path.join(os.path.dirname(sys.argv[1]), j['KernelSpecification']['KernelFile']))" "$job")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf "%-14s %-28s %5s %5s %7s %5s %6s %7s %4s %4s %5s %6s %9s\n" name config FFMA LDS LDS.128 LDG LDG.64 LDG.128 STS BAR regs spill FFMA/LDS
for arg in "$@"; do
  name=${arg%%=*}
  key=${arg#*=}
  [ "$key" = default ] && key=$defaults
  defs=()
  IFS=, read -r -a values <<<"$key"
  i=0
  for p in $names; do
    defs+=("-D$p=${values[$i]}")
    i=$((i + 1))
  done
  "$nvcc" -cubin -arch="$arch" -O3 -w -Xptxas -v "${defs[@]}" -o "$tmp/v.cubin" "$file" 2>"$tmp/ptxas.txt"
  "$cuobjdump" -sass "$tmp/v.cubin" >"$tmp/v.sass"
  count() { grep -cE "$1" "$tmp/v.sass" || true; }
  ffma=$(count '\bFFMA\b')
  lds=$(count '\bLDS(\.[A-Z0-9.]+)?\b')
  lds128=$(count '\bLDS(\.U)?\.128\b')
  ldg=$(count '\bLDG(\.[A-Z0-9.]+)?\b')
  ldg64=$(count '\bLDG\.E\.64\b')
  ldg128=$(count '\bLDG\.E\.128\b')
  sts=$(count '\bSTS(\.[A-Z0-9.]+)?\b')
  bar=$(count '\bBAR\.')
  regs=$(sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' "$tmp/ptxas.txt" | head -1)
  spill=$(sed -n 's/.* \([0-9]*\) bytes spill stores, \([0-9]*\) bytes spill loads.*/\1+\2/p' "$tmp/ptxas.txt" | head -1)
  ratio=$(awk -v f="$ffma" -v s="$lds" 'BEGIN { if (s > 0) printf "%.2f", f / s; else print "-" }')
  printf "%-14s %-28s %5s %5s %7s %5s %6s %7s %4s %4s %5s %6s %9s\n" "$name" "$key" "$ffma" "$lds" \
    "$lds128" "$ldg" "$ldg64" "$ldg128" "$sts" "$bar" "$regs" "$spill" "$ratio"
done
