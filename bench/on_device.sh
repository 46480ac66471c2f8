#!/usr/bin/env bash
# On the lent GPU machine, from a kit packed here (bench/device_kit.sh pack; carry .devkit): runs
# the GPU steps in order, each within its own time limit, then always brings bench/results, the
# logs and a summary back in $OUT. Each `device` call may run 10 minutes, so give each call the
# steps that fit; the kit is unpacked once per machine (again when a newer kit travels).
#   bash bench/on_device.sh STEP[@SECONDS] [ARGS] [-- STEP[@SECONDS] [ARGS] ...]
#     tests                     build-kit/tests/gpu_test and select_gpu_test (the ctest label
#                               `gpu`), logs in bench/out
#     bench                     bench/run_gpu_benchmarks.sh: variants/s, matmul vs cuBLAS at 4096^3
#     naive [ARGS]              bench/run_naive_gpu_bench.sh ARGS (e.g. --budget 300 configs/naive/mv.json)
#     proof [JOB[:N] ...]       bench/run_model_proof.sh: issue #3's proof on measured data
#     stream [RUN ...]          bench/run_stream_bench.sh: the streaming runs (issue #49), each cold
#                               and within its own limit (a RUN is "JOB ARGS... @SECONDS"), cut to
#                               what is left of the step's limit
#     screen JOB [RUN ARGS]     a cold `gputune run JOB` with the screen and with --no-screen, each
#                               with its own empty cubin cache: wall times into bench/results
#   Limits: STEP@SECONDS; by default tests 300, bench 240, naive 480, proof 480, stream 480, screen
#   300. At its limit a step gets SIGINT (`timeout --signal=INT --kill-after=15`: gputune and
#   naive_gpu_bench store the run in hand as interrupted, keeping what they measured, and the bench
#   scripts write what they have and start nothing more), SIGKILL 15 s later if still running. All
#   steps together end within ON_DEVICE_DEADLINE seconds of the start (default 570, leaving the
#   collection time in a 600 s call): a step with less than its limit + 15 s left is skipped. The
#   summary (bench/out/on-device/summary.log, collected) lists each step's limit, wall time, exit
#   code and whether it finished, was cut off at its limit or was skipped; the exit code is the
#   last failing step's (124 or 137: cut off; 124 also for a skipped step).
#   ON_DEVICE_DRY=1: no kit; each step is a stand-in that logs, sleeps ON_DEVICE_DRY_SLEEP seconds
#   (default 10) and on SIGINT logs "stopped" and exits 5 as gputune does (tests the limits here).
#   e.g. bash bench/on_device.sh tests@240 -- bench -- naive --budget 200 configs/naive/transpose.json
#   The full naive spaces (mm 576,460, conv2d 366,528) go through the model's search (20,000
#   analyses by default: 275 s for mm on the 2-core VM): naive --budget 200 configs/naive/mm.json
#   configs/naive/conv2d.json measures what it finds next to mm_sgemm and conv2d_bench (the model
#   predicts conv2d's best, merge 8x8, outside conv2d_bench's region).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kit=$root/build-kit
logs=$root/bench/out/on-device
dry=${ON_DEVICE_DRY:-0}
cd "$root" || exit 2

step_tests() {
  "$kit/tests/gpu_test" --gtest_output="xml:$logs/gpu_test.xml" 2>&1 | tee -i "$logs/gpu_test.log"
  local rc=${PIPESTATUS[0]}
  "$kit/tests/select_gpu_test" --gtest_output="xml:$logs/select_gpu_test.xml" 2>&1 |
    tee -i "$logs/select_gpu_test.log"
  return $((rc ? rc : PIPESTATUS[0]))
}

