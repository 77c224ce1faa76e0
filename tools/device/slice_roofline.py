#!/usr/bin/env python3
"""Bytes moved per decode step of a glm5_next model, the bandwidth a measured decode achieved, and the
extrapolation of a full-width slice to GLM-5.3-Flash's 45 layers on 2 x GB10 (issue 6, benchmark 3;
docs/PERFORMANCE_SLICE.md). python3 standard library only.

    slice_roofline.py prompts --batch 4 --length 256 [--vocab 154880] [--seed 1]
        prints B ';'-separated lists of random prompt ids (for `generate --prompt-ids A;B;C;D --concurrency B`)
    slice_roofline.py report --model SLICE_DIR --run gen_b1.json [--run gen_b2.json ...]
        [--bench bench.json | --copy-bw GBps] [--full-config tests/data/glm-5.3-flash.config.json]
        [--gb10-bw 273] [--gb10-copy-bw GBps] [--allreduce-us 25] [--json OUT.json] [--label TEXT] [--nominal-bw GBps]
        [--compute-only]

Each --run is the --json of `twinspark-cli generate --concurrency B` (cmd_generate_engine.cpp): its
decode_tok_s is the aggregate decode speed while all B requests run, concurrency is B.

THE BYTE MODEL (one decode step = one token for each of the B running sequences; weights are read once per
step whatever B is; what the recipe's checkpoint stores is what is counted):
  weights      BF16 matrices (2 B/value): attention / KDA projections, indexer, router, shared expert, dense
               MLP, mHC fn, lm_head; routed experts EXL3 at K bits (K/8 B/value, both dimensions padded to
               multiples of 128 as EXL3 stores them) plus their suh/svh, kept as fp32 on the device (4 B/value);
               small vectors (norms, biases, A_log, dt_bias, conv weights,
               mHC base/scale) as the fp32 copies the engine uploads (4 B/value).
  routed       the distinct experts among the step's draws: B tokens each pick top_k distinct experts of E;
               with independent uniform routing the expected number of distinct experts is
               E * (1 - (1 - top_k/E)^B)  (8, 15.8, 30.7 for B = 1, 2, 4 at E = 288, top_k = 8).
  embedding    one row (D x 2 B) per token.
  KDA state    per sequence and KDA layer, the fp32 state [H, Dk, Dv] read and written (2 x 4 MiB at real
               widths) and the conv tail (3 x H*Dk x (conv_kernel-1) fp32) read and written.
  DSA caches   per sequence and DSA layer: the fp8_ds_mla latent of every attended token (R + 4*ceil(R/128) +
               128 B = 656 B; attended = min(index_topk/kpool, complete pools) * kpool + the incomplete pool's
               tail) read, one latent written; the indexer's pooled keys (Di fp8 + one fp32 scale per complete
               pool) read; the raw k + gate (2 x Di bf16) of the tail read and of the new token written.
  not counted  activations (a few hundred KB per step, cache-resident), sampling, the host; the MTP block and
               the vision tower (no decode step without speculation or images runs them); each EXL3 linear's
               mul1 scalar (a kernel argument).
  tests/tools/test_slice_byte_model.py holds this model against the embedded model's checkpoint, tensor by
  tensor, and against `twinspark-cli plan`'s cache and state sizes.
Context per sequence: prompt + half the generated tokens (the mean over the decode window).

Achieved bandwidth = bytes per step x steps per second (= decode_tok_s / B); its fraction is taken of the
device-to-device copy bandwidth that bench-device measures (read + write bytes per second), as benchmark 1.

THE EXTRAPOLATION to 45 layers (the full config: 34 KDA + 11 DSA-MLA layers, layers 0-2 dense MLP, 42 MoE)
on 2 x GB10 with tensor parallelism 2 (the recipe's layout) -- assumptions, each printed with the result:
  A1 TP split as vLLM lays these models out: column/row-parallel matrices are halved per rank (KDA q/k/v/o,
     f_b, g_b, b_proj, conv and per-head vectors; MLA q_b, kv_b, o_proj; the dense MLP; the shared expert;
     every routed expert, split along its intermediate dimension; lm_head, vocabulary-parallel); replicated
     on both ranks: mHC, norms, MLA q_a / kv_a (ReplicatedLinear), the whole indexer, the router, KDA f_a /
     g_a. KDA states are split by heads; the MLA latent cache and the indexer keys are replicated (as vLLM
     and `twinspark-cli plan` hold them: 7,307 B per token per rank).
  A2 Bandwidth: each GB10 moves its bytes at the fraction of its copy bandwidth that the slice reached on the
     measuring GPU (the H200; once an H100) at the same batch. GB10's copy bandwidth is not measured here: by default it is the nominal 273 GB/s
     times the measuring GPU's measured-copy / nominal ratio (nominal: --nominal-bw, else the datasheet figure of
     the GPU --label names — H200 4,800 GB/s, H100 SXM 3,350 —, else the H200's; --gb10-copy-bw overrides it
     with a measured value). This is pessimistic where the H200 slice is bound by launches or integer work rather than by
     bytes (a GB10 has ~6x more SM per byte/s than an H200), optimistic if GB10 kernels are less tuned.
  A3 Communication: 2 all-reduces of the B x D bf16 sublayer output per layer (after the attention's o_proj
     and after the MoE / MLP down projection), one for the vocabulary-parallel embedding and one gather of the
     logits: 2 x 45 + 2 per step, each --allreduce-us of latency (default 25 us: an assumed NCCL small-message
     all-reduce over the CX7 RoCE link between the two GB10s; the recipe documents give no figure) plus
     2 x message / 25 GB/s (200 Gb/s CX7). Not overlapped with compute (each depends on the layer before).
  A4 Routing: independent and uniform across tokens (the formula above); real routing is correlated, which
     lowers the distinct experts for B > 1 (fewer bytes, faster).
  A5 Context: the slice's mean context. The recipe's published numbers (REQUIREMENTS.md) are at empty KV,
     400 generated tokens, so short context: the indexer's top-2048 selection is not yet binding there.
  A6 The recipe's 62.9 / 103.3 / 146.5 tok/s (aggregate, concurrency 1 / 2 / 4) include DFlash2 speculation
     (k = 7; 6.43 tokens per step at acceptance 0.918, structured prompts, concurrency 1). Our numbers are
     before speculation: one token per sequence per forward. For scale the report also gives the recipe's
     implied target forwards per second (per-stream tok/s / 6.43, assuming 6.43 tokens per step holds at
     concurrency 2 and 4 too, which is not published) and our bytes-based time of a forward that verifies
     8 positions per sequence (experts distinct among 8 x 8 x B draws; the drafter's own forward not counted).
"""
import argparse
import json
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FULL_CONFIG = os.path.join(ROOT, "tests", "data", "glm-5.3-flash.config.json")
H200_NOMINAL_GBPS = 4800.0  # HBM3e, NVIDIA's H200 datasheet
# Nominal memory bandwidth of the GPUs the slice is measured on, by a piece of the name nvidia-smi prints (first
# match wins): the datasheets' figures. Used only for A2's measured-copy / nominal ratio.
NOMINAL_BY_NAME = [("H200", 4800.0), ("H100 NVL", 3900.0), ("H100 PCIe", 2000.0), ("H100 80GB HBM3", 3350.0)]
GB10_NOMINAL_GBPS = 273.0   # LPDDR5x, per DGX Spark (design/ARCHITECTURE.md §6)
CX7_GBPS = 25.0             # 200 Gb/s
# REQUIREMENTS.md, "Benchmark": 2 x GB10, warm, empty KV, CUDA graphs, temp 0, thinking off, DFlash2 k = 7.
RECIPE = {1: (62.9, 62.9), 2: (103.3, 51.7), 4: (146.5, 37.1)}  # concurrency -> (aggregate, per stream)
RECIPE_TOKENS_PER_STEP = 6.43  # structured lab median, acceptance 0.918, concurrency 1
SPEC_POSITIONS = 8             # k + 1 positions verified per sequence per target forward (k = 7)


