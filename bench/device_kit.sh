#!/usr/bin/env bash
# The GPU machine lent through the `device` tool has the CUDA toolkit, CMake and a driver, but none
# of gputune's Debian packages (clang 14, SQLite, httplib, ...) and no network. This script packs,
# on the development machine, everything the GPU work runs into one archive that travels as a
# carried path, and unpacks it on the GPU machine:
#
#   bench/device_kit.sh pack       here: Release build in build-kit/ (gputune, gpu_test,
#                                  select_gpu_test, gpu_bench,
#                                  naive_gpu_bench), stripped, with every shared library they load
#                                  (glibc and its loader included, libcuda and NVRTC excluded: the
#                                  GPU machine's own are used) and clang's resource headers, into
#                                  .devkit/kit.tar.xz (under 60 MiB; .devkit/ is git-ignored)
#   bench/device_kit.sh unpack     there: unpacks into build-kit/, checks that every binary loads,
#                                  writes build-kit/kit-env.sh (source it) and prints the GPU
#   bench/device_kit.sh collect [PATH...]
#                                  there: bench/results files written since the unpack (since the
#                                  file COLLECT_SINCE names, where set: on_device's dry run), plus
#                                  the PATHs, into $OUT/results.tar.gz (the tool brings 8 files at most)
#   bench/device_kit.sh selftest   here, as root: unpack and use the kit where its build tree and
#                                  clang are hidden (a private mount namespace), as the GPU machine is
#
# The binaries keep the absolute paths they were built with (the source tree for configs/, the
# build tree for tests), so `unpack` makes that path a link to the GPU machine's copy of the tree
# when the two differ. The kit's own loader and libraries are set as each binary's interpreter and
# rpath (patchelf), so the GPU machine's glibc version does not matter. bench/on_device.sh runs
# the GPU steps from the kit: run(carry=[".devkit"], command="bash bench/on_device.sh tests").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kit_dir=$root/.devkit
archive=$kit_dir/kit.tar.xz
build=$root/build-kit
targets=(gputune tests/gpu_test tests/select_gpu_test bench/gpu_bench bench/naive_gpu_bench)
max_bytes=$((60 * 1024 * 1024))

die() {
  echo "device_kit: $*" >&2
  exit 2
}

