#!/usr/bin/env python3
"""Trains TwinSpark's embedded default model (tools/train/README.md) on the GPU machine.

1. corpus (make_corpus.py) -> GLM-style byte-level BPE with HF `tokenizers` (make_tokenizer_golden.py's
   pre-tokenizer/decoder config and GLM's added tokens);
2. a small Glm5NextForConditionalGeneration (KDA + DSA-MLA with an active k-pool indexer, mHC, MoE, tiny vision
   tower) plus an MTP layer stated as in tests/golden/make_golden.py, trained together (completion-only loss;
   MTP loss on token p+2), for a fixed wall-clock budget;
3. BF16 checkpoint in our loader's format (save_pretrained + MTP tensors appended, as make_golden.py does) with
   tokenizer.json, tokenizer_config.json, chat_template.jinja, generation_config.json;
4. greedy exact-answer accuracy on tests/e2e/data/heldout.jsonl with the reloaded BF16 checkpoint (fp32 compute).

    python3 tools/train/train.py --out OUTDIR --train-seconds 330 [--init-state state.pt] [--lr 2e-3]
"""
import argparse, json, math, os, random, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "train"))
sys.path.insert(0, str(ROOT / "tests" / "golden"))
import make_corpus as mc  # noqa: E402
from make_tokenizer_golden import GLM_ADDED, GLM_REGEX  # noqa: E402  (our GLM tokenizer config)

T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ---------------------------------------------------------------------------------------------------------
# tokenizer

def train_tokenizer(examples, vocab_size):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GLM_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(GLM_ADDED), min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    # added tokens are split out before training, exactly as encode() will split them
    special = sorted((t for t, _ in GLM_ADDED), key=len, reverse=True)
    import re
    rx = re.compile("|".join(re.escape(t) for t in special))
    tok.train_from_iterator((p for e in examples for p in rx.split(mc.tokenizer_training_text(e)) if p),
                            trainer=trainer)
    for content, sp in GLM_ADDED:  # one at a time, so ids follow GLM's order
        t = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=sp)
        (tok.add_special_tokens if sp else tok.add_tokens)([t])
    return tok


def tokenizer_config(tok):
    tpl = mc.JINJA.read_text(encoding="utf-8")
    cfg = {"added_tokens_decoder": {}, "bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
           "clean_up_tokenization_spaces": False, "do_lower_case": False, "model_max_length": 4096,
           "padding_side": "left", "remove_space": False, "tokenizer_class": "PreTrainedTokenizerFast",
           "extra_special_tokens": {}, "chat_template": tpl}
    for content, special in GLM_ADDED:
        cfg["added_tokens_decoder"][str(tok.token_to_id(content))] = {
            "content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
            "special": special}
    return cfg


# ---------------------------------------------------------------------------------------------------------
# model

def model_spec(tok, args):
    import make_golden as mg
    ids = {t: tok.token_to_id(t) for t, _ in GLM_ADDED}
    vocab = (tok.get_vocab_size(with_added_tokens=True) + 63) // 64 * 64
    KDA, DSA = mg.KDA, mg.DSA
    text = mg.text_cfg(
        vocab_size=vocab, hidden_size=256, intermediate_size=512, moe_intermediate_size=96,
        num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=128, kv_lora_rank=128,
        qk_nope_head_dim=64, v_head_dim=64, n_routed_experts=16, num_experts_per_tok=4, n_group=1, topk_group=1,
        n_shared_experts=1, routed_scaling_factor=2.5, rms_norm_eps=1e-6, swiglu_limit=10.0,
        layer_types=[KDA, KDA, KDA, DSA, KDA, KDA, KDA, DSA], mlp_layer_types=["dense"] + ["sparse"] * 7,
        indexer_types=["full"] * 8, index_topk=args.index_topk, index_kpool=4, index_n_heads=16, index_head_dim=32,
        linear_num_heads=4, linear_head_dim=64, hc_mult=4, pad_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]])
    top = dict(image_token_id=ids["<|image|>"], video_token_id=ids["<|video|>"],
               image_start_token_id=ids["<|begin_of_image|>"], image_end_token_id=ids["<|end_of_image|>"],
               video_start_token_id=ids["<|begin_of_video|>"], video_end_token_id=ids["<|end_of_video|>"])
    return text, top, mg.vision(text["hidden_size"])


