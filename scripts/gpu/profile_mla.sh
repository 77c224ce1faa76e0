#!/usr/bin/env bash
# Kernel times of the sparse MLA decode benchmark (bench-device --what mla), one line per launch with Nsight
# Compute's gpu__time_duration: which of the op's kernels (slot selection, the main pass — tensor-core or
# SIMT —, the chunk merge) a call spends its time in. Needs build-gpu (run_gpu_suite.sh first, in the same
# device call) and ncu; caches and clocks as the benchmark leaves them (not flushed or locked). Result: $OUT/ncu_mla.txt (raw) and the per-kernel medians printed.
# Env: KERNELS (ncu's kernel-name regex; default the MLA op's three kernels — "indexer" gives the indexer
#      select's), LAUNCHES (kernel launches profiled, 60), TAG (result file ncu_<TAG>.txt, default mla).
set -u
OUT=${1:-/tmp/twinspark-gpu}
mkdir -p "$OUT"
CLI=${CLI:-build-gpu/app/twinspark-cli}
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu"; exit 2; }
"$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:"${KERNELS:-SelectSlots|Sparse|Combine}" --launch-count "${LAUNCHES:-60}" --csv \
  "$CLI" bench-device --backend cuda --what mla --reps 1 >"$OUT/ncu_${TAG:-mla}.txt" 2>&1
python3 - "$OUT/ncu_${TAG:-mla}.txt" <<'PY'
import csv, sys, statistics, collections
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 10]
if not rows:
    print("ncu_mla: no rows"); sys.exit(0)
h = rows[0]
ki, vi = h.index("Kernel Name"), h.index("Metric Value")
ui = h.index("Metric Unit") if "Metric Unit" in h else -1
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
t = collections.OrderedDict()
for r in rows[1:]:
    try:
        t.setdefault(r[ki].split("(")[0], []).append(float(r[vi].replace(",", "")) * scale.get(r[ui] if ui >= 0 else "nsecond", 1e-3))
    except (ValueError, IndexError):
        pass
for k, v in t.items():
    print(f"{k:60s} n={len(v):3d} median {statistics.median(v):8.2f} us  min {min(v):8.2f} us")
PY
