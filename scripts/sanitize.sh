#!/usr/bin/env bash
# The checking build (issue #47): gputune, its tests and the libFuzzer targets compiled by clang 14
# with AddressSanitizer, UndefinedBehaviorSanitizer (every report fatal) and libFuzzer's coverage
# (-DGPUTUNE_FUZZ=ON, -O1) in build-san/, then tests run there.
#   bash scripts/sanitize.sh [quick|full]
#     quick (default; what .ci/run runs): the unit tests, plus each fuzz target for 5 s from its
#           corpus (every crash input kept there is replayed).
#     full: the whole suite but the labels gpu (no GPU here), slurm and load (timing-bound).
# Times on the 2-core VM: see bench/results/sanitize-vm-*.md. Installs clang-14 and
# libclang-rt-14-dev (libFuzzer) where missing. ccache is used where installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-quick}
case $mode in quick | full) ;; *)
  echo "usage: scripts/sanitize.sh [quick|full]" >&2
  exit 2
  ;;
esac
GPUTUNE_SETUP_NO_BUILD=1 GPUTUNE_EXTRA_PACKAGES="clang-14 libclang-rt-14-dev ${GPUTUNE_EXTRA_PACKAGES:-}" \
  bash "$root/scripts/setup.sh"
export PATH="${CUDAToolkit_ROOT:-/usr/local/cuda}/bin:$PATH"
build=${GPUTUNE_SAN_BUILD:-$root/build-san}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$(date +%s)
CXX=clang++-14 cmake -S "$root" -B "$build" -DGPUTUNE_FUZZ=ON -DGPUTUNE_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  "${launcher[@]}" >/dev/null
if [ "$mode" = quick ]; then
  cmake --build "$build" -j "$(nproc)" --target gputune fuzzers unit_tests fake_cuda
else
  cmake --build "$build" -j "$(nproc)"
fi
built=$(date +%s)
# A sanitizer report fails the test it ran in. Leaks are not reported: LLVM's libraries (the
# naive-kernel front end) keep allocations until exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$build"
rc=0
if [ "$mode" = quick ]; then
  ctest --output-on-failure -j "$(nproc)" -L "^(unit|fuzz)$" || rc=$?
else
  ctest --output-on-failure -j "$(nproc)" -LE "^(gpu|slurm|load)$" --timeout 1800 || rc=$?
fi
echo "sanitize ($mode): built in $((built - start)) s, tests ran $(($(date +%s) - built)) s, exit $rc"
exit $rc