pack() {
  command -v patchelf >/dev/null || die "patchelf is missing: apt-get install patchelf"
  command -v xz >/dev/null || die "xz is missing: apt-get install xz-utils"
  export PATH="${CUDAToolkit_ROOT:-/usr/local/cuda}/bin:$PATH"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGPUTUNE_WERROR=OFF >/dev/null
  local names=()
  for t in "${targets[@]}"; do names+=("$(basename "$t")"); done
  cmake --build "$build" -j "$(nproc)" --target "${names[@]}"

  local stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  local kb=$stage/build-kit
  mkdir -p "$kb/kit-lib"
  local libs=()
  for t in "${targets[@]}"; do
    mkdir -p "$kb/$(dirname "$t")"
    strip --strip-unneeded -o "$kb/$t" "$build/$t"
    # Every library the binary loads, by the name it asks for, except the GPU machine's own.
    while read -r name _ path _; do
      case $name in
        linux-vdso* | libcuda.so* | libnvrtc*) continue ;;
      esac
      [[ $path == /* ]] || die "$t: $name not found here (ldd)"
      libs+=("$name=$path")
    done < <(ldd "$build/$t" | grep '=>')
  done
  local interp
  interp=$(patchelf --print-interpreter "$build/gputune")
  cp -L "$interp" "$kb/kit-lib/$(basename "$interp")"
  for l in $(printf '%s\n' "${libs[@]}" | sort -u); do
    [[ -e $kb/kit-lib/${l%%=*} ]] || cp -L "${l#*=}" "$kb/kit-lib/${l%%=*}"
  done
  strip --strip-unneeded "$kb"/kit-lib/*.so* 2>/dev/null || true
  # A library's own RUNPATH (LLVM's and clang's point at ../lib) hides the binaries' rpath from
  # its dependencies: point those at the kit too.
  for f in "$kb"/kit-lib/*.so*; do
    if readelf -d "$f" 2>/dev/null | grep -qE 'RPATH|RUNPATH'; then patchelf --set-rpath '$ORIGIN' "$f"; fi
  done
  for t in "${targets[@]}"; do
    patchelf --set-interpreter "$build/kit-lib/$(basename "$interp")" \
      --force-rpath --set-rpath "$build/kit-lib:/usr/local/cuda/lib64" "$kb/$t"
  done
  local resource
  resource=$(find /usr/lib/llvm-14/lib/clang -mindepth 1 -maxdepth 1 -type d | head -1)
  mkdir -p "$kb/clang-resource"
  cp -r "$resource/include" "$kb/clang-resource/include"
  {
    echo "root=$root"
    echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "dirty=$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | wc -l)"
    echo "packed=$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
    echo "targets=${targets[*]}"
  } >"$kb/KIT"
  mkdir -p "$kit_dir"
  XZ_OPT=-T0 tar -C "$stage" -cJf "$archive" build-kit
  local size
  size=$(stat -c %s "$archive")
  echo "device_kit: $archive: $((size / 1048576)) MiB ($(ls "$kb/kit-lib" | wc -l) libraries)"
  ((size <= max_bytes)) || die "the kit is over 60 MiB; the tool carries 64 MiB with the tree"
  cat "$kb/KIT"
}

# tar -J needs the xz program; Python's lzma module does the same where xz is missing.
untar() {
  if command -v xz >/dev/null; then
    tar -C "$1" -xJf "$archive"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
      "$archive" "$1"
  fi
}

unpack() {
  [[ -f $archive ]] || die "$archive is missing: run 'bench/device_kit.sh pack' here and carry .devkit"
  local want tmp
  tmp=$(mktemp -d)
  untar "$tmp"
  want=$(sed -n 's/^root=//p' "$tmp/build-kit/KIT" 2>/dev/null || true)
  [[ -n $want ]] || die "$archive has no build-kit/KIT"
  if [[ $(cd "$root" && pwd -P) != $(cd "$want" 2>/dev/null && pwd -P) ]]; then
    [[ -e $want && ! -L $want ]] && die "$want exists and is not this tree ($root); unpack elsewhere"
    mkdir -p "$(dirname "$want")"
    ln -sfn "$root" "$want"
    echo "device_kit: $want -> $root"
  fi
  rm -rf "$build"
  mv "$tmp/build-kit" "$build"
  rm -rf "$tmp"
  # NVRTC (needed) and cuBLAS (the baselines): the toolkit's, else a Python wheel's (the torch
  # environment has both), through LD_LIBRARY_PATH, which the loader reads after the rpath.
  local nvrtc="" cublas="" extra=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /opt /usr/lib; do
    [[ -d $d ]] || continue
    [[ -n $nvrtc ]] || nvrtc=$(find "$d/" -name 'libnvrtc.so.13' 2>/dev/null | head -1)
    [[ -n $cublas ]] || cublas=$(find "$d/" -name 'libcublas.so.13*' 2>/dev/null | head -1)
    [[ -n $nvrtc && -n $cublas ]] && break
  done
  for f in "$nvrtc" "$cublas"; do
    [[ -n $f && ${f%/*} != /usr/local/cuda/lib64 ]] && extra="$extra${extra:+:}${f%/*}"
  done
  {
    echo "# written by bench/device_kit.sh unpack"
    echo "export GPUTUNE_CLANG_RESOURCE_DIR=$want/build-kit/clang-resource"
    echo "export GPUTUNE_COMMIT=$(sed -n 's/^commit=//p' "$build/KIT")"
    echo "export PATH=/usr/local/cuda/bin:\$PATH"
    [[ -n $extra ]] && echo "export LD_LIBRARY_PATH=$extra\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  } >"$build/kit-env.sh"
  touch "$build/unpacked"
  cat "$build/KIT"
  echo "nvrtc: ${nvrtc:-not found (gputune cannot compile without it)}"
  echo "cublas: ${cublas:-not found (the cuBLAS baselines will say so)}"
  # shellcheck disable=SC1091
  . "$build/kit-env.sh"
  local bad=0 loader
  loader=$(ls "$build"/kit-lib/ld-linux*.so*)
  for t in "${targets[@]}"; do
    # The kit's loader lists what each binary would load, as ldd does, without running it.
    if ! "$loader" --list "$build/$t" >"$build/ldd.txt" 2>&1 || grep -q 'not found' "$build/ldd.txt" ||
      grep '=> /' "$build/ldd.txt" | grep -v "$want/build-kit/kit-lib/" | grep -qv 'libnvrtc'; then
      echo "device_kit: $t does not load:" >&2
      grep -v "kit-lib/" "$build/ldd.txt" >&2 || true
      bad=1
    fi
  done
  ((bad == 0)) || die "a binary of the kit does not load here"
  "$build/gputune" devices || true
}

collect() {
  [[ -n ${OUT:-} ]] || die "\$OUT is not set (collect runs on the GPU machine)"
  local since=${COLLECT_SINCE:-$build/unpacked}
  [[ -f $since ]] || die "nothing unpacked here"
  local files=()
  while IFS= read -r f; do files+=("${f#"$root"/}"); done \
    < <(find "$root/bench/results" -type f -newer "$since")
  for p in "$@"; do [[ -e $root/$p ]] && files+=("$p"); done
  ((${#files[@]})) || {
    echo "device_kit: nothing new to collect"
    return 0
  }
  tar -C "$root" -czf "$OUT/results.tar.gz" "${files[@]}"
  printf 'collected: %s\n' "${files[@]}"
}

# Here, as root: the GPU machine imitated. A copy of the tracked tree in a private mount namespace
# where the tree's own path and clang's installation are hidden; unpack there, check that every
# library loads from the kit, run the GPU tests (they skip), a prune that needs clang, and, when
# build/ has the fake driver, a `run` on it.
selftest() {
  [[ -f $archive ]] || die "$archive is missing: pack first"
  [[ $(id -u) -eq 0 ]] || die "selftest needs root (a private mount namespace)"
  local sim
  sim=$(mktemp -d)
  trap 'rm -rf "$sim"' RETURN
  mkdir -p "$sim/tree" "$sim/empty" "$sim/out"
  git -C "$root" ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$sim/tree")
  cp "$0" "$sim/tree/bench/device_kit.sh"
  mkdir -p "$sim/tree/.devkit" && cp "$archive" "$sim/tree/.devkit/"
  local fake=""
  if [[ -f $root/build/tests/fake_cuda/libcuda.so.1 ]]; then
    mkdir -p "$sim/fake" && cp -L "$root/build/tests/fake_cuda/libcuda.so.1" "$sim/fake/" && fake=$sim/fake
  fi
  local want
  want=$(tar -xOJf "$archive" build-kit/KIT | sed -n 's/^root=//p')
  unshare -m bash -euo pipefail -c '
    want=$1 sim=$2 fake=$3
    mount -t tmpfs tmpfs "$(dirname "$want")"
    [[ -d /usr/lib/llvm-14 ]] && mount --bind "$sim/empty" /usr/lib/llvm-14
    cd "$sim/tree"
    export OUT=$sim/out
    bash bench/device_kit.sh unpack
    . build-kit/kit-env.sh
    build-kit/tests/gpu_test --gtest_brief=1
    build-kit/tests/select_gpu_test --gtest_brief=1
    build-kit/gputune prune configs/examples/transpose.json --device h100-sxm --no-store \
      --cache-dir - | tail -n 3
    # A header only clang'"'"'s resource directory has: found in the kit'"'"'s copy.
    printf "#include <__stddef_max_align_t.h>\n__global__ void k(float* o, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) o[i] = sizeof(max_align_t);\n}\n" >"$sim/k.cu"
    build-kit/gputune generate "$sim/k.cu" --kernel k --out "$sim/gen" --limit 1 | tail -n 1
    if [[ -n $fake ]]; then
      LD_LIBRARY_PATH=$fake build-kit/gputune run configs/examples/vector_add.json \
        --db "$sim/v.db" --cache-dir - | tail -n 4
    fi
    bash bench/device_kit.sh collect build-kit/KIT
    tar -tzf "$OUT/results.tar.gz"
  ' selftest "$want" "$sim" "$fake"
  echo "device_kit: selftest passed"
}

case ${1:-} in
  selftest) selftest ;;
  pack) pack ;;
  unpack) unpack ;;
  collect)
    shift
    collect "$@"
    ;;
  *) die "usage: bench/device_kit.sh pack | unpack | collect [PATH...] | selftest" ;;
esac
