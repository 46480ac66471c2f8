#!/usr/bin/env bash
# Quick start 2: set up, build, and run the whole test suite (GPU tests skip without a device).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
cd "$root/build"
ctest --output-on-failure -j "$(nproc)"
