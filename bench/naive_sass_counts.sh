#!/usr/bin/env bash
# Static SASS counts of named configurations of a naive job's generated space (no GPU needed):
# registers and spills (ptxas), and for each loop that holds FFMA, innermost first, its
# instructions, FFMA and their share, shared loads (of them 128-bit), global loads, cp.async
# copies, shared stores, barriers (bench/sass_loops.py). The same counts as
# bench/sgemm_sass_counts.sh gives the parametric sgemm, so the two sit side by side.
#   bench/naive_sass_counts.sh JOB.json NAME='{"block_size_x": 16, ...}' ...
# A configuration is a `gputune space JOB --list` line. Needs build/gputune, nvcc (CUDA toolkit
# at /usr/local/cuda) and cuobjdump (CUOBJDUMP=...; the PyPI wheels nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm have it where the toolkit lacks it: put their bin folder on PATH).
set -euo pipefail
job=${1:?usage: $0 JOB.json NAME=CONFIG ...}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
gputune=${GPUTUNE:-$root/build/gputune}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
arch=${ARCH:-sm_90}
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
kernel=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['KernelSpecification']['KernelName'])" "$job")
file=$(python3 -c "import json,sys,os; j=json.load(open(sys.argv[1])); print(os.path.join(os.path.dirname(sys.argv[1]), j['KernelSpecification']['KernelFile']))" "$job")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for arg in "$@"; do
  name=${arg%%=*}
  config=${arg#*=}
  "$gputune" generate "$file" --kernel "$kernel" --job "$job" --config "$config" 2>"$tmp/err" |
    sed -n '/^\/\/ Generated/,$p' >"$tmp/v.cu" || true
  if [ ! -s "$tmp/v.cu" ]; then
    echo "$name: $(tail -1 "$tmp/err")"
    continue
  fi
  "$nvcc" -cubin -arch="$arch" -O3 -w -Xptxas -v -o "$tmp/v.cubin" "$tmp/v.cu" 2>"$tmp/ptxas.txt"
  "$cuobjdump" -sass "$tmp/v.cubin" >"$tmp/v.sass"
  regs=$(sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' "$tmp/ptxas.txt" | head -1)
  spill=$(sed -n 's/.* \([0-9]*\) bytes spill stores, \([0-9]*\) bytes spill loads.*/\1+\2/p' "$tmp/ptxas.txt" | head -1)
  echo "$name: $regs registers, spills $spill bytes"
  python3 "$root/bench/sass_loops.py" "$tmp/v.sass" "$name"
done
