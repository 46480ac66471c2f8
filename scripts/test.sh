#!/usr/bin/env bash
# Quick start 2: set up, build, and run the whole test suite (GPU tests skip without a device).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The dashboard tests drive a real headless Chromium.
GPUTUNE_EXTRA_PACKAGES="chromium chromium-driver" bash "$root/scripts/setup.sh"
cd "$root/build"
ctest --output-on-failure -j "$(nproc)"
