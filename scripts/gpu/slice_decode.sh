# Sourced by run_gpu_suite.sh (benchmark 3) and partition_check.sh: defines slice_decode, which decodes the full-width
# slice through the engine at batch 1, 2 and 4 — distinct random prompts of SLICE_PROMPT tokens (256), SLICE_TOKENS
# new tokens each (64), greedy, --ignore-eos — with $CLI, in the caller's environment (TS_CUDA_SMS included).
#   slice_decode SDIR DIR LOG TAG: each batch's ids, --json and stderr go to DIR/slice_b<B>.{ids,json,err}; one line
#   per batch ("slice<TAG>: batch B: rc …") is printed and appended to LOG; RUNS is set to the "--run FILE" arguments
#   of the batches that succeeded, for tools/device/slice_roofline.py report.
slice_decode() {
  local sdir=$1 dir=$2 log=$3 tag=$4 b sb rc line
  RUNS=()
  for b in 1 2 4; do
    sb=$(date +%s)
    rm -f "$dir/slice_b$b.json"
    python3 tools/device/slice_roofline.py prompts --batch $b --length "${SLICE_PROMPT:-256}" >"$dir/slice_b$b.ids"
    "$CLI" generate --backend cuda --model "$sdir" --prompt-ids "@$dir/slice_b$b.ids" --concurrency $b \
      --max-tokens "${SLICE_TOKENS:-64}" --ignore-eos --json "$dir/slice_b$b.json" >/dev/null 2>"$dir/slice_b$b.err"
    rc=$?
    line="slice$tag: batch $b: rc $rc in $(( $(date +%s) - sb )) s (load + prefill + decode): $(grep -E 'decode with|rror' "$dir/slice_b$b.err" | tail -1)"
    echo "$line" | tee -a "$log"
    if [ $rc -eq 0 ]; then RUNS+=(--run "$dir/slice_b$b.json"); else tail -5 "$dir/slice_b$b.err" >>"$log"; fi
  done
}
