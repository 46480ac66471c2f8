#!/usr/bin/env bash
# Do two gputune binaries print the same thing? For moves that must not change behaviour (#64:
# "prune --json and replay outputs stay byte-identical on the shipped jobs, and the generated
# variants of configs/naive are identical"): build the commit before into one folder and the one
# after into another, then
#
#   bash bench/same_outputs.sh BEFORE/gputune AFTER/gputune [OUT]
#
# Each binary runs, with one shared cubin cache (OUT/cubins; warmed by the first):
# - replay of the transpose 4096 recording with the H100 model (--device, --model-seeds 2), and of
#   the hub's dedispersion with --score (needs ../shared/data);
# - prune --json --no-store of three configs/examples jobs;
# - generate of four configs/naive kernels (16 variant files each), and generate --check;
# - check of configs/examples/transpose.json at a small size.
# Each command's output and exit code go to OUT/before and OUT/after (the generated files as md5
# sums); the script lists what differs and exits 1 when anything does. No GPU needed. On the
# 2-core VM: about 4 min with a cold cache (most of it compiling), under a minute warm.
set -uo pipefail
[ $# -ge 2 ] || {
  echo "usage: bash bench/same_outputs.sh BEFORE_BINARY AFTER_BINARY [OUT]" >&2
  exit 2
}
root=$(cd "$(dirname "$0")/.." && pwd)
data=$root/../shared/data
out=${3:-$root/bench/out/same-outputs}
before=$(realpath "$1")
after=$(realpath "$2")
mkdir -p "$out/cubins"

run_all() { # BINARY FOLDER
  local g=$1 o=$2 gen=$2/generated
  rm -rf "$o" && mkdir -p "$o" "$gen"
  cd "$root" || exit 2
  if [ -d "$data" ]; then
    "$g" replay configs/examples/transpose.json \
      --measurements "$data/h100-2026-11-26/transpose.4096x4096.t4.json" --context 4096x4096 \
      --device "NVIDIA H100 80GB HBM3" --model-seeds 2 --seeds 20 --within 1,5,10 \
      --cache-dir "$out/cubins" >"$o/replay_transpose.txt" 2>&1
    echo "rc $?" >>"$o/replay_transpose.txt"
    "$g" replay configs/community/benchmark-hub/dedispersion_milo_corrected.json \
      --measurements "$data/kernel-tuner-cache/dedispersion_A4000.json.gz" --seeds 20 --score \
      --within 1,5,10 >"$o/replay_dedispersion.txt" 2>&1
    echo "rc $?" >>"$o/replay_dedispersion.txt"
  else
    echo "same_outputs: no $data: the replays are left out" >&2
  fi
  for j in transpose matmul vector_add; do
    "$g" prune "configs/examples/$j.json" --json --no-store --cache-dir "$out/cubins" \
      >"$o/prune_$j.json" 2>"$o/prune_$j.err"
    echo "rc $?" >>"$o/prune_$j.json"
  done
  for k in mm conv1d jacobi conv2d; do
    "$g" generate "configs/naive/$k.cu" --kernel "$k" --job "configs/naive/$k.json" --limit 16 \
      --out "$gen/$k" >"$o/generate_$k.txt" 2>&1
    echo "rc $?" >>"$o/generate_$k.txt"
    # The report names the output folder, which differs: the same relative name in both.
    sed -i "s|$gen/|GEN/|g" "$o/generate_$k.txt"
    (cd "$gen/$k" && find . -type f | sort | xargs md5sum) >"$o/generate_$k.md5"
  done
  "$g" generate configs/naive/mm.cu --kernel mm --job configs/naive/mm.json --limit 3 --check \
    --out "$gen/check" >"$o/generate_check.txt" 2>&1
  echo "rc $?" >>"$o/generate_check.txt"
  sed -i "s|$gen/|GEN/|g" "$o/generate_check.txt"
  "$g" check configs/examples/transpose.json --limit 6 --size 64,48 >"$o/check_transpose.txt" 2>&1
  echo "rc $?" >>"$o/check_transpose.txt"
  rm -rf "$gen"
}

run_all "$before" "$out/before"
run_all "$after" "$out/after"
status=0
for f in "$out"/before/*; do
  name=$(basename "$f")
  if ! cmp -s "$f" "$out/after/$name"; then
    echo "differs: $name"
    diff "$f" "$out/after/$name" | head -20
    status=1
  fi
done
echo "same_outputs: $(find "$out/before" -type f | wc -l) outputs ($(cat "$out"/before/* | wc -l) lines)," \
  "$([ $status = 0 ] && echo "all the same" || echo "some differ") ($out)"
exit $status