class MTP:
    """The MTP layer of make_golden.py (vLLM's Glm5NextMultiTokenPredictorLayer), trainable: decoder block = layer N
    of an auxiliary N+1-layer model (DSA, full indexer, MoE), used without mHC; plus enorm/hnorm/eh_proj/shared_head."""

    def __init__(self, aux, N, D, dev):
        import torch
        import make_golden as mg
        self.aux, self.N = aux, N
        self.layer = mg.text_model(aux).layers[N].to(dev)
        self.enorm = torch.nn.Parameter(torch.ones(D, device=dev))
        self.hnorm = torch.nn.Parameter(torch.ones(D, device=dev))
        self.shnorm = torch.nn.Parameter(torch.ones(D, device=dev))
        self.eh_proj = torch.nn.Parameter(torch.randn(D, 2 * D, device=dev) / math.sqrt(2 * D))

    def parameters(self):
        return [p for n, p in self.layer.named_parameters() if not n.startswith(("attn_hc.", "ffn_hc."))] + [
            self.enorm, self.hnorm, self.shnorm, self.eh_proj]

    def forward(self, ids, h, emb, head, eps):
        """ids [B,T], h [B,T,D] main output after the final norm; returns logits [B,T,V], row p drafts p+2."""
        import torch
        import make_golden as mg
        B, T = ids.shape
        e = emb(torch.cat([ids[:, 1:], ids[:, -1:]], dim=1)).float()  # row p: embedding of token p+1 (last: dummy)
        e = torch.cat([torch.zeros_like(e[:, :1]), e[:, 1:]], dim=1)  # zero at position 0 (vLLM)
        z = torch.cat([mg.rms(e, self.enorm, eps), mg.rms(h, self.hnorm, eps)], -1) @ self.eh_proj.T
        mask = torch.ones(B, T, dtype=torch.bool, device=ids.device)
        a = mg.first(self.layer.self_attn(hidden_states=self.layer.input_layernorm(z), attention_mask=mask,
                                          past_key_values=None, prev_topk_indices=None))
        r = z + a
        m = self.layer.mlp(self.layer.post_attention_layernorm(r))
        return head(mg.rms(r + m, self.shnorm, eps))

    def state(self):
        return {"enorm.weight": self.enorm, "hnorm.weight": self.hnorm, "eh_proj.weight": self.eh_proj,
                "shared_head.norm.weight": self.shnorm}


