#!/usr/bin/env python3
"""gputune's portfolio search on the community's recorded spaces, those of issue #61 and the same
kernels measured on other GPUs, against random search: one Markdown table.

Per space: random search as `gputune replay` scores it (its seeds) and exactly (the median and
90th percentile of random search without replacement, the job's default measured first and
counted, from the number of configurations within 5% of the optimum), the portfolio search's
median and p90 to 5% as `replay` scores it (bench/search_bench: the stream of `run`, this
machine's compile workers and look-ahead), its ratio to the exact random median, and the
methodology's score over measurements and over time. Then the geometric means of the ratios per
group of spaces:
  - issue: the five spaces of issue #61 (its settings were chosen on these);
  - diagnosis: five held-out spaces the portfolio's old bandit failed on, which chose the shares
    too (bench/results/search-shares-vm-2026-12-07.md);
  - check: the other sixteen, which no setting saw.

The other GPUs' measurements are the Auto-Tuning Association's benchmark hub (MIT): give a
checkout of https://github.com/AutoTuningAssociation/benchmark_hub (commit 8eeb99e was used) with
--hub; its cachefiles/ and currently_unused/cachefiles/ are read. Without it, the issue's five
spaces only (../shared/data).

Usage: python3 bench/search_spaces.py [--hub DIR] [--seeds N] [--set key=value]...
         [--only issue,diagnosis,check] [--jobs 2]
"""
import argparse
import concurrent.futures
import gzip
import json
import math
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.environ.get("GPUTUNE_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
JOBS = {
    "hubconv": "configs/community/benchmark-hub/convolution_milo.json",
    "dedisp": "configs/community/benchmark-hub/dedispersion_milo.json",
    "pnpoly": "configs/community/kernel-tuner/pnpoly.json",
    "ktconv": "configs/community/kernel-tuner/convolution.json",
    "gemm": "configs/community/kernel-tuner/gemm.json",
}
DIAGNOSIS = {"hubconv A100", "hubconv W6600", "pnpoly RTX 3060 laptop", "pnpoly RTX 3090",
             "pnpoly TITAN RTX"}


def spaces(hub):
    """(group, name, kernel, file) of every space."""
    out = [
        ("issue", "hubconv RTX A4000", "hubconv",
         f"{DATA}/community-spaces/benchmark-hub/cachefiles/convolution_milo_A4000.json.gz"),
        ("issue", "pnpoly RTX 2080 Ti", "pnpoly",
         f"{DATA}/community-spaces/kernel-tuner-examples/pnpoly_RTX_2080_Ti.json.gz"),
        ("issue", "ktconv RTX 2080 Ti", "ktconv",
         f"{DATA}/community-spaces/kernel-tuner-examples/convolution_RTX_2080_Ti.json.gz"),
        ("issue", "gemm RTX 2080 Ti", "gemm",
         f"{DATA}/community-spaces/kernel-tuner-examples/gemm_RTX_2080_Ti.json.gz"),
        ("issue", "dedisp RTX A4000", "dedisp", f"{DATA}/kernel-tuner-cache/dedispersion_A4000.json.gz"),
    ]
    if not hub:
        return out
    kt = f"{hub}/currently_unused/cachefiles/KernelTuner data"
    others = []
    for gpu in ["A100", "A6000", "MI250X", "W6600", "W7800"]:
        others.append((f"hubconv {gpu}", "hubconv", f"{hub}/cachefiles/convolution_milo/{gpu}.json.gz"))
    for gpu in ["A100", "A6000", "MI250X", "W6600", "W7800"]:
        others.append((f"dedisp {gpu}", "dedisp", f"{hub}/cachefiles/dedispersion_milo/{gpu}.json.gz"))
    for gpu, f in [("RTX 3060 laptop", "RTX_3060_laptop"), ("RTX 3090", "RTX_3090"),
                   ("TITAN RTX", "RTX_Titan")]:
        others.append((f"pnpoly {gpu}", "pnpoly", f"{kt}/pnpoly/{f}.json.gz"))
    others.append(("pnpoly RTX 2080 Ti (2nd)", "pnpoly",
                   f"{hub}/currently_unused/cachefiles/pnpoly/RTX_2080_Ti.json.gz"))
    for gpu, f in [("RTX 3060 laptop", "RTX_3060_laptop"), ("RTX 3090", "RTX_3090"),
                   ("TITAN RTX", "RTX_Titan")]:
        others.append((f"ktconv {gpu}", "ktconv", f"{kt}/convolution/{f}.json.gz"))
    others.append(("ktconv RTX 2080 Ti (2nd)", "ktconv",
                   f"{hub}/currently_unused/cachefiles/convolution/RTX_2080_Ti.json.gz"))
    for gpu, f in [("RTX 3060 laptop", "RTX_3060_laptop"), ("RTX 3090", "RTX_3090"),
                   ("TITAN RTX", "RTX_Titan")]:
        others.append((f"gemm {gpu}", "gemm", f"{kt}/gemm/{f}.json.gz"))
    for name, kernel, path in others:
        out.append(("diagnosis" if name in DIAGNOSIS else "check", name, kernel, path))
    return out


def exact_random(job, path, tol=0.05):
    """Median and p90 of random search without replacement over the recorded configurations,
    the job's default measured first (and counted)."""
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        cache = json.load(f)
    entries, keys = cache["cache"], cache["tune_params_keys"]
    with open(os.path.join(ROOT, job)) as f:
        params = json.load(f)["ConfigurationSpace"]["TuningParameters"]
    default = {p["Name"]: p.get("Default") for p in params}
    default_key = ",".join(str(default.get(k)) for k in keys)
    times = {k: e["time"] for k, e in entries.items()
             if isinstance(e.get("time"), (int, float)) and not isinstance(e.get("time"), bool)}
    optimum = min(times.values())
    n, good = len(entries), sum(1 for t in times.values() if t <= optimum * (1 + tol))
    if default_key in times and times[default_key] <= optimum * (1 + tol):
        return 1, 1
    if default_key in entries:
        n -= 1
    miss, median, p90 = 1.0, None, None
    for k in range(1, n + 1):
        miss *= (n - good - (k - 1)) / (n - (k - 1))
        if median is None and 1 - miss >= 0.5:
            median = k + 1
        if 1 - miss >= 0.9:
            return median, k + 1
    return median, n + 1


def replay(args, kernel, path):
    cmd = [os.path.join(ROOT, "build/bench/search_bench"), "--seeds", str(args.seeds)]
    for s in args.set:
        cmd += ["--set", s]
    cmd += [os.path.join(ROOT, JOBS[kernel]), path]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = {}
    for m in re.finditer(r"^\s+(\S+)\s+to 5% (\S+)\s+p90 (\S+)\s+score (\S+) / (\S+)$", text, re.M):
        rows[m.group(1)] = tuple(float(x) for x in m.groups()[1:])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hub", help="a checkout of AutoTuningAssociation/benchmark_hub")
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--set", action="append", default=[], help="a portfolio setting, key=value")
    ap.add_argument("--only", default="issue,diagnosis,check")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    wanted = [s for s in spaces(args.hub) if s[0] in args.only.split(",")]
    missing = [s[3] for s in wanted if not os.path.exists(s[3])]
    if missing:
        sys.exit("search_spaces.py: missing " + ", ".join(missing))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda s: replay(args, s[2], s[3]), wanted))
    print(f"settings: {' '.join(args.set) or 'the defaults'}; {args.seeds} seeds\n")
    print("| group | space | random (replay) | random (exact) | portfolio | / exact random |"
          " score (measurements / time) |")
    print("|---|---|---|---|---|---|---|")
    ratios, p90s, time_scores = {}, {}, {}
    for (group, name, kernel, path), rows in zip(wanted, results):
        rnd, port = rows["random"], rows["portfolio"]
        med, p90 = exact_random(JOBS[kernel], path)
        ratio = port[0] / med
        flag = " **worse**" if ratio > 1 or port[1] > p90 else ""
        ratios.setdefault(group, []).append(ratio)
        p90s.setdefault(group, []).append(port[1] / p90)
        time_scores.setdefault(group, []).append(port[3])
        print(f"| {group} | {name} | {rnd[0]:,.0f} ({rnd[1]:,.0f}) | {med:,} ({p90:,}) |"
              f" {port[0]:,.0f} ({port[1]:,.0f}) | {ratio:.2f}{flag} | {port[2]:.3f} / {port[3]:.3f} |")
    print()
    for group in ratios:
        gm = math.exp(sum(map(math.log, ratios[group])) / len(ratios[group]))
        gp = math.exp(sum(map(math.log, p90s[group])) / len(p90s[group]))
        ts = sum(time_scores[group]) / len(time_scores[group])
        print(f"- {group} ({len(ratios[group])} spaces): geometric mean of median / exact random"
              f" {gm:.3f}, of p90 / exact random's p90 {gp:.3f}; mean score over time {ts:.3f}")


if __name__ == "__main__":
    main()
