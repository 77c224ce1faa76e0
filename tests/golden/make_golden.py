#!/usr/bin/env python3
"""Golden reference data for TwinSpark's glm5_next (GLM-5.3-Flash) engine. See tests/golden/README.md.

Builds small random Glm5NextForConditionalGeneration checkpoints (bf16 on disk, plus an MTP layer under the names
vLLM loads), then records transformers' full no-cache forward in float32 on exactly those bf16 values, and a
PyTorch statement of vLLM's GLM-5.3-Flash MTP layer built from the reference's own decoder-layer modules.
Usage: python3 tests/golden/make_golden.py --out tests/golden/data [--device cuda|cpu] [--only tiny_a] [--force]
"""
import argparse, copy, json, math, os, sys, tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
import transformers

try:
    from transformers import Glm5NextConfig, Glm5NextForConditionalGeneration
except ImportError as exc:
    sys.exit(f"FATAL: transformers {transformers.__version__} has no Glm5Next classes ({exc}); need 5.17.0")

DSA, KDA, P = "deepseek_sparse_attention", "linear_attention", "model.language_model.layers."
MHC = ("hc_", "attn_hc.", "ffn_hc.")  # mHC tensor names on disk / in HF modules


def die(msg):
    print(f"\nFATAL: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def text_cfg(**kw):
    return dict(qk_rope_head_dim=0, hidden_act="silu", max_position_embeddings=4096, norm_topk_prob=True,
                bos_token_id=None, tie_word_embeddings=False, index_kpool_always_select_tail=True,
                linear_conv_kernel_dim=4, linear_lower_bound=-5.0, hc_eps=1e-6, hc_sinkhorn_iters=20,
                attention_bias=False, attention_dropout=0.0, num_nextn_predict_layers=1, **kw)


def vision(d):  # tiny ViT: only its weights matter here (the forward is text-only)
    return dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64, out_hidden_size=d,
                projection_intermediate_size=64, hidden_act="silu", attention_bias=True, in_channels=3,
                patch_size=14, temporal_patch_size=2, spatial_merge_size=2, rms_norm_eps=1e-5, swiglu_limit=10.0)


SPECS = [
    dict(name="tiny_a", seed=1234, lengths=[7, 75, 200, 300], shard=None, mlp_in_scale=2.0,
         text=text_cfg(vocab_size=512, hidden_size=128, intermediate_size=256, moe_intermediate_size=32,
                       num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=64,
                       kv_lora_rank=64, qk_nope_head_dim=32, v_head_dim=32, n_routed_experts=8,
                       num_experts_per_tok=2, n_group=1, topk_group=1, n_shared_experts=1,
                       routed_scaling_factor=2.5, rms_norm_eps=1e-6, swiglu_limit=3.0,
                       layer_types=[KDA, KDA, DSA, KDA, KDA, DSA], mlp_layer_types=["dense"] + ["sparse"] * 5,
                       indexer_types=["full"] * 6, index_topk=32, index_kpool=4, index_n_heads=16,
                       index_head_dim=32, linear_num_heads=4, linear_head_dim=32, hc_mult=4,
                       pad_token_id=500, eos_token_id=[500, 507, 509]),
         top=dict(image_token_id=510, video_token_id=511, image_start_token_id=502, image_end_token_id=503,
                  video_start_token_id=504, video_end_token_id=505)),
    # B: layer 2 is an IndexShare ("shared") layer reusing layer 1's selection. HF hands a top-k only to the
    # directly following layer (a KDA layer in between drops it), so a shared layer must follow a DSA layer.
    dict(name="tiny_b", seed=5678, lengths=[9, 64, 150, 300], shard="400KB", mlp_in_scale=4.0,
         text=text_cfg(vocab_size=384, hidden_size=96, intermediate_size=192, moe_intermediate_size=32,
                       num_hidden_layers=5, num_attention_heads=3, num_key_value_heads=3, q_lora_rank=48,
                       kv_lora_rank=32, qk_nope_head_dim=16, v_head_dim=24, n_routed_experts=16,
                       num_experts_per_tok=4, n_group=4, topk_group=2, n_shared_experts=2,
                       routed_scaling_factor=1.8, rms_norm_eps=1e-5, swiglu_limit=10.0,
                       layer_types=[KDA, DSA, DSA, KDA, DSA], mlp_layer_types=["dense", "dense"] + ["sparse"] * 3,
                       indexer_types=["full", "full", "shared", "full", "full"], index_topk=48, index_kpool=8,
                       index_n_heads=16, index_head_dim=16, linear_num_heads=3, linear_head_dim=16, hc_mult=2,
                       pad_token_id=370, eos_token_id=[370, 377, 379]),
         top=dict(image_token_id=380, video_token_id=381, image_start_token_id=372, image_end_token_id=373,
                  video_start_token_id=374, video_end_token_id=375)),
]


