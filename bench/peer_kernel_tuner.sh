#!/usr/bin/env bash
# gputune's strategies and Kernel Tuner 1.5's, side by side, on the community's recorded spaces
# (every configuration measured on a real GPU), without a GPU: one table of the distinct
# configurations measured until the best is within 1%, 5% and 10% of the optimum (median and 90th
# percentile over seeds) and the methodology's performance score (Willemsen et al., FGCS 2024)
# over measurements and over time, as its package computes it, for both tuners.
#
# - Kernel Tuner runs in its simulation mode (tune_cache), each strategy with max_fevals 2000
#   (bayes_opt 500: its Gaussian process takes seconds a step past that), charged serially: each
#   configuration costs its recorded compile time plus benchmark time. A strategy's trajectories
#   already in the output folder with at least as many seeds are kept (--fresh reruns them):
#   Kernel Tuner's whole set takes hours on 2 cores.
# - gputune's strategies run as `gputune replay` simulates `run`: the same costs, with this
#   machine's compile workers overlapping the measurements (--compile-workers to change).
# - Both write trajectories (bench/out/peer/); bench/peer_table.py scores them all with
#   autotuning_methodology and prints the table (Markdown), also as bench/out/peer/table.json.
#
# The peers live in a virtual environment under bench/out/peer-venv (kernel_tuner==1.5.0,
# autotuning_methodology==1.1.0 from PyPI), never in gputune's own dependencies.
#
# Usage: bash bench/peer_kernel_tuner.sh [--seeds N] [--kt-seeds N] [--strategies a,b,...]
#          [--spaces name,name] [--compile-workers N] [--out DIR] [--fresh]
# Needs build/gputune (bash scripts/setup.sh builds it) and ../shared/data.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${GPUTUNE_SHARED_DATA:-$root/../shared/data}
seeds=100
kt_seeds=100
strategies=random_sample,genetic_algorithm,pso,simulated_annealing,greedy_ils,dual_annealing,diff_evo,firefly_algorithm,adaptive_tabu_greywolf,hybrid_vndx,bayes_opt
slow="hybrid_vndx=1,bayes_opt=20"  # seeds of the strategies that take minutes a seed
fevals="bayes_opt=500"
fresh=0
spaces=hubconv,pnpoly,ktconv,gemm,dedisp
workers=""
out=$root/bench/out/peer
while (($#)); do
  case $1 in
    --seeds) seeds=$2; shift 2 ;;
    --kt-seeds) kt_seeds=$2; shift 2 ;;
    --strategies) strategies=$2; shift 2 ;;
    --spaces) spaces=$2; shift 2 ;;
    --compile-workers) workers=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --fresh) fresh=1; shift ;;
    *) echo "peer_kernel_tuner.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
gputune=$root/build/gputune
[ -x "$gputune" ] || { echo "peer_kernel_tuner.sh: build/gputune missing: bash scripts/setup.sh" >&2; exit 2; }
venv=$root/bench/out/peer-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import kernel_tuner, autotuning_methodology" 2>/dev/null; then
  echo "peer_kernel_tuner.sh: making $venv (kernel_tuner 1.5.0, autotuning_methodology 1.1.0)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "kernel_tuner==1.5.0" "autotuning_methodology==1.1.0"
fi
mkdir -p "$out"

declare -A job cache
job[hubconv]=$root/configs/community/benchmark-hub/convolution_milo.json
cache[hubconv]=$data/community-spaces/benchmark-hub/cachefiles/convolution_milo_A4000.json.gz
job[pnpoly]=$root/configs/community/kernel-tuner/pnpoly.json
cache[pnpoly]=$data/community-spaces/kernel-tuner-examples/pnpoly_RTX_2080_Ti.json.gz
job[ktconv]=$root/configs/community/kernel-tuner/convolution.json
cache[ktconv]=$data/community-spaces/kernel-tuner-examples/convolution_RTX_2080_Ti.json.gz
job[gemm]=$root/configs/community/kernel-tuner/gemm.json
cache[gemm]=$data/community-spaces/kernel-tuner-examples/gemm_RTX_2080_Ti.json.gz
job[dedisp]=$root/configs/community/benchmark-hub/dedispersion_milo.json
cache[dedisp]=$data/kernel-tuner-cache/dedispersion_A4000.json.gz

{
  echo "# machine: $(uname -srm); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "# date: $(date -u +%Y-%m-%dT%H:%MZ); gputune commit: $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo '+changes')"
  echo "# kernel_tuner $("$venv/bin/python" -c 'import kernel_tuner; print(kernel_tuner.__version__)' 2>/dev/null || echo '?'), autotuning_methodology $("$venv/bin/pip" show autotuning_methodology 2>/dev/null | awk '/^Version/{print $2}')"
  echo "# gputune seeds: $seeds; Kernel Tuner seeds: $kt_seeds (slow ones: $slow), max_fevals 2000 ($fevals)"
} | tee "$out/header.txt"

args=()
IFS=, read -ra names <<<"$spaces"
for name in "${names[@]}"; do
  [ -n "${job[$name]:-}" ] || { echo "peer_kernel_tuner.sh: unknown space $name" >&2; exit 2; }
  echo "== $name: gputune replay" >&2
  "$gputune" replay "${job[$name]}" --measurements "${cache[$name]}" --seeds "$seeds" \
    --within 1,5,10 --score --trajectories "$out/g_$name.jsonl" ${workers:+--compile-workers $workers} \
    > "$out/g_$name.txt" 2> "$out/g_$name.log"
  files=("$out/g_$name.jsonl")
  IFS=, read -ra kts <<<"$strategies"
  for s in "${kts[@]}"; do
    n=$kt_seeds
    for item in ${slow//,/ }; do [ "${item%%=*}" = "$s" ] && n=$((${item#*=} < kt_seeds ? ${item#*=} : kt_seeds)); done
    file=$out/kt_${name}_$s.jsonl
    have=0
    [ -f "$file" ] && have=$(($(wc -l <"$file") - 1))
    if ((fresh == 0 && have >= n)); then
      echo "== $name: Kernel Tuner $s: kept $file ($have seeds)" >&2
    else
      echo "== $name: Kernel Tuner $s ($n seeds)" >&2
      "$venv/bin/python" "$root/bench/peer_kernel_tuner.py" "${cache[$name]}" "$file.part" \
        --strategies "$s" --seeds "$n" --max-fevals 2000 --strategy-fevals "$fevals" \
        2>> "$out/kt_$name.log"
      mv "$file.part" "$file"
    fi
    files+=("$file")
  done
  args+=(--space "$name" "${files[@]}")
done
cd "$root/bench"
"$venv/bin/python" peer_table.py "${args[@]}" --json "$out/table.json" | tee "$out/table.md"
