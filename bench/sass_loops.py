#!/usr/bin/env python3
"""The loops of a kernel's SASS (cuobjdump -sass output) that hold FFMA, innermost first: per loop
its instructions, FFMA (and their share), shared loads (of them 128-bit), global loads, cp.async
copies (LDGSTS), shared stores, barriers, local-memory traffic (spills) and FFMA per shared load.
A loop is the range from a backward branch's target to the branch.
  bench/sass_loops.py FILE.sass [NAME]   (used by bench/naive_sass_counts.sh)"""
import collections
import re
import sys


def op(text):
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]


def loops_of(path):
    ins, at = [], {}
    for line in open(path):
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            at[int(m.group(1), 16)] = len(ins)
            ins.append(m.group(2))
    out = []
    for i, t in enumerate(ins):
        m = re.search(r"\bBRA\b[^0-9]*0x([0-9a-f]+)", t)
        j = at.get(int(m.group(1), 16)) if m else None
        if j is None or j > i:
            continue
        body = [op(b) for b in ins[j : i + 1]]
        if sum(b == "FFMA" for b in body) >= 16:
            out.append(body)
    out.sort(key=len)
    return out


def describe(body):
    c = collections.Counter(b.split(".")[0] for b in body)
    lds = sum(b.startswith("LDS") for b in body)
    lds128 = sum(bool(re.match(r"LDS(\.U)?\.128", b)) for b in body)
    f = c["FFMA"]
    return (f"{len(body):5d} instr, FFMA {f:4d} ({100 * f / len(body):.0f}%), LDS {lds:3d} "
            f"(128-bit {lds128:3d}), FFMA/LDS {f / max(lds, 1):5.1f}, LDG {c['LDG']:2d}, "
            f"LDGSTS {c['LDGSTS']:2d}, STS {c['STS']:2d}, BAR {c['BAR']}, LDL+STL "
            f"{c['LDL'] + c['STL']}")


if __name__ == "__main__":
    name = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
    loops = loops_of(sys.argv[1])
    if not loops:
        print(f"{name}: no loop with 16 FFMA")
    for n, body in enumerate(loops):
        print(f"{name:<34} loop {n + 1}: {describe(body)}")
