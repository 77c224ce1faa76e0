# Issue 6, benchmark 4: decode tokens/s of the transformers 5.17 reference (eager attention, bf16) on a
# small model directory, batch 1 and 4, on the GPU machine; set beside `twinspark-cli generate --backend
# cuda` on the same model and GPU (scripts/gpu/run_gpu_suite.sh runs both). Method: a 64-token random
# prompt, greedy decode of N tokens with the model's own cache (generate, min_new_tokens = max_new_tokens
# so every run decodes the same count), one warm-up run, median of 3; decode rate = (N − 1) / (total −
# prefill) where prefill is timed separately with max_new_tokens = 1.
# Usage: python3 tools/device/bench_transformers_decode.py MODEL_DIR [N=64] > OUT.json
import json, statistics, sys, time
import torch
from transformers import Glm5NextForConditionalGeneration

d = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 64
m = Glm5NextForConditionalGeneration.from_pretrained(d, dtype=torch.bfloat16, attn_implementation="eager").cuda().eval()
V = m.config.get_text_config().vocab_size
res = {"model": d, "dtype": "bfloat16", "attn": "eager", "new_tokens": N, "torch": torch.__version__}
for B in (1, 4):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V - 64, (B, 64), generator=g).cuda()

    def timed(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.no_grad():
            m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                       do_sample=False, pad_token_id=0)
        torch.cuda.synchronize()
        return time.perf_counter() - t

    timed(N)
    pre = statistics.median(timed(1) for _ in range(3))
    tot = statistics.median(timed(N) for _ in range(3))
    res[f"batch{B}"] = {"prefill_s": pre, "total_s": tot, "decode_tok_s_per_seq": (N - 1) / (tot - pre),
                        "decode_tok_s_total": B * (N - 1) / (tot - pre)}
    print(f"transformers bf16 eager batch {B}: {(N - 1) / (tot - pre):.1f} tok/s per sequence", file=sys.stderr)
print(json.dumps(res, indent=1))
