#!/usr/bin/env bash
# The GPU machine's one-call suite (issue 6): build the CUDA backend, run the self-test (every op against
# the CPU reference, then the golden and embedded models' logits), then the device benchmarks.
#   here:   bash scripts/gpu/prepare_deps.sh          (once; fills .device-deps/)
#           bash scripts/gpu/device_tree.sh stash     (before the call: the tree is near the 64 MiB limit;
#                                                      `restore` after it)
#   device: bash scripts/gpu/run_gpu_suite.sh "$OUT"  (run with carry [".device-deps"]; the call returns at
#           most 8 files: tar $OUT into one at the end of the command)
# Results: $OUT/selftest.{txt,json}, $OUT/bench.{txt,json}, $OUT/build.log, $OUT/slice.{txt,json} (benchmark 3),
# $OUT/graphs.txt (decode graphs against eager through the engine, per model).
# Exit status: the self-test's, or 1 when the graphs check fails.
# PREBUILT=1: no build here — the binary scripts/gpu/prebuilt.sh built on the other machine (carried
#      build-dev/twinspark-cli.xz and build-dev/lib); saves the ~4–5 minutes a build takes of the call.
#      PREBUILT_DIR=build-dev-srv takes `SERVER=1 prebuilt.sh`'s instead (the same CLI with the server), so that one
#      call can run this suite and scripts/gpu/serve_check.sh from one carried binary.
# Env: ARCHS (default 90a: the H200; the fat binary 90a;120a;121a is what CI and release builds compile),
#      FILTER (self-test --filter), GRAPHS_CHECK (1; 0 skips the graphs-against-eager run), GRAPHS_MODELS
#      (space list of model dirs for it; default both embedded models), BENCH (bench-device --what, default
#      exl3,mla,kda,mhc,gemv; "none" skips),
#      MODELS (comma list of model dirs for the model parity part), SLICE (benchmark 3, default 1; 0 skips),
#      SLICE_LAYERS (4), SLICE_PROMPT (256), SLICE_TOKENS (64), SLICE_DIR (/tmp/twinspark-slice-L<layers>),
#      SLICE_MAKE_ARGS (more make_slice_model.py options, e.g. "--experts 16" for a quick check).
set -uo pipefail
OUT=${1:-/tmp/twinspark-gpu}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
DEPS=$PWD/.device-deps
ARCHS=${ARCHS:-90a}
MODELS=${MODELS:-tests/golden/data/tiny_a,tests/golden/data/tiny_b,resources/models/glm5-next-tiny,resources/models/glm5-next-tiny-exl3}
BENCH=${BENCH:-exl3,mla,kda,mhc,gemv}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
if [ "${PREBUILT:-0}" = 1 ]; then  # the binary built here by scripts/gpu/prebuilt.sh, carried compressed
  PD=${PREBUILT_DIR:-build-dev}
  [ -f "$PD/twinspark-cli.xz" ] || { echo "PREBUILT=1: carry $PD/twinspark-cli.xz and $PD/lib (prebuilt.sh)"; exit 2; }
  mkdir -p build-gpu/app && xz -dc "$PD/twinspark-cli.xz" >build-gpu/app/twinspark-cli && chmod +x build-gpu/app/twinspark-cli
  export LD_LIBRARY_PATH="$PWD/$PD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  rc=0
else
  [ -f "$DEPS/deps.tar.xz" ] && [ ! -d "$DEPS/usr" ] && tar xJf "$DEPS/deps.tar.xz" -C "$DEPS"
  [ -d "$DEPS/usr/include/nlohmann" ] || { echo "missing $DEPS: run scripts/gpu/prepare_deps.sh here and carry .device-deps"; exit 2; }
  bash scripts/gpu/configure_device.sh build-gpu "$DEPS/usr" "$ARCHS" >"$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target twinspark-cli >>"$OUT/build.log" 2>&1
  rc=$?
