#!/usr/bin/env bash
# A/B of whole binaries on the GPU machine, for changes that are compile-time constants (a ring depth, a launch
# bound): each binary built here by scripts/gpu/prebuilt.sh from one variant of the tree and carried compressed
# (e.g. build-dev/twinspark-cli-b.xz beside the suite's build-dev/twinspark-cli.xz), run in turn ROUNDS times,
# alternating, so that drift between the first and the last run does not favour one variant: `bench-device --what
# $AB_WHAT` (default exl3-prefill) and, when the full-width slice is there (run_gpu_suite.sh with SLICE=1 first, in
# the same call), its prefill (prefill_ab.sh with PF_CHUNK / PF_LENGTHS as set, the default settings only) and,
# with AB_DECODE set, its decode at those batches (decode_step_ab.sh under the one setting DEC_VAR; the binaries'
# greedy tokens compared per batch: an A/B of code that should compute the same bits).
#   device: AB_BINS="build-dev/twinspark-cli.xz build-dev/twinspark-cli-b.xz" bash scripts/gpu/ab_binaries.sh "$OUT"
# Results: $OUT/ab_<n>_r<round>.{txt,json} (n: the binary's place in AB_BINS, from 0), $OUT/ab_<n>_r<round>/prefill.txt,
# and $OUT/ab.txt, one line per run. Env: AB_BINS (required), AB_WHAT ("" skips the benchmark), ROUNDS (2),
# AB_SLICE (1; 0 skips the slice's prefill), PF_CHUNK (1024), PF_LENGTHS ("1024 4096"), AB_DECODE (batches, e.g. "4 16";
# unset: no decode runs), DEC_VAR (TS_SEQ_BATCH=1), AB_TOKENS (48).
set -uo pipefail
OUT=${1:-/tmp/twinspark-gpu}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
[ -n "${AB_BINS:-}" ] || { echo "AB_BINS: the carried .xz binaries to compare"; exit 2; }
[ -d build-dev/lib ] && export LD_LIBRARY_PATH="$PWD/build-dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
n=0
for b in $AB_BINS; do
  [ -f "$b" ] || { echo "ab: $b missing"; exit 2; }
  xz -dc "$b" >"/tmp/ab_cli_$n" && chmod +x "/tmp/ab_cli_$n"
  echo "ab: binary $n = $b" | tee -a "$OUT/ab.txt"
  n=$((n + 1))
done
for r in $(seq 1 "${ROUNDS:-2}"); do
  for i in $(seq 0 $((n - 1))); do
    if [ -n "${AB_WHAT-exl3-prefill}" ]; then
      "/tmp/ab_cli_$i" bench-device --backend cuda --what "${AB_WHAT-exl3-prefill}" --json "$OUT/ab_${i}_r$r.json" \
        >"$OUT/ab_${i}_r$r.txt" 2>&1
      echo "ab: binary $i round $r: bench rc $?" | tee -a "$OUT/ab.txt"
    fi
    if [ "${AB_SLICE:-1}" = 1 ]; then
      CLI="/tmp/ab_cli_$i" PF_CHUNK=${PF_CHUNK-1024} PF_LENGTHS=${PF_LENGTHS:-1024 4096} PF_VARS="TS_EXL3_PREFILL=1" PF_PROFILE=0 \
        bash scripts/gpu/prefill_ab.sh "$OUT/ab_${i}_r$r" 2>&1 | sed "s/^/ab: binary $i round $r: /" | tee -a "$OUT/ab.txt"
    fi
    if [ -n "${AB_DECODE:-}" ]; then
      CLI="/tmp/ab_cli_$i" AB_VARS="${DEC_VAR:-TS_SEQ_BATCH=1}" AB_BATCHES="$AB_DECODE" NCU_ON=0 PROFILE=0 \
        bash scripts/gpu/decode_step_ab.sh "$OUT/dec_${i}_r$r" 2>&1 | sed "s/^/ab: binary $i round $r: /" | tee -a "$OUT/ab.txt"
    fi
  done
done
if [ -n "${AB_DECODE:-}" ]; then
  python3 - "$OUT" "$n" "${ROUNDS:-2}" "$(echo "${DEC_VAR:-TS_SEQ_BATCH=1}" | tr '=' '_')" $AB_DECODE <<'PY' | tee -a "$OUT/ab.txt"
import json, sys
out, n, rounds, tag, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
for b in batches:
    toks = {}
    for i in range(n):
        for r in range(1, rounds + 1):
            try:
                toks[f"binary {i} round {r}"] = json.load(open(f"{out}/dec_{i}_r{r}/ab_b{b}_{tag}.json"))["tokens"]
            except Exception:
                pass
    if toks:
        first = next(iter(toks.values()))
        same = all(t == first for t in toks.values())
        print(f"ab: decode batch {b}: tokens {'identical' if same else 'DIFFER'} across {len(toks)} runs")
PY
fi