# Issue #49's figures on the GPU: the streaming runs of bench/run_stream_bench.sh, cold, each
# within its own limit (@N seconds; one cut off keeps what it measured), into bench/results.
#   stream [RUN ...]   a RUN is "JOB ARGS... @SECONDS" (default: the three runs of the issue and
#                      mm_sgemm --budget 200)
step_stream() {
  local out=$root/bench/results/stream-gpu-$slug-$date.md
  local runs=("$@")
  ((${#runs[@]})) || runs=("configs/naive/transpose.json --budget 60 @90"
    "configs/naive/mm_sgemm.json --budget 60 @120" "configs/examples/matmul.json --strategy brute_force @90"
    "configs/naive/mm_sgemm.json --budget 200 @150")
  local args=(--)
  # shellcheck disable=SC2206 # a RUN is split into its words
  for r in "${runs[@]}"; do args+=($r ";"); done
  {
    echo
    echo "## Streaming runs on $device, $date (bench/run_stream_bench.sh)"
    echo
    echo "- commit: $GPUTUNE_COMMIT; $(nproc) host cores; each run with an empty cubin and analysis"
    echo "  cache and a new database; GPU busy: the seconds gputune spent in its measurer"
    echo
    bash bench/run_stream_bench.sh "$kit/gputune" system "$logs/stream" "${args[@]}"
  } | tee -i -a "$out"
  for f in "$logs"/stream/run-*.log; do cp "$f" "$logs/stream-$(basename "$f")"; done
}

step_screen() {
  local job=$1
  shift
  local out=$root/bench/results/screen-gpu-$slug-$date.md
  [[ -f $out ]] || printf '# The screen on the GPU: %s, %s\n' "$device" "$date" >"$out"
  {
    echo
    echo "## $job $*"
    echo
    echo "- commit: $GPUTUNE_COMMIT; cold: each run has its own empty cubin cache and database"
    echo
    echo '| mode | wall (s) | exit | last lines |'
    echo '|---|---|---|---|'
  } >>"$out"
  for mode in screen no-screen; do
    ((stopped)) && break
    local extra=() cache=$logs/cache-$mode db=$logs/screen-$mode.db
    [[ $mode == no-screen ]] && extra=(--no-screen)
    rm -rf "$cache" "$db" "$db"-wal "$db"-shm
    local start rc=0
    start=$(date +%s%N)
    "$kit/gputune" run "$job" --db "$db" --cache-dir "$cache" -q "${extra[@]}" "$@" \
      >"$logs/screen-$mode.log" 2>&1 || rc=$?
    local ms=$((($(date +%s%N) - start) / 1000000))
    local wall
    wall=$((ms / 1000)).$(printf '%03d' $((ms % 1000)))
    echo "| $mode | $wall | $rc | $(grep -E 'screen:|tuned' "$logs/screen-$mode.log" | tr '\n' ' ' | tr '|' '/') |" >>"$out"
  done
  cat "$out"
}

# ON_DEVICE_DRY's stand-in for a step: what it "measured" is logged as it goes, as gputune stores.
step_dry() {
  local log=$logs/dry-$1.log
  echo "dry $*: started $(date -u +%H:%M:%S)" >>"$log"
  sleep "${ON_DEVICE_DRY_SLEEP:-10}" >/dev/null &
  dry_sleep=$!
  trap 'kill "$dry_sleep"; echo "dry $*: stopped by SIGINT after $SECONDS s, what was measured stays" | tee -a "$log"; exit 5' INT
  wait "$dry_sleep"
  echo "dry $*: done after $SECONDS s" | tee -a "$log"
}

run_step() {
  local name=$1
  shift
  if ((dry)); then
    step_dry "$name" "$@"
    return
  fi
  case $name in
    tests) step_tests ;;
    bench) bench/run_gpu_benchmarks.sh "$kit" ;;
    naive) bench/run_naive_gpu_bench.sh "$kit" "$@" ;;
    proof) bench/run_model_proof.sh "$kit" "$@" ;;
    stream) step_stream "$@" ;;
    screen) step_screen "$@" ;;
  esac
}

# One step, run by the main script under `timeout` (its own process group, which the SIGINT at
# the limit reaches): bash bench/on_device.sh --step NAME ARGS.
if [[ ${1:-} == --step ]]; then
  shift
  stopped=0
  trap 'stopped=1' INT # let the step's own commands stop first and write what they have
  run_step "$@"
  exit $?
fi

[[ -n ${OUT:-} ]] || {
  echo "on_device: \$OUT is not set: this runs on the GPU machine through the device tool" >&2
  exit 2
}
started=$(date +%s)
deadline=$((started + ${ON_DEVICE_DEADLINE:-570}))
grace=15
declare -A default_limit=([tests]=300 [bench]=240 [naive]=480 [proof]=480 [stream]=480 [screen]=300)

