#!/usr/bin/env bash
# Issue #3's model on real measurements of a kernel it did not come with: benchmark_hub's
# dedispersion (every one of 11,130 configurations timed by Kernel Tuner on an RTX A4000,
# ../shared/data/kernel-tuner-cache/). No GPU needed. The kernel source is third-party and not
# shipped: give the path of benchmark_hub's CUDA `dedispersion.cu` (its `dedispersion_kernel`;
# the T1 job names the HIP twin `dedisp_milo/dedispersion.cu.hip`). This script writes the
# header that file includes, with the problem's constants from benchmark_hub's
# `kernels/dedisp_milo/dedispersion_milo.py` (nr_dms 2048, nr_samples 25000, nr_channels 1536,
# max_shift 650, dm_first 0, dm_step 0.02), and a copy of the T1 job whose arguments have the
# sizes and types the Python script allocates (the T1 file says Size 1 for the input and the
# shifts, and float for the uint8 input), with the shifts the Python script computes: the model
# reads the contents of small read-only arrays, and these set the kernel's addresses.
# Usage: bench/run_dedispersion_replay.sh PATH/TO/dedispersion.cu [BUILD_DIR] [SEEDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kernel=${1:?usage: bench/run_dedispersion_replay.sh PATH/TO/dedispersion.cu [BUILD_DIR] [SEEDS]}
build=${2:-$root/build}
seeds=${3:-200}
data=$root/../shared/data/kernel-tuner-cache
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$kernel" "$work/dedispersion.cu"
cat > "$work/dedispersion.h" <<'H'
#define nr_dms 2048
#define nr_samples 25000
#define nr_channels 1536
#define max_shift 650
#define nr_samples_per_channel (nr_samples + max_shift)
#define down_sampling 1
#define dm_first 0.0f
#define dm_step 0.02f
H
python3 - "$data/dedispersion_milo.T1.json" "$work/dedispersion.T1.json" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))
spec = job["KernelSpecification"]
spec["KernelFile"] = "dedispersion.cu"
args = spec["Arguments"]
args[0].update({"Type": "uint8", "Size": "25650*1536", "FillValue": 2})  # input_samples
# shifts: each channel's dispersion delay per unit of DM, in samples, as dedispersion_milo.py
# computes them (the cold-plasma delay 4148.808 s MHz^2 x (f^-2 - f_max^-2), 1536 channels of
# 0.1953125 MHz from 1425 MHz, 25000 samples of 40.96 us), as float32; the highest channel 0.
import struct
nr_channels, bw, f_min, nr_samples, t_sample = 1536, 0.1953125, 1425.0, 25000, 0.00004096
f_max = f_min + (nr_channels - 1) * bw
unit = nr_samples * t_sample
shifts = [4148.808 * (1 / (f_min + c * bw) ** 2 - 1 / f_max ** 2) * nr_samples / unit
          for c in range(nr_channels)]
shifts[-1] = 0.0
open(sys.argv[2].replace("dedispersion.T1.json", "shifts.bin"), "wb").write(
    struct.pack("<%df" % nr_channels, *shifts))
args[2].update({"Size": "1536", "FillType": "BinaryRaw", "DataSource": "shifts.bin"})
args[2].pop("FillValue", None)
json.dump(job, open(sys.argv[2], "w"), indent=1)
PY
"$build/gputune" replay "$work/dedispersion.T1.json" \
  --measurements "$data/dedispersion_A4000.json.gz" --device A4000 --seeds "$seeds" \
  --within 0,1,5,10 --cache-dir - 2>&1 | grep -v '^gputune: note'
