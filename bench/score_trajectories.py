#!/usr/bin/env python3
"""Scores a `gputune replay --trajectories FILE` with the published package.

The performance score of Willemsen, Schoonhoven, van Werkhoven et al., "A methodology for comparing
optimization algorithms for auto-tuning" (FGCS 2024), as the package `autotuning_methodology`
(PyPI) computes it, on the trajectories gputune wrote: the same numbers `gputune replay --score`
prints, computed by the package's own classes, so the two can be checked against each other
(tests/tuner/methodology_test.cpp does, within 0.01).

The file (JSON lines): the first line is the space, {"space": {"source": ..., "configurations":
[[key, time_ms or null, compile_s, benchmark_s], ...]}}, every configuration of the job's space
that the measurements hold; each other line one seed of one strategy, {"strategy": NAME, "seed":
N, "evaluations": [[key, clock_s], ...]}, in the order the search measured them, clock_s the
simulated time at which each measurement ended (gputune's strategies as `run` streams them, the
peer's serially).

The package scores Kernel Tuner's runs from T4 files; here the space becomes a T4 file of its own
(compile time as `compilation`, benchmark time as the one `runtimes` entry, the time as the `time`
measurement) and each seed a list of T4 results whose times add up to its clock, which the
package's own `write_results` turns into its arrays. Then, as the package's
`get_strategy_scores` does: the cutoffs (1% to 95% of the way from the median to the optimum),
the calculated random-search baseline, each strategy's curve over time (isotonic regression with
bootstrap bagging, as the package does by default) and over function evaluations, standardised
against the baseline and averaged over the range.

Usage: bench/out/peer-venv/bin/python bench/score_trajectories.py TRAJECTORIES... [--resolution N]
       [--seed N]
Prints one JSON object: {strategy: {"score_time": ..., "score_fevals": ...}, "_range": {...}}.
"""
import argparse
import json
import os
import pathlib
import sys
import tempfile
import warnings

import numpy as np

warnings.simplefilter("ignore")
from autotuning_methodology.baseline import RandomSearchCalculatedBaseline  # noqa: E402
from autotuning_methodology.caching import Results  # noqa: E402
from autotuning_methodology.curves import StochasticOptimizationAlgorithm  # noqa: E402
from autotuning_methodology.report_experiments import (  # noqa: E402
    get_strategies_aggregated_performance,
)
from autotuning_methodology.runner import write_results  # noqa: E402
from autotuning_methodology.searchspace_statistics import SearchspaceStatistics  # noqa: E402

TIME_KEYS = ["compilation", "runtimes"]


class Description:
    """What StochasticOptimizationAlgorithm reads of a ResultsDescription, kept in memory."""

    def __init__(self, name):
        self.group_name = name
        self.group_display_name = name
        self.device_name = "recorded"
        self.application_name = "space"
        self.stochastic = True
        self.minimization = True
        self.objective_time_keys = TIME_KEYS
        self.objective_performance_keys = ["time"]
        self.arrays = None

    def set_results(self, arrays):
        self.arrays = arrays

    def get_results(self):
        keys = ["fevals_results", "objective_time_results", "objective_performance_results",
                "objective_performance_best_results", "objective_performance_stds",
                "objective_time_results_per_key", "objective_performance_results_per_key"]
        return Results([self.arrays[k] for k in keys])

    def has_results(self):
        return self.arrays is not None


def t4_result(key, time_ms, compile_s, benchmark_s):
    ok = time_ms is not None
    return {
        "configuration": {"key": key},
        "invalidity": "correct" if ok else "runtime",
        "correctness": 1,
        "times": {"compilation": compile_s, "runtimes": [benchmark_s]},
        "measurements": [{"name": "time", "value": time_ms if ok else float("nan"), "unit": "ms"}],
    }


def read_lines(paths):
    """The space (the first file's) and the seeds of every file, by strategy."""
    space, runs = None, {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
        if not lines or "space" not in lines[0]:
            sys.exit(f"{path}: the first line is not the space (written by gputune replay "
                     "--trajectories or bench/peer_kernel_tuner.py)")
        if space is None:
            space = {c[0]: c for c in lines[0]["space"]["configurations"]}
        for line in lines[1:]:
            runs.setdefault(line["strategy"], []).append(line)
    return space, runs


def scores(space, runs, resolution=1000, confidence=0.95):
    """The package's score of each strategy, over time and over function evaluations."""
    with tempfile.TemporaryDirectory() as tmp:
        t4 = os.path.join(tmp, "space_T4.json")
        with open(t4, "w", encoding="utf-8") as f:
            # A valid configuration first: the package checks its sums on the first result,
            # and a failed one there (NaN) fails that check.
            ordered = sorted(space.values(), key=lambda c: c[1] is None)
            json.dump({"schema_version": "1.0.0", "metadata": {"timeunit": "seconds"},
                       "results": [t4_result(*c) for c in ordered]}, f)
        stats = SearchspaceStatistics("space", "recorded", True, TIME_KEYS, ["time"],
                                      pathlib.Path(t4), full_validate=False)

    start_f, end_f, start_t, end_t = stats.cutoff_point_fevals_time_start_end(0.01, 0.95)
    fevals_range = np.arange(start=start_f, stop=end_f + 1)
    time_range = np.linspace(start=start_t, stop=end_t, num=resolution)
    baseline = RandomSearchCalculatedBaseline(stats)
    dist = stats.objective_performances_total_sorted

    curves, names = [], []
    for name, seeds in runs.items():
        repeated = []
        for run in seeds:
            evaluations, clock = [], 0.0
            for key, at in run["evaluations"]:
                _, time_ms, _, _ = space[key]
                evaluations.append(t4_result(key, time_ms, max(at - clock, 0.0), 0.0))
                clock = max(at, clock)
            repeated.append(evaluations)
        d = Description(name)
        write_results(repeated, d)
        curves.append(StochasticOptimizationAlgorithm(d))
        names.append(name)

    out = {"_range": {"fevals": [int(start_f), int(end_f)], "time_s": [float(start_t), float(end_t)],
                      "optimum_ms": float(dist[0]), "median_ms": float(np.median(dist))}}
    performance, _, _, _ = get_strategies_aggregated_performance(
        [(baseline, curves, stats, time_range, fevals_range)], confidence)
    for name, curve, perf in zip(names, curves, performance):
        real = curve.get_curve_over_fevals(fevals_range, dist=dist, confidence_level=confidence)
        full = np.concatenate([real[2], real[6]]) if real[5].ndim > 0 else real[2]
        std = baseline.get_standardised_curves(fevals_range, [full], x_type="fevals")[0]
        out[name] = {"score_time": round(float(np.mean(perf)), 4),
                     "score_fevals": round(float(np.mean(std)), 4)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trajectories", nargs="+",
                    help="files of one space (the first one's space line is used)")
    ap.add_argument("--resolution", type=int, default=1000,
                    help="points of the time range (the package's default experiments: 1000)")
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=None,
                    help="seed numpy's generator, which the package's bagging draws from "
                         "(unseeded, as the package runs, by default)")
    args = ap.parse_args()
    if args.seed is not None:
        np.random.seed(args.seed)
    space, runs = read_lines(args.trajectories)
    json.dump(scores(space, runs, args.resolution, args.confidence), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