# The steps, checked before anything runs: a typo fails at once, not after minutes.
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(tests)
flat=() step_at=() step_len=() step_limit=() # step k: flat[step_at[k]] .. (name, then arguments)
i=0
while ((i < ${#args[@]})); do
  step=()
  while ((i < ${#args[@]})) && [[ ${args[i]} != -- ]]; do
    step+=("${args[i]}")
    i=$((i + 1))
  done
  i=$((i + 1))
  ((${#step[@]})) || continue
  name=${step[0]%%@*} limit=${default_limit[${step[0]%%@*}]:-}
  [[ -n $limit ]] || {
    echo "on_device: unknown step '$name' (tests, bench, naive, proof, stream, screen)" >&2
    exit 2
  }
  if [[ ${step[0]} == *@* ]]; then
    limit=${step[0]#*@}
    [[ $limit =~ ^[1-9][0-9]*$ ]] || {
      echo "on_device: '${step[0]}': give the step's limit in whole seconds (${name}@300)" >&2
      exit 2
    }
  fi
  if [[ $name == screen && ${#step[@]} -lt 2 ]]; then
    echo "on_device: screen needs a job" >&2
    exit 2
  fi
  step[0]=$name
  step_at+=("${#flat[@]}") step_len+=("${#step[@]}") step_limit+=("$limit")
  flat+=("${step[@]}")
done

mkdir -p "$logs"
rm -f "$logs"/summary.log "$logs"/step-*.log "$logs"/dry-*.log # this call's, not an earlier one's
if ((dry)); then
  export GPUTUNE_COMMIT=${GPUTUNE_COMMIT:-dry-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
  touch "$logs/.dry-start"
  export COLLECT_SINCE=$logs/.dry-start
else
  if [[ ! -f $kit/unpacked || $root/.devkit/kit.tar.xz -nt $kit/unpacked ]]; then
    bash bench/device_kit.sh unpack || exit 2
  fi
  # shellcheck disable=SC1091
  . "$kit/kit-env.sh"
fi
date=$(date -u +%Y-%m-%d)
device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
slug=$(echo "${device:-unknown}" | tr -c 'A-Za-z0-9\n' '-' | sed 's/-*$//')
export date device slug
status=0
summary=("| step | limit (s) | wall (s) | exit | outcome |" "|---|---|---|---|---|")

for ((k = 0; k < ${#step_at[@]}; k++)); do
  n=$((k + 1)) limit=${step_limit[k]}
  step=("${flat[@]:step_at[k]:step_len[k]}")
  name=${step[0]}
  left=$((deadline - $(date +%s)))
  if ((left < limit + grace)); then
    hint="no time left for it"
    ((left - grace > 0)) && hint="give it less: ${name}@$((left - grace))"
    echo "=== on_device: $name skipped: $left s left of ON_DEVICE_DEADLINE, it needs $limit + $grace ($hint)"
    summary+=("| ${step[*]} | $limit | - | - | skipped: $left s left, it needs $limit + $grace |")
    status=124
    continue
  fi
  echo "=== on_device: ${step[*]} (limit $limit s, $(date -u +%H:%M:%S))"
  t0=$(date +%s)
  BENCH_DEADLINE=$((t0 + limit)) timeout --signal=INT --kill-after=$grace "$limit" \
    bash "$0" --step "${step[@]}" 2>&1 | tee -i "$logs/step-$n-$name.log"
  rc=${PIPESTATUS[0]}
  wall=$(($(date +%s) - t0))
  if ((wall >= limit)) && ((rc == 124 || rc == 137)); then
    how="cut off at its limit (SIGINT$( ((rc == 137)) && echo ', then SIGKILL'); what it stored is kept)"
  elif ((rc == 0)); then
    how="finished"
  else
    how="failed (exit $rc)"
  fi
  echo "=== on_device: $name exited $rc after $wall s: $how"
  summary+=("| ${step[*]} | $limit | $wall | $rc | $how |")
  ((rc == 0)) || status=$rc
done

{
  echo "on_device summary: commit ${GPUTUNE_COMMIT:-unknown}, ${device:-no GPU}, $(date -u +%Y-%m-%dT%H:%M:%SZ)," \
    "$(($(date +%s) - started)) s of ON_DEVICE_DEADLINE ${ON_DEVICE_DEADLINE:-570}"
  echo
  printf '%s\n' "${summary[@]}"
} | tee "$logs/summary.log"
shopt -s nullglob
bash bench/device_kit.sh collect bench/out/on-device/*.log bench/out/on-device/*.xml \
  bench/out/model-proof/*.txt
exit "$status"
