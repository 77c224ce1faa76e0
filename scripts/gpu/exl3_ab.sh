#!/usr/bin/env bash
# A/B of the EXL3 kernels' switches in one device call (issue 6, benchmark 1): bench-device's short EXL3 runs
# (the MoE layer at batch 1 and 4, the 4096→12288 GEMV at K = 4) once per variant, then one table of µs and
# fraction of copy bandwidth per row and variant. Needs build-gpu (run_gpu_suite.sh first, in the same call).
# The switches: kernels/cuda/cuda_exl3.cuh (tuneFlags, tuneSliceTiles).
#   device: TUNES="0 4 32 64" bash scripts/gpu/exl3_ab.sh "$OUT"
#           VARIANTS="TS_EXL3_KSL=0 TS_EXL3_KSL=32 TS_EXL3_TUNE=64,TS_EXL3_KSL=32" bash scripts/gpu/exl3_ab.sh "$OUT"
# Env: VARIANTS (space-separated; each a comma-separated list of VAR=value set for one run), else TUNES
#      (TS_EXL3_TUNE values, default "0 4 64": default, two-launch MoE, one-stage slices); REPS (bench-device
#      --reps, 20), WHAT (default exl3-moe,exl3-gemv4), CLI (default build-gpu/app/twinspark-cli), BACKEND
#      (default cuda; cpu only checks the script). Results: $OUT/ab_<run>_<variant>.json, $OUT/ab.txt.
set -uo pipefail
OUT=${1:-/tmp/twinspark-gpu}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
CLI=${CLI:-build-gpu/app/twinspark-cli}
[ -x "$CLI" ] || { echo "$CLI missing: run run_gpu_suite.sh first"; exit 2; }
if [ -z "${VARIANTS:-}" ]; then
  VARIANTS=""
  for t in ${TUNES:-0 4 64}; do VARIANTS="$VARIANTS TS_EXL3_TUNE=$t"; done
fi
tag() { echo "$1" | tr -c 'A-Za-z0-9_\n' '_'; }
i=0
for v in $VARIANTS; do  # a variant may repeat (A B A B: the spread between runs): files are numbered by run
  case "$v" in *=*) ;; *) echo "variant '$v': expected VAR=value[,VAR=value...]"; exit 2 ;; esac
  i=$((i + 1))
  t="${i}_$(tag "$v")"
  env $(echo "$v" | tr ',' ' ') "$CLI" bench-device --backend "${BACKEND:-cuda}" --what "${WHAT:-exl3-moe,exl3-gemv4}" \
    --reps "${REPS:-20}" --json "$OUT/ab_$t.json" >"$OUT/ab_$t.txt" 2>&1
  echo "$v: rc $? ($(grep -m1 'decode unit' "$OUT/ab_$t.txt" | sed 's/.*decode unit: //'))"
done | tee "$OUT/ab.txt"
python3 - "$OUT" $VARIANTS <<'PY' | tee -a "$OUT/ab.txt"
import json, re, sys
out, variants = sys.argv[1], sys.argv[2:]
runs = {}
for i, v in enumerate(variants, 1):
    t = f"{i}_" + re.sub(r"[^A-Za-z0-9_]", "_", v)
    label = v if variants.count(v) == 1 else f"{v} (run {i})"
    try:
        runs[label] = json.load(open(f"{out}/ab_{t}.json"))["exl3"]["rows"]
    except Exception as e:
        print(f"{label}: no result ({e})")
def key(r):
    if r.get("bench") == "exl3_moe":
        return f"MoE layer {r.get('codebook', 'mul1')} b{r['batch']}"
    if r.get("bench") == "exl3_moe_routed":  # (a') routed on the device; job_rows tells the two batch-16 rows apart
        return f"MoE layer routed on the device {r.get('codebook', 'mul1')} b{r['batch']} ({r.get('job_rows', '?')}-row jobs)"
    if "in" not in r:  # a row kind this table does not know: named by its bench, never a KeyError
        return f"{r.get('bench', '?')} b{r.get('batch', '?')}"
    return f"GEMV {r['in']}->{r['out']} K={r['bits']} {r['codebook']} b{r['batch']}" + (" (L2-resident)" if r.get("l2_resident") else "")
rows = []
for t, rs in runs.items():
    for r in rs:
        if "us" in r and key(r) not in rows:
            rows.append(key(r))
print("| row | " + " | ".join(runs) + " |")
print("|---|" + "---|" * len(runs))
for k in rows:
    cells = []
    for t, rs in runs.items():
        r = next((r for r in rs if key(r) == k and "us" in r), None)
        cells.append(f"{r['us']:.1f} us, {100 * r['fraction_of_copy']:.1f} %" if r else "-")
    print(f"| {k} | " + " | ".join(cells) + " |")
PY
