#!/usr/bin/env bash
# Where a decode step's time goes on the GPU machine, after run_gpu_suite.sh has built build-gpu and written
# the full-width slice (SLICE=1): (1) the slice's decode tok/s under each setting of AB_VARS (default: the MoE
# routing on the device, TS_MOE_DEVICE_ROUTE=1, and through the host, =0) at each batch of AB_BATCHES; (2) the kernels' own time per decode step
# from Nsight Compute (tools/device/gpu_busy.py) at batch 1 (the engine path, as the tok/s runs), beside the wall time per step: the
# difference is what launch-side work (CUDA graphs) could still recover; (3) the per-op profile at batch 1.
#   device: bash scripts/gpu/decode_step_ab.sh "$OUT"   (after run_gpu_suite.sh in the same call)
# Results: $OUT/ab.txt, $OUT/ab_*.json, $OUT/busy.txt/json, $OUT/profile_b1.txt. About 4 minutes.
# Env: AB_VARS (space-separated NAME=VALUE settings, one run each, e.g. "TS_GEMV_ROWS=0 TS_GEMV_ROWS=4";
#      default "TS_MOE_DEVICE_ROUTE=1 TS_MOE_DEVICE_ROUTE=0"; "" skips the A/B), AB_BATCHES ("1 4"), AB_TOKENS (48), NCU_ON (1; 0 skips the ncu run), PROFILE (1; 0 skips the per-op profile).
set -uo pipefail
source "$(dirname "$0")/slice_env.sh" "$@"  # OUT, CLI, SL, SDIR; the repository root
SP=${SLICE_PROMPT:-256}; SN=${AB_TOKENS:-48}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
AB="$OUT/ab.txt"
for b in ${AB_BATCHES:-1 4}; do
  # The ids go through a file (--prompt-ids @FILE): one argument holds ~18k ids, less than 2 × 16k-token prompts.
  IDS="/tmp/ab_prompts_b$b.ids"
  python3 tools/device/slice_roofline.py prompts --batch $b --length "$SP" >"$IDS"
  for setting in ${AB_VARS-TS_MOE_DEVICE_ROUTE=1 TS_MOE_DEVICE_ROUTE=0}; do
    tag=$(echo "$setting" | tr '=' '_')
    env "$setting" $CLI generate --backend cuda --model "$SDIR" --prompt-ids "@$IDS" --concurrency $b \
      --max-tokens "$SN" --ignore-eos --json "$OUT/ab_b${b}_$tag.json" >/dev/null 2>"$OUT/ab_b${b}_$tag.err"
    echo "batch $b, $setting: rc $? $(grep -E 'decode with|rror' "$OUT/ab_b${b}_$tag.err" | tail -1)" | tee -a "$AB"
  done
  # Greedy decoding: settings that compute the same bits (the A/B switches of bit-identical paths) must
  # decode the same tokens; others may differ (a summation order), which is reported, not failed.
  python3 - "$OUT" "$b" ${AB_VARS-TS_MOE_DEVICE_ROUTE=1 TS_MOE_DEVICE_ROUTE=0} <<'PY' | tee -a "$AB"
import json, sys
out, b, settings = sys.argv[1], sys.argv[2], sys.argv[3:]
toks = {}
for s in settings:
    try:
        toks[s] = json.load(open(f"{out}/ab_b{b}_{s.replace('=', '_')}.json"))["tokens"]
    except Exception:
        pass
if len(toks) > 1:
    first = next(iter(toks.values()))
    same = all(t == first for t in toks.values())
    print(f"batch {b}: tokens {'identical' if same else 'DIFFER'} across {', '.join(toks)}")
PY
done
IDS=/tmp/ab_prompts_b1.ids
python3 tools/device/slice_roofline.py prompts --batch 1 --length "$SP" >"$IDS"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ "${NCU_ON:-1}" = 1 ] && [ -n "$NCU" ]; then
  timeout 300 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    $CLI generate --backend cuda --model "$SDIR" --prompt-ids "@$IDS" --concurrency 1 --max-tokens 10 --ignore-eos \
    >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
  echo "ncu rc $?" | tee -a "$OUT/busy.txt"
  python3 tools/device/gpu_busy.py "$OUT/ncu.csv" --skip 2 --top 25 --json "$OUT/busy.json" 2>&1 | tee -a "$OUT/busy.txt"
  xz -9 "$OUT/ncu.csv"
else
  echo "no ncu on this machine" | tee -a "$OUT/busy.txt"
fi
if [ "${PROFILE:-1}" = 1 ]; then
  $CLI generate --backend cuda --model "$SDIR" --prompt-ids "@$IDS" --max-tokens 32 --ignore-eos --profile-ops \
    >/dev/null 2>"$OUT/profile_b1.txt"
  tail -40 "$OUT/profile_b1.txt"
fi
