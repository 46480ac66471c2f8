#!/usr/bin/env bash
# Quick start 2: set up, build, and run the whole test suite (GPU tests skip without a device).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The dashboard tests drive a real headless Chromium; the slurm tests start a single-node SLURM
# (tests/slurm/local_slurm.sh: munged, slurmctld, slurmd); the fuzz targets build with clang 14
# and its libFuzzer (tests/fuzz/run_fuzz.sh).
GPUTUNE_EXTRA_PACKAGES="chromium chromium-driver slurmd slurmctld slurm-client munge clang-14 libclang-rt-14-dev" bash "$root/scripts/setup.sh"
cd "$root/build"
ctest --output-on-failure -j "$(nproc)"