def make_config(text, top, vis):
    """Glm5NextConfig from our dicts; every requested field is checked to have arrived."""
    try:
        cfg = Glm5NextConfig(text_config=dict(text), vision_config=dict(vis), tie_word_embeddings=False, **top)
    except TypeError as exc:  # a strict config refusing the (non-HF) MTP field
        print(f"WARNING: Glm5NextConfig refused num_nextn_predict_layers ({exc}); setting it as attribute")
        t = {k: v for k, v in text.items() if k != "num_nextn_predict_layers"}
        cfg = Glm5NextConfig(text_config=t, vision_config=dict(vis), tie_word_embeddings=False, **top)
    tc, vc = cfg.text_config, cfg.vision_config
    if getattr(tc, "num_nextn_predict_layers", None) != 1:
        tc.num_nextn_predict_layers = 1
    for obj, src, tag in ((tc, text, "text_config"), (cfg, top, "config"), (vc, vis, "vision_config")):
        for k, v in src.items():
            if getattr(obj, k, "<missing>") != v:
                (print if tag == "vision_config" else die)(f"{tag}.{k}: asked {v!r}, holds {getattr(obj, k, None)!r}")
    if (cfg.model_type, tc.model_type) != ("glm5_next", "glm5_next_text") or cfg.tie_word_embeddings:
        die(f"unexpected model types {cfg.model_type}/{tc.model_type} or tied embeddings")
    if vc.model_type != "glm5_next_vision":
        print(f"WARNING: vision_config.model_type is {vc.model_type!r}, not 'glm5_next_vision'")
    n = tc.num_hidden_layers
    if not len(tc.layer_types) == len(tc.mlp_layer_types) == len(tc.indexer_types) == n:
        die("layer_types / mlp_layer_types / indexer_types lengths differ from num_hidden_layers")
    if tc.index_topk % tc.index_kpool or getattr(tc, "qk_head_dim", None) != tc.qk_nope_head_dim:
        die("index_topk must be a multiple of index_kpool, and the MLA must be NoPE")
    for L in range(n):
        if tc.layer_types[L] == DSA and tc.indexer_types[L] == "shared" and (L == 0 or tc.layer_types[L - 1] != DSA):
            die(f"layer {L} is 'shared' but layer {L - 1} is not DSA: HF passes a top-k only to the next layer")
    if tc.mlp_layer_types[-1] != "sparse":
        die("the MTP layer takes the last layer's MLP type; these checkpoints expect MoE")
    return cfg


def aux_text(text):  # the same model plus layer N = the MTP decoder block (DSA, full indexer, last MLP type)
    t = copy.deepcopy(text)
    t["num_hidden_layers"] += 1
    t["layer_types"].append(DSA)
    t["mlp_layer_types"].append(t["mlp_layer_types"][-1])
    t["indexer_types"].append("full")
    return t


