#!/usr/bin/env python3
"""Where a training step of train.py spends its time (GPU machine): tokens/s of the same batches under each
experts implementation and with/without bf16 autocast, then a torch.profiler table of one configuration.

    python3 tools/train/profile_step.py [--budget 32768] [--steps 6] [--out DIR]

Uses the shipped tokenizer (resources/models/glm5-next-tiny) and a few thousand corpus examples; trains nothing
that is kept. Prints and writes DIR/profile.json.
"""
import argparse, json, random, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "train"))
import train as tr  # noqa: E402
import make_corpus as mc  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=32768)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--variants", default="eager:fp32,batched_mm:fp32,grouped_mm:fp32,eager:bf16,grouped_mm:bf16")
    args = ap.parse_args()
    import torch
    from tokenizers import Tokenizer
    import make_golden as mg
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    tok = Tokenizer.from_file(str(ROOT / "resources/models/glm5-next-tiny/tokenizer.json"))
    held = mc.load_heldout(ROOT / "tests/e2e/data/heldout.jsonl")
    exs = list(mc.train_examples(6000, mc.heldout_keys_of(held)))
    data = tr.encode_examples(tok, exs)
    targs = argparse.Namespace(index_topk=128)
    text, top, vis = tr.model_spec(tok, targs)
    cfg, model, aux = tr.build(text, top, vis, dev, 1)
    model.set_attn_implementation("sdpa")
    tc = cfg.text_config
    mtp = tr.MTP(aux, tc.num_hidden_layers, tc.hidden_size, dev)
    mtp.layer.self_attn.config._attn_implementation = "sdpa"
    emb, head = mg.text_model(model).embed_tokens, model.lm_head
    params = [p for p in model.parameters() if p.requires_grad] + mtp.parameters()
    opt = torch.optim.AdamW(params, lr=1e-4)
    it = tr.batches(data, args.budget, random.Random(1), 448)
    fixed = [tr.collate(data, next(it), tc.pad_token_id, dev) for _ in range(args.steps + 3)]

    def step(ids, comp, bf16):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            h = model.model(input_ids=ids, use_cache=False).last_hidden_state
            logits = head(h).float()
            tgt = comp[:, 1:]
            loss = torch.nn.functional.cross_entropy(logits[:, :-1][tgt], ids[:, 1:][tgt])
            ml = mtp.forward(ids, h.float(), emb, head, tc.rms_norm_eps).float()
            t2 = comp[:, 2:]
            mloss = torch.nn.functional.cross_entropy(ml[:, :-2][t2], ids[:, 2:][t2])
        (loss + 0.3 * mloss).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    report = {"budget": args.budget, "variants": {}}
    for v in args.variants.split(","):
        impl, prec = v.split(":")
        try:
            model.set_experts_implementation(impl)
        except Exception as exc:  # noqa: BLE001
            print(f"{v}: cannot set ({exc!r})", flush=True)
            report["variants"][v] = {"error": repr(exc)}
            continue
        try:
            for ids, comp in fixed[:3]:
                step(ids, comp, prec == "bf16")
            torch.cuda.synchronize()
            t0, n = time.time(), 0
            for ids, comp in fixed[3:]:
                loss = step(ids, comp, prec == "bf16")
                n += ids.numel()
            torch.cuda.synchronize()
            dt = time.time() - t0
            r = {"s_per_step": dt / args.steps, "padded_tok_per_s": n / dt, "last_loss": float(loss)}
        except Exception as exc:  # noqa: BLE001
            r = {"error": repr(exc)[:500]}
        print(v, r, flush=True)
        report["variants"][v] = r

    model.set_experts_implementation("eager")
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for ids, comp in fixed[3:5]:
            step(ids, comp, False)
        torch.cuda.synchronize()
    ka = prof.key_averages()
    print(ka.table(sort_by="self_cpu_time_total", row_limit=30), flush=True)
    print(ka.table(sort_by="self_cuda_time_total", row_limit=20), flush=True)
    kernels = sum(e.count for e in ka if e.device_type.name == "CUDA")
    print(f"CUDA kernel events in 2 steps: {kernels}", flush=True)
    # where, by module: group the forward by top-level Python stack is not available cheaply; time the
    # main model's pieces instead by hooks on each layer's mixer and MLP
    times = {}

    def hook(name):
        def pre(mod, inp):
            torch.cuda.synchronize()
            times.setdefault(name, [0.0, 0])
            mod._t0 = time.time()

        def post(mod, inp, out):
            torch.cuda.synchronize()
            times[name][0] += time.time() - mod._t0
            times[name][1] += 1
        return pre, post

    tm = mg.text_model(model)
    hs = []
    for i, layer in enumerate(tm.layers):
        for nm, sub in layer.named_children():
            pre, post = hook(f"{type(sub).__name__}")
            hs += [sub.register_forward_pre_hook(pre), sub.register_forward_hook(post)]
    with torch.no_grad():
        for ids, comp in fixed[3:5]:
            model.model(input_ids=ids, use_cache=False)
    for h_ in hs:
        h_.remove()
    print("forward time by submodule type (2 batches, synchronised):", flush=True)
    for k, (t, c) in sorted(times.items(), key=lambda kv: -kv[1][0]):
        print(f"  {k:40s} {t * 1e3:9.1f} ms over {c} calls", flush=True)
    report["forward_by_module_ms"] = {k: v[0] * 1e3 for k, v in times.items()}
    report["kernel_events_2_steps"] = kernels
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "profile.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
