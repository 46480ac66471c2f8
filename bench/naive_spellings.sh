#!/usr/bin/env bash
# Issue #63's figure: per kernel of tests/data/naive (one spelling each), what `gputune generate`
# offers as written (--as-written: no rewrites) and as read (the spellings rewritten): loops every
# thread runs alike, bounds checks, each array's load paths, halo windows, split, and the space.
# Usage: bash bench/naive_spellings.sh [DIR]   (default tests/data/naive; needs build/gputune)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/tests/data/naive}
gputune=$root/build/gputune
summary() {
  # One cell: loops, checks, each array's paths (+ a halo window), split, the space's size.
  python3 -c '
import re, sys
t = sys.stdin.read()
m = re.search(r"(\d+) loop\(s\).*?(\d+) bounds check", t)
loops, checks = (m.group(1), m.group(2)) if m else ("?", "?")
arrays = []
for line in t.splitlines():
    a = re.match(r"^  ([A-Za-z_]\w*)( \(written\))?: ?(.*)$", line)
    if a and a.group(1) not in ("split", "note"):
        arrays.append(a.group(1) + ": " + a.group(3).strip())
    elif "shared: a halo window" in line and arrays:
        arrays[-1] += " (window)"
split = "yes" if "split: 1-32" in t else "no"
n = re.search(r"^(\d+) variants in the generated space", t, re.M)
print(loops + " loop(s), " + checks + " check(s); " + "; ".join(arrays) + "; split " + split + "; " + (n.group(1) if n else "?") + " variants", end="")
'
}
echo "| kernel | as written (--as-written) | as read (the spellings rewritten) |"
echo "|---|---|---|"
for cu in "$dir"/*.cu; do
  k=$(basename "$cu" .cu)
  before=$("$gputune" generate "$cu" --kernel "$k" --as-written 2>&1 | summary)
  after=$("$gputune" generate "$cu" --kernel "$k" 2>&1 | summary)
  echo "| $k | $before | $after |"
done