@torch.no_grad()
def randomize(model, gen, mlp_in_scale):
    """Overwrite every parameter and persistent float buffer with seeded noise, rounded through bf16."""
    rn = lambda shp: torch.randn(tuple(shp), generator=gen)
    generic, count = [], 0
    for mname, mod in model.named_modules():
        cls = type(mod).__name__
        items = list(mod.named_parameters(recurse=False)) + [
            (n, b) for n, b in mod.named_buffers(recurse=False)
            if n not in getattr(mod, "_non_persistent_buffers_set", set()) and b.is_floating_point()]
        for n, t in items:
            shp = t.shape
            if "Norm" in cls:                  # RMSNorm / LayerNorm (+bias) / RMSNormGated (KDA o_norm)
                v = 1 + 0.1 * rn(shp) if n == "weight" else 0.1 * rn(shp)
            elif "HyperConnection" in cls:     # fn [(2+n)n, nD] / base / scale [3]: strong, non-identity mixing
                v = {"fn": lambda: rn(shp) / math.sqrt(shp[-1]), "base": lambda: rn(shp),
                     "scale": lambda: 0.5 + torch.rand(tuple(shp), generator=gen)}[n]()
            elif "ForgetGate" in cls:          # A_log [H], dt_bias [H*Dh]: per-token decays ~exp(-0.05 .. -3)
                v = 0.5 * rn(shp) if n == "A_log" else 1.5 * rn(shp) - 2.0
            elif "TopkRouter" in cls:          # router weight / e_score_correction_bias
                v = rn(shp) / math.sqrt(shp[-1]) if n == "weight" else 0.1 * rn(shp)
            elif "Experts" in cls:             # packed gate_up [E,2I,D] / down [E,D,I]
                v = rn(shp) / math.sqrt(shp[-1]) * (mlp_in_scale if n == "gate_up_proj" else 1.0)
            elif "Indexer" in cls:             # index_kpool_compress_ape [kp,Di] / _gate [Di,D]
                v = rn(shp) if n.endswith("ape") else rn(shp) / math.sqrt(shp[-1])
            elif isinstance(mod, torch.nn.Embedding):
                v = rn(shp)
            elif n == "bias":
                v = 0.1 * rn(shp)
            elif len(shp) >= 2:                # Linear / Conv1d (KDA) / Conv2d, Conv3d (vision): 1/sqrt(fan_in)
                v = rn(shp) / math.sqrt(int(np.prod(shp[1:])))
                v = v * (mlp_in_scale if mname.endswith(("gate_proj", "up_proj")) else 1.0)  # exercise the clamp
            else:
                generic.append(f"{mname}.{n} ({cls})")
                v = 0.1 * rn(shp)
            t.copy_(v.to(torch.bfloat16).to(t.dtype))
            count += 1
            if t.numel() > 1 and float(t.float().std()) == 0.0:
                die(f"{mname}.{n} is constant after randomization")
    if generic:
        print(f"NOTE: generic 0.1*N(0,1) init for unrecognised 1-D tensors: {generic}")
    return count, generic


def text_model(m):
    if not hasattr(getattr(m, "model", None), "language_model"):
        die("model.model.language_model not found: module layout differs from transformers 5.17")
    return m.model.language_model


def set_impls(m):
    for fn in ("set_attn_implementation", "set_experts_implementation"):
        try:
            getattr(m, fn)("eager")
        except Exception as exc:
            print(f"WARNING: {fn}('eager') failed ({exc!r}); keeping the default")
    tc = m.config.get_text_config()
    return {"attention": str(getattr(tc, "_attn_implementation", None)),
            "experts": str(getattr(tc, "_experts_implementation", None))}


def build(cfg, seed, mlp_in_scale):
    torch.manual_seed(seed)
    m = Glm5NextForConditionalGeneration(cfg).float().eval()
    impl = set_impls(m)
    if m.lm_head.weight.data_ptr() == text_model(m).embed_tokens.weight.data_ptr():
        die("lm_head is tied to embed_tokens although tie_word_embeddings=False")
    n, generic = randomize(m, torch.Generator().manual_seed(seed), mlp_in_scale)
    print(f"randomized {n} tensors (seed {seed}); implementations {impl}")
    return m, impl, generic


