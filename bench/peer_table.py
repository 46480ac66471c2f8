#!/usr/bin/env python3
"""One table of gputune's and Kernel Tuner's strategies on recorded spaces.

Reads, per space, trajectories files (`gputune replay --trajectories`, bench/peer_kernel_tuner.py)
and prints a Markdown table: per space and strategy, the median and 90th percentile over seeds of
the distinct configurations measured until the best is within 1%, 5% and 10% of the space's
optimum (a seed that never gets there counts as never, and the cell says how many), and the
methodology's performance score over measurements and over time as the published package
computes it (bench/score_trajectories.py). With --json FILE, the same as JSON.

Usage: python bench/peer_table.py --space NAME FILE [FILE...] [--space NAME FILE...] [--json F]
"""
import argparse
import json
import math
import sys

from score_trajectories import read_lines, scores

TOLERANCES = (0.01, 0.05, 0.10)


def to_reach(space, evaluations, optimum, tol):
    best = math.inf
    for n, (key, _) in enumerate(evaluations, 1):
        t = space[key][1]
        if t is not None and t < best:
            best = t
        if best <= optimum * (1 + tol):
            return n
    return math.inf


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


def cell(values):
    med, p90 = percentile(values, 0.5), percentile(values, 0.9)
    never = sum(1 for v in values if v == math.inf)
    text = lambda v: "never" if v == math.inf else f"{v:,.0f}"
    out = f"{text(med)} ({text(p90)})"
    if never:
        out += f" [{never} of {len(values)} never]"
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--space", nargs="+", action="append", required=True,
                    metavar=("NAME", "FILE"), help="a space's name and its trajectories files")
    ap.add_argument("--json", help="also write the figures as JSON")
    args = ap.parse_args()
    rows, figures = [], {}
    for name, *files in args.space:
        space, runs = read_lines(files)
        optimum = min(c[1] for c in space.values() if c[1] is not None)
        s = scores(space, runs)
        figures[name] = {"range": s["_range"], "strategies": {}}
        for strategy, seeds in runs.items():
            reach = {tol: [to_reach(space, r["evaluations"], optimum, tol) for r in seeds]
                     for tol in TOLERANCES}
            f = {"seeds": len(seeds), "score_fevals": s[strategy]["score_fevals"],
                 "score_time": s[strategy]["score_time"]}
            for tol in TOLERANCES:
                v = reach[tol]
                finite = lambda x: None if x == math.inf else x  # noqa: E731
                f[f"to_{round(tol * 100)}"] = {"median": finite(percentile(v, 0.5)),
                                              "p90": finite(percentile(v, 0.9)),
                                              "never": sum(1 for x in v if x == math.inf)}
            figures[name]["strategies"][strategy] = f
            rows.append([name, strategy, str(len(seeds))] + [cell(reach[t]) for t in TOLERANCES] +
                        [f"{f['score_fevals']:.3f}", f"{f['score_time']:.3f}"])
    head = ["space", "strategy", "seeds", "to 1%: median (p90)", "to 5%: median (p90)",
            "to 10%: median (p90)", "score (measurements)", "score (time)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
