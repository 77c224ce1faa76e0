# Prints what the installed transformers' glm5_next reference looks like: versions, the default
# config, and the state-dict names/shapes of a tiny model. Used to keep tests/golden in step with it.
import os, sys, shutil, json
import torch, transformers
from transformers import Glm5NextConfig, Glm5NextForConditionalGeneration
out = os.environ.get("OUT", "/tmp")
print("torch", torch.__version__, "transformers", transformers.__version__)
mdir = os.path.dirname(transformers.models.glm5_next.__file__)
for f in os.listdir(mdir):
    if f.endswith(".py"):
        shutil.copy(os.path.join(mdir, f), os.path.join(out, f))
tc = dict(vocab_size=256, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=4,
          num_attention_heads=2, num_key_value_heads=2, n_routed_experts=4, num_experts_per_tok=2, q_lora_rank=32,
          kv_lora_rank=32, qk_nope_head_dim=16, v_head_dim=16, index_n_heads=4, index_head_dim=16, index_topk=16,
          index_kpool=4, linear_num_heads=2, linear_head_dim=16, pad_token_id=0, eos_token_id=[1],
          mlp_layer_types=["dense", "sparse", "sparse", "sparse"])
vc = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64, out_hidden_size=64, projection_intermediate_size=64)
cfg = Glm5NextConfig(text_config=tc, vision_config=vc, image_token_id=250, video_token_id=251, image_start_token_id=252,
                     image_end_token_id=253, video_start_token_id=254, video_end_token_id=255)
print(json.dumps(cfg.to_dict(), indent=1, default=str)[:6000])
m = Glm5NextForConditionalGeneration(cfg)
for k, v in m.state_dict().items():
    print(k, tuple(v.shape), v.dtype)
print("keep_fp32", getattr(m, "_keep_in_fp32_modules", None), getattr(m, "_keep_in_fp32_modules_strict", None))
ids = torch.randint(0, 240, (1, 40))
with torch.no_grad():
    o = m(input_ids=ids, use_cache=False)
print("logits", o.logits.shape, float(o.logits.std()))
