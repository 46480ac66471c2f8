#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: issue #3's proof on measured data. Each job is measured on the
# GPU without pruning (brute force, or a random sample of N configurations where a job is given
# as JOB:N), exported as T4 and replayed against the pruner and the strategies for this GPU
# (fraction pruned, regret, Spearman, launch failures predicted, measurements each strategy needs
# to reach 5% / 10% of the optimum). Appends to bench/results/model-gpu-<device>-<date>.md; the
# databases and T4 files stay in bench/out/model-proof/.
# Usage: bench/run_model_proof.sh [BUILD_DIR] [JOB[:N] ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
if [[ $# -gt 0 && -d $1 ]]; then build=$1; shift; fi
jobs=("$@")
if [[ ${#jobs[@]} -eq 0 ]]; then
  jobs=(configs/examples/matmul.json configs/examples/convolution.json
        configs/examples/transpose.json configs/naive/transpose.json:1500
        configs/naive/mm_sgemm.json:1000 configs/naive/jacobi.json:1500)
fi
gputune=$build/tuner/gputune
device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
if [[ -z $device ]]; then
  echo "run_model_proof: no NVIDIA GPU (nvidia-smi found none); nothing measured"
  exit 3
fi
date=$(date -u +%Y-%m-%d)
keep=$root/bench/out/model-proof
mkdir -p "$keep"
out=$root/bench/results/model-gpu-$(echo "$device" | tr -c 'A-Za-z0-9\n' '-' | sed 's/-*$//')-$date.md
[[ -f $out ]] || echo "# The model on measured data: $device, $date" > "$out"
for spec in "${jobs[@]}"; do
  job=${spec%%:*}
  [[ $job = /* ]] || job=$root/$job
  name=$(basename "$job" .json)-$(basename "$(dirname "$job")")
  measure=(--strategy brute_force)
  [[ $spec == *:* ]] && measure=(--strategy random --budget "${spec##*:}")
  db=$keep/$name.db
  rm -f "$db" "$db"-wal "$db"-shm
  start=$(date +%s)
  rc=0
  "$gputune" run "$job" --db "$db" -q "${measure[@]}" > "$keep/$name.run.txt" 2>&1 || rc=$?
  "$gputune" export --t4 --db "$db" -o "$keep/$name.t4.json"
  "$gputune" replay "$job" --measurements "$keep/$name.t4.json" --device "$device" \
    > "$keep/$name.replay.txt" 2>&1 || true
  {
    echo
    echo "## $(basename "$(dirname "$job")")/$(basename "$job")"
    echo
    echo "- measured: \`gputune run $spec ${measure[*]}\` (exit $rc, $(( $(date +%s) - start )) s with the replay)"
    echo "- commit: ${GPUTUNE_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    echo
    echo '```'
    tail -n 8 "$keep/$name.run.txt"
    echo '```'
    echo
    echo "\`gputune replay $(basename "$job") --measurements $name.t4.json --device \"$device\"\`:"
    echo
    echo '```'
    cat "$keep/$name.replay.txt"
    echo '```'
  } >> "$out"
  echo "run_model_proof: $spec done"
done
echo "wrote $out"
