#!/usr/bin/env python3
"""Calibration token ids for quantizing the embedded model to EXL3 (tools/train/export_exl3.sh).

Draws N examples of the training distribution (make_corpus.train_examples with its own seed, so none of the
held-out prompts is among them), renders each as prompt + completion with our chat template (the text the
model was trained on, stop token included), tokenizes it with the model's own tokenizer through
`twinspark-cli tokenize`, and writes the JSON list of lists of token ids that `twinspark-cli quantize
--calibration` reads. Plain python3; deterministic.

    python3 tools/train/make_calibration.py --cli build/app/twinspark-cli \
        --model resources/models/glm5-next-tiny --out /tmp/calib.json [-n 160]
"""
import argparse, json, subprocess, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_corpus as mc  # noqa: E402

CALIB_SEED = mc.SEED + 7  # not the training stream's seed (SEED + 1): fresh draws of the same distribution


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True, help="path to twinspark-cli")
    ap.add_argument("--model", required=True, help="the BF16 model directory (its tokenizer is used)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("-n", type=int, default=160, help="number of examples (rows)")
    args = ap.parse_args()
    keys = mc.heldout_keys_of(mc.make_heldout())
    rows = []
    for e in mc.train_examples(args.n, keys, seed=CALIB_SEED):
        text = mc.prompt_key(e) + mc.completion_text(e)
        r = subprocess.run([args.cli, "tokenize", "--model", args.model, "--text", text], capture_output=True,
                           text=True, check=False)
        if r.returncode != 0:
            sys.exit(f"twinspark-cli tokenize failed ({r.returncode}): {r.stderr.strip()}")
        rows.append(json.loads(r.stdout))
    args.out.write_text(json.dumps(rows, separators=(",", ":")) + "\n", encoding="utf-8")
    n_tok = sum(len(r) for r in rows)
    print(f"wrote {len(rows)} calibration rows ({n_tok} tokens, {min(map(len, rows))}..{max(map(len, rows))} per row) "
          f"to {args.out}")


if __name__ == "__main__":
    main()
