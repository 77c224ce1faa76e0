#!/usr/bin/env python3
"""Writes a "full-width slice" of GLM-5.3-Flash: a glm5_next checkpoint with the model's REAL text widths
and a few layers of random weights, for issue 6's benchmark 3 (docs/PERFORMANCE_SLICE.md).

    make_slice_model.py OUT_DIR [--layers 4] [--pattern LLLD] [--dense-layers 0] [--experts 288]
                                [--codebook mul1|mcg] [--config tests/data/glm-5.3-flash.config.json]
                                [--jobs N] [--seed 1]

Widths (hidden 4096, 64 heads of 256, KDA 64x128, MLA latent 512, q_lora 1536, indexer 32x128 top-2048
kpool 16, MoE 2048-wide experts top-8, dense MLP 12288, vocab 154,880, mHC 4 streams) come from --config,
by default tests/data/glm-5.3-flash.config.json (a copy of shared/specs/glm-5.3-flash.config.json, which is
transformers 5.17's Glm5NextConfig() default). The options change only counts, never widths:
  --layers N       number of decoder layers (default 4)
  --pattern P      one letter per layer: L = KDA linear attention, D = DSA-MLA with a full indexer.
                   Default: the real schedule's first N entries (layers 0-3 are L L L D: the real 3:1 ratio).
  --dense-layers K the first K layers get the dense SwiGLU MLP (intermediate 12288); the rest are MoE.
                   Default 0: every slice layer is MoE. The real model has 3 dense layers of 45 (layers
                   0-2), 42 MoE; in a 4-layer slice a dense layer would weigh 25 % instead of 7 %, so the
                   slice measures the MoE layer type and the roofline calculator (slice_roofline.py) adds
                   the 3 dense layers to the 45-layer extrapolation by their bytes. --dense-layers 3
                   reproduces the real first layers instead.
  --experts E      routed experts per layer (default: the config's 288; top-k stays 8). Only for quick
                   checks on small machines: the benchmark uses 288.
  --codebook C     the routed experts' EXL3 codebook: mul1 (default: current conversions) or mcg (the
                   recipe's checkpoint, REQUIREMENTS.md); the flag tensor and quantization_config follow.
No MTP layer (num_nextn_predict_layers 0) and no vision tower: benchmark 3 times plain decode.

Weights:
  routed experts   EXL3, K = 4 bits, MUL1 codebook (exllamav3's default; --codebook mcg: MCG), stored per
                   expert as exllamav3 writes them: experts.{e}.{gate,up,down}_proj.{trellis I16 [k/16, n/16,
                   64], suh F16 [k], svh F16 [n], mul1 (or mcg) I32 []}. The trellis is random bytes: every
                   bitstream is a valid EXL3 weight (shared/specs/exl3.md §3); MUL1 values have RMS 1, so
                   W = diag(suh) H W^ H diag(svh) has entries of std |suh||svh|: suh = random sign x 2^-6 x
                   [1, 1.25), svh = random sign x [1, 1.25): std ~ 0.0198, i.e. 1.27/sqrt(fan_in) for gate/up
                   (fan_in 4096) and 0.9/sqrt(fan_in) for down (fan_in 2048).
  everything else  BF16 (what the recipe's checkpoint keeps unquantized: attention, KDA, indexer, router,
                   shared expert, dense MLP, mHC, norms, embedding, lm_head), with make_golden.py's scales:
                   matrices std ~ 1/sqrt(fan_in), norms ~ 1, mHC fn 1/sqrt(4D), base N(0,1), scale
                   0.5 + U(0,1), A_log 0.5 N, dt_bias 1.5 N - 2, router 1/sqrt(D), correction bias 0.1 N,
                   embedding ~ 0.76 (make_golden: N(0,1)). Large matrices are drawn fast: random sign, a
                   fixed power-of-two exponent and a random mantissa, so |w| is uniform in [a, 2a) with
                   a = the power of two nearest to std / 1.53: the std is within a factor sqrt(2) of the
                   target (activations stay finite through the rmsnorms; the values themselves are noise).
Random bytes come from Python's seeded generator per tensor (--seed): a rerun writes the same files.

Output: model-000NN-of-000MM.safetensors shards (one for the embedding, one for lm_head + final norm, one
per layer for its non-expert tensors, and the experts split into shards of about --shard-gb), their
model.safetensors.index.json, generation_config.json, and config.json written LAST (it marks the directory
complete). If OUT_DIR already holds a complete slice with the same parameters it is reused (--force
rewrites). Shards are written in parallel (--jobs, default: all cores). python3 standard library only.
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import time
from multiprocessing import get_context

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_CONFIG = os.path.join(ROOT, "tests", "data", "glm-5.3-flash.config.json")
PREFIX = "model.language_model."
MUL1_FLAG = -2082680531  # int32 view of exllamav3's locked MUL1 multiplier 0x83DCD12D (exl3.md §2.1)
MCG_FLAG = -877912083    # int32 view of the MCG multiplier 0xCBAC1FED (exl3.md §2.1)
CODEBOOK_FLAGS = {"mul1": MUL1_FLAG, "mcg": MCG_FLAG}  # --codebook: its flag tensor's name and value
EXL3_BITS = 4
CHUNK = 16 << 20  # elements (or bytes) drawn per step: bounds the memory of each writer process
DTYPE_SIZE = {"BF16": 2, "F16": 2, "I16": 2, "I32": 4, "F32": 4}


# ---------------------------------------------------------------------------------------------------------
# Tensor specifications: (name, dtype, shape, kind, params). Values are produced only in the writer.
#   ("bf16_fast", exp)      random sign, |w| = 2^exp * (1 + m/128), m uniform in 0..127
#   ("bf16_list", fn)       small tensors: fn(rng) -> one float, rounded to bf16 (fn named in GEN below)
#   ("f16_scale", exp)      random sign, |w| = 2^exp * (1 + m/1024), m uniform in 0..255
#   ("random_bytes", None)  the trellis
#   ("i32_const", value)
# ---------------------------------------------------------------------------------------------------------
GEN = {
    "norm": lambda r: 1.0 + 0.1 * r.gauss(0.0, 1.0),
    "small": lambda r: 0.1 * r.gauss(0.0, 1.0),
    "normal": lambda r: r.gauss(0.0, 1.0),
    "hc_scale": lambda r: 0.5 + r.random(),
    "a_log": lambda r: 0.5 * r.gauss(0.0, 1.0),
    "dt_bias": lambda r: 1.5 * r.gauss(0.0, 1.0) - 2.0,
}


def fast_exp(std):
    """Exponent of the power of two a with 1.53 a closest (in log) to std: |w| uniform in [a, 2a)."""
    return int(round(math.log2(std / math.sqrt(7.0 / 3.0))))


def mat(name, rows, cols, std=None):
    return (name, "BF16", [rows, cols], "bf16_fast", fast_exp(std if std is not None else 1.0 / math.sqrt(cols)))


def vec(name, shape, gen):
    return (name, "BF16", list(shape), "bf16_list", gen)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def nbytes(spec):
    return numel(spec[2]) * DTYPE_SIZE[spec[1]]


def mlp_specs(p, D, I):
    return [mat(p + ".gate_proj.weight", I, D), mat(p + ".up_proj.weight", I, D), mat(p + ".down_proj.weight", D, I)]


def exl3_specs(p, k, n, codebook):
    """One EXL3 linear with in_features k and out_features n (both multiples of 128), codebook mul1 or mcg."""
    return [(p + ".trellis", "I16", [k // 16, n // 16, 16 * EXL3_BITS], "random_bytes", None),
            (p + ".suh", "F16", [k], "f16_scale", -6),  # 2^-6 = 1/sqrt(4096)
            (p + ".svh", "F16", [n], "f16_scale", 0),
            (p + "." + codebook, "I32", [], "i32_const", CODEBOOK_FLAGS[codebook])]


def expert_specs(p, e, D, I, codebook):
    q = f"{p}.experts.{e}"
    return (exl3_specs(q + ".gate_proj", D, I, codebook) + exl3_specs(q + ".up_proj", D, I, codebook)
            + exl3_specs(q + ".down_proj", I, D, codebook))


def layer_specs(L, linear, dense, c):
    """Every tensor of layer L except its routed experts (names as transformers' save_pretrained writes)."""
    D, p = c["hidden_size"], f"{PREFIX}layers.{L}"
    n = c["hc_mult"]
    mix = 2 * n + n * n
    s = []
    for site in ("attn", "ffn"):
        s += [mat(f"{p}.hc_{site}_fn", mix, n * D), vec(f"{p}.hc_{site}_base", [mix], "normal"),
              vec(f"{p}.hc_{site}_scale", [3], "hc_scale")]
    s += [vec(p + ".input_layernorm.weight", [D], "norm"), vec(p + ".post_attention_layernorm.weight", [D], "norm")]
    a = p + ".self_attn"
    if linear:  # KDA (glm_dsa.md §8.3, §11.7-9)
        H, Dk, K = c["linear_num_heads"], c["linear_head_dim"], c["linear_conv_kernel_dim"]
        C = H * Dk
        s += [mat(a + ".q_proj.weight", C, D), mat(a + ".k_proj.weight", C, D), mat(a + ".v_proj.weight", C, D)]
        s += [(a + f".{x}_conv1d.weight", "BF16", [C, 1, K], "bf16_fast", fast_exp(1.0 / math.sqrt(K)))
              for x in ("q", "k", "v")]
        s += [mat(a + ".f_a_proj.weight", Dk, D), mat(a + ".f_b_proj.weight", C, Dk),
              vec(a + ".dt_bias", [C], "dt_bias"), vec(a + ".A_log", [H], "a_log"),
              mat(a + ".b_proj.weight", H, D), mat(a + ".g_a_proj.weight", Dk, D), mat(a + ".g_b_proj.weight", C, Dk),
              vec(a + ".o_norm.weight", [Dk], "norm"), mat(a + ".o_proj.weight", D, C)]
    else:  # DSA-MLA, NoPE, with a full k-pool indexer (§8.2, §11.4)
        H, R, ql = c["num_attention_heads"], c["kv_lora_rank"], c["q_lora_rank"]
        dn, dv = c["qk_nope_head_dim"], c["v_head_dim"]
        Hi, Di, kp = c["index_n_heads"], c["index_head_dim"], c["index_kpool"]
        s += [mat(a + ".q_a_proj.weight", ql, D), vec(a + ".q_a_layernorm.weight", [ql], "norm"),
              mat(a + ".q_b_proj.weight", H * dn, ql), mat(a + ".kv_a_proj_with_mqa.weight", R, D),
              vec(a + ".kv_a_layernorm.weight", [R], "norm"), mat(a + ".kv_b_proj.weight", H * (dn + dv), R),
              mat(a + ".o_proj.weight", D, H * dv)]
        i = a + ".indexer"
        s += [mat(i + ".wq_b.weight", Hi * Di, ql), mat(i + ".wk.weight", Di, D),
              vec(i + ".k_norm.weight", [Di], "norm"), vec(i + ".k_norm.bias", [Di], "small"),
              mat(i + ".weights_proj.weight", Hi, D), mat(i + ".index_kpool_compress_gate", Di, D),
              vec(i + ".index_kpool_compress_ape", [kp, Di], "normal")]
    m = p + ".mlp"
    if dense:
        s += mlp_specs(m, D, c["intermediate_size"])
    else:
        E, I = c["n_routed_experts"], c["moe_intermediate_size"]
        s += [mat(m + ".gate.weight", E, D), vec(m + ".gate.e_score_correction_bias", [E], "small")]
        s += mlp_specs(m + ".shared_experts", D, I * c["n_shared_experts"])
    return s


# ---------------------------------------------------------------------------------------------------------
# Value generation and the safetensors writer
# ---------------------------------------------------------------------------------------------------------
def bf16_bits(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def write_values(f, spec, rng):
    name, dtype, shape, kind, param = spec
    n = numel(shape)
    if kind == "random_bytes":
        left = n * DTYPE_SIZE[dtype]
        while left:
            k = min(left, CHUNK)
            f.write(rng.randbytes(k))
            left -= k
    elif kind == "bf16_fast":  # one random byte per value: sign bit + 7 mantissa bits; fixed exponent
        E = param + 127
        assert 1 <= E <= 254, name
        lo = bytes(((E & 1) << 7) | (b & 0x7F) for b in range(256))
        hi = bytes((b & 0x80) | (E >> 1) for b in range(256))
        left = n
        while left:
            k = min(left, CHUNK)
            r = rng.randbytes(k)
            out = bytearray(2 * k)
            out[0::2] = r.translate(lo)
            out[1::2] = r.translate(hi)
            f.write(out)
            left -= k
    elif kind == "f16_scale":  # random sign; mantissa's low 8 bits random, so |w| in 2^exp * [1, 1.25)
        E = param + 15
        assert 1 <= E <= 30, name
        r = rng.randbytes(2 * n)
        hi = bytes((b & 0x80) | (E << 2) for b in range(256))
        out = bytearray(r)
        out[1::2] = r[1::2].translate(hi)
        f.write(out)
    elif kind == "bf16_list":
        g = GEN[param]
        f.write(struct.pack(f"<{n}H", *(bf16_bits(g(rng)) for _ in range(n))))
    elif kind == "i32_const":
        f.write(struct.pack("<i", param))
    else:
        raise ValueError(kind)


def header_bytes(specs):
    header, off = {"__metadata__": {"format": "pt", "twinspark": "full-width slice, random weights"}}, 0
    for spec in specs:
        b = nbytes(spec)
        header[spec[0]] = {"dtype": spec[1], "shape": spec[2], "data_offsets": [off, off + b]}
        off += b
    hb = json.dumps(header, separators=(",", ":")).encode()
    return hb + b" " * ((8 - len(hb) % 8) % 8), off


def write_shard(task):
    path, specs, seed = task
    t0 = time.time()
    hb, total = header_bytes(specs)
    tmp = path + ".tmp"
    with open(tmp, "wb", buffering=8 << 20) as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for spec in specs:
            write_values(f, spec, random.Random(f"{seed}:{spec[0]}"))
    os.replace(tmp, path)
    return os.path.basename(path), 8 + len(hb) + total, time.time() - t0


# ---------------------------------------------------------------------------------------------------------
def build_config(base, args):
    cfg = json.loads(json.dumps(base))
    tc = cfg["text_config"]
    real_types = tc["layer_types"]
    N = args.layers
    if args.pattern:
        pattern = args.pattern.upper()
        if len(pattern) != N or set(pattern) - {"L", "D"}:
            raise SystemExit(f"--pattern must be {N} letters L (KDA) / D (DSA-MLA), got '{args.pattern}'")
    else:
        if N > len(real_types):
            raise SystemExit(f"--layers {N} exceeds the config's {len(real_types)} layers: give --pattern")
        pattern = "".join("L" if t == "linear_attention" else "D" for t in real_types[:N])
    if not 0 <= args.dense_layers <= N:
        raise SystemExit("--dense-layers must be in 0..--layers")
    E = args.experts or tc["n_routed_experts"]
    if E < tc["num_experts_per_tok"]:
        raise SystemExit(f"--experts {E} is below num_experts_per_tok {tc['num_experts_per_tok']}")
    tc["num_hidden_layers"] = N
    tc["layer_types"] = ["linear_attention" if ch == "L" else "deepseek_sparse_attention" for ch in pattern]
    tc["mlp_layer_types"] = ["dense" if L < args.dense_layers else "sparse" for L in range(N)]
    tc["indexer_types"] = ["full"] * N
    tc["n_routed_experts"] = E
    tc["num_nextn_predict_layers"] = 0
    cfg["dtype"] = "bfloat16"
    cfg["quantization_config"] = {"quant_method": "exl3", "version": "twinspark-slice", "bits": float(EXL3_BITS),
                                  "head_bits": 16, "codebook": args.codebook, "out_scales": "always"}
    cfg["twinspark_random_weights"] = True
    cfg["twinspark_slice"] = {"layers": N, "pattern": pattern, "dense_layers": args.dense_layers, "experts": E,
                              "exl3_bits": EXL3_BITS, "codebook": args.codebook, "seed": args.seed,
                              "source_config": os.path.relpath(os.path.abspath(args.config), ROOT)}
    return cfg, pattern


def plan_shards(cfg, pattern, shard_bytes):
    """Lists of tensor specs, one per shard file; the experts of a layer are split into ~shard_bytes pieces."""
    tc = cfg["text_config"]
    D, V = tc["hidden_size"], tc["vocab_size"]
    shards = [[mat(PREFIX + "embed_tokens.weight", V, D, std=1.0)],
              [mat("lm_head.weight", V, D), vec(PREFIX + "norm.weight", [D], "norm")]]
    for L, ch in enumerate(pattern):
        dense = tc["mlp_layer_types"][L] == "dense"
        shards.append(layer_specs(L, ch == "L", dense, tc))
        if dense:
            continue
        E, I = tc["n_routed_experts"], tc["moe_intermediate_size"]
        cb = cfg["quantization_config"]["codebook"]
        per_expert = sum(nbytes(s) for s in expert_specs("x", 0, D, I, cb))
        group = max(1, shard_bytes // per_expert)
        for e0 in range(0, E, group):
            shards.append([s for e in range(e0, min(E, e0 + group))
                           for s in expert_specs(f"{PREFIX}layers.{L}.mlp", e, D, I, cb)])
    return shards


def complete(out, cfg):
    """True when OUT already holds a complete slice written with the same parameters."""
    try:
        with open(os.path.join(out, "config.json")) as f:
            old = json.load(f)
        with open(os.path.join(out, "model.safetensors.index.json")) as f:
            index = json.load(f)
    except (OSError, ValueError):
        return False
    if old != cfg:
        return False
    sizes = index.get("metadata", {}).get("shard_bytes", {})
    return bool(sizes) and all(os.path.isfile(os.path.join(out, n)) and os.path.getsize(os.path.join(out, n)) == b
                               for n, b in sizes.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--pattern", default="")
    ap.add_argument("--dense-layers", type=int, default=0)
    ap.add_argument("--experts", type=int, default=0)
    ap.add_argument("--codebook", choices=sorted(CODEBOOK_FLAGS), default="mul1")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shard-gb", type=float, default=0.5)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    if args.layers < 1:
        raise SystemExit("--layers must be >= 1")
    with open(args.config) as f:
        base = json.load(f)
    cfg, pattern = build_config(base, args)
    out = args.out
    if not args.force and complete(out, cfg):
        print(f"make_slice_model: {out} already holds this slice ({pattern}, {cfg['text_config']['n_routed_experts']} "
              f"experts): reused", flush=True)
        return
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):  # a previous, different or partial slice
        if name.startswith("model") and (".safetensors" in name) or name == "config.json":
            os.remove(os.path.join(out, name))

    shards = plan_shards(cfg, pattern, int(args.shard_gb * 1e9))
    M = len(shards)
    names = [f"model-{i + 1:05d}-of-{M:05d}.safetensors" for i in range(M)]
    total = sum(nbytes(s) for sh in shards for s in sh)
    weight_map = {s[0]: names[i] for i, sh in enumerate(shards) for s in sh}
    print(f"make_slice_model: {out}: {args.layers} layers {pattern}, "
          f"{cfg['text_config']['n_routed_experts']} experts x {EXL3_BITS} bpw, {len(weight_map)} tensors, "
          f"{total / 1e9:.2f} GB in {M} shards, {args.jobs} jobs", flush=True)
    order = sorted(range(M), key=lambda i: -sum(nbytes(s) for s in shards[i]))  # largest first
    tasks = [(os.path.join(out, names[i]), shards[i], args.seed) for i in order]
    t0, done, written, sizes = time.time(), 0, 0, {}
    with get_context("fork").Pool(max(1, min(args.jobs, M))) as pool:
        for name, size, _ in pool.imap_unordered(write_shard, tasks):
            done += 1
            written += size
            sizes[name] = size
            el = time.time() - t0
            if done == M or done % max(1, M // 10) == 0:
                print(f"  [{done}/{M}] {written / 1e9:.2f} GB in {el:.1f} s ({written / 1e9 / max(el, 1e-9):.2f} GB/s)",
                      flush=True)
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total, "shard_bytes": sizes}, "weight_map": weight_map}, f, indent=1)
    tc = cfg["text_config"]
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": tc["eos_token_id"], "pad_token_id": tc["pad_token_id"]}, f, indent=2)
    tmp = os.path.join(out, "config.json.tmp")
    with open(tmp, "w") as f:
        json.dump(cfg, f, indent=2)
    os.replace(tmp, os.path.join(out, "config.json"))
    el = time.time() - t0
    print(f"make_slice_model: wrote {total / 1e9:.2f} GB in {el:.1f} s ({total / 1e9 / max(el, 1e-9):.2f} GB/s)",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
