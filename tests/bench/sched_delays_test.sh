#!/usr/bin/env bash
# bench/sched_delays.py on a hand-made `perf sched timehist` (tests/data/sched/timehist.txt): two
# cores; a load generator's wake-up waits 3 ms behind a request thread while the other core idles,
# a request thread 4 ms behind a worker while the other core runs only the background rebuild,
# and another 2 ms behind the rebuild while the first core is busy. Each must be told as such.
set -euo pipefail
root=$1
out=$(python3 "$root/bench/sched_delays.py" "$root/tests/data/sched/timehist.txt" 100)
echo "$out"
expect() {
  grep -qxF -- "$1" <<<"$out" || { echo "FAILED: no line '$1'" >&2; exit 1; }
}
expect "| daemon: a request thread | 4 | 2 | 50.00% |"
expect "| the load generator | 1 | 1 | 100.00% |"
expect "Long waits: median 3.00 ms, longest 4.00 ms."
expect "| daemon: a request thread | 1 |"
expect "| a worker or its job | 1 |"
expect "| daemon: the background rebuild | 1 |"
expect "| another core was idle or ran only the background rebuild | 2 |"
expect "| every other core was busy | 1 |"
if python3 "$root/bench/sched_delays.py" /dev/null 100 2>/dev/null; then
  echo "FAILED: an empty trace was accepted" >&2; exit 1
fi
echo "sched_delays_test: ok"
