#!/usr/bin/env bash
# Issue #47 on a real GPU: `gputune run JOB` killed with SIGKILL (its whole process group: the
# supervisor and the tuning process in the middle of a kernel, a compile or a store) at random
# moments, KILLS times, each time resumed with --resume, then left to finish. Before each kill it
# reads how many pairs the run has stored with a verified time (`gputune runs`), after it again:
# a finished measurement lost would show as a smaller count. The database is left in OUTDIR for the checks
# that need SQLite (bench/check_kill_db.py: integrity, every pair measured exactly once).
#   bash bench/gpu_kill_loop.sh JOB KILLS OUTDIR [RUN ARGS...]
# e.g. (on the GPU machine, from the kit) bash bench/gpu_kill_loop.sh configs/examples/matmul.json
#        12 "$OUT/kill" --strategy random --budget 100
# Logs kill.log (one line per kill: seconds alive, stored before, stored after, lost) in OUTDIR.
set -uo pipefail
job=$1 kills=$2 out=$3
shift 3
gputune=${GPUTUNE:-build-kit/gputune}
mkdir -p "$out"
db=$out/kill.db log=$out/kill.log cache=$(mktemp -d)
rm -f "$db" "$db-wal" "$db-shm"
RANDOM=${KILL_SEED:-47}
# Pairs with a verified time stored (`runs`' timed column, counted from the measurement rows; its
# progress column is a counter the run updates every 64 pairs, too coarse for this).
stored() { "$gputune" runs --db "$db" 2>/dev/null | awk '$1 == 1 { print $5 }'; }
echo "# gputune kill loop: $job, $kills kills, $(date -u +%FT%TZ)" >"$log"
lost_total=0
for ((i = 1; i <= kills; ++i)); do
  args=(run "$job" --db "$db" --cache-dir "$cache" "$@")
  ((i > 1)) && args+=(--resume 1)
  setsid "$gputune" "${args[@]}" >>"$out/run.log" 2>&1 &
  pid=$!
  # 0.5 s to KILL_MAX_S + 0.5 s (default 4): early ones land in compiles, later ones in measurements
  alive=$(printf "%d.%03d" $((RANDOM % ${KILL_MAX_S:-4})) $((RANDOM % 1000)))
  sleep 0.5 && sleep "$alive"
  before=$(stored)
  if ! kill -9 -- -"$pid" 2>/dev/null; then
    wait "$pid"
    echo "kill $i: the run had ended (exit $?) before its kill" >>"$log"
    break
  fi
  wait "$pid" 2>/dev/null
  after=$(stored)
  lost=$((${before:-0} > ${after:-0} ? ${before:-0} - ${after:-0} : 0))
  lost_total=$((lost_total + lost))
  echo "kill $i: after $alive s: stored before ${before:-0}, after ${after:-0}, lost $lost" >>"$log"
done
timeout 240 "$gputune" run "$job" --db "$db" --cache-dir "$cache" "$@" --resume 1 >>"$out/run.log" 2>&1
echo "final resume: exit $?; stored $(stored); lost across kills: $lost_total" >>"$log"
"$gputune" runs --db "$db" >>"$log" 2>&1
rm -rf "$cache"
cat "$log"