def load_exported(d, model, mtp, text, top, vis, N, dev):
    """Inverse of save_checkpoint: main weights through from_pretrained (the on-disk names are converted
    back by transformers), the MTP decoder block as layer N of the auxiliary N+1-layer model read from the
    same files, and the MTP extras (enorm/hnorm/eh_proj/shared_head.norm) from the raw tensors."""
    import torch
    import make_golden as mg
    from transformers import Glm5NextForConditionalGeneration
    src = Glm5NextForConditionalGeneration.from_pretrained(str(d), dtype=torch.float32)
    missing, unexpected = model.load_state_dict(src.state_dict(), strict=False)
    if missing or unexpected:
        raise SystemExit(f"--init-ckpt {d}: main weights do not match the model: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    aux = Glm5NextForConditionalGeneration.from_pretrained(str(d), config=mg.make_config(mg.aux_text(text), top, vis),
                                                           dtype=torch.float32)
    blk = {k: v for k, v in mg.text_model(aux).layers[N].state_dict().items()
           if not k.startswith(("attn_hc.", "ffn_hc."))}
    missing, unexpected = mtp.layer.load_state_dict(blk, strict=False)
    missing = [k for k in missing if not k.startswith(("attn_hc.", "ffn_hc."))]
    if missing or unexpected:
        raise SystemExit(f"--init-ckpt {d}: MTP block mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
    raw = mg.read_ckpt(Path(d))
    pre = f"{mg.P}{N}."
    with torch.no_grad():
        for k, v in mtp.state().items():
            v.copy_(raw[pre + k].float().to(dev))
    # the MTP block must really be the trained one: its attention weights differ from a fresh init
    del src, aux


def build(text, top, vis, dev, seed):
    import torch
    import make_golden as mg
    from transformers import Glm5NextForConditionalGeneration
    torch.manual_seed(seed)
    cfg = mg.make_config(text, top, vis)
    m = Glm5NextForConditionalGeneration(cfg).float().to(dev)
    mg.set_impls(m)
    aux = Glm5NextForConditionalGeneration(mg.make_config(mg.aux_text(text), top, vis)).float()
    mg.set_impls(aux)
    return cfg, m, aux


# ---------------------------------------------------------------------------------------------------------
# data

def encode_examples(tok, exs):
    prompts = tok.encode_batch([mc.prompt_key(e) for e in exs], add_special_tokens=False)
    comps = tok.encode_batch([mc.completion_text(e) for e in exs], add_special_tokens=False)
    return [(p.ids, c.ids) for p, c in zip(prompts, comps)]


def batches(data, budget, rng, max_len):
    """Length-bucketed batches of about `budget` padded tokens; yields forever (reshuffled each epoch)."""
    while True:
        idx = [i for i in range(len(data)) if len(data[i][0]) + len(data[i][1]) <= max_len]
        rng.shuffle(idx)
        out = []
        for s in range(0, len(idx), 2048):
            chunk = sorted(idx[s:s + 2048], key=lambda i: len(data[i][0]) + len(data[i][1]))
            cur = []
            for i in chunk:
                L = len(data[i][0]) + len(data[i][1])
                if cur and (len(cur) + 1) * L > budget:
                    out.append(cur)
                    cur = []
                cur.append(i)
            if cur:
                out.append(cur)
        rng.shuffle(out)
        yield from out


def collate(data, b, pad, dev):
    import torch
    L = max(len(data[i][0]) + len(data[i][1]) for i in b)
    ids = torch.full((len(b), L), pad, dtype=torch.long)
    comp = torch.zeros((len(b), L), dtype=torch.bool)  # positions holding completion tokens
    for r, i in enumerate(b):
        p, c = data[i]
        ids[r, :len(p) + len(c)] = torch.tensor(p + c)
        comp[r, len(p):len(p) + len(c)] = True
    return ids.to(dev), comp.to(dev)


# ---------------------------------------------------------------------------------------------------------
# evaluation: batched greedy decoding without cache (right padding; the model is causal, so padding after a
# sequence never changes its logits: KDA and conv are causal, indexer pools must end at or before the query)

def greedy(model, prompts, eos, pad, max_new, dev, group=48):
    import torch
    outs = [None] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    for s in range(0, len(order), group):
        g = order[s:s + group]
        seqs = [list(prompts[i]) for i in g]
        done = [False] * len(g)
        gen = [[] for _ in g]
        for _ in range(max_new):
            L = max(len(x) for x in seqs)
            ids = torch.full((len(g), L), pad, dtype=torch.long)
            for r, x in enumerate(seqs):
                ids[r, :len(x)] = torch.tensor(x)
            with torch.no_grad():
                h = model.model(input_ids=ids.to(dev), use_cache=False).last_hidden_state
                last = torch.stack([h[r, len(x) - 1] for r, x in enumerate(seqs)])
                nxt = model.lm_head(last).float().argmax(-1).tolist()
            for r in range(len(g)):
                if done[r]:
                    continue
                gen[r].append(nxt[r])
                seqs[r].append(nxt[r])
                if nxt[r] in eos:
                    done[r] = True
            if all(done):
                break
        for r, i in enumerate(g):
            outs[i] = gen[r]
    return outs


def evaluate(model, tok, held, eos, pad, max_new, dev):
    prompts = [tok.encode(mc.render_prompt(h["messages"], h["tools"], True, h["enable_thinking"]),
                          add_special_tokens=False).ids for h in held]
    outs = greedy(model, prompts, set(eos), pad, max_new, dev)
    fam, rows = {}, []
    for h, o in zip(held, outs):
        text = tok.decode(o, skip_special_tokens=True)
        ok = mc.is_correct(h, *mc.parse_output(text, h["enable_thinking"]))
        f = fam.setdefault(h["family"], [0, 0])
        f[0] += ok
        f[1] += 1
        rows.append({"id": h["id"], "ok": bool(ok), "ids": o, "text": text})
    total = sum(v[0] for v in fam.values())
    return total / len(held), {k: f"{v[0]}/{v[1]}" for k, v in fam.items()}, rows


# ---------------------------------------------------------------------------------------------------------

def save_checkpoint(model, aux, mtp, cfg, text, top, vis, tok, d):
    import torch
    import make_golden as mg
    d.mkdir(parents=True, exist_ok=True)
    for p in d.iterdir():
        p.unlink()
    mg.save_bf16(model, d, None)
    mg.patch_config_json(d, text, top, vis)
    pure = mg.read_ckpt(d)
    # MTP block names as save_pretrained writes layer N of the aux model (main weights copied in first)
    N = text["num_hidden_layers"]
    pre = f"{mg.P}{N}."
    with torch.no_grad():
        aux_sd = aux.state_dict()
        for k, v in model.state_dict().items():
            aux_sd[k].copy_(v.to(aux_sd[k].device))
    with tempfile.TemporaryDirectory() as tmp:
        mg.save_bf16(aux.cpu(), Path(tmp), None)
        blk = {k: v for k, v in mg.read_ckpt(Path(tmp)).items()
               if k.startswith(pre) and not k[len(pre):].startswith(mg.MHC)}
    mtp.layer.to(model.lm_head.weight.device)
    extra = {pre + k: v.detach().float().cpu().to(torch.bfloat16) for k, v in mtp.state().items()}
    extra[pre + "shared_head.head.weight"] = pure["lm_head.weight"].clone()
    mg.append_tensors(d, {**blk, **extra})
    tok.save(str(d / "tokenizer.json"), pretty=False)
    (d / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(tok), indent=1, ensure_ascii=False) + "\n",
                                             encoding="utf-8")
    (d / "chat_template.jinja").write_text(mc.JINJA.read_text(encoding="utf-8"), encoding="utf-8")
    gc = {"_from_model_config": False, "do_sample": False, "eos_token_id": text["eos_token_id"],
          "pad_token_id": text["pad_token_id"], "max_new_tokens": 256}
    (d / "generation_config.json").write_text(json.dumps(gc, indent=2) + "\n")
    return sum(p.stat().st_size for p in d.iterdir())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--train-seconds", type=float, default=330)
    ap.add_argument("--n-train", type=int, default=200000)
    ap.add_argument("--vocab", type=int, default=3072)
    ap.add_argument("--index-topk", type=int, default=64)
    ap.add_argument("--budget", type=int, default=16384, help="padded tokens per batch")
    ap.add_argument("--max-len", type=int, default=448)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=60)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--init-state", type=Path, help="continue from a state.pt written by an earlier run")
    ap.add_argument("--tokenizer", type=Path, help="reuse this tokenizer.json (with --init-state / --init-ckpt)")
    ap.add_argument("--init-ckpt", type=Path, help="continue from an exported checkpoint directory (BF16 weights "
                    "incl. the MTP block, e.g. resources/models/glm5-next-tiny); implies its tokenizer")
    ap.add_argument("--save-every", type=float, default=150)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (default: fp32 with TF32)")
    ap.add_argument("--kda", choices=["fast", "reference"], default="fast",
                    help="KDA chunk implementation in training: fast_kda.py (checked against the reference first; "
                         "falls back on a mismatch) or transformers' fallback")
    ap.add_argument("--experts", default="grouped_mm", help="transformers experts implementation in training")
    ap.add_argument("--stop-after", type=float, help="save the full training state (weights, optimizer, step, "
                    "clock) after this many training seconds and exit; --resume continues the same schedule")
    ap.add_argument("--resume", type=Path, help="full state written by --stop-after")
    args = ap.parse_args()
    if args.resume and not args.resume.is_file():
        raise SystemExit(f"--resume {args.resume}: no such file (a full state written by --stop-after)")
    if args.stop_after is not None and not 0 < args.stop_after < args.train_seconds:
        raise SystemExit(f"--stop-after must lie in (0, --train-seconds = {args.train_seconds}); got {args.stop_after}")
    import torch
    import transformers
    import make_golden as mg
    from tokenizers import Tokenizer
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    log(f"torch {torch.__version__} transformers {transformers.__version__} device {dev}")
    args.out.mkdir(parents=True, exist_ok=True)
    ckdir = args.out / "glm5-next-tiny"

    held = mc.load_heldout(ROOT / "tests/e2e/data/heldout.jsonl")
    exs = list(mc.train_examples(args.n_train, mc.heldout_keys_of(held)))
    log(f"{len(exs)} training examples, {len(held)} held-out")
    if args.init_ckpt and not args.tokenizer:
        args.tokenizer = args.init_ckpt / "tokenizer.json"
    if args.tokenizer:
        tok = Tokenizer.from_file(str(args.tokenizer))
    else:
        tok = train_tokenizer(exs[:40000], args.vocab)
    log(f"tokenizer: {tok.get_vocab_size(with_added_tokens=True)} tokens")
    data = encode_examples(tok, exs)
    lens = sorted(len(p) + len(c) for p, c in data)
    comp_max = max(len(c) for _, c in data)
    log(f"tokens/example median {lens[len(lens) // 2]}, p99 {lens[int(.99 * len(lens))]}, max {lens[-1]}; "
        f"completion max {comp_max}")
    text, top, vis = model_spec(tok, args)
    cfg, model, aux = build(text, top, vis, dev, args.seed)
    tc = cfg.text_config
    N, D, eps = tc.num_hidden_layers, tc.hidden_size, tc.rms_norm_eps
    mtp = MTP(aux, N, D, dev)
    if args.init_state:
        st = torch.load(args.init_state, map_location=dev)
        model.load_state_dict({k: v.float() for k, v in st["model"].items()})
        mtp.layer.load_state_dict({k: v.float() for k, v in st["mtp_layer"].items()})
        with torch.no_grad():
            for k, v in mtp.state().items():
                v.copy_(st["mtp_extra"][k].float())
        log(f"continued from {args.init_state}")
    if args.init_ckpt:
        load_exported(args.init_ckpt, model, mtp, text, top, vis, N, dev)
        log(f"continued from {args.init_ckpt}")
    if args.kda == "fast":
        import fast_kda
        from transformers.models.glm5_next import modeling_glm5_next as M
        err = fast_kda.check(M.chunk_kimi_delta_attention, dev)
        log(f"fast KDA vs transformers' chunk_kda (max relative error): {err}")
        if max(err.values()) < 2e-3:
            reference_kda = M.chunk_kimi_delta_attention
            M.chunk_kimi_delta_attention = fast_kda.chunk_kda
        else:
            log("fast KDA disagrees with the reference: training with the reference")
            args.kda = "reference"
    for m_ in (model, aux):
        try:
            m_.set_experts_implementation(args.experts)
        except Exception as exc:  # noqa: BLE001
            log(f"experts implementation {args.experts} unavailable ({exc!r}); eager")
    try:
        model.set_attn_implementation("sdpa")
        mtp.layer.self_attn.config._attn_implementation = "sdpa"
    except Exception as exc:  # noqa: BLE001
        log(f"sdpa unavailable ({exc!r}); eager")
    nparam = sum(p.numel() for p in model.parameters())
    log(f"model: {nparam / 1e6:.2f} M parameters (+ MTP {sum(p.numel() for p in mtp.parameters()) / 1e6:.2f} M); "
        f"attn {tc._attn_implementation}")
    params = [p for p in model.parameters() if p.requires_grad] + mtp.parameters()
    decay = [p for p in params if p.dim() >= 2]
    nodecay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    pad = text["pad_token_id"]
    emb, head = mg.text_model(model).embed_tokens, model.lm_head
    step, toks, hist, el0 = 0, 0, [], 0.0
    if args.resume:
        st = torch.load(args.resume, map_location=dev)
        model.load_state_dict(st["model"])
        mtp.layer.load_state_dict(st["mtp_layer"])
        with torch.no_grad():
            for k, v in mtp.state().items():
                v.copy_(st["mtp_extra"][k])
        opt.load_state_dict(st["opt"])
        step, toks, hist, el0 = st["step"], st["toks"], st["hist"], st["elapsed"]
        log(f"resumed {args.resume}: step {step}, {el0:.0f} s of {args.train_seconds:.0f} s trained")
    it = batches(data, args.budget, random.Random(args.seed + step), args.max_len)
    model.train()
    t_start, last_save = time.time() - el0, time.time()
    while True:
        el = time.time() - t_start
        if args.stop_after and el > args.stop_after:
            torch.save({"model": model.state_dict(), "mtp_layer": mtp.layer.state_dict(),
                        "mtp_extra": {k: v.detach() for k, v in mtp.state().items()}, "opt": opt.state_dict(),
                        "step": step, "toks": toks, "hist": hist, "elapsed": el}, args.out / "full_state.pt")
            log(f"stopped after {el:.0f} s at step {step}: full state in {args.out / 'full_state.pt'}")
            size = save_checkpoint(model, aux, mtp, cfg, text, top, vis, tok, ckdir)
            log(f"partial checkpoint written: {size / 1e6:.1f} MB")
            return
        if el > args.train_seconds:
            break
        frac = el / args.train_seconds
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        ids, comp = collate(data, next(it), pad, dev)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16 and dev.type == "cuda"):
            h = model.model(input_ids=ids, use_cache=False).last_hidden_state
            logits = head(h).float()
            tgt = comp[:, 1:]
            loss = torch.nn.functional.cross_entropy(logits[:, :-1][tgt], ids[:, 1:][tgt])
            ml = mtp.forward(ids, h.float(), emb, head, eps).float()
            t2 = comp[:, 2:]
            mloss = torch.nn.functional.cross_entropy(ml[:, :-2][t2], ids[:, 2:][t2])
        (loss + args.mtp_weight * mloss).backward()
        gn = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        toks += ids.numel()
        if step % 25 == 0 or step <= 3:
            torch.cuda.synchronize() if dev.type == "cuda" else None
            el = time.time() - t_start
            hist.append({"step": step, "t": round(el, 1), "loss": round(loss.item(), 4), "mtp_loss": round(mloss.item(), 4),
                         "lr": lr, "gnorm": round(float(gn), 3)})
            log(f"step {step} loss {loss.item():.4f} mtp {mloss.item():.4f} lr {lr:.2e} gn {float(gn):.2f} "
                f"{toks / el:,.0f} padded tok/s batch {tuple(ids.shape)}")
        if time.time() - last_save > args.save_every:
            torch.save({"model": {k: v.bfloat16() for k, v in model.state_dict().items()},
                        "mtp_layer": {k: v.bfloat16() for k, v in mtp.layer.state_dict().items()},
                        "mtp_extra": {k: v.detach().bfloat16() for k, v in mtp.state().items()}}, args.out / "state.pt")
            last_save = time.time()
            log("state saved")
    train_time = time.time() - t_start
    log(f"trained {step} steps, {toks:,} padded tokens in {train_time:.0f}s")
    model.eval()
    torch.save({"model": {k: v.bfloat16() for k, v in model.state_dict().items()},
                "mtp_layer": {k: v.bfloat16() for k, v in mtp.layer.state_dict().items()},
                "mtp_extra": {k: v.detach().bfloat16() for k, v in mtp.state().items()}}, args.out / "state.pt")
    size = save_checkpoint(model, aux, mtp, cfg, text, top, vis, tok, ckdir)
    log(f"checkpoint written: {size / 1e6:.1f} MB")
    if args.kda == "fast":  # the evaluation below is transformers' own forward
        M.chunk_kimi_delta_attention = reference_kda
    # evaluate the BF16 checkpoint as our engine loads it: reloaded from disk, fp32 compute on bf16 values
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ref = mg.load_ref(ckdir, dev)
    try:
        ref.set_attn_implementation("sdpa")
    except Exception:  # noqa: BLE001
        pass
    acc, fam, rows = evaluate(ref, tok, held, text["eos_token_id"], pad, comp_max + 24, dev)
    log(f"held-out exact-answer accuracy (BF16 weights, PyTorch greedy): {acc:.3f} {fam}")
    # MTP draft quality on held-out reference completions (teacher forced): top-1 agreement with token p+2
    with torch.no_grad():
        hits = tot = 0
        for h_ in held[:100]:
            e = {"enable_thinking": h_["enable_thinking"], "reasoning": "", "content": h_["expected"]["content"],
                 "tool_calls": h_["expected"]["tool_calls"]}
            p = tok.encode(mc.render_prompt(h_["messages"], h_["tools"], True, h_["enable_thinking"])).ids
            ids = torch.tensor([p + tok.encode(mc.completion_text(e)).ids], device=dev)
            hh = mg.text_model(model)(input_ids=ids, use_cache=False).last_hidden_state.float()
            ml = mtp.forward(ids, hh, emb, head, eps)[0, len(p) - 2:-2].argmax(-1)
            hits += int((ml == ids[0, len(p):]).sum())
            tot += ids.shape[1] - len(p)
    log(f"MTP top-1 draft agreement on held-out completions: {hits / tot:.3f}")
    report = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__},
              "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
              "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "params_main": nparam, "steps": step, "train_seconds": train_time, "padded_tokens": toks,
              "loss_history": hist, "heldout_accuracy": acc, "per_family": fam, "mtp_top1": hits / tot,
              "checkpoint_bytes": size, "total_seconds": time.time() - T0}
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "heldout_outputs.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    log("ALL DONE")


if __name__ == "__main__":
    main()
