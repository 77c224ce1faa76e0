#!/usr/bin/env python3
"""tools/device/slice_roofline.py's byte model (step_bytes) held against what it models, on the EXL3 embedded
model (resources/models/glm5-next-tiny-exl3: the glm5_next layout with KDA and DSA-MLA layers, a dense and MoE
layers, routed experts in EXL3 at 4 bits, so every term of the model is exercised).

- Weights: each tensor of the checkpoint's header is put in one of the model's categories by its name and counted
  as the engine holds it (engine/model/weights.h: matrices stay views of the checkpoint at its dtype, the vectors
  that weights.cpp reads with `vec` are uploaded as fp32, an EXL3 linear's suh / svh are fp32, kernels/backend.h);
  the sums must equal step_bytes' weight categories at batch 1. A tensor that fits no category fails the test, so
  a new kind of weight has to be placed in the model. Left out, as the model leaves them out: the MTP block (layer
  num_hidden_layers) and the vision tower, which no plain decode step runs, and each EXL3 linear's mul1 scalar.
- Caches and states: step_bytes' KDA state traffic and latent bytes per attended token against `twinspark-cli
  plan`'s own figures for the same config (what the engine allocates: state bytes per request, latent bytes per
  token), at TP 1 and 2.
The CLI is $TWINSPARK_CLI (CTest sets it) or build/app/twinspark-cli; without either the test fails. Standard
library only; CTest runs it (label unit).
"""
import importlib.util
import json
import os
import re
import struct
import subprocess
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "device", "slice_roofline.py")
MODEL = os.path.join(ROOT, "resources", "models", "glm5-next-tiny-exl3")

_spec = importlib.util.spec_from_file_location("slice_roofline", SCRIPT)
roofline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(roofline)

DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I16": 2, "I32": 4}

# Tensors weights.cpp reads with `vec` (uploaded as fp32 buffers), by the end of their names (and the final norm,
# by its whole name); and EXL3's suh / svh.
FP32_SUFFIXES = ("hc_attn_base", "hc_attn_scale", "hc_ffn_base", "hc_ffn_scale", "input_layernorm.weight",
                 "post_attention_layernorm.weight", "conv1d.weight", "dt_bias", "A_log", "o_norm.weight",
                 "q_a_layernorm.weight", "kv_a_layernorm.weight", "k_norm.weight", "k_norm.bias",
                 "index_kpool_compress_ape", "e_score_correction_bias", ".suh", ".svh")
KDA_NAMES = re.compile(r"self_attn\.([qkvo]_proj|[qkv]_conv1d|conv1d|[fg]_[ab]_proj|b_proj|dt_bias|A_log|o_norm)\b")


