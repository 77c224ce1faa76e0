#!/usr/bin/env python3
"""Reduce Nsight Compute's SASS source page (ncu --page source --print-source sass --csv) to the
instructions where warps stall most: the top N by warp-stall samples, with their share, executed count and
the stall-reason columns that are non-zero, plus the totals per stall reason over the whole kernel.

With --buckets N, also the stall samples per run of N consecutive SASS instructions with the most any of them
was executed: the code regions of a unit (prologue, the loop, the arrival, the last unit's epilogue) show up
as runs of one executed count.

Usage: ncu_source_top.py SOURCE.csv[.xz] [--top 60] [--buckets 100]
"""
import argparse
import csv
import io
import sys


def num(s):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=60)
    ap.add_argument("--buckets", type=int, default=0, help="samples per run of N instructions (0: off)")
    a = ap.parse_args()
    if a.csv.endswith(".xz"):  # as profile_exl3_kernel.sh keeps it
        import lzma
        text = lzma.open(a.csv, "rt", encoding="utf-8", errors="replace").read()
    else:
        text = open(a.csv, encoding="utf-8", errors="replace").read()
    # ncu prints log lines (==PROF== ...) before the table: start at the header line.
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"') and "Source" in l), None)
    if start is None:
        print("no source table found; first lines:")
        print("\n".join(lines[:30]))
        return 1
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    head, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    print("columns:", " | ".join(head))
    src = next(i for i, h in enumerate(head) if h.strip() == "Source")
    addr = next((i for i, h in enumerate(head) if "Address" in h), None)
    samp = next((i for i, h in enumerate(head) if "Warp Stall Sampling (All" in h), None)
    execd = next((i for i, h in enumerate(head) if h.startswith("Instructions Executed")), None)
    stall_cols = [i for i, h in enumerate(head) if h.startswith("stall_") or "Stall" in h and i != samp]
    if samp is None:
        print("no stall-sampling column")
        return 1
    total = sum(num(r[samp]) for r in body) or 1.0
    print(f"instructions: {len(body)}, stall samples: {total:.0f}")
    sums = {head[i]: sum(num(r[i]) for r in body) for i in stall_cols}
    for k, v in sorted(sums.items(), key=lambda kv: -kv[1])[:20]:
        if v > 0:
            print(f"  {k:50s} {v:10.0f}")
    # Samples by opcode family.
    fam = {}
    for r in body:
        op = r[src].strip().split()[0] if r[src].strip() else "?"
        if op.startswith("@"):
            op = r[src].strip().split()[1]
        op = op.split(".")[0]
        fam[op] = fam.get(op, [0.0, 0.0])
        fam[op][0] += num(r[samp])
        fam[op][1] += num(r[execd]) if execd is not None else 0
    print("by opcode (samples, executed):")
    for k, v in sorted(fam.items(), key=lambda kv: -kv[1][0])[:30]:
        print(f"  {k:12s} {v[0]:9.0f} {100 * v[0] / total:5.1f}%  {v[1]:12.0f}")
    # The hot loop vs the rest: instructions executed more than 1.5x as often as the kernel's first one (which
    # every warp runs once) and at most 4x the most executed mma (HMMA/IMMA: the streaming loop issues them once
    # per k-tile; without any, the most executed instruction) are the loop's body, across its steady and drain
    # passes; the rest is the unit's fixed work (prologue, input transform, epilogue). Instructions executed
    # more than 4x the mma are polling loops (the one-launch MoE's down units waiting for their rows), reported
    # apart. Shares of stall samples ~ shares of warp time.
    if execd is not None:
        def opname(r):
            op = r[src].strip().split()
            return (op[1] if op and op[0].startswith("@") and len(op) > 1 else (op[0] if op else "?")).split(".")[0]
        mmas = [num(r[execd]) for r in body if opname(r) in ("HMMA", "IMMA")]
        mx = (max(mmas) if mmas else max(num(r[execd]) for r in body)) or 1.0
        once = num(body[0][execd]) or 1.0
        hot = [r for r in body if 1.5 * once < num(r[execd]) <= 4 * mx]
        poll = [r for r in body if num(r[execd]) > 4 * mx]
        hs = sum(num(r[samp]) for r in hot)
        he = sum(num(r[execd]) for r in hot)
        te = sum(num(r[execd]) for r in body) or 1.0
        anchor = "the most executed mma" if mmas else "the max"
        print(f"hot loop (executed > 1.5x the first instruction's {once:.0f} and <= 4x {anchor}'s {mx:.0f}): {len(hot)} instructions, {100 * hs / total:.1f}% of "
              f"stall samples, {100 * he / te:.1f}% of executed instructions; the rest: {100 * (total - hs) / total:.1f}% "
              f"of samples")
        if poll:
            ps = sum(num(r[samp]) for r in poll)
            print(f"  polling (executed > 4x that): {len(poll)} instructions, {100 * ps / total:.1f}% of stall samples")
        hf = {}
        for r in hot:
            op = opname(r)
            hf[op] = hf.get(op, 0.0) + num(r[execd]) / mx
        print(f"  hot-loop instructions per execution of {anchor}, by opcode: " +
              ", ".join(f"{k} {v:.1f}" for k, v in sorted(hf.items(), key=lambda kv: -kv[1])))
    if a.buckets > 0:
        print(f"stall samples per {a.buckets} instructions (with the largest executed count among them):")
        for b0 in range(0, len(body), a.buckets):
            run = body[b0:b0 + a.buckets]
            sm = sum(num(r[samp]) for r in run)
            if sm > 0:
                ex = max(num(r[execd]) for r in run) if execd is not None else 0
                print(f"  {b0:6d}-{b0 + len(run) - 1:<6d} {sm:8.0f} {100 * sm / total:5.1f}%  executed <= {ex:.0f}")
    print(f"top {a.top} instructions by stall samples:")
    order = sorted(range(len(body)), key=lambda i: -num(body[i][samp]))[: a.top]
    for i in sorted(order):
        r = body[i]
        extra = ", ".join(f"{head[c]}={r[c]}" for c in stall_cols if num(r[c]) > 0.05 * num(r[samp]) and num(r[c]) > 0)
        print(f"{i:5d} {r[addr] if addr is not None else '':>8s} {num(r[samp]):7.0f} {100 * num(r[samp]) / total:5.1f}% "
              f"ex={r[execd] if execd is not None else '?':>8s}  {r[src].strip()[:70]:70s} {extra[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