def save_bf16(m, d, shard):  # values are already bf16-exact, so this cast is lossless
    copy.deepcopy(m).to(torch.bfloat16).save_pretrained(str(d), **({"max_shard_size": shard} if shard else {}))


def ckpt_layout(d):
    if (d / "model.safetensors.index.json").exists():
        idx = json.loads((d / "model.safetensors.index.json").read_text())
        return idx, sorted(set(idx["weight_map"].values()))
    if (d / "model.safetensors").exists():
        return None, ["model.safetensors"]
    die(f"no safetensors checkpoint in {d}: {sorted(p.name for p in d.iterdir())}")


def read_ckpt(d):
    out = {}
    for f in ckpt_layout(d)[1]:
        for k, v in load_file(str(d / f)).items():
            if k in out:
                die(f"tensor {k} appears in two files")
            out[k] = v.clone()  # keep no views of a file that is rewritten later
    return out


def append_tensors(d, extra):
    """Add tensors to the (last) checkpoint file and keep model.safetensors.index.json consistent."""
    idx, files = ckpt_layout(d)
    with safe_open(str(d / files[-1]), framework="pt") as f:
        meta, tensors = f.metadata() or {"format": "pt"}, {k: f.get_tensor(k).clone() for k in f.keys()}
    if set(extra) & (set(idx["weight_map"]) if idx else set(tensors)):
        die("MTP tensors are already in the checkpoint")
    save_file({**tensors, **{k: v.contiguous() for k, v in extra.items()}}, str(d / "tmp.part"), metadata=meta)
    os.replace(d / "tmp.part", d / files[-1])
    if idx is not None:
        idx["weight_map"] = dict(sorted({**idx["weight_map"], **{k: files[-1] for k in extra}}.items()))
        md = idx.setdefault("metadata", {})
        for key, add in (("total_size", sum(v.numel() * v.element_size() for v in extra.values())),
                         ("total_parameters", sum(v.numel() for v in extra.values()))):
            if key in md:
                md[key] = int(md[key]) + add
        (d / "model.safetensors.index.json").write_text(json.dumps(idx, indent=2) + "\n")