fi
echo "build: rc $rc in $(( $(date +%s) - t0 )) s${PREBUILT:+ (PREBUILT=$PREBUILT)}"
if [ $rc -ne 0 ]; then grep -E "error|Error" "$OUT/build.log" | head -40; exit $rc; fi
CLI=build-gpu/app/twinspark-cli
# Model directories left here by `device_tree.sh stash --room` are not in the tree: their rows are skipped.
present() {
  local out=() d
  for d in $(echo "$1" | tr ',' ' '); do
    if [ -f "$d/config.json" ]; then out+=("$d"); else echo "suite: $d is not in this tree: skipped" >&2; fi
  done
  (IFS=$2; echo "${out[*]}")
}
MODELS=$(present "$MODELS" ,)
$CLI selftest --backend cuda ${FILTER:+--filter "$FILTER"} --model "$MODELS" --json "$OUT/selftest.json" \
  2>&1 | tee "$OUT/selftest.txt"
st=${PIPESTATUS[0]}
if [ "$BENCH" != none ]; then
  $CLI bench-device --backend cuda --what "$BENCH" --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt"
fi
# Benchmark 4: the whole small models, our CUDA engine vs transformers (bf16, eager) on the same GPU.
if [ "${BENCH_MODEL:-1}" = 1 ]; then
  IDS=$(python3 -c "import random; r=random.Random(1); print(','.join(str(r.randrange(0, 380)) for _ in range(64)))")
  for m in $(present "tests/golden/data/tiny_a resources/models/glm5-next-tiny" " "); do
    n=$(basename "$m")
    for be in cuda cpu; do
      $CLI generate --backend $be --model "$m" --prompt-ids "$IDS" --max-tokens 64 --ignore-eos \
        --json "$OUT/gen_${n}_$be.json" >/dev/null 2>"$OUT/gen_${n}_$be.txt"; tail -1 "$OUT/gen_${n}_$be.txt"
    done
    python3 tools/device/bench_transformers_decode.py "$m" 64 >"$OUT/hf_$n.json" 2>"$OUT/hf_$n.txt"; tail -2 "$OUT/hf_$n.txt"
  done
  [ -f resources/models/glm5-next-tiny/config.json ] &&
    $CLI generate --backend cuda --model resources/models/glm5-next-tiny --prompt "Count from 1 to 40." \
      --concurrency 4 --max-tokens 64 --ignore-eos --json "$OUT/gen_engine_c4.json" 2>&1 >/dev/null | tail -1
fi
# Decode graphs against eager (TS_CUDA_GRAPHS=0) through the engine, for each of GRAPHS_MODELS (default: the
# EXL3 embedded model and the BF16 one; both MoEs take a graphed device path), four requests with their own
# prompts and limits, so the batch shrinks 4 -> 3 -> 2 -> 1 and each size is measured, captured and replayed;
# greedy, so every request's tokens must be identical. Fails the suite when they differ or nothing was
# replayed. Results: $OUT/graphs.txt, $OUT/graphs_<model>_g{0,1}.json.
if [ "${GRAPHS_CHECK:-1}" = 1 ]; then
  GIDS=$(python3 -c "import random; r=random.Random(7); print(';'.join(','.join(str(r.randrange(0, 1920)) for _ in range(n)) for n in (40, 55, 70, 85)))")
  for GM in $(present "${GRAPHS_MODELS:-resources/models/glm5-next-tiny-exl3 resources/models/glm5-next-tiny}" " "); do
    gn=$(basename "$GM")
    for g in 0 1; do
      TS_CUDA_GRAPHS=$g $CLI generate --backend cuda --model "$GM" --prompt-ids "$GIDS" --concurrency 4 \
        --max-tokens "600;450;300;150" --ignore-eos --json "$OUT/graphs_${gn}_g$g.json" >/dev/null 2>"$OUT/graphs_${gn}_g$g.err"
      echo "graphs $gn: TS_CUDA_GRAPHS=$g rc $? $(grep -E 'tok/s aggregate \(|cuda graphs|rror' "$OUT/graphs_${gn}_g$g.err" | tr '\n' ' ')" | tee -a "$OUT/graphs.txt"
    done
    python3 - "$OUT" "$gn" <<'PY' | tee -a "$OUT/graphs.txt"
