#!/usr/bin/env bash
# Issue #46's figure: the overhead of `gputune batch --slurm --submit` as a job array when every
# job of the suite is unchanged (--skip-unchanged): seconds from the submit to the last array task
# done, and to the merge job done. On a throwaway single-node SLURM (tests/slurm/local_slurm.sh,
# as root) with the fake driver (tests/fake_cuda) as each task's GPU: a suite of 3 vector_add jobs
# (4096, 8192, 12288 elements, --budget 3) runs once to fill the shards, then ROUNDS times
# (default 5) unchanged; each round's figures are a row of the Markdown table printed (and
# written to OUT when given).
#   bash bench/run_slurm_overhead.sh [GPUTUNE] [OUT.md]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gputune=${1:-$root/build/gputune}
gputune=$(cd "$(dirname "$gputune")" && pwd)/$(basename "$gputune")
out=${2:-}
rounds=${ROUNDS:-5}
fake=$(dirname "$gputune")/tests/fake_cuda
[ -e "$fake/libcuda.so.1" ] || { echo "no fake driver at $fake: make fake_cuda" >&2; exit 2; }
work=$(mktemp -d /tmp/gputune-slurm-bench.XXXXXX)
cleanup() { bash "$root/tests/slurm/local_slurm.sh" stop "$work/cluster"; rm -rf "$work"; }
trap cleanup EXIT
bash "$root/tests/slurm/local_slurm.sh" start "$work/cluster" >/dev/null || exit
export SLURM_CONF=$work/cluster/slurm.conf LD_LIBRARY_PATH=$fake

cp "$root/configs/examples/vector_add.cu" "$work/"
for i in 0 1 2; do
  python3 - "$root/configs/examples/vector_add.json" "$work/job$i.json" "$i" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); i = int(sys.argv[3])
j["General"]["BenchmarkName"] = f"vector_add_{i}"
j["GPUTune"]["Contexts"] = [{"Name": "small", "ProblemSize": [4096 * (i + 1)]}]
json.dump(j, open(sys.argv[2], "w"), indent=2)
PY
done
echo '{"Suite": "bench", "Jobs": ["job0.json", "job1.json", "job2.json"]}' >"$work/suite.json"

now() { date +%s.%N; }
# Waits until squeue lists none of the ids; prints the time then.
gone() {
  while [ -n "$(squeue -h -o %i -j "$1" 2>/dev/null)" ]; do sleep 0.05; done
  now
}
submit() {
  "$gputune" batch "$work/suite.json" --db "$work/nightly.db" --slurm --submit --budget 3 -q \
    --skip-unchanged --cache-dir "$work/cache" 2>"$work/err" >"$work/out" ||
    { cat "$work/err" >&2; exit 1; }
  array=$(sed -n 's/^array job //p' "$work/out")
  merge=$(sed -n 's/^merge job //p' "$work/out")
}
t0=$(now); submit; t1=$(gone "$array"); gone "$merge" >/dev/null
first=$(echo "$t1 - $t0" | bc)
rows=""
for r in $(seq "$rounds"); do
  t0=$(now); submit; t1=$(gone "$array"); t2=$(gone "$merge")
  unchanged=$(grep -l "unchanged" "$work"/nightly.db.logs/task-*-"$array".out | wc -l)
  rows+="| $r | $(printf '%.2f' "$(echo "$t1 - $t0" | bc)") s | $(printf '%.2f' "$(echo "$t2 - $t0" | bc)") s | $unchanged of 3 |"$'\n'
done
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null)
report="# \`batch --slurm\`: the job array's overhead for an unchanged suite, $(date -u +%F)

- machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(free -g | awk '/Mem:/{print $2}') GiB, $(. /etc/os-release; echo "$PRETTY_NAME"), no GPU (the fake driver, tests/fake_cuda)
- SLURM $(sinfo -V | cut -d' ' -f2) on this machine alone (tests/slurm/local_slurm.sh: one node, CPUs=2, one gres gpu, so the tasks run one after another)
- commit: $commit
- command: \`bash bench/run_slurm_overhead.sh\`: a suite of 3 vector_add jobs, \`gputune batch SUITE --db DB --slurm --submit --budget 3 -q --skip-unchanged\`, an array of 3 tasks and its merge job; the first submit tunes every job (${first%.*}.$(echo "$first" | cut -d. -f2 | cut -c1-2) s to the last task done), then each round finds every job unchanged in its task's shard

| round | submit to last task done | submit to merge job done | tasks that found their job unchanged |
|---|---|---|---|
$rows
Submit to done is measured from before \`gputune batch --submit\` starts until \`squeue\` no longer lists
the job (polled every 50 ms). Each task is a \`gputune batch\` of its job that exits at once
(\`run --skip-unchanged\`); what remains is SLURM's scheduling and each task's process start.
The merge job runs \`gputune db merge\` of the three shards (after the first submit nothing is new)
and \`batch --report-only\` with its Markdown and JSON reports."
echo "$report"
[ -z "$out" ] || printf '%s\n' "$report" >"$out"
