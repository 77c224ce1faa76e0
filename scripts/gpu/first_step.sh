#!/usr/bin/env bash
# The first decode steps after a long prefill, on the GPU machine, after run_gpu_suite.sh has built build-gpu
# and written the slice (SLICE=1): one prompt of FS_LENGTH tokens prefilled, then FS_TOKENS greedy tokens, under
# each setting of FS_VARS (space-separated runs, each NAME=VALUE[,NAME=VALUE...]; "default" = none). Per run:
# the decode figure of `generate` (all steps after the prefill, first ones included) and the per-op table of
# the first decode step alone (`--max-tokens 2 --profile-ops`, every op synchronized: which op holds a one-off
# cost). Written for the ~0.17 s first step seen after the EXL3 prefill path landed (docs/PERFORMANCE.md,
# "Prefill").
#   device: bash scripts/gpu/first_step.sh "$OUT"   (after run_gpu_suite.sh in the same call)
# Results: $OUT/first_step.txt. Env: FS_LENGTH (4096), FS_TOKENS (8), FS_VARS ("default CUDA_MODULE_LOADING=EAGER").
set -uo pipefail
source "$(dirname "$0")/slice_env.sh" "$@"  # OUT, CLI, SL, SDIR; the repository root
FS="$OUT/first_step.txt"
n=${FS_LENGTH:-4096}
IDS="/tmp/fs_prompt_$n.ids"
python3 tools/device/slice_roofline.py prompts --batch 1 --length "$n" >"$IDS"
for setting in ${FS_VARS:-default CUDA_MODULE_LOADING=EAGER}; do
  envs=""
  [ "$setting" != default ] && envs=$(echo "$setting" | tr ',' ' ')
  t0=$(date +%s.%N)
  env $envs $CLI generate --backend cuda --model "$SDIR" --prompt-ids "@$IDS" --max-tokens "${FS_TOKENS:-8}" \
    --ignore-eos --warmup >/dev/null 2>/tmp/fs.err
  rc=$?
  t1=$(date +%s.%N)
  echo "$setting: rc $rc, process $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s: $(grep -E 'prefill|rror' /tmp/fs.err | tail -1)" | tee -a "$FS"
  env $envs $CLI generate --backend cuda --model "$SDIR" --prompt-ids "@$IDS" --max-tokens 2 --ignore-eos \
    --warmup --profile-ops >/dev/null 2>/tmp/fs_prof.err
  echo "$setting: the first decode step's ops (rc $?):" | tee -a "$FS"
  sed -n '/per-op time of the decode steps/,$p' /tmp/fs_prof.err | head -14 | tee -a "$FS"
done
