#!/usr/bin/env bash
# On the lent GPU machine, from a kit packed here (bench/device_kit.sh pack; carry .devkit): runs
# the GPU steps in order, then always brings bench/results and the logs back in $OUT. Each `device`
# call may run 10 minutes, so give each call the steps that fit; the kit is unpacked once per
# machine (again when a newer kit travels).
#   bash bench/on_device.sh STEP [STEP ...]     steps are separated by `--` when they take arguments:
#     tests                     build-kit/tests/gpu_test (the ctest label `gpu`), log in bench/out
#     bench                     bench/run_gpu_benchmarks.sh: variants/s, matmul vs cuBLAS at 4096^3
#     naive [ARGS]              bench/run_naive_gpu_bench.sh ARGS (e.g. --budget 300 configs/naive/mv.json)
#     proof [JOB[:N] ...]       bench/run_model_proof.sh: issue #3's proof on measured data
#     stream [RUN ...]          bench/run_stream_bench.sh: the streaming runs (issue #49), each cold
#                               and within its own limit (a RUN is "JOB ARGS... @SECONDS")
#     screen JOB [RUN ARGS]     a cold `gputune run JOB` with the screen and with --no-screen, each
#                               with its own empty cubin cache: wall times into bench/results
#   e.g. bash bench/on_device.sh tests -- bench -- naive --budget 200 configs/naive/transpose.json
#   The full naive spaces (mm 576,460, conv2d 366,528) go through the model's search (20,000
#   analyses by default: 275 s for mm on the 2-core VM): naive --budget 200 configs/naive/mm.json
#   configs/naive/conv2d.json measures what it finds next to mm_sgemm and conv2d_bench (the model
#   predicts conv2d's best, merge 8x8, outside conv2d_bench's region).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kit=$root/build-kit
cd "$root"
[[ -n ${OUT:-} ]] || {
  echo "on_device: \$OUT is not set: this runs on the GPU machine through the device tool" >&2
  exit 2
}
if [[ ! -f $kit/unpacked || $root/.devkit/kit.tar.xz -nt $kit/unpacked ]]; then
  bash bench/device_kit.sh unpack || exit 2
fi
# shellcheck disable=SC1091
. "$kit/kit-env.sh"
logs=$root/bench/out/on-device
mkdir -p "$logs"
date=$(date -u +%Y-%m-%d)
device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
slug=$(echo "${device:-unknown}" | tr -c 'A-Za-z0-9\n' '-' | sed 's/-*$//')
status=0

step_tests() {
  "$kit/tests/gpu_test" --gtest_output="xml:$logs/gpu_test.xml" 2>&1 | tee "$logs/gpu_test.log"
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
  for r in "${runs[@]}"; do args+=($r ";"); done
  {
    echo
    echo "## Streaming runs on $device, $date (bench/run_stream_bench.sh)"
    echo
    echo "- commit: $GPUTUNE_COMMIT; $(nproc) host cores; each run with an empty cubin and analysis"
    echo "  cache and a new database; GPU busy: the seconds gputune spent in its measurer"
    echo
    bash bench/run_stream_bench.sh "$kit/tuner/gputune" system "$logs/stream" "${args[@]}"
  } | tee -a "$out"
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
    local extra=() cache=$logs/cache-$mode db=$logs/screen-$mode.db
    [[ $mode == no-screen ]] && extra=(--no-screen)
    rm -rf "$cache" "$db" "$db"-wal "$db"-shm
    local start rc=0
    start=$(date +%s%N)
    "$kit/tuner/gputune" run "$job" --db "$db" --cache-dir "$cache" -q "${extra[@]}" "$@" \
      >"$logs/screen-$mode.log" 2>&1 || rc=$?
    local ms=$((($(date +%s%N) - start) / 1000000))
    local wall=$((ms / 1000)).$(printf '%03d' $((ms % 1000)))
    echo "| $mode | $wall | $rc | $(grep -E 'screen:|tuned' "$logs/screen-$mode.log" | tr '\n' ' ' | tr '|' '/') |" >>"$out"
  done
  cat "$out"
}

run_step() {
  local name=$1
  shift
  echo "=== on_device: $name $* ($(date -u +%H:%M:%S))"
  case $name in
    tests) step_tests ;;
    bench) bench/run_gpu_benchmarks.sh "$kit" ;;
    naive) bench/run_naive_gpu_bench.sh "$kit" "$@" ;;
    proof) bench/run_model_proof.sh "$kit" "$@" ;;
    stream) step_stream "$@" ;;
    screen)
      [[ $# -ge 1 ]] || {
        echo "on_device: screen needs a job" >&2
        return 2
      }
      step_screen "$@"
      ;;
    *)
      echo "on_device: unknown step '$name' (tests, bench, naive, proof, stream, screen)" >&2
      return 2
      ;;
  esac
}

args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(tests)
i=0
while ((i < ${#args[@]})); do
  step=()
  while ((i < ${#args[@]})) && [[ ${args[i]} != -- ]]; do
    step+=("${args[i]}")
    i=$((i + 1))
  done
  i=$((i + 1))
  ((${#step[@]})) || continue
  run_step "${step[@]}" || {
    rc=$?
    echo "=== on_device: ${step[0]} exited $rc"
    status=$rc
  }
done
shopt -s nullglob
bash bench/device_kit.sh collect bench/out/on-device/*.log bench/out/on-device/*.xml \
  bench/out/model-proof/*.txt
exit $status
