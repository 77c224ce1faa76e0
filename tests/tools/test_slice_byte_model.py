#!/usr/bin/env python3
"""tools/device/slice_roofline.py's byte model (step_bytes) held against what it models, on the EXL3 embedded
model (resources/models/glm5-next-tiny-exl3: the glm5_next layout with KDA and DSA-MLA layers, a dense and MoE
layers, routed experts in EXL3 at 4 bits, so every term of the model is exercised).

- Weights: each tensor of the checkpoint's header is put in one of the model's categories by its name and counted
  at the bytes the engine itself reports holding it (`twinspark-cli inspect --model --json`: ModelWeights::held —
  matrices as views of the checkpoint at its dtype, per-channel vectors and an EXL3 linear's suh / svh as fp32,
  trellises packed); the sums must equal step_bytes' weight categories at batch 1. A tensor that fits no category
  fails the test, so a new kind of weight has to be placed in the model; so does a tensor the model counts that the
  engine does not hold, or one the engine holds that the model leaves out. Left out, as the model leaves them out:
  the MTP block (layer num_hidden_layers; held, but no plain decode step runs it), the vision tower and each EXL3
  linear's mul1 flag (neither held).
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


def find_cli():
    for c in (os.environ.get("TWINSPARK_CLI", ""), os.path.join(ROOT, "build", "app", "twinspark-cli")):
        if c and os.access(c, os.X_OK):
            return c
    return None


def engine_held(model_dir):
    """{name: bytes} of every tensor the engine holds of model_dir, as `inspect --model --json` reports it."""
    cli = find_cli()
    if cli is None:
        raise AssertionError("twinspark-cli not found: set TWINSPARK_CLI or build into build/")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "held.json")
        r = subprocess.run([cli, "inspect", "--model", model_dir, "--json", out], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"inspect --model exited {r.returncode}: {r.stderr}")
        with open(out) as f:
            return {h["name"]: h["bytes"] for h in json.load(f)["held"]}


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
        cls.held = engine_held(MODEL)

    def test_every_weight_category_matches_the_checkpoint(self):
        tc = self.tc
        got = {}
        expert_bytes = 0
        for name in self.tensors:
            cat = categorise(name, tc)
            if cat is None:
                continue
            self.assertIn(name, self.held, f"{name}: counted by the byte model, not held by the engine")
            b = self.held[name]
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

    def test_what_the_engine_holds_beyond_the_model_is_the_mtp_block(self):
        mtp = f"model.language_model.layers.{self.tc['num_hidden_layers']}."
        extra = [n for n in self.held if categorise(n, self.tc) is None]
        self.assertTrue(extra, "the test model has an MTP block, which the engine holds")
        for n in extra:
            self.assertTrue(n.startswith(mtp), f"{n}: held by the engine, left out of the byte model")
        # Not held, as the model leaves them out too: the vision tower and the EXL3 codebook flags.
        for n in self.tensors:
            if n.startswith("model.visual.") or n.endswith(".mul1"):
                self.assertNotIn(n, self.held)

    def test_every_checkpoint_tensor_has_a_place(self):
        counted = sum(1 for n in self.tensors if categorise(n, self.tc) is not None)
        self.assertGreater(counted, 100)
        with self.assertRaises(ValueError):
            categorise("model.language_model.layers.0.self_attn.new_proj.weight", self.tc)


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
