#!/usr/bin/env bash
# Device: the CUDA backend on part of the GPU's SMs (TS_CUDA_SMS / bench-device --sms; kernels/cuda/
# cuda_partition.cu) — what these kernels would do on a GPU with that many SMs, e.g. a GB10's 48 — run after
# scripts/gpu/run_gpu_suite.sh in the same device call (its binary, and the slice model it left when SLICE=1).
# For each count in SMS:
#   1. the whole op self-test and the EXL3 embedded model's rows, every grid planned for the partition (EXL3 units,
#      MLA chunks, the indexer, the KDA chunks), against the CPU (exit status counted);
#   2. bench-device --sms N --what $WHAT: benchmark 1 on N SMs (absolute GB/s; its copy is the partition's);
#   3. if the slice model is there: its decode at batch 1, 2 and 4 on N SMs; slice_roofline.py report --compute-only
#      gives the bytes per second of a step on N SMs and their multiple of a GB10's nominal 273 GB/s (no
#      extrapolation: a partition's fraction of copy is not a GB10's).
# With LIMITS=gb10 each run also gives every SM a GB10 SM's limits (TS_CUDA_SM_LIMITS / bench-device --sm-limits:
# 100 KiB of shared memory and 1,536 threads per SM, kernels/cuda/sm_limits.h), and the outputs go to sms<N>-gb10/.
# Usage: SMS="48" [LIMITS=gb10] bash scripts/gpu/partition_check.sh "$OUT"
# Env: SMS (counts, default 48), LIMITS (unset: the device's SMs as they are), WHAT (exl3-moe,exl3-gemv4; "" for none), CLI (build-gpu/app/twinspark-cli),
#      SLICE_DIR (/tmp/twinspark-slice-L<SLICE_LAYERS, 4>), SLICE_TOKENS (64), SLICE_PROMPT (256), SELFTEST (1; 0 skips),
#      EXL3_MODEL (resources/models/glm5-next-tiny-exl3).
set -u
source "$(dirname "$0")/cli_env.sh" "$@"     # OUT, CLI; the repository root
source scripts/gpu/slice_decode.sh             # slice_decode
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
WHAT=${WHAT-exl3-moe,exl3-gemv4}  # set but empty: the copy bandwidth alone
SDIR=${SLICE_DIR:-/tmp/twinspark-slice-L${SLICE_LAYERS:-4}}
EXL3_MODEL=${EXL3_MODEL:-resources/models/glm5-next-tiny-exl3}
fails=0
LIM=()           # bench-device's flag
LTAG=""          # the output folder's suffix
LWORDS=""        # the labels' words
if [ -n "${LIMITS:-}" ]; then
  export TS_CUDA_SM_LIMITS=$LIMITS   # selftest and the slice's generate runs; bench-device gets the flag
  LIM=(--sm-limits "$LIMITS"); LTAG="-$LIMITS"; LWORDS=" with a $LIMITS SM's limits"
else
  unset TS_CUDA_SM_LIMITS            # none inherited: the output folders say which runs had limits
fi
for n in ${SMS:-48}; do
  P="$OUT/sms$n$LTAG"; mkdir -p "$P"
  echo "== on $n SMs$LWORDS"
  if [ "${SELFTEST:-1}" = 1 ]; then
    TS_CUDA_SMS=$n $CLI selftest --backend cuda --model "$EXL3_MODEL" --json "$P/selftest.json" >"$P/selftest.txt" 2>&1
    rc=$?; [ $rc -eq 0 ] || fails=$((fails + 1))
    echo "selftest on $n SMs: exit $rc; $(grep -E 'SMs|limited|checks|FAIL' "$P/selftest.txt" | head -5 | tr '\n' ' ')"
  fi
  # --what "" measures the copy bandwidth alone (the partition's)
  $CLI bench-device --backend cuda --sms "$n" ${LIM[@]+"${LIM[@]}"} --what "$WHAT" --json "$P/bench.json" 2>&1 | tee "$P/bench.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { fails=$((fails + 1)); echo "bench-device on $n SMs failed"; }
  if [ -f "$SDIR/config.json" ]; then
    : >"$P/slice.txt"
    export TS_CUDA_SMS=$n
    slice_decode "$SDIR" "$P" "$P/slice.txt" " on $n SMs$LWORDS"
    unset TS_CUDA_SMS
    python3 tools/device/slice_roofline.py report --compute-only --model "$SDIR" ${RUNS[@]+"${RUNS[@]}"} \
      --bench "$P/bench.json" --label "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), on $n SMs$LWORDS" \
      --json "$P/slice.json" 2>&1 | tee -a "$P/slice.txt"
  fi
done
echo "partition_check: $fails failure(s) (self-tests and bench-device runs)"
exit $fails