def text_config(path):
    with open(os.path.join(path, "config.json") if os.path.isdir(path) else path) as f:
        cfg = json.load(f)
    return cfg, cfg.get("text_config", cfg)


def distinct_experts(E, k, draws):
    return E * (1.0 - (1.0 - k / E) ** draws)


def pad128(n):
    return (n + 127) // 128 * 128


def step_bytes(tc, B, ctx, exl3_bits=4, positions=1, tp=1):
    """Bytes one rank moves in one decode step of B sequences at context ctx (tp=1: the whole model).
    Returns {category: bytes}. positions > 1: a forward that verifies that many positions per sequence."""
    D, V = tc["hidden_size"], tc["vocab_size"]
    n = tc["hc_mult"]
    mix = 2 * n + n * n
    H, R, ql = tc["num_attention_heads"], tc["kv_lora_rank"], tc["q_lora_rank"]
    dn, dv = tc["qk_nope_head_dim"], tc["v_head_dim"]
    Hi, Di, kp, topk = tc["index_n_heads"], tc["index_head_dim"], tc["index_kpool"], tc["index_topk"]
    Hk, Dk, K = tc["linear_num_heads"], tc["linear_head_dim"], tc["linear_conv_kernel_dim"]
    C = Hk * Dk
    E, top, I = tc["n_routed_experts"], tc["num_experts_per_tok"], tc["moe_intermediate_size"]
    Is = I * tc.get("n_shared_experts", 0)
    Id = tc["intermediate_size"]
    s = 1.0 / tp  # the share of a split tensor on one rank
    bf, f32 = 2, 4
    out = {"mhc+norms": 0.0, "kda weights": 0.0, "mla weights": 0.0, "indexer weights": 0.0, "router": 0.0,
           "shared expert": 0.0, "dense mlp": 0.0, "routed experts": 0.0, "embedding": 0.0, "lm_head": 0.0,
           "kda state": 0.0, "mla latent cache": 0.0, "indexer cache": 0.0}
    T = B * positions
    pools = ctx // kp
    tail = ctx % kp
    attended = min(topk // kp, pools) * kp + tail
    latent = R + 4 * math.ceil(R / 128) + 64 * 2  # fp8_ds_mla: 656 B at R = 512
    for L in range(tc["num_hidden_layers"]):
        out["mhc+norms"] += 2 * (mix * n * D * bf + (mix + 3) * f32) + 2 * D * f32
        if tc["layer_types"][L] == "linear_attention":
            out["kda weights"] += s * (4 * C * D * bf + 3 * C * K * f32 + 2 * C * Dk * bf + C * f32 + Hk * f32 +
                                       Hk * D * bf) + 2 * Dk * D * bf + Dk * f32
            out["kda state"] += B * s * 2 * (Hk * Dk * Dk * f32 + 3 * C * (K - 1) * f32)
        else:
            out["mla weights"] += (ql * D + R * D) * bf + (ql + R) * f32 + \
                s * (H * dn * ql + H * (dn + dv) * R + D * H * dv) * bf
            if tc["indexer_types"][L] == "full":
                out["indexer weights"] += (Hi * Di * ql + Di * D + Hi * D + Di * D) * bf + (2 * Di + kp * Di) * f32
                out["indexer cache"] += B * (pools * (Di + 4) + tail * 2 * Di * bf + 2 * Di * bf)
            out["mla latent cache"] += B * (attended + 1) * latent
        if tc["mlp_layer_types"][L] == "dense":
            out["dense mlp"] += s * 3 * Id * D * bf
        else:
            out["router"] += E * D * bf + E * f32
            out["shared expert"] += s * 3 * Is * D * bf
            # EXL3 pads both dimensions of a linear to multiples of 128 (specs/exl3.md §2.4) and the kernels
            # read the padded trellis; suh / svh are fp32 vectors of the padded in / out features.
            Dp, Ip = pad128(D), pad128(I)
            per_expert = 3 * Dp * Ip * exl3_bits / 8 + 3 * (Dp + Ip) * f32
            out["routed experts"] += s * distinct_experts(E, top, T) * per_expert
    out["embedding"] = T * D * bf * s
    out["lm_head"] = s * V * D * bf + D * f32
    return out


def comm_seconds(tc, B, latency_us, positions=1):
    n_ops = 2 * tc["num_hidden_layers"] + 2
    msg = B * positions * tc["hidden_size"] * 2
    return n_ops * (latency_us * 1e-6 + 2 * msg / (CX7_GBPS * 1e9))


def fmt_bytes(b):
    return f"{b / 1e9:.3f} GB" if b >= 1e8 else f"{b / 1e6:.2f} MB"


def cmd_prompts(a):
    lists = []
    for i in range(a.batch):
        r = random.Random(f"{a.seed}:{i}")
        lists.append(",".join(str(r.randrange(0, a.vocab)) for _ in range(a.length)))
    print(";".join(lists))


def nominal_bandwidth(given, label):
    """(GB/s, where it came from): the measuring GPU's datasheet bandwidth for A2's ratio."""
    if given:
        return given, "--nominal-bw"
    for piece, gbps in NOMINAL_BY_NAME:
        if piece in (label or ""):
            return gbps, f"datasheet of the {piece}"
    return H200_NOMINAL_GBPS, f"unknown GPU '{label}'"


def cmd_report(a):
    cfg, tc = text_config(a.model)
    slice_info = cfg.get("twinspark_slice", {})
    bits = int(slice_info.get("exl3_bits", 4))
    full_cfg, full = text_config(a.full_config)
    lines, warn = [], []
    p = lines.append

    copy_src = "--copy-bw"
    copy_bw = a.copy_bw
    if copy_bw is None and a.bench and os.path.exists(a.bench):
        with open(a.bench) as f:
            copy_bw = json.load(f).get("copy_bandwidth_GBps")
        copy_src = a.bench
    if copy_bw is None:
        copy_bw = H200_NOMINAL_GBPS
        copy_src = "NOT MEASURED: the H200's nominal 4,800 GB/s stands in"
        warn.append("no measured copy bandwidth: fractions are of the H200's nominal 4,800 GB/s")
    nominal, nominal_src = nominal_bandwidth(a.nominal_bw, a.label)
    if nominal_src.startswith("unknown") and not a.compute_only:  # only A2 (the extrapolation) uses it
        warn.append(f"{nominal_src}: A2's ratio uses the H200's nominal 4,800 GB/s (give --nominal-bw)")
    eta = min(1.0, copy_bw / nominal)
    gb10_copy = a.gb10_copy_bw if a.gb10_copy_bw else a.gb10_bw * eta
    gb10_src = "--gb10-copy-bw (given)" if a.gb10_copy_bw else \
        f"{a.gb10_bw:.0f} GB/s nominal x {eta:.3f} (this GPU's measured copy / its nominal {nominal:,.0f} GB/s, " \
        f"{nominal_src})"

    runs = []
    for path in a.run:
        if not os.path.exists(path):
            warn.append(f"missing run {path}")
            continue
        with open(path) as f:
            r = json.load(f)
        B = int(r.get("concurrency", 1))
        tps = float(r.get("decode_tok_s", 0.0))
        if tps <= 0:
            warn.append(f"{path}: no decode window (decode_tok_s = 0)")
            continue
        gen = int(r.get("generated_tokens", 0)) / max(1, B)
        ctx = int(r.get("prompt_tokens", 0) + gen / 2)
        toks = r.get("tokens", [])
        if B > 1 and toks and all(t == toks[0] for t in toks):
            warn.append(f"batch {B}: all requests generated the same tokens (same routing: the distinct-expert "
                        "count overstates the bytes)")
        if B > 1 and int(r.get("distinct_prompts", 1)) < B:
            warn.append(f"batch {B}: only {r.get('distinct_prompts', 1)} distinct prompt(s) for {B} requests")
        bb = step_bytes(tc, B, ctx, bits)
        total = sum(bb.values())
        steps = tps / B
        achieved = total * steps / 1e9
        runs.append({"batch": B, "decode_tok_s": tps, "step_ms": 1e3 / steps, "context": ctx,
                     "bytes_per_step": total, "bytes_per_token": total / B, "achieved_GBps": achieved,
                     "fraction_of_copy": achieved / copy_bw, "h200_copy_roofline_tok_s": B * copy_bw * 1e9 / total,
                     "breakdown": bb, "backend": r.get("backend", "?"), "source": os.path.basename(path),
                     "distinct_experts_assumed": distinct_experts(tc["n_routed_experts"], tc["num_experts_per_tok"], B)})
    runs.sort(key=lambda x: x["batch"])

    label = f" ({a.label})" if a.label else ""
    p(f"== Full-width slice{label}: {tc['num_hidden_layers']} layers {slice_info.get('pattern', '?')}, "
      f"{tc['n_routed_experts']} experts top-{tc['num_experts_per_tok']} at {bits} bpw, hidden {tc['hidden_size']}, "
      f"vocab {tc['vocab_size']}")
    p(f"copy bandwidth (read + write): {copy_bw:.1f} GB/s  [{copy_src}]")
    p("")
    p("measured (bytes by the model in slice_roofline.py's docstring; routed experts = expected distinct experts)")
    p(f"{'batch':>5} {'decode tok/s':>12} {'step ms':>8} {'ctx':>5} {'experts':>7} {'bytes/step':>11} "
      f"{'bytes/token':>11} {'GB/s':>8} {'of copy':>8} {'copy-roofline tok/s':>19}")
    for x in runs:
        p(f"{x['batch']:>5} {x['decode_tok_s']:>12.2f} {x['step_ms']:>8.3f} {x['context']:>5} "
          f"{x['distinct_experts_assumed']:>7.1f} {fmt_bytes(x['bytes_per_step']):>11} "
          f"{fmt_bytes(x['bytes_per_token']):>11} {x['achieved_GBps']:>8.1f} {100 * x['fraction_of_copy']:>7.1f}% "
          f"{x['h200_copy_roofline_tok_s']:>19.1f}")
    if runs:
        p("bytes per step by category (batch " + ", ".join(str(x["batch"]) for x in runs) + "):")
        for k in runs[0]["breakdown"]:
            p(f"  {k:<18} " + "  ".join(f"{fmt_bytes(x['breakdown'][k]):>11}" for x in runs))

    if a.compute_only:
        # A run on an SM partition (TS_CUDA_SMS; scripts/gpu/partition_check.sh): how fast that many SMs get through
        # a step with the measuring GPU's memory behind them. Its fraction of copy is not a GB10 fraction, so no
        # extrapolation; what it answers is whether a GB10's 48 SMs could consume its 273 GB/s.
        for x in runs:
            x["gb10_nominal_multiple"] = x["achieved_GBps"] / a.gb10_bw
        p(f"on an SM partition (--compute-only): the step's bytes per second against a GB10's nominal "
          f"{a.gb10_bw:.0f} GB/s: " + "; ".join(f"b{x['batch']}: {x['gb10_nominal_multiple']:.2f}x" for x in runs))
        for w in warn:
            p(f"WARNING: {w}")
        print("\n".join(lines))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"label": a.label, "compute_only": True, "copy_bandwidth_GBps": copy_bw,
                           "copy_bandwidth_source": copy_src, "gb10_nominal_GBps": a.gb10_bw, "measured": runs,
                           "warnings": warn}, f, indent=1)
        return 0

    # ---- extrapolation -------------------------------------------------------------------------------
    ext = []
    for x in runs:
        B = x["batch"]
        ctx = x["context"]
        per_rank = sum(step_bytes(full, B, ctx, bits, tp=2).values())
        whole = sum(step_bytes(full, B, ctx, bits, tp=1).values())
        bw = x["fraction_of_copy"] * gb10_copy * 1e9
        t_mem = per_rank / bw
        t_comm = comm_seconds(full, B, a.allreduce_us)
        t = t_mem + t_comm
        roof = B * a.gb10_bw * 1e9 / per_rank
        spec_rank = sum(step_bytes(full, B, ctx, bits, positions=SPEC_POSITIONS, tp=2).values())
        t_spec = spec_rank / bw + comm_seconds(full, B, a.allreduce_us, SPEC_POSITIONS)
        rec = RECIPE.get(B)
        e = {"batch": B, "whole_model_bytes_per_step": whole, "per_rank_bytes_per_step": per_rank,
             "fraction_carried_over": x["fraction_of_copy"], "gb10_effective_GBps": bw / 1e9,
             "t_mem_ms": 1e3 * t_mem, "t_comm_ms": 1e3 * t_comm, "step_ms": 1e3 * t,
             "tok_s_aggregate": B / t, "tok_s_per_stream": 1 / t,
             "roofline_tok_s_aggregate": roof,
             "comm_sensitivity_tok_s": {f"{us}us": B / (t_mem + comm_seconds(full, B, us)) for us in (0, 10, 25, 50)},
             "verify8_step_ms": 1e3 * t_spec}
        if rec:
            e.update({"recipe_tok_s_aggregate": rec[0], "recipe_tok_s_per_stream": rec[1],
                      "recipe_implied_forward_ms": 1e3 * RECIPE_TOKENS_PER_STEP / rec[1]})
        ext.append(e)

    n_kda = sum(t == "linear_attention" for t in full["layer_types"])
    n_dense = sum(t == "dense" for t in full["mlp_layer_types"])
    p("")
    p(f"extrapolation: {full['num_hidden_layers']} layers ({n_kda} KDA, {full['num_hidden_layers'] - n_kda} DSA-MLA; "
      f"{n_dense} dense MLP, {full['num_hidden_layers'] - n_dense} MoE) on 2 x GB10, TP 2, before speculation")
    p(f"  GB10 copy bandwidth: {gb10_copy:.1f} GB/s = {gb10_src}; all-reduce {a.allreduce_us:g} us each "
      f"({2 * full['num_hidden_layers'] + 2} per step)")
    p(f"{'batch':>5} {'bytes/step/rank':>15} {'of copy':>8} {'GB/s':>7} {'mem ms':>7} {'comm ms':>7} "
      f"{'tok/s':>8} {'per stream':>10} {'roofline':>8} | {'recipe':>7} {'per stream':>10}")
    for e in ext:
        rec = f"{e.get('recipe_tok_s_aggregate', float('nan')):>7.1f} {e.get('recipe_tok_s_per_stream', float('nan')):>10.1f}"
        p(f"{e['batch']:>5} {fmt_bytes(e['per_rank_bytes_per_step']):>15} {100 * e['fraction_carried_over']:>7.1f}% "
          f"{e['gb10_effective_GBps']:>7.1f} {e['t_mem_ms']:>7.2f} {e['t_comm_ms']:>7.2f} {e['tok_s_aggregate']:>8.2f} "
          f"{e['tok_s_per_stream']:>10.2f} {e['roofline_tok_s_aggregate']:>8.2f} | {rec}")
    p("  roofline = 100 % of 273 GB/s per GB10, no communication. recipe = WITH DFlash2 speculation (k = 7).")
    p("  all-reduce sensitivity, tok/s aggregate at 0 / 10 / 25 / 50 us: " + "; ".join(
        f"b{e['batch']}: " + " / ".join(f"{v:.1f}" for v in e["comm_sensitivity_tok_s"].values()) for e in ext))
    p("  for scale (A6): recipe's implied ms per target forward (per-stream tok/s / 6.43) vs ours for a forward "
      "verifying 8 positions per sequence: " + "; ".join(
        f"b{e['batch']}: {e.get('recipe_implied_forward_ms', float('nan')):.0f} vs {e['verify8_step_ms']:.1f} ms"
        for e in ext))
    p("  assumptions A1-A6: tools/device/slice_roofline.py docstring and docs/PERFORMANCE_SLICE.md.")
    for w in warn:
        p(f"WARNING: {w}")
    text = "\n".join(lines)
    print(text)

    if a.json:
        doc = {"label": a.label, "slice": {"dir": a.model, **slice_info, "num_hidden_layers": tc["num_hidden_layers"],
                                           "n_routed_experts": tc["n_routed_experts"]},
               "copy_bandwidth_GBps": copy_bw, "copy_bandwidth_source": copy_src,
               "measuring_gpu_nominal_GBps": nominal,
               "gb10": {"nominal_GBps": a.gb10_bw, "copy_GBps_assumed": gb10_copy, "source": gb10_src,
                        "allreduce_us": a.allreduce_us, "allreduces_per_step": 2 * full["num_hidden_layers"] + 2},
               "measured": runs, "extrapolation_45_layers_2xGB10_tp2": ext,
               "recipe": {"tok_s": {str(k): v[0] for k, v in RECIPE.items()},
                          "per_stream": {str(k): v[1] for k, v in RECIPE.items()},
                          "speculation": "DFlash2 k=7, 6.43 tokens/step at concurrency 1 (structured)"},
               "warnings": warn}
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("prompts")
    pr.add_argument("--batch", type=int, required=True)
    pr.add_argument("--length", type=int, required=True)
    pr.add_argument("--vocab", type=int, default=154880)
    pr.add_argument("--seed", type=int, default=1)
    rp = sub.add_parser("report")
    rp.add_argument("--model", required=True, help="the slice directory (its config.json) or a config.json")
    rp.add_argument("--run", action="append", default=[])
    rp.add_argument("--bench", help="bench-device --json output (copy_bandwidth_GBps)")
    rp.add_argument("--copy-bw", type=float, help="device copy bandwidth, GB/s (read + write)")
    rp.add_argument("--full-config", default=FULL_CONFIG)
    rp.add_argument("--gb10-bw", type=float, default=GB10_NOMINAL_GBPS)
    rp.add_argument("--gb10-copy-bw", type=float, default=0.0)
    rp.add_argument("--allreduce-us", type=float, default=25.0)
    rp.add_argument("--label", default="", help="the GPU's name as nvidia-smi prints it (picks its nominal bandwidth)")
    rp.add_argument("--nominal-bw", type=float, default=0.0, help="the measuring GPU's nominal bandwidth, GB/s")
    rp.add_argument("--compute-only", action="store_true",
                    help="a run on an SM partition (TS_CUDA_SMS): the measured table and its rate against a GB10's "
                         "nominal bandwidth, no extrapolation")
    rp.add_argument("--json")
    a = ap.parse_args()
    if a.cmd == "report" and a.nominal_bw < 0:
        ap.error(f"--nominal-bw must be a bandwidth in GB/s (> 0), got {a.nominal_bw:g}")
    return cmd_prompts(a) if a.cmd == "prompts" else cmd_report(a)


if __name__ == "__main__":
    sys.exit(main())
