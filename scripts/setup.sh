#!/usr/bin/env bash
# Installs the Debian packages gputune needs (only the missing ones) and builds it into build/.
# Needs the CUDA toolkit at /usr/local/cuda (or CUDAToolkit_ROOT). Sourced by run-example.sh and test.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
packages=(cmake g++ make pkg-config libsqlite3-dev nlohmann-json3-dev libcxxopts-dev libgtest-dev
          libbenchmark-dev libssl-dev zlib1g-dev libcpp-httplib-dev libjemalloc-dev
          libclang-14-dev libclang-cpp14-dev llvm-14-dev)
# shellcheck disable=SC2206
packages+=(${GPUTUNE_EXTRA_PACKAGES:-})
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "gputune setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ! -x "${CUDAToolkit_ROOT:-/usr/local/cuda}/bin/nvcc" ] && ! command -v nvcc >/dev/null; then
  echo "gputune setup: the CUDA toolkit was not found at ${CUDAToolkit_ROOT:-/usr/local/cuda}." >&2
  echo "Install the CUDA toolkit (NVRTC and headers are needed; a GPU driver is not) or set CUDAToolkit_ROOT." >&2
  exit 2
fi
export PATH="${CUDAToolkit_ROOT:-/usr/local/cuda}/bin:$PATH"
# GPUTUNE_SETUP_NO_BUILD=1: the packages only (scripts/sanitize.sh builds its own tree).
[ "${GPUTUNE_SETUP_NO_BUILD:-0}" = 1 ] && exit 0
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
echo "gputune setup: configuring build/ (cmake)"
# -g1: line tables and function names (backtraces, profiles) at a fraction of -g's cost: -g made
# the quick start's build of the binary 7 min 20 s on 2 cores, -g1 3 min 37 s
# (bench/results/quickstart-vm-2026-12-02.md).
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DGPUTUNE_WERROR=$werror >/dev/null
# GPUTUNE_SETUP_TARGET=gputune (run-example.sh): the binary alone, not the tests.
target=${GPUTUNE_SETUP_TARGET:-all}
echo "gputune setup: building $target on $(nproc) cores (make's [ NN%] lines show how far it is)"
cmake --build "$root/build" -j "$(nproc)" --target "$target"
