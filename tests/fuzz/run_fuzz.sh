#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz/*_fuzz.cpp) for SECONDS each, and prints what each did as
# a Markdown table (executions, seconds, executions/s, corpus, peak memory, crash):
#
#   bash tests/fuzz/run_fuzz.sh [SECONDS] [TARGET...]      # default 60 s, every target
#
# Builds them first, where needed, in $GPUTUNE_FUZZ_BUILD (default build-fuzz/): clang 14
# (CXX=clang++-14), -DGPUTUNE_FUZZ=ON, ccache when present. Each target starts from its seed corpus
# tests/fuzz/corpus/TARGET/ (crash inputs once fixed live there too: every start replays them)
# and keeps what it finds in $GPUTUNE_FUZZ_BUILD/corpus/TARGET/ (not in the repository). A crash,
# a sanitizer report, a leak, a timeout (-timeout, default 30 s) or a wrong answer a target checks
# is written to $GPUTUNE_FUZZ_CRASHES (default tests/fuzz/crashes/, git-ignored) as TARGET-crash-...
# and the script exits 1. Without clang++-14 or its libFuzzer it exits 77 (ctest: skipped), saying
# which is missing. $GPUTUNE_FUZZ_REPORT: also write the table there. $GPUTUNE_FUZZ_JOBS: build
# jobs (default: the cores). Extra libFuzzer flags: $GPUTUNE_FUZZ_FLAGS.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-60}
shift || true
all=(expr_fuzz job_fuzz interchange_fuzz cubin_fuzz web_fuzz naive_fuzz suite_fuzz)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")
build=${GPUTUNE_FUZZ_BUILD:-$root/build-fuzz}
crashes=${GPUTUNE_FUZZ_CRASHES:-$root/tests/fuzz/crashes}
cxx=${GPUTUNE_FUZZ_CXX:-clang++-14}

if ! command -v "$cxx" >/dev/null; then
  echo "run_fuzz: skipped: $cxx is not installed (Debian package clang-14)"
  exit 77
fi
resource=$("$cxx" -print-resource-dir)
if [ ! -f "$resource/lib/linux/libclang_rt.fuzzer-x86_64.a" ]; then
  echo "run_fuzz: skipped: $cxx has no libFuzzer ($resource/lib/linux/libclang_rt.fuzzer-x86_64.a; Debian package libclang-rt-14-dev)"
  exit 77
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # -O1 and line tables: what libFuzzer's documentation recommends, and a quicker build.
  CXX=$cxx cmake -S "$root" -B "$build" -DGPUTUNE_FUZZ=ON -DGPUTUNE_BUILD_TESTS=OFF \
    -DGPUTUNE_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" "${launcher[@]}" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; echo "run_fuzz: configuring $build failed"; exit 1; }
fi
cmake --build "$build" --target "${targets[@]}" -j "${GPUTUNE_FUZZ_JOBS:-$(nproc)}" >"$build/build.log" 2>&1 ||
  { tail -50 "$build/build.log"; echo "run_fuzz: building ${targets[*]} failed ($build/build.log)"; exit 1; }

mkdir -p "$crashes"
stat_of() { sed -n "s/^stat::$1: *//p" "$2" | tail -1; }
table="| target | executions | seconds | executions/s | corpus (seeds -> after) | peak RSS MB | result |
|---|---:|---:|---:|---|---:|---|"
failed=0
for t in "${targets[@]}"; do
  seeds=$root/tests/fuzz/corpus/$t
  work=$build/corpus/$t
  mkdir -p "$work" "$seeds"
  log=$build/$t.log
  start=$(date +%s%N)
  # The work corpus first: libFuzzer writes what it finds into the first folder.
  # shellcheck disable=SC2086
  # Scratch files of the target (a crash leaves them behind) in a folder of the run's own.
  rm -rf "$build/tmp/$t" && mkdir -p "$build/tmp/$t"
  (cd "$build" && TMPDIR=$build/tmp/$t ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/fuzzers/$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=30 \
    -rss_limit_mb=3072 -artifact_prefix="$crashes/$t-" ${GPUTUNE_FUZZ_FLAGS:-} "$work" "$seeds") >"$log" 2>&1
  rc=$?
  rm -rf "$build/tmp/$t"
  wall=$((($(date +%s%N) - start) / 1000000000))
  execs=$(stat_of number_of_executed_units "$log")
  rate=$(stat_of average_exec_per_sec "$log")
  rss=$(stat_of peak_rss_mb "$log")
  n_seeds=$(find "$seeds" -type f | wc -l)
  n_after=$(find "$work" "$seeds" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    result="no crash"
  else
    failed=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    why=$(grep -m1 -E "ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error:|FINDING:|terminate called|deadly signal" "$log" | cut -c1-160)
    result="**exit $rc**: ${why:-see $log} (${artifact:-no input written})"
    echo "run_fuzz: $t failed; its log: $log" >&2
    tail -40 "$log" >&2
  fi
  table+=$'\n'"| $t | ${execs:-0} | $wall | ${rate:-0} | $n_seeds -> $n_after | ${rss:-?} | $result |"
done
echo "$table"
[ -n "${GPUTUNE_FUZZ_REPORT:-}" ] && echo "$table" >"$GPUTUNE_FUZZ_REPORT"
exit $failed
