#!/usr/bin/env bash
# The full-width slice's prefill on the GPU machine, after run_gpu_suite.sh has built build-gpu and written the
# slice (SLICE=1): one prompt of each length in PF_LENGTHS prefilled in one forward (the reference path,
# `generate --prompt-ids @FILE --warmup`: the prompt once untimed on a discarded sequence, then timed), under
# each setting of PF_VARS (space-separated runs, each NAME=VALUE[,NAME=VALUE...]; default: the defaults, the EXL3
# prefill path off (TS_EXL3_PREFILL=0: the staged kernels), and that with the dense GEMM on the SIMT GEMM above 8
# tokens (TS_GEMM=0), which is the prefill as it was before both; then the per-op table of one
# prefill (`--profile-ops`, every op synchronized: where the time goes, not the speed) at the longest length with
# the default settings.
#   device: bash scripts/gpu/prefill_ab.sh "$OUT"   (after run_gpu_suite.sh in the same call)
# Results: $OUT/prefill.txt (one line per run: prefill seconds and tok/s), $OUT/prefill_profile.txt.
# Env: PF_LENGTHS ("1024 4096"), PF_VARS (see above; "" skips the A/B), PF_PROFILE (1), PF_CHUNK (unset: one
# forward per prompt; N: forwards of at most N tokens, `--prefill-chunk N` — 1024 is how the engine prefills).
set -uo pipefail
source "$(dirname "$0")/slice_env.sh" "$@"  # OUT, CLI, SL, SDIR; the repository root
PF="$OUT/prefill.txt"
LENGTHS=${PF_LENGTHS:-1024 4096}
for n in $LENGTHS; do
  IDS="/tmp/pf_prompt_$n.ids"
  python3 tools/device/slice_roofline.py prompts --batch 1 --length "$n" >"$IDS"
  for setting in ${PF_VARS-TS_EXL3_PREFILL=1 TS_EXL3_PREFILL=0 TS_EXL3_PREFILL=0,TS_GEMM=0}; do
    tag=$(echo "$setting" | tr '=,' '__')
    env $(echo "$setting" | tr ',' ' ') $CLI generate --backend cuda --model "$SDIR" --prompt-ids "@$IDS" --max-tokens 4 --ignore-eos \
      ${PF_CHUNK:+--prefill-chunk "$PF_CHUNK"} --warmup --json "$OUT/pf_${n}_$tag.json" >"/tmp/pf_${n}_$tag.ids" 2>"/tmp/pf_${n}_$tag.err"
    echo "prompt $n, $setting: rc $? $(grep -E 'prefill|rror' "/tmp/pf_${n}_$tag.err" | tail -1)" | tee -a "$PF"
  done
  # The first generated tokens of each setting (greedy): the same unless a summation order tips a near-tie.
  python3 - "$OUT" "$n" ${PF_VARS-TS_EXL3_PREFILL=1 TS_EXL3_PREFILL=0 TS_EXL3_PREFILL=0,TS_GEMM=0} <<'PY' | tee -a "$PF"
import json, sys
out, n, settings = sys.argv[1], sys.argv[2], sys.argv[3:]
toks = {}
for s in settings:
    try:
        toks[s] = json.load(open(f"{out}/pf_{n}_{s.replace('=', '_').replace(',', '_')}.json"))["generated"]
    except Exception:
        pass
if len(toks) > 1:
    first = next(iter(toks.values()))
    print(f"prompt {n}: first tokens {'identical' if all(t == first for t in toks.values()) else 'differ'} "
          f"across {', '.join(toks)}: {first}")
PY
done
if [ "${PF_PROFILE:-1}" = 1 ]; then
  n=${LENGTHS##* }
  $CLI generate --backend cuda --model "$SDIR" --prompt-ids "@/tmp/pf_prompt_$n.ids" --max-tokens 2 --ignore-eos \
    ${PF_CHUNK:+--prefill-chunk "$PF_CHUNK"} --warmup --profile-ops >/dev/null 2>"$OUT/prefill_profile.txt"
  echo "profile rc $?: $OUT/prefill_profile.txt" | tee -a "$PF"
fi
