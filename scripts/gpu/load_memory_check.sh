#!/usr/bin/env bash
# The GPU machine's checks of how a model gets onto the device and how its memory is planned (issue 6, GB10
# readiness; docs/PERFORMANCE.md "Loading and device memory"), after run_gpu_suite.sh (or PREBUILT=1) has put the
# CLI in build-gpu in the same call:
#   1. bench-device --what upload: 1 GiB uploads from anonymous memory and from a mapped file, through the pinned
#      ring and straight from the source (TS_UPLOAD_RING's A/B), GB/s;
#   2. generate through the engine on the EXL3 embedded model with the KV pool sized from GPU_MEM_UTIL 0.87 as
#      serve sizes it: its load-progress and device-memory lines, and the engine's snapshot of the device's memory
#      after the run (Engine::metrics, what /metrics and the dashboard show);
#   3. the same at 0.999 (more than was free when the device was opened): must stop with the message naming the
#      utilisation that fits, exit 2 — at the start-up check, before any weight is uploaded (no "weights on the
#      device" line), after waiting ~10 s for memory that never comes;
#   3b. the restart race: a PyTorch process holds ~60 GB and exits 6 s after it has them; generate at 0.87, started while it
#      still holds them, must wait for them ("waiting for device memory") and then load and run, exit 0;
#   4. the same at 0.5 with TS_UNIFIED_MEMORY=1 (the GB10's accounting, free = the host's MemAvailable, forced on
#      this discrete GPU): the path runs and says "unified" — its numbers mean nothing here;
#   5. tools/device/kernel_image_probe.cu built for sm_120a: the runtime reports the missing image at the check.
#   device: bash scripts/gpu/load_memory_check.sh "$OUT"
# Results: $OUT/load_memory.txt, $OUT/upload.json.
set -uo pipefail
source "$(dirname "$0")/cli_env.sh" "$@"  # OUT, CLI; the repository root
R="$OUT/load_memory.txt"
MODEL=${LM_MODEL:-resources/models/glm5-next-tiny-exl3}
$CLI bench-device --backend cuda --what upload --reps 5 --json "$OUT/upload.json" 2>&1 | tee -a "$R"
# The server is not built on the GPU machine (no cpp-httplib there): `generate --gpu-mem-util` sizes the KV pool
# through the same code (runtime/device_budget) on the engine path.
budget_run() {  # $1: label, $2: GPU_MEM_UTIL; the rest: environment assignments
  local label=$1 util=$2; shift 2
  env "$@" $CLI generate --backend cuda --model "$MODEL" --prompt-ids 1,2,3 --concurrency 1 --max-tokens 4 \
    --ignore-eos --gpu-mem-util "$util" >/dev/null 2>/tmp/lm_gen.err
  echo "== generate --gpu-mem-util $util ($label): exit $?" | tee -a "$R"
  grep -E "weights on the device|device memory|GPU_MEM_UTIL|error|waiting" /tmp/lm_gen.err | tee -a "$R"
}
# The GPU's used memory in MiB (the first GPU).
gpu_used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1 | tr -d ' '; }
budget_run "defaults" 0.87
budget_run "more than was free at the start" 0.999
echo "== restart race: a process holding ~60 GB exits 6 s after it has them" | tee -a "$R"
before=$(gpu_used_mib)
rm -f /tmp/lm_holder.out
python3 -c "import torch, time; x = torch.empty(60 * 10**9, dtype=torch.uint8, device='cuda'); torch.cuda.synchronize(); print('holder: allocated', flush=True); time.sleep(6)" >/tmp/lm_holder.out 2>&1 &
holder=$!
for _ in $(seq 1 120); do grep -q "holder: allocated" /tmp/lm_holder.out 2>/dev/null && break; sleep 0.25; done
echo "GPU memory used: ${before} MiB before the holder, $(gpu_used_mib) MiB while it holds" | tee -a "$R"
t0=$(date +%s.%N)
budget_run "started while another process still held 60 GB" 0.87
echo "generate took $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s; holder: $(cat /tmp/lm_holder.out | tr '\n' ' ')" | tee -a "$R"
# The race happened only if the holder had its memory and generate waited for it.
if grep -q "holder: allocated" /tmp/lm_holder.out && grep -q "waiting for device memory" /tmp/lm_gen.err; then
  echo "restart race exercised: generate waited for the holder's memory" | tee -a "$R"
else
  echo "restart race NOT exercised (holder: $(tail -1 /tmp/lm_holder.out); no wait in generate's output)" | tee -a "$R"
fi
wait $holder
budget_run "TS_UNIFIED_MEMORY=1" 0.5 TS_UNIFIED_MEMORY=1
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if "$NVCC" -gencode arch=compute_120a,code=sm_120a -o /tmp/kernel_image_probe tools/device/kernel_image_probe.cu 2>/tmp/kip.err; then
  echo "== kernel image probe built for sm_120a on this $(nvidia-smi --query-gpu=name --format=csv,noheader):" | tee -a "$R"
  /tmp/kernel_image_probe 2>&1 | tee -a "$R"; echo "exit ${PIPESTATUS[0]}" | tee -a "$R"
else
  echo "== kernel image probe: nvcc failed" | tee -a "$R"; cat /tmp/kip.err | tee -a "$R"
fi
