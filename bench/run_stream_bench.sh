#!/usr/bin/env bash
# Issue #49's figures: how soon a run measures, how much it compiles, and how long the GPU waits.
# Runs, each with an empty cubin and analysis cache and a new database:
#   configs/naive/transpose.json --budget 60, configs/naive/mm_sgemm.json --budget 60 (model_guided),
#   configs/examples/matmul.json --strategy brute_force
# and prints one Markdown table row per run: time to the first measurement (from the process start
# to the first stored GPU outcome), configurations compiled, measured, wall time, the seconds the
# (fake) GPU was busy and the fraction it sat idle, and the analysis and compile seconds the run
# logged (GPUTUNE_TIME_STAGES).
#
#   bash bench/run_stream_bench.sh GPUTUNE [LIBCUDA_DIR] [OUT_DIR] [-- JOB ARGS ...]
# GPUTUNE: the binary to time. LIBCUDA_DIR: a folder with libcuda.so.1; by default the fake driver
# of the build (tests/fake_cuda), run with FAKE_CUDA_ANY_KERNEL=1 (every kernel loads, writes
# nothing, and each launch sleeps FAKE_CUDA_SLOW_MS, default 2 ms) and FAKE_CUDA_BUSY_FILE (its
# busy seconds). With a real driver's folder (or "system"), the GPU's; busy time is then the sum of
# the stored measurements' samples. After `--`: other runs, each `JOB ARGS...;` (a literal `;`).
# Each run is limited to STREAM_BENCH_TIMEOUT seconds (default 1800), or to N with a last word @N
# (`configs/examples/matmul.json --strategy brute_force @90`); a run cut off (SIGINT: it stores what
# it measured and its provisional winner) keeps its row, with exit code 5 (124 when `timeout`
# stopped it). With BENCH_DEADLINE (seconds since the epoch; bench/on_device.sh sets it to the end
# of its step's limit) no run is given a limit that ends later than 5 s before it, and a run with
# less than 10 s left is skipped (its row says so). A SIGINT to this script starts no further run.
set -uo pipefail
stopped=0
trap 'stopped=1' INT
root=$(cd "$(dirname "$0")/.." && pwd)
gputune=${1:?usage: run_stream_bench.sh GPUTUNE [LIBCUDA_DIR] [OUT_DIR]}
gputune=$(cd "$(dirname "$gputune")" && pwd)/$(basename "$gputune")
libdir=${2:-$root/build/tests/fake_cuda}
out=${3:-$root/bench/out/stream}
shift $(($# < 3 ? $# : 3))
[[ ${1:-} == -- ]] && shift
mkdir -p "$out"
limit=${STREAM_BENCH_TIMEOUT:-1800}
fake=0
[[ $libdir != system && -f $libdir/libcuda.so.1 ]] && grep -q FAKE_CUDA_ANY_KERNEL "$libdir/libcuda.so.1" && fake=1

runs=()
if (($#)); then
  cur=""
  for a in "$@"; do
    if [[ $a == ";" ]]; then runs+=("$cur"); cur=""; else cur+="${cur:+ }$a"; fi
  done
  [[ -n $cur ]] && runs+=("$cur")
else
  runs=("configs/naive/transpose.json --budget 60" "configs/naive/mm_sgemm.json --budget 60"
        "configs/examples/matmul.json --strategy brute_force")
fi

echo "| run | first measurement (s) | compiled | measured | wall (s) | GPU busy (s) | GPU idle | analysis (s) | compile stage (s) | best (ms) | exit |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
n=0
for spec in "${runs[@]}"; do
  n=$((n + 1))
  read -r -a words <<<"$spec"
  run_limit=$limit capped=""
  if [[ ${words[-1]} == @* ]]; then  # JOB ARGS... @SECONDS: this run's own limit
    run_limit=${words[-1]#@}
    unset 'words[-1]'
  fi
  if ((stopped)); then
    echo "| $spec | not run: stopped by a signal | | | | | | | | | |"
    continue
  fi
  if [[ -n ${BENCH_DEADLINE:-} ]]; then
    left=$((BENCH_DEADLINE - $(date +%s) - 5))
    if ((left < 5)); then
      echo "| $spec | not run: $((left + 5)) s left of the step's limit | | | | | | | | | |"
      continue
    fi
    if ((run_limit > left)); then
      run_limit=$left
      capped=" (limit cut to $left s)"
    fi
  fi
  job=${words[0]}
  [[ $job = /* ]] || job=$root/$job
  name=$(basename "$job" .json)
  cache=$out/cache-$n db=$out/run-$n.db log=$out/run-$n.log busy=$out/busy-$n
  rm -rf "$cache" "$db" "$db"-wal "$db"-shm "$busy"
  env_args=(GPUTUNE_TIME_STAGES=1)
  if ((fake)); then
    env_args+=(LD_LIBRARY_PATH="$libdir" FAKE_CUDA_ANY_KERNEL=1 FAKE_CUDA_SLOW_MS="${FAKE_CUDA_SLOW_MS:-2}"
               FAKE_CUDA_BUSY_FILE="$busy")
  elif [[ $libdir != system ]]; then
    env_args+=(LD_LIBRARY_PATH="$libdir")
  fi
  start=$(date +%s.%N)
  rc=0
  # timeout signals its child and then its process group: the child is a shell, so that gputune
  # (its supervisor) gets one SIGINT, not two (a second one means "quit now", losing the report).
  (cd "$root" && env "${env_args[@]}" timeout -s INT "$run_limit" bash -c '"$@"; exit $?' run \
    "$gputune" run "$job" "${words[@]:1}" --db "$db" --cache-dir "$cache" >"$log" 2>&1) || rc=$?
  end=$(date +%s.%N)
  python3 - "$db" "$log" "$busy" "$start" "$end" "$name ${words[*]:1}$capped" "$rc" "$fake" <<'EOF'
import datetime, os, re, sqlite3, sys
db, log, busy, start, end, name, rc, fake = sys.argv[1:]
start, end = float(start), float(end)
text = open(log, errors="replace").read()
first = measured = best = None
busy_s = None
if os.path.exists(db):
    c = sqlite3.connect(db)
    timed = "status IN ('correct','runtime','correctness','timeout') AND reason NOT LIKE 're-measurement%'"
    row = c.execute(f"SELECT min(created_at), count(*) FROM measurements WHERE {timed}").fetchone()
    if row[0]:
        t = datetime.datetime.strptime(row[0], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
        first = t.timestamp() - start
    measured = row[1]
    best = c.execute("SELECT min(m.time_ms) FROM winners w JOIN measurements m "
                     "ON m.id = w.measurement_id").fetchone()[0]
    if fake != "1":
        import json
        busy_s = sum(sum(json.loads(s or "[]")) for (s,) in c.execute(
            "SELECT samples FROM measurements")) / 1000
if fake == "1" and os.path.exists(busy):
    busy_s = float(open(busy).read())
else:
    # A real GPU: the seconds gputune spent in its measurer (launches, copies, verification).
    m = re.search(r"GPU busy ([0-9.e+]+) s of", text)
    if m:
        busy_s = float(m.group(1))
m = re.search(r"compiled (\d+) \((\d+) from cache\), compile failures (\d+)", text)
compiled = str(int(m.group(1)) + int(m.group(3))) if m else "?"
stage = lambda pat: sum(float(x) for x in re.findall(r"stage " + pat + r" took ([0-9.e+]+) ms", text)) / 1000
analysis = stage(r"(?:model search|model [^ ]+|analysis [^ ]+)")
compile_s = stage(r"compile[^ ]*")
wall = end - start
fmt = lambda x, p=1: "-" if x is None else f"{x:.{p}f}"
idle = "-" if busy_s is None else f"{100 * (1 - busy_s / wall):.1f}%"
print(f"| {name} | {fmt(first)} | {compiled} | {fmt(measured, 0) if measured is not None else '-'} | "
      f"{wall:.1f} | {fmt(busy_s)} | {idle} | {analysis:.1f} | {compile_s:.1f} | "
      f"{fmt(best, 4)} | {rc} |")
EOF
done
