#!/usr/bin/env python3
"""Where the load's wake-ups waited for a core (issue #47): reads `perf sched timehist` of a
`perf sched record` taken during bench/run_load_bench.sh, and for every wake-up of the daemon's
HTTP threads and of the load generator that waited longer than --over ms before it ran, says what
ran meanwhile on its own core (what it waited behind) and on the other cores (whether one was free).

Usage: bench/sched_delays.py TIMEHIST.txt DAEMON_PID [--over 1.0]
Threads are told apart by name: the daemon names its request threads `gputune-http` and its
background rebuild thread `gputune-rebuild` (web/server.cpp, web/rebuilds.cpp); any other
`gputune` process is a worker or a job it runs. Prints Markdown.
"""
import argparse
import re
from collections import Counter, defaultdict

ROW = re.compile(r"\s*([\d.]+)\s+\[(\d+)\]\s+(.*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
TASK = re.compile(r"(.*)\[(\d+)(?:/(\d+))?\]$")


def kind(task, daemon_pid):
    if task.startswith("<idle>"):
        return "idle"
    m = TASK.match(task)
    name, tid, pid = (m.group(1), m.group(2), m.group(3) or m.group(2)) if m else (task, "", "")
    if name.startswith("gputune-http"):
        return "daemon: a request thread"
    if name.startswith("gputune-rebuil"):  # perf cuts names to 15 characters
        return "daemon: the background rebuild"
    if name.startswith("gputune"):
        return "daemon: another thread" if pid == daemon_pid else "a worker or its job"
    if name.startswith("load_bench"):
        return "the load generator"
    return "the kernel or another process"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("timehist")
    ap.add_argument("daemon_pid")
    ap.add_argument("--over", type=float, default=1.0, help="a wait counted as long, in ms")
    a = ap.parse_args()
    rows = []
    for line in open(a.timehist, errors="replace"):
        m = ROW.match(line)
        if m:  # time the task was switched out, its core, name, wait, scheduling delay, run (ms)
            rows.append((float(m[1]), int(m[2]), m[3], float(m[5]), float(m[6])))
    if not rows:
        raise SystemExit(f"sched_delays.py: no scheduling events in {a.timehist}")
    ran = defaultdict(list)  # core -> [(from, to, kind)]
    for t, cpu, task, _, run in rows:
        ran[cpu].append((t - run / 1e3, t, kind(task, a.daemon_pid)))
    cores = sorted(ran)

    def during(cpu, start, end):
        c = Counter()
        for s, e, k in ran[cpu]:
            if min(e, end) > max(s, start):
                c[k] += min(e, end) - max(s, start)
        return c

    watched = ("daemon: a request thread", "the load generator")
    wakeups, long_waits, waits = Counter(), Counter(), []
    behind, elsewhere = Counter(), Counter()
    for t, cpu, task, delay, run in rows:
        k = kind(task, a.daemon_pid)
        if k not in watched:
            continue
        wakeups[k] += 1
        if delay <= a.over:
            continue
        long_waits[k] += 1
        waits.append(delay)
        end = t - run / 1e3
        start = end - delay / 1e3
        own = during(cpu, start, end)
        behind[own.most_common(1)[0][0] if own else "nothing recorded"] += 1
        free = False
        for other in cores:
            if other == cpu:
                continue
            o = during(other, start, end)
            idle_share = (o["idle"] + o["daemon: the background rebuild"]) / (end - start)
            free = free or idle_share > 0.5
        elsewhere["another core was idle or ran only the background rebuild" if free
                  else "every other core was busy"] += 1
    span = rows[-1][0] - rows[0][0]
    print(f"Scheduling of {span:.1f} s of the load (`perf sched record`), {len(cores)} cores; "
          f"a long wait is one over {a.over:g} ms between a thread's wake-up and its run.\n")
    print("| thread | wake-ups | long waits | share |\n|---|---|---|---|")
    for k in watched:
        n = wakeups[k]
        print(f"| {k} | {n} | {long_waits[k]} | {100.0 * long_waits[k] / max(n, 1):.2f}% |")
    if waits:
        waits.sort()
        print(f"\nLong waits: median {waits[len(waits) // 2]:.2f} ms, "
              f"longest {waits[-1]:.2f} ms.\n")
        print("| what ran on the waiting thread's core meanwhile | long waits |\n|---|---|")
        for k, n in behind.most_common():
            print(f"| {k} | {n} |")
        print("\n| the other cores meanwhile | long waits |\n|---|---|")
        for k, n in elsewhere.most_common():
            print(f"| {k} | {n} |")


if __name__ == "__main__":
    main()
