#!/usr/bin/env python3
"""Kernel Tuner's strategies on a recorded space, in its simulation mode, as trajectories.

Runs `kernel_tuner.tune_cache(CACHE, strategy=S, strategy_options={"max_fevals": N})` for each
strategy and seed (numpy's and Python's random generators seeded with the seed), and writes what
each run evaluated, in order, with the simulated time Kernel Tuner charges serially (each
configuration's recorded compile time plus benchmark time, as `gputune replay` charges), as JSON
lines in the format of `gputune replay --trajectories` (the space first: every configuration of
the cache with its time, compile and benchmark seconds), so that bench/score_trajectories.py and
bench/peer_table.py score both tuners the same way.

Kernel Tuner's simulated space is what its cache timed: configurations that failed are left out
of its space (gputune's replays include them; a small advantage to the peer).

Usage: python bench/peer_kernel_tuner.py CACHE.json[.gz] OUT.jsonl --strategies a,b --seeds 20
       [--max-fevals 2000] [--budget-s S: per run, stop a strategy's seeds after S seconds]
"""
import argparse
import gzip
import json
import os
import random
import sys
import tempfile
import time
import warnings

import numpy as np


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache")
    ap.add_argument("out")
    ap.add_argument("--strategies", default="random_sample,genetic_algorithm")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--max-fevals", type=int, default=2000)
    ap.add_argument("--strategy-fevals", default="",
                    help="per-strategy max_fevals, e.g. bayes_opt=400 (a slow strategy's budget)")
    ap.add_argument("--wall-s", type=float, default=0,
                    help="per strategy: stop starting seeds after this many seconds (0: none)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import kernel_tuner  # noqa: E402  (after the warnings filter: it warns on import)

    cache = load(args.cache)
    keys = cache["tune_params_keys"]
    configs, cost = [], {}
    for key, e in cache["cache"].items():
        t = e.get("time")
        ok = isinstance(t, (int, float)) and not isinstance(t, bool)
        compile_s = float(e.get("compile_time", 0) or 0) / 1000
        bench_s = float(e.get("benchmark_time", 0) or 0) / 1000
        configs.append([key, float(t) if ok else None, compile_s, bench_s])
        cost[key] = compile_s + bench_s
    fevals = {}
    for item in filter(None, args.strategy_fevals.split(",")):
        name, n = item.split("=")
        fevals[name] = int(n)

    # Kernel Tuner reads an uncompressed cache.
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "cache.json")
        with open(plain, "w", encoding="utf-8") as f:
            json.dump(cache, f)
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(json.dumps({"space": {"source": args.cache, "configurations": configs}}) + "\n")
            for strategy in filter(None, args.strategies.split(",")):
                started = time.time()
                budget = fevals.get(strategy, args.max_fevals)
                for seed in range(1, args.seeds + 1):
                    if args.wall_s and time.time() - started > args.wall_s:
                        print(f"{strategy}: stopped after {seed - 1} seeds ({args.wall_s:.0f} s)",
                              file=sys.stderr)
                        break
                    np.random.seed(seed)
                    random.seed(seed)
                    t0 = time.time()
                    results, _ = kernel_tuner.tune_cache(
                        plain, strategy=strategy, strategy_options={"max_fevals": budget},
                        quiet=True, verbose=False)
                    clock, evaluations, seen = 0.0, [], set()
                    for r in results:
                        key = ",".join(str(r[k]) for k in keys)
                        if key in seen:  # served again from the cache: no new measurement
                            continue
                        seen.add(key)
                        clock += cost.get(key, 0.0)
                        evaluations.append([key, clock])
                    out.write(json.dumps({"strategy": "kt:" + strategy, "seed": seed,
                                          "max_fevals": budget, "wall_s": time.time() - t0,
                                          "evaluations": evaluations}) + "\n")
                    out.flush()
                print(f"{strategy}: {time.time() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