import json, sys
o, n = sys.argv[1], sys.argv[2]
try:
    a, b = (json.load(open(f"{o}/graphs_{n}_g{g}.json")) for g in (0, 1))
except Exception as e:
    print(f"graphs {n}: FAIL (no result: {e})"); sys.exit(0)
same = a["tokens"] == b["tokens"] and all(len(t) == k for t, k in zip(a["tokens"], (600, 450, 300, 150)))
rep = b.get("graphs", {}).get("replays", 0)
print(f"graphs {n}: {'ok' if same and rep > 0 else 'FAIL'}: tokens {'identical' if same else 'DIFFER'} with and without "
      f"graphs; {rep} steps replayed; {a['aggregate_tok_s']:.1f} vs {b['aggregate_tok_s']:.1f} tok/s aggregate")
PY
    grep -q "graphs $gn: ok" "$OUT/graphs.txt" || st=1
  done
fi
# Benchmark 3: a full-width slice. GLM-5.3-Flash's real widths, SLICE_LAYERS layers of random weights (routed
# experts EXL3 4 bpw) written by tools/device/make_slice_model.py, decoded through the engine at batch 1, 2, 4
# (distinct random prompts of SLICE_PROMPT tokens, SLICE_TOKENS new tokens each); tools/device/slice_roofline.py
# turns decode_tok_s into bytes per token, the fraction of the copy bandwidth (bench.json) and the 45-layer
# 2 x GB10 extrapolation. Results appended to $OUT/slice.txt and written to $OUT/slice.json. The model stays in
# SLICE_DIR and is reused by the next call while this machine is held. Budget: about 3 minutes.
if [ "${SLICE:-1}" = 1 ]; then
  SL=${SLICE_LAYERS:-4}; SP=${SLICE_PROMPT:-256}; SN=${SLICE_TOKENS:-64}
  SDIR=${SLICE_DIR:-/tmp/twinspark-slice-L$SL}
  ST="$OUT/slice.txt"
  s0=$(date +%s)
  echo "== benchmark 3: full-width slice, $SL layers, $SP prompt tokens and $SN new tokens per request" | tee -a "$ST"
  python3 tools/device/make_slice_model.py "$SDIR" --layers "$SL" ${SLICE_MAKE_ARGS:-} >>"$ST" 2>&1
  src=$?
  echo "slice: model (rc $src) ready in $(( $(date +%s) - s0 )) s: $(tail -1 "$ST")" | tee -a "$ST"
  COPY="$OUT/bench.json"
  if [ ! -f "$COPY" ]; then  # no bench-device run: measure the copy bandwidth alone (--what "" = nothing else)
    COPY=/tmp/slice_copy.json
    $CLI bench-device --backend cuda --what "" --json "$COPY" >>"$ST" 2>&1
  fi
  RUNS=()
  source scripts/gpu/slice_decode.sh  # slice_decode: batch 1, 2, 4 (ids as @FILE: long prompts), sets RUNS
  [ $src -eq 0 ] && slice_decode "$SDIR" /tmp "$ST" ""
  python3 tools/device/slice_roofline.py report --model "$SDIR" ${RUNS[@]+"${RUNS[@]}"} --bench "$COPY" \
    --label "$(tail -1 "$OUT/gpu.txt" | cut -d, -f1), $SL layers" \
    --json "$OUT/slice.json" 2>&1 | tee -a "$ST"
  echo "slice: total $(( $(date +%s) - s0 )) s" | tee -a "$ST"
fi
echo "selftest exit $st"
exit $st
