#!/usr/bin/env bash
# Nsight Compute's view of the fused EXL3 MoE kernel (exl3MoeKernel) inside a full-width slice decode step
# (batch 1 and 4), and the kernels' own time per decode step at batch 4: the diagnostics behind the EXL3
# bandwidth target of issue 6 (docs/PERFORMANCE_EXL3.md). Needs build-gpu (run_gpu_suite.sh first, in the
# same device call) and ncu (CUDA toolkit). About 2 minutes.
#   device: bash scripts/gpu/profile_moe_kernel.sh "$OUT"
# Results: $OUT/ncu_moe_b{1,4}.txt (ncu --set detailed of one decode-step MoE launch), $OUT/busy_b4.{txt,json}.
# Env: KERNEL (exl3MoeKernel: the kernel name regex), SKIP (8: launches of it skipped first — the prefill's and
#      the first decode step's), COUNT (1: launches profiled), TAG (moe: the result files' tag), BATCHES ("1 4");
#      e.g. KERNEL=gemvVecKernel SKIP=60 COUNT=3 TAG=gemv BATCHES=4 for the 4-token BF16 GEMV.
set -uo pipefail
source "$(dirname "$0")/cli_env.sh" "$@"  # OUT, CLI; the repository root
SDIR=${SLICE_DIR:-/tmp/twinspark-slice-L4}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -f "$SDIR/config.json" ] || python3 tools/device/make_slice_model.py "$SDIR" --layers 4 >"$OUT/make_slice.log" 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu"; exit 2; }
KERNEL=${KERNEL:-exl3MoeKernel}; TAG=${TAG:-moe}
for b in ${BATCHES:-1 4}; do
  IDS=/tmp/moe_prompts_b$b.ids
  python3 tools/device/slice_roofline.py prompts --batch $b --length 256 >"$IDS"
  # Default: skip the prefill's 4 MoE launches and the first decode step's 4: layer 1 of the second decode step.
  timeout 120 "$NCU" --clock-control none --set detailed -k "regex:$KERNEL" -s "${SKIP:-8}" -c "${COUNT:-1}" \
    $CLI generate --backend cuda --model "$SDIR" --prompt-ids "@$IDS" --concurrency $b --max-tokens 6 --ignore-eos \
    >"$OUT/ncu_${TAG}_b$b.txt" 2>&1
  echo "ncu $TAG batch $b: rc $?"
done
IDS=/tmp/moe_prompts_b4.ids
python3 tools/device/slice_roofline.py prompts --batch 4 --length 256 >"$IDS"
timeout 150 "$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
  $CLI generate --backend cuda --model "$SDIR" --prompt-ids "@$IDS" --concurrency 4 --max-tokens 10 --ignore-eos \
  >"$OUT/ncu_b4.csv" 2>"$OUT/ncu_b4.err"
python3 tools/device/gpu_busy.py "$OUT/ncu_b4.csv" --skip 2 --top 16 --json "$OUT/busy_b4.json" | tee "$OUT/busy_b4.txt"
xz -9 "$OUT/ncu_b4.csv"
