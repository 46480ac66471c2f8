#!/usr/bin/env python3
"""Adds seed inputs to tests/fuzz/corpus/<target>/ from the repository's own files: configs/
(jobs, suites, kernels, naive kernels), tests/data/ and, with --shared, ../shared/data/.

    python3 tests/fuzz/seed_corpus.py [--shared] [--max-bytes N] [--cubins]

Each seed is named by the SHA-1 of its bytes (so re-running adds nothing twice) and only files
up to --max-bytes (default 16 KiB) are taken, so the repository stays lean; a bigger measurement
file is cut to its first entries instead. --cubins compiles three small kernels with nvcc for the
cubin target (needs the CUDA toolkit). Crash inputs are added by hand (see
docs/testing-and-benchmarks.md, "Fuzzing"), not here."""
import argparse
import gzip
import hashlib
import json
import os
import pathlib
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
TOKEN = "fuzz-token"  # the write token web_fuzz.cpp's server expects


def add(target, data, limit):
    if isinstance(data, str):
        data = data.encode()
    if len(data) > limit:
        return False
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    p = d / hashlib.sha1(data).hexdigest()
    if not p.exists():
        p.write_bytes(data)
    return True


def expressions(node):
    """Every string of a job document that is (probably) an expression."""
    if isinstance(node, dict):
        for v in node.values():
            yield from expressions(v)
    elif isinstance(node, list):
        for v in node:
            yield from expressions(v)
    elif isinstance(node, str) and any(c in node for c in "[]()*+-/%<>=") and len(node) < 300:
        yield node


def http(method, path, body=b"", token=True):
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n"
    if token:
        head += f"Authorization: Bearer {TOKEN}\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def cut_measurements(doc, n=6):
    """A measurement file with its first n entries (Kernel Tuner's cache, T4's results)."""
    if isinstance(doc, dict):
        if isinstance(doc.get("cache"), dict):
            doc["cache"] = dict(list(doc["cache"].items())[:n])
        if isinstance(doc.get("results"), list):
            doc["results"] = doc["results"][:n]
    return doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", action="store_true", help="also ../shared/data")
    ap.add_argument("--max-bytes", type=int, default=16384)
    ap.add_argument("--cubins", action="store_true", help="compile seed cubins with nvcc")
    a = ap.parse_args()
    lim = a.max_bytes
    sources = [ROOT / "configs", ROOT / "tests" / "data"]
    if a.shared:
        sources.append(ROOT.parent / "shared" / "data")
    jsons, kernels = [], []
    for s in sources:
        for p in sorted(s.rglob("*")):
            if p.suffix == ".json" or p.name.endswith(".json.gz"):
                jsons.append(p)
            elif p.suffix == ".cu":
                kernels.append(p)
    for p in jsons:
        raw = p.read_bytes()
        text = gzip.decompress(raw) if p.name.endswith(".gz") else raw
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        if "KernelSpecification" in doc:  # a T1 job
            add("job_fuzz", raw, lim)
            for e in expressions(doc):
                add("expr_fuzz", e, lim)
            ks = doc["KernelSpecification"]
            cu = p.parent / ks.get("KernelFile", "")
            if cu.is_file():
                body = json.dumps({"document": doc, "kernel_source": cu.read_text(),
                                   "name": p.stem}).encode()
                add("web_fuzz", http("POST", "/api/jobs", body), lim)
                if doc.get("GPUTune", {}).get("Naive"):
                    add("naive_fuzz", ks["KernelName"] + "\n" + cu.read_text(), lim)
        elif "Jobs" in doc:  # a suite
            add("suite_fuzz", raw, lim)
        elif "cache" in doc or "results" in doc:  # Kernel Tuner cache, T4 results
            small = json.dumps(cut_measurements(doc)).encode()
            add("interchange_fuzz", small, lim)
            add("interchange_fuzz", gzip.compress(small, mtime=0), lim)
    # The suite target's file sits in suites/ beside examples/ and naive/ (links to configs/).
    for jobs in (["../examples/vector_add.json"], ["../naive/mv.json", "../examples"],
                 ["fuzz.json"], ["../naive/outer.json", "../naive/outer.json"]):
        add("suite_fuzz", json.dumps({"Suite": "s", "Jobs": jobs}), lim)
    # Every read route of the API, with the ids and names the fuzz database holds.
    for path in ["/api/devices", "/api/kernels", "/api/kernels/1", "/api/kernels/1/header?context=1M",
                 "/api/kernels/1/select?device=NVIDIA%20H100&size=2048,2048",
                 "/api/kernels/vector_add/select?device=NVIDIA%20RTX%20A4000&size=1048576&value.x=2",
                 "/api/contexts?kernel=vector_add", "/api/runs?limit=5&offset=0", "/api/runs/1",
                 "/api/runs/1/t4?context=1M", "/api/runs/1/measurements?status=correct&sort=time&order=desc&limit=3&q=128",
                 "/api/runs/1/best_over_time", "/api/runs/1/parameters?context=1", "/api/runs/1/predicted",
                 "/api/winners?limit=3", "/api/best?kernel=vector_add&context=1M", "/api/contexts/1/history",
                 "/api/queue?limit=2", "/api/runs/1/best.svg", "/api/runs/1/scatter.svg",
                 "/api/runs/1/parameters.svg", "/api/contexts/1/history.svg", "/", "/app.js"]:
        add("web_fuzz", http("GET", path, token=False), lim)
    add("web_fuzz", http("POST", "/api/jobs/1/cancel"), lim)
    for p in kernels:  # arbitrary CUDA: the first __global__ function's name, else "k"
        src = p.read_text(errors="replace")
        name = "k"
        i = src.find("__global__")
        if i >= 0:
            head = src[i:src.find("(", i)].split()
            name = head[-1] if head else "k"
        add("naive_fuzz", name + "\n" + src, lim)
    if a.cubins:
        kernels_cu = {
            "plain": 'extern "C" __global__ void k(float* a, int n) { int i = threadIdx.x; if (i < n) a[i] *= 2; }',
            "smem": 'extern "C" __global__ void __launch_bounds__(128) k(float* a) { __shared__ float s[256]; '
                    's[threadIdx.x] = a[threadIdx.x]; __syncthreads(); a[threadIdx.x] = s[255 - threadIdx.x]; }',
            "two": 'extern "C" __global__ void k(double* a, const double* b, long n) { for (long i = threadIdx.x; i < n; i += 32) a[i] += b[i]; }\n'
                   'extern "C" __global__ void other(int* x) { asm volatile("bar.sync 3;"); x[0] = 1; }',
        }
        nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
        with tempfile.TemporaryDirectory() as t:
            for name, src in kernels_cu.items():
                cu = pathlib.Path(t) / (name + ".cu")
                cu.write_text(src)
                out = pathlib.Path(t) / (name + ".cubin")
                subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-o", str(out), str(cu)], check=True)
                add("cubin_fuzz", out.read_bytes(), lim)
        add("cubin_fuzz", "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
                          "ptxas info    : Function properties for k\n"
                          "    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
                          "ptxas info    : Used 32 registers, 368 bytes cmem[0]\n", lim)
    for t in sorted(CORPUS.iterdir()):
        files = list(t.iterdir())
        print(f"{t.name}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
