#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: issue #3's proof on measured data. Each job is measured on the
# GPU without pruning (brute force, or a random sample of N configurations where a job is given
# as JOB:N) and replayed from its database, one context at a time, against the pruner and the
# strategies for this GPU (fraction pruned, regret, Spearman, launch failures predicted,
# measurements each strategy needs to reach 5% / 10% of the optimum). Not from the T4 export: it
# holds every context's times under the same configurations (matmul and transpose have two).
# Appends to bench/results/model-gpu-<device>-<date>.md; the databases and T4 exports (for outside
# tools) stay in bench/out/model-proof/.
# Usage: bench/run_model_proof.sh [BUILD_DIR] [JOB[:N] ...]
# SIGINT (bench/on_device.sh's step limit) stops the run in hand (it stores what it measured), and
# the script writes that job's section without the replay and starts no other job.
set -euo pipefail
stopped=0
trap 'stopped=1' INT
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
if [[ $# -gt 0 && -d $1 ]]; then build=$1; shift; fi
jobs=("$@")
if [[ ${#jobs[@]} -eq 0 ]]; then
  jobs=(configs/examples/matmul.json configs/examples/convolution.json
        configs/examples/transpose.json configs/naive/transpose.json:1500
        configs/naive/mm_sgemm.json:1000 configs/naive/jacobi.json:1500)
fi
gputune=$build/gputune
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
  # The job's context labels (GPUTune.Contexts); none listed: the job's one default context.
  mapfile -t contexts < <(python3 -c 'import json, sys
for c in json.load(open(sys.argv[1])).get("GPUTune", {}).get("Contexts", []): print(c["Name"])' \
    "$job" 2>/dev/null || true)
  [[ ${#contexts[@]} -gt 0 ]] || contexts=("")
  : > "$keep/$name.replay.txt"
  if ((stopped)); then
    contexts=()
    echo "not replayed: stopped by a signal; the measurements are in $db" > "$keep/$name.replay.txt"
  fi
  for ctx in "${contexts[@]}"; do
    ctx_opt=()
    [[ -n $ctx ]] && ctx_opt=(--context "$ctx")
    "$gputune" replay "$job" --measurements "$db" --device "$device" "${ctx_opt[@]}" \
      >> "$keep/$name.replay.txt" 2>&1 || true
    # For outside tools: one T4 file per context (a T4 file is one tuning problem).
    "$gputune" export --t4 --db "$db" "${ctx_opt[@]}" -o "$keep/$name${ctx:+.$ctx}.t4.json" \
      >> "$keep/$name.replay.txt" 2>&1 || true
    echo >> "$keep/$name.replay.txt"
  done
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
    echo "\`gputune replay $(basename "$job") --measurements $name.db --device \"$device\" [--context LABEL]\`, each context of the job:"
    echo
    echo '```'
    cat "$keep/$name.replay.txt"
    echo '```'
  } >> "$out"
  echo "run_model_proof: $spec done"
  if ((stopped)); then
    echo "run_model_proof: stopped by a signal: no further job"
    break
  fi
done
echo "wrote $out"
