#!/usr/bin/env bash
# Exports the embedded BF16 model to EXL3 (issue 8): routed experts at 4 bpw, everything else kept as it is.
#
#   bash tools/train/export_exl3.sh [BF16_DIR] [OUT_DIR]
#     BF16_DIR  default resources/models/glm5-next-tiny
#     OUT_DIR   default resources/models/glm5-next-tiny-exl3 (replaced when the export is complete)
#   TS_CLI=path/to/twinspark-cli  (default build/app/twinspark-cli; build it with
#                                  cmake --build build --target twinspark-cli)
#
# What it does:
#   1. calibration token ids: 160 examples of the training distribution (tools/train/make_calibration.py, a seed
#      of its own, no held-out prompt), tokenized with the model's tokenizer;
#   2. `twinspark-cli quantize --bits 4 --codebook mul1 --calibration …`: every routed expert's gate/up/down
#      projection (decoder layers 1–7 and the MTP block: 384 linears) becomes an EXL3 trellis, LDLQ with
#      Hessians from our own BF16 forward over the calibration rows (each expert sees only its routed tokens).
#      As in the recipe's GLM-5.3-Flash-EXL3, nothing else is quantized: attention (KDA, DSA-MLA, indexer),
#      the dense layer-0 MLP, the shared experts, routers, norms, mHC, embeddings and the head stay BF16.
#      moe_intermediate_size is 96, not a multiple of 128: the quantizer zero-pads both dimensions to multiples
#      of 128 (the padded columns decode to exactly 0), so an expert is stored as 128×256 / 256×128 trellises
#      (5.3 bits per real weight) and the engine computes on it packed;
#   3. the shards, index, config.json (+ quantization_config), tokenizer, template and generation config are
#      written to OUT_DIR.new(.partial) and moved to OUT_DIR only when complete.
# Deterministic: the same BF16 checkpoint gives the same bytes. ~4 minutes on 2 CPU cores. Interrupted runs
# resume: rerun the same command (the calibration file and the .partial folder are kept until success).
# tests/e2e/test_embedded_model.cpp (exl3IsExportOfBf16) fails when OUT_DIR is not the export of BF16_DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
IN=${1:-resources/models/glm5-next-tiny}
OUT=${2:-resources/models/glm5-next-tiny-exl3}
CLI=${TS_CLI:-build/app/twinspark-cli}
[ -x "$CLI" ] || { echo "export_exl3: $CLI not found; build it (cmake --build build --target twinspark-cli) or set TS_CLI" >&2; exit 1; }
[ -f "$IN/config.json" ] || { echo "export_exl3: $IN/config.json not found" >&2; exit 1; }
OUT=${OUT%/}
NEW="$OUT.new"
CALIB="$NEW.calibration.json"
STAMP="$NEW.source"  # checksums of the input the unfinished run started from
rm -rf "$NEW"        # a finished export that was not moved: make it again
# Resume only a run of the same input: quantize's own resume check compares arguments, not the checkpoint's
# bytes, and a retrained model under the same path must not be mixed with shards of the previous one.
SUM=$(cd "$IN" && sha256sum config.json ./*.safetensors | sha256sum | cut -d' ' -f1)
if [ -e "$NEW.partial" ] && [ "$(cat "$STAMP" 2>/dev/null)" != "$SUM" ]; then
  echo "export_exl3: $NEW.partial is from another input checkpoint; starting over"
  rm -rf "$NEW.partial"
fi
echo "$SUM" > "$STAMP"

python3 tools/train/make_calibration.py --cli "$CLI" --model "$IN" --out "$CALIB"
"$CLI" quantize --in "$IN" --out "$NEW" --bits 4 --codebook mul1 --calibration "$CALIB"
rm -rf "$OUT"
mv "$NEW" "$OUT"
rm -f "$CALIB" "$STAMP"
du -sh "$IN" "$OUT"
echo "export_exl3: wrote $OUT; check it: ctest --test-dir build -R embedded --output-on-failure"