def checkpoint_tensors(model_dir):
    """{name: (dtype, shape, bytes in the file)} over every .safetensors file of model_dir."""
    out = {}
    for fn in sorted(os.listdir(model_dir)):
        if not fn.endswith(".safetensors"):
            continue
        with open(os.path.join(model_dir, fn), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        for name, t in header.items():
            if name != "__metadata__":
                out[name] = (t["dtype"], t["shape"], t["data_offsets"][1] - t["data_offsets"][0])
    return out


def engine_bytes(name, dtype, shape, nbytes):
    if name.endswith(FP32_SUFFIXES) or name == "model.language_model.norm.weight":
        count = 1
        for d in shape:
            count *= d
        return 4 * count
    return nbytes


def categorise(name, tc):
    """step_bytes' category of a checkpoint tensor, None for one the model leaves out; raises for an unknown one."""
    if name.startswith("model.visual."):
        return None
    if name == "lm_head.weight":
        return "lm_head"
    p = "model.language_model."
    if not name.startswith(p):
        raise ValueError(f"{name}: outside the language model and not the vision tower or lm_head")
    rest = name[len(p):]
    if rest == "norm.weight":
        return "lm_head"  # the final norm is counted with the head
    if rest == "embed_tokens.weight":
        return "embedding"
    m = re.match(r"layers\.(\d+)\.(.+)$", rest)
    if not m:
        raise ValueError(f"{name}: no category in the byte model")
    layer, t = int(m.group(1)), m.group(2)
    if layer >= tc["num_hidden_layers"]:
        return None  # the MTP block
    linear = tc["layer_types"][layer] == "linear_attention"
    if re.match(r"hc_(attn|ffn)_(fn|base|scale)$", t) or t in ("input_layernorm.weight",
                                                                 "post_attention_layernorm.weight"):
        return "mhc+norms"
    if t.startswith("self_attn.indexer."):
        return "indexer weights"
    if linear and KDA_NAMES.match(t):
        return "kda weights"
    if not linear and re.match(r"self_attn\.(q_a_proj|q_a_layernorm|q_b_proj|kv_a_proj_with_mqa|kv_a_layernorm|"
                               r"kv_b_proj|o_proj)\.weight$", t):
        return "mla weights"
    if t.startswith("mlp.gate."):
        return "router"
    if t.startswith("mlp.shared_experts."):
        return "shared expert"
    if re.match(r"mlp\.experts\.\d+\.(gate|up|down)_proj\.(trellis|suh|svh)$", t):
        return "routed experts"
    if re.match(r"mlp\.experts\.\d+\.(gate|up|down)_proj\.mul1$", t):
        return None  # a scalar per linear, passed as a kernel argument
    if re.match(r"mlp\.(gate|up|down)_proj\.weight$", t):
        return "dense mlp"
    raise ValueError(f"{name}: no category in the byte model")


class ByteModelAgainstCheckpoint(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cfg, cls.tc = roofline.text_config(MODEL)
        cls.bits = int(cls.cfg["quantization_config"]["bits"])
        cls.tensors = checkpoint_tensors(MODEL)

    def test_every_weight_category_matches_the_checkpoint(self):
        tc = self.tc
        got = {}
        expert_bytes = 0
        for name, (dtype, shape, nbytes) in self.tensors.items():
            cat = categorise(name, tc)
            if cat is None:
                continue
            b = engine_bytes(name, dtype, shape, nbytes)
            if cat == "routed experts":
                expert_bytes += b
            elif cat == "embedding":
                got[cat] = got.get(cat, 0) + b // tc["vocab_size"]  # one row per token at batch 1
            else:
                got[cat] = got.get(cat, 0) + b
        # At batch 1 a step reads top_k of the E experts of each MoE layer (all experts are the same size).
        got["routed experts"] = expert_bytes * tc["num_experts_per_tok"] / tc["n_routed_experts"]
        model = roofline.step_bytes(tc, 1, 0, self.bits)
        weights = {k: v for k, v in model.items() if k not in ("kda state", "mla latent cache", "indexer cache")}
        self.assertEqual(sorted(got), sorted(weights))
        for k in weights:
            self.assertAlmostEqual(weights[k], got[k], delta=1e-9 * got[k], msg=k)
        # The test model's expert width (96) is not a multiple of 128: the padded trellis is what is read.
        self.assertNotEqual(tc["moe_intermediate_size"] % 128, 0)

    def test_every_checkpoint_tensor_has_a_place(self):
        counted = sum(1 for n in self.tensors if categorise(n, self.tc) is not None)
        self.assertGreater(counted, 100)
        with self.assertRaises(ValueError):
            categorise("model.language_model.layers.0.self_attn.new_proj.weight", self.tc)


def find_cli():
    for c in (os.environ.get("TWINSPARK_CLI", ""), os.path.join(ROOT, "build", "app", "twinspark-cli")):
        if c and os.access(c, os.X_OK):
            return c
    return None


class ByteModelAgainstPlan(unittest.TestCase):
    def plan(self, tp):
        cli = find_cli()
        self.assertIsNotNone(cli, "twinspark-cli not found: set TWINSPARK_CLI or build into build/")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "plan.json")
            r = subprocess.run([cli, "plan", "--config", os.path.join(MODEL, "config.json"), "--tp", str(tp),
                                "--json", out], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                return json.load(f)

    def test_states_and_latent_match_what_the_engine_allocates(self):
        _, tc = roofline.text_config(MODEL)
        kp = tc["index_kpool"]
        mla_layers = sum(1 for t in tc["layer_types"] if t != "linear_attention")
        mtp = tc.get("num_nextn_predict_layers", 0)
        for tp in (1, 2):
            plan = self.plan(tp)
            # KDA: the recurrent state and conv tail of one request on this rank, read and written once a step.
            m = roofline.step_bytes(tc, 1, 0, tp=tp)
            self.assertEqual(m["kda state"], 2 * plan["snapshot_bytes"], f"tp {tp}")
            # Latent: the plan's bytes per token over its DSA layers (the MTP block's included there) is what
            # step_bytes reads per attended token and layer; two complete pools apart, inside the indexer's top-k.
            per_layer = plan["latent_bytes_per_token"] / (mla_layers + mtp)
            a = roofline.step_bytes(tc, 1, 2 * kp, tp=tp)["mla latent cache"]
            b = roofline.step_bytes(tc, 1, 4 * kp, tp=tp)["mla latent cache"]
            self.assertEqual((b - a) / (2 * kp * mla_layers), per_layer, f"tp {tp}")


if __name__ == "__main__":
    unittest.main()
