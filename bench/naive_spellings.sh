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
  # One line: loops, checks, arrays' paths (+window), split, space size.
  awk '
    /^naive kernel/ { match($0, /([0-9]+) loop\(s\)/, m); loops = m[1]; match($0, /([0-9]+) bounds/, g); checks = g[1] }
    /^  [A-Za-z_][A-Za-z_0-9]*:/ { a = $1; sub(":", "", a); $1 = ""; paths = paths (paths ? "; " : "") a ":" $0 }
    /shared: a halo window/ { paths = paths " (window)" }
    /^  split: 1-32/ { split = "yes" }
    /^  split: not offered/ { split = "no" }
    /variants in the generated space/ { space = $1 }
    END { printf "%s loop(s), %s check(s); %s; split %s; %s variants", loops, checks, paths, split, space }'
}
echo "| kernel | as written (--as-written) | as read (the spellings rewritten) |"
echo "|---|---|---|"
for cu in "$dir"/*.cu; do
  k=$(basename "$cu" .cu)
  before=$("$gputune" generate "$cu" --kernel "$k" --as-written 2>&1 | summary)
  after=$("$gputune" generate "$cu" --kernel "$k" 2>&1 | summary)
  echo "| $k | $before | $after |"
done
