#!/usr/bin/env python3
"""How busy the GPU is during a decode step: the kernels' own time per step, from an Nsight Compute run.

A decode step's wall time (generate's decode tok/s) is its kernels' time plus the gaps between them:
launch latency, host work the GPU waits for, and host round trips. This reads the per-kernel
durations of `ncu --metrics gpu__time_duration.sum --csv` over a generate run, cuts the kernel stream
into steps at the sampling kernel (sampleRowsKernel ends every engine step), and prints per step the
kernel count and the sum of kernel durations. Set beside the unprofiled run's ms per step, the
difference is the most that CUDA graphs (or any launch-side change) could recover. ncu serializes
kernels and flushes caches between them by default (`--cache-control none` keeps them warm), so the sum
is an estimate of busy time, not a measurement of the unprofiled run's kernels.

Usage (on the GPU machine; ncu is in the CUDA toolkit):
  ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
      build-gpu/app/twinspark-cli generate --backend cuda --model SLICE --prompt-ids IDS --concurrency 1 \
      --max-tokens 10 --ignore-eos > ncu.csv
  python3 tools/device/gpu_busy.py ncu.csv [--skip 2] [--json out.json]
"""
import argparse
import csv
import json
import statistics
import sys

UNIT_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


def read_kernels(path):
    """[(kernel name, duration ns)] in launch order."""
    with open(path, newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]  # ncu prints its own log lines before the CSV
    out = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = row.get("Metric Unit", "nsecond")
        if unit not in UNIT_NS:
            sys.exit(f"unknown unit {unit!r}")
        value = float(row["Metric Value"].replace(",", ""))
        out.append((row["Kernel Name"], value * UNIT_NS[unit]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--marker", default="sampleRowsKernel", help="kernel that ends a step")
    ap.add_argument("--skip", type=int, default=2, help="steps to leave out at the start (prefill, warm-up)")
    ap.add_argument("--top", type=int, default=12, help="kernels to list by time per step")
    ap.add_argument("--json")
    a = ap.parse_args()
    ks = read_kernels(a.csv)
    if not ks:
        sys.exit("no gpu__time_duration.sum rows in " + a.csv)
    steps, cur = [], []
    for name, ns in ks:
        cur.append((name, ns))
        if a.marker in name:
            steps.append(cur)
            cur = []
    decode = steps[a.skip:]
    if not decode:
        sys.exit(f"{len(steps)} steps found; nothing left after --skip {a.skip}")
    busy = [sum(ns for _, ns in s) / 1e3 for s in decode]
    counts = [len(s) for s in decode]
    by = {}
    for s in decode:
        for name, ns in s:
            base = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "").replace("void ", "", 1)
            short = base.split("(")[0].split("<")[0].split("::")[-1]
            t = by.setdefault(short, [0, 0.0])
            t[0] += 1
            t[1] += ns / 1e3
    n = len(decode)
    print(f"{n} decode steps (after {a.skip} skipped): kernels per step {statistics.median(counts):.0f}, "
          f"kernel time per step median {statistics.median(busy):.1f} us (min {min(busy):.1f}, max {max(busy):.1f})")
    rows = sorted(by.items(), key=lambda kv: -kv[1][1])
    print(f"{'kernel':44s} {'calls/step':>10s} {'us/step':>9s} {'us/call':>8s}")
    for name, (c, us) in rows[: a.top]:
        print(f"{name[:44]:44s} {c / n:10.1f} {us / n:9.1f} {us / c:8.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"steps": n, "kernels_per_step": statistics.median(counts),
                       "kernel_us_per_step": statistics.median(busy),
                       "by_kernel": {k: {"calls_per_step": c / n, "us_per_step": us / n} for k, (c, us) in rows}},
                      f, indent=1)


if __name__ == "__main__":
    main()
