#!/usr/bin/env bash
# The daemon under a bounded load (issue #47, "Load and security"): `gputune serve` with one
# worker on the fake driver (tests/fake_cuda, so submitted jobs are tuned), on a copy of the web
# benchmarks' database (bench/out/big.db, one million measurements; made when missing) or a
# smaller one, and bench/load_bench from a second process on loopback: every GET endpoint at a
# fixed rate and job submissions, for a given time; latency per endpoint against the published
# targets (bench/results/web-vm-2026-11-21.md), errors, and the daemon's and workers' RSS.
# Usage: bench/run_load_bench.sh [--seconds 180] [--measurements N] [--read-rate R]
#          [--submit-every S] [--max-growth-mib M] [--compile-nice N] [--rebuild-nice N]
#          [--only TEXT] [--arrivals even|poisson] [--trace FILE] [--sched-trace S]
#          [--result FILE]
#          [--gputune BIN] [BUILD_DIR]
# --measurements N: a fresh database of N measurements instead of big.db's copy; --result FILE:
# also write the Markdown report there with the machine, date, commit and command. Exits with
# load_bench's status (1: an error, or the daemon's RSS grew beyond the bound). --compile-nice N:
# the daemon's (its workers' compile threads' priority; default: gputune's, 10). --rebuild-nice N:
# the daemon's (its background rebuilds' priority; default: gputune's, 19). --sched-trace S:
# record the scheduler (`perf sched record`, needs perf and root) for S seconds from 30 s into
# the load, and add to the report which wake-ups waited for a core and behind what
# (bench/sched_delays.py). --arrivals: the reads evenly spaced (default) or poisson (independent
# arrivals at the same mean rate). --trace FILE: every read as a CSV line (load_bench --trace).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command_line="bench/run_load_bench.sh $*"
seconds=180 arrivals=even sched_trace="" tracer="" measurements="" read_rate=100 submit_every=5 max_growth=64 result="" gputune=""
serve_args=() load_args=()
build=$root/build
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --measurements) measurements=$2; shift 2 ;;
    --read-rate) read_rate=$2; shift 2 ;;
    --submit-every) submit_every=$2; shift 2 ;;
    --max-growth-mib) max_growth=$2; shift 2 ;;
    --compile-nice) serve_args+=(--compile-nice "$2"); shift 2 ;;
    --rebuild-nice) serve_args+=(--rebuild-nice "$2"); shift 2 ;;
    --only) load_args+=(--only "$2"); shift 2 ;;
    --trace) load_args+=(--trace "$2"); shift 2 ;;
    --arrivals) arrivals=$2; load_args+=(--arrivals "$2"); shift 2 ;;
    --sched-trace) sched_trace=$2; shift 2 ;;
    --result) result=$2; shift 2 ;;
    --gputune) gputune=$2; shift 2 ;;
    -*) echo "run_load_bench.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$(cd "$1" && pwd); shift ;;
  esac
done
gputune=${gputune:-$build/gputune}
work=$(mktemp -d "${TMPDIR:-/tmp}/gputune-load.XXXXXX")
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
db=$work/load.db
if [ -z "$measurements" ]; then
  big=$root/bench/out/big.db
  if [ ! -f "$big" ]; then
    mkdir -p "$root/bench/out"
    echo "building $big (1,000,000 measurements)..." >&2
    "$build/bench/make_big_db" "$big" 1000000 >&2
  fi
  cp "$big" "$db"  # the workers add to it: the published database stays as it was
else
  "$build/bench/make_big_db" "$db" "$measurements" >/dev/null 2>&1
fi
LD_LIBRARY_PATH=$build/tests/fake_cuda "$gputune" serve --db "$db" --port 0 \
  --cache-dir "$work/cache" "${serve_args[@]}" > "$work/serve.log" 2>&1 &
server=$!
url=""
for _ in $(seq 150); do
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/serve.log" | head -1 || true)
  [ -n "$url" ] && [ -f "$db.token" ] && break
  sleep 0.2
done
if [ -z "$url" ]; then echo "gputune serve did not start:" >&2; cat "$work/serve.log" >&2; exit 1; fi
if [ -n "$sched_trace" ]; then
  if ! command -v perf >/dev/null; then
    echo "run_load_bench.sh: --sched-trace needs perf (apt-get install linux-perf)" >&2; exit 2
  fi
  if [ $((sched_trace + 30)) -gt "${seconds%.*}" ]; then
    echo "run_load_bench.sh: --sched-trace $sched_trace needs --seconds of at least $((sched_trace + 30))" >&2
    exit 2
  fi
  (sleep 30 && perf sched record -o "$work/sched.data" -- sleep "$sched_trace" \
    > "$work/perf.log" 2>&1) &
  tracer=$!
fi
status=0
"$build/bench/load_bench" --url "$url" --token "$(cat "$db.token")" --pid "$server" \
  --job "$root/configs/examples/vector_add.json" --seconds "$seconds" --read-rate "$read_rate" \
  --submit-every "$submit_every" --max-growth-mib "$max_growth" \
  --targets "$root/bench/results/web-vm-2026-11-21.md" "${load_args[@]}" > "$work/report.md" ||
  status=$?
if [ -n "$sched_trace" ]; then
  wait "$tracer" || true
  {
    echo
    echo "### Waits for a core (\`--sched-trace $sched_trace\`)"
    echo
    if perf sched timehist -i "$work/sched.data" > "$work/timehist.txt" 2>> "$work/perf.log"; then
      python3 "$root/bench/sched_delays.py" "$work/timehist.txt" "$server"
    else
      echo "perf sched could not record here:"; echo; sed 's/^/    /' "$work/perf.log" | tail -5
    fi
  } >> "$work/report.md"
fi
cat "$work/report.md"
if grep -qi "sanitizer" "$work/serve.log"; then
  echo "the daemon or a worker reported a sanitizer error:" >&2
  grep -i -A20 "sanitizer" "$work/serve.log" >&2
  status=1
fi
if [ -n "$result" ]; then
  {
    echo "# The daemon under load, $(date -u +%Y-%m-%d)"
    echo
    echo "- machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/Mem:/{print $2}') GiB, no GPU; the load, the daemon and its worker share these cores"
    echo "- commit: $(git -C "$root" rev-parse --short HEAD)"
    echo "- command: \`$command_line\`"
    echo "- database: a copy of \`bench/out/big.db\` ($(sqlite3 "$db" 'select count(*) from measurements') measurements at the end) unless --measurements; one worker on the fake driver tunes the submitted jobs (vector_add, one context, 24 configurations)"
    echo "- load: \`bench/load_bench\`, $read_rate reads/s ($arrivals arrivals) over 4 keep-alive clients and one for the slow endpoints, every GET endpoint in turn with ids read from the daemon; a job submitted every $submit_every s, one in three cancelled at once"
    echo
    cat "$work/report.md"
  } > "$result"
  echo "wrote $result" >&2
fi
exit $status