def patch_config_json(d, text, top, vis):
    """Check config.json; write every field we chose explicitly (in case save_pretrained omitted defaults)."""
    cfg = json.loads((d / "config.json").read_text())
    tc, vc = cfg.get("text_config") or {}, cfg.setdefault("vision_config", {})
    if (cfg.get("model_type"), tc.get("model_type")) != ("glm5_next", "glm5_next_text"):
        die(f"config.json model types: {cfg.get('model_type')} / {tc.get('model_type')}")
    filled = []
    for dst, src, tag in ((tc, text, "text_config"), (cfg, top, "config"), (vc, vis, "vision_config")):
        for k, v in src.items():
            if k not in dst:
                dst[k] = v
                filled.append(f"{tag}.{k}")
            elif dst[k] != v:
                (print if tag == "vision_config" else die)(f"config.json {tag}.{k} = {dst[k]!r}, expected {v!r}")
    if filled:
        print(f"NOTE: config.json omitted {filled}; written explicitly")
        (d / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    if not (d / "generation_config.json").exists():
        print("NOTE: save_pretrained wrote no generation_config.json; writing a minimal one")
        transformers.GenerationConfig(eos_token_id=text["eos_token_id"],
                                      pad_token_id=text["pad_token_id"]).save_pretrained(str(d))
    return filled


def load_ref(d, dev):
    try:
        m = Glm5NextForConditionalGeneration.from_pretrained(str(d), dtype=torch.float32, attn_implementation="eager")
    except Exception as exc:
        die(f"Glm5NextForConditionalGeneration.from_pretrained({d}) failed: {exc!r}")
    m = m.float().to(dev).eval()
    set_impls(m)
    return m


def same_state(a, b, what):
    sa, sb = a.state_dict(), b.state_dict()
    if set(sa) != set(sb):
        die(f"{what}: state_dict keys differ: {sorted(set(sa) ^ set(sb))[:8]}")
    bad = [k for k in sa if not torch.equal(sa[k].detach().float().cpu(), sb[k].detach().float().cpu())]
    if bad:
        die(f"{what}: {len(bad)} tensors differ after save + reload, e.g. {bad[:6]}")
    print(f"ok: {what}: all {len(sa)} state_dict tensors identical after save + reload")


def capture(layer):
    """Hooks recording one call of a layer's self_attn (kwargs, output) and mlp (input, output)."""
    rec = {}

    def on_attn(mod, args, kwargs, out):
        if args and (len(args) != 1 or "hidden_states" in kwargs):
            die(f"self_attn called with {len(args)} positional args: unknown convention")
        rec["attn"] = ({**kwargs, **({"hidden_states": args[0]} if args else {})}, out)

    return rec, [layer.self_attn.register_forward_hook(on_attn, with_kwargs=True),
                 layer.mlp.register_forward_hook(lambda mod, args, out: rec.__setitem__("mlp", (args[0], out)))]


def attn_kwargs(cap_kw, T, dev):
    """Re-create, for a length-T sequence, the kwargs the reference decoder layer passes to a DSA self_attn."""
    kw = {}
    for k, v in cap_kw.items():
        if k == "hidden_states":
            continue
        if torch.is_tensor(v):
            if k == "attention_mask" and v.dim() == 2 and v.shape[0] == 1 and bool((v != 0).all()):
                kw[k] = torch.ones(1, T, dtype=v.dtype, device=dev)  # [B,S] padding mask, all tokens valid
            elif k == "position_ids" and v.dim() == 2 and v.shape[0] == 1:
                kw[k] = torch.arange(T, dtype=v.dtype, device=dev)[None]
            else:
                die(f"cannot re-create self_attn kwarg {k}: {tuple(v.shape)} {v.dtype} (API drift?)")
        elif k in ("past_key_values", "prev_topk_indices", "cache_params") and v is not None:
            die(f"self_attn got {k}={type(v).__name__}; expected None (no cache, full indexer)")
        elif isinstance(v, (dict, list, tuple)) and any(map(torch.is_tensor, v.values() if isinstance(v, dict) else v)):
            die(f"self_attn kwarg {k} holds tensors: unknown convention")
        else:
            kw[k] = v
    return kw


first = lambda o: o[0] if isinstance(o, (tuple, list)) else o  # noqa: E731  (self_attn returns a tuple)
rms = lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w  # noqa: E731


@torch.no_grad()
def forward_main(m, ids, dev):
    x = torch.tensor([ids], dtype=torch.long, device=dev)
    logits = m(input_ids=x, use_cache=False).logits[0].float()
    h = m.model(input_ids=x, use_cache=False).last_hidden_state[0].float()  # after final norm = lm_head input
    if not (m.lm_head(h) - logits).abs().max().item() <= 1e-5:
        die("lm_head(model.model(...).last_hidden_state) differs from the full forward's logits")
    return logits, h


@torch.no_grad()
def forward_mtp(layer, cap_kw, w, emb, head, ids, H, eps, dev):
    """vLLM's Glm5NextMultiTokenPredictorLayer, teacher-forced over positions 0..T-2 (formula: README)."""
    T = len(ids)
    e = emb[torch.tensor(ids[1:], dtype=torch.long, device=dev)].clone()  # row p: embedding of token p+1
    e[0] = 0.0                                                            # vLLM zeroes position 0
    z = (torch.cat([rms(e, w["enorm"], eps), rms(H[:T - 1], w["hnorm"], eps)], dim=-1) @ w["eh_proj"].T)[None]
    a = first(layer.self_attn(hidden_states=layer.input_layernorm(z), **attn_kwargs(cap_kw, T - 1, dev)))
    r = z + a                                                             # plain residual: no mHC
    m = layer.mlp(layer.post_attention_layernorm(r))
    return (rms(r + m, w["shared_head_norm"], eps) @ head.T)[0]


def make_one(spec, root, dev, force):
    name, seed, text, top = spec["name"], spec["seed"], spec["text"], spec["top"]
    d = root / name
    if d.exists() and any(d.iterdir()):
        if not force:
            die(f"{d} is not empty (use --force to overwrite)")
        for p in d.iterdir():
            if not (p.is_file() and p.suffix in (".safetensors", ".json")):
                die(f"unexpected entry {p}; remove it by hand")
            p.unlink()
    d.mkdir(parents=True, exist_ok=True)
    vis = vision(text["hidden_size"])
    cfg = make_config(text, top, vis)
    tc = cfg.text_config
    N, D, eps = tc.num_hidden_layers, tc.hidden_size, tc.rms_norm_eps
    print(f"\n===== {name}: text_config =====\n{json.dumps(tc.to_dict(), indent=1, default=str)}")
    print(f"vision_config: {json.dumps(cfg.vision_config.to_dict(), default=str)}")
    model, impl, generic = build(cfg, seed, spec["mlp_in_scale"])
    aux, _, _ = build(make_config(aux_text(text), top, vis), seed + 1, spec["mlp_in_scale"])

    # 1) main checkpoint, reloaded and compared before any MTP tensor is added
    save_bf16(model, d, spec["shard"])
    filled = patch_config_json(d, text, top, vis)
    pure = read_ckpt(d)
    if "lm_head.weight" not in pure or not any(k.startswith(P + "0.") for k in pure):
        die(f"unexpected checkpoint names, e.g. {sorted(pure)[:8]}")
    for L in range(N):  # IndexShare: a shared layer has no indexer weights on disk
        has = any(k.startswith(f"{P}{L}.self_attn.indexer.") for k in pure)
        if has != (tc.layer_types[L] == DSA and tc.indexer_types[L] == "full"):
            die(f"layer {L}: indexer weights present={has}, but {tc.layer_types[L]}/{tc.indexer_types[L]}")
    same_state(model, load_ref(d, "cpu"), f"{name} (no MTP)")

    # 2) MTP block = HF's decoder layer N of the aux model as save_pretrained writes it (so its names follow the
    #    main layers' on-disk conversion) minus its mHC tensors, plus enorm / hnorm / eh_proj / shared_head.*
    pre = f"{P}{N}."
    with tempfile.TemporaryDirectory() as tmp:
        save_bf16(aux, Path(tmp), None)
        blk = {k: v for k, v in read_ckpt(Path(tmp)).items() if k.startswith(pre)}
        aux_ref = load_ref(Path(tmp), dev)
    same_state(aux, aux_ref, f"{name} aux model (MTP block)")
    hc = sorted(k for k in blk if k[len(pre):].startswith(MHC))
    blk = {k: v for k, v in blk.items() if k not in hc}
    Lc = max(L for L in range(N) if (tc.layer_types[L], tc.indexer_types[L], tc.mlp_layer_types[L])
             == (DSA, "full", "sparse"))  # a main layer of the same kind, for name/shape and calling checks
    like = {k[len(f"{P}{Lc}."):]: v.shape for k, v in pure.items()
            if k.startswith(f"{P}{Lc}.") and not k[len(f"{P}{Lc}."):].startswith(MHC)}
    if len(hc) != 6 or like != {k[len(pre):]: v.shape for k, v in blk.items()}:
        die(f"MTP block {sorted(blk)} (mHC {hc}) does not match main layer {Lc}'s names/shapes")
    g = torch.Generator().manual_seed(seed + 2)
    rn = lambda *s: torch.randn(s, generator=g)
    extra = {pre + "enorm.weight": (1 + 0.1 * rn(D)).bfloat16(), pre + "hnorm.weight": (1 + 0.1 * rn(D)).bfloat16(),
             pre + "eh_proj.weight": (rn(D, 2 * D) / math.sqrt(2 * D)).bfloat16(),
             pre + "shared_head.norm.weight": (1 + 0.1 * rn(D)).bfloat16(),
             pre + "shared_head.head.weight": pure["lm_head.weight"].clone()}  # exact copy (DeepSeek convention)
    mtp_t = {**blk, **extra}
    append_tensors(d, mtp_t)
    final = read_ckpt(d)
    if set(final) != set(pure) | set(mtp_t) or any(not torch.equal(final[k], v) for k, v in mtp_t.items()):
        die("checkpoint contents after appending the MTP tensors are not as written")
    ref = load_ref(d, dev)  # transformers must still load it: layer-N keys are unexpected, hence ignored
    same_state(model, ref, f"{name} with MTP tensors appended")
    print(f"\n----- {name}: checkpoint tensors (name, shape, dtype) -----")
    for k in sorted(final):
        print(f"  {k:78s} {str(list(final[k].shape)):18s} {str(final[k].dtype).replace('torch.', '')}")
    non_bf16 = sorted(k for k, v in final.items() if v.dtype != torch.bfloat16)
    experts = "per_expert" if any(".mlp.experts.0.gate_proj.weight" in k for k in final) else "packed"
    print(f"non-bf16 tensors: {non_bf16 or 'none'}; routed experts stored {experts}")

    # 3) golden forward passes; first learn + test how the reference calls a DSA layer's self_attn and mlp
    lay = text_model(ref).layers[Lc]
    rng = np.random.RandomState(seed + 3)
    hi = min([text["pad_token_id"], *text["eos_token_id"], *top.values()])  # prompts avoid all special ids
    prompts = [rng.randint(0, hi, size=T).astype(np.int64).tolist() for T in spec["lengths"]]
    rec, hooks = capture(lay)
    forward_main(ref, max(prompts, key=len), dev)
    for hk in hooks:
        hk.remove()
    (kw, out), (mx, mout) = rec["attn"], rec["mlp"]
    x = kw["hidden_states"]
    d_attn = (first(lay.self_attn(hidden_states=x, **attn_kwargs(kw, x.shape[1], dev))) - first(out)).abs().max().item()
    d_mlp = (lay.mlp(mx) - mout).abs().max().item()
    if not (d_attn <= 1e-5 and d_mlp <= 1e-5):
        die(f"re-calling layer {Lc}'s self_attn / mlp outside the model differs: {d_attn}, {d_mlp}")
    print(f"ok: layer {Lc} self_attn / mlp re-called outside the model reproduce it ({d_attn:.1e}, {d_mlp:.1e})")
    mtp_layer = text_model(aux_ref).layers[N]
    w = {k: extra[pre + n].float().to(dev) for k, n in (("enorm", "enorm.weight"), ("hnorm", "hnorm.weight"),
         ("eh_proj", "eh_proj.weight"), ("shared_head_norm", "shared_head.norm.weight"))}
    emb, head = text_model(ref).embed_tokens.weight.float(), ref.lm_head.weight.float()
    golden, stats = {}, []
    for i, ids in enumerate(prompts):
        logits, h = forward_main(ref, ids, dev)
        mtp = forward_mtp(mtp_layer, kw, w, emb, head, ids, h, eps, dev)
        if not (torch.isfinite(logits).all() and torch.isfinite(mtp).all()):
            die(f"prompt {i}: non-finite logits")
        st = {"length": len(ids), "logits_std": round(logits.std().item(), 4),
              "logits_absmax": round(logits.abs().max().item(), 3), "mtp_logits_std": round(mtp.std().item(), 4)}
        if str(dev) != "cpu":  # the in-memory model on CPU: the reference's own device spread; catches TF32
            diff = (forward_main(model, ids, "cpu")[0] - logits.cpu()).abs().amax(-1)
            big = (diff > 1e-3).nonzero()
            st["cpu_vs_device_maxabs"] = diff.max().item()
            st["cpu_vs_device_first_pos_over_1e-3"] = int(big[0]) if len(big) else None
            if i < 2 and len(big):
                die(f"prompt {i}: CPU vs {dev} logits differ by {diff.max().item()} (TF32 enabled?)")
        if not (0.2 < st["logits_std"] < 10 and 0.2 < st["mtp_logits_std"] < 10):
            print(f"WARNING: prompt {i}: logits scale is not O(1): {st}")
        print(f"prompt {i}: {st}")
        stats.append(st)
        golden.update({f"prompt_{i}": torch.tensor(ids, dtype=torch.int32), f"logits_{i}": logits.cpu().contiguous(),
                       f"mtp_logits_{i}": mtp.cpu().contiguous(), f"hidden_{i}": h.cpu().contiguous()})
    save_file(golden, str(d / "golden.safetensors"), metadata={"format": "pt", "generator": "make_golden.py"})
    info = {
        "checkpoint": name, "generator": "tests/golden/make_golden.py",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "python": sys.version.split()[0]},
        "device": str(dev) + ("" if str(dev) == "cpu" else f" ({torch.cuda.get_device_name()})"),
        "implementations": impl, "reference_dtype": "float32 on the bf16 values stored on disk",
        "seeds": {"weights": seed, "mtp_block_aux_model": seed + 1, "mtp_extra": seed + 2, "prompts": seed + 3},
        "init": {"mlp_in_scale": spec["mlp_in_scale"], "generic_1d_tensors": generic},
        "checkpoint_files": sorted(p.name for p in d.iterdir() if not p.name.startswith("golden.")),
        "non_bf16_tensors": non_bf16, "routed_experts_on_disk": experts, "config_json_fields_filled": filled,
        "text_config": text, "top_level_token_ids": top,
        "golden_tensors": {"prompt_i": "int32 [T]", "logits_i": "float32 [T, vocab]",
                           "mtp_logits_i": "float32 [T-1, vocab]: row p = MTP at position p (drafts token p+2)",
                           "hidden_i": "float32 [T, hidden]: main-model output after the final norm (lm_head input)"},
        "prompts": [{"index": i, "length": len(p), "tokens": p} for i, p in enumerate(prompts)],
        "stats": stats,
        "mtp": {"layer_index": N, "block_like_main_layer": Lc, "weights": {k: list(v.shape) for k, v in
                                                                           sorted(extra.items())},
                "block_weights": f"{pre}{{self_attn.*, mlp.*, input_layernorm, post_attention_layernorm}}: "
                                 f"same names/shapes as layer {Lc}, without its mHC tensors",
                "zero_embedding_at_position_0": True, "previous_hidden": "hidden_i",
                "embedding": "main embed_tokens", "lm_head": "main lm_head (shared_head.head is an exact copy)"},
        "checks": {"attn_recall_maxabs": d_attn, "mlp_recall_maxabs": d_mlp,
                   "save_reload_state_dict": "identical (main, main + MTP, aux)"},
        "tolerance": "see README: compare positions before the first exact-zero indexer tie only",
    }
    (d / "golden.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"wrote {d}: {sum(p.stat().st_size for p in d.iterdir()) / 1e6:.2f} MB, {sorted(p.name for p in d.iterdir())}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path, help="output root (one subfolder per checkpoint)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--only", action="append", choices=[s["name"] for s in SPECS])
    ap.add_argument("--force", action="store_true", help="overwrite existing checkpoint folders")
    args = ap.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, device {args.device}")
    if transformers.__version__ != "5.17.0" or not torch.__version__.startswith("2.11"):
        print("WARNING: expected transformers 5.17.0 / torch 2.11; golden.json records the versions used")
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False  # cuDNN convs (the KDA conv1d) would otherwise use TF32
    args.out.mkdir(parents=True, exist_ok=True)
    for spec in SPECS:
        if not args.only or spec["name"] in args.only:
            make_one(spec, args.out, torch.device(args.device), args.force)
    print("\nALL DONE")


if __name__ == "__main__":
    main()
