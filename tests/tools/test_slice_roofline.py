#!/usr/bin/env python3
"""tools/device/slice_roofline.py report, on the host: the numbers docs/PERFORMANCE_SLICE.md quotes from it.

--compute-only (a run on an SM partition, scripts/gpu/partition_check.sh) must give each batch's bytes per second
as a multiple of a GB10's nominal bandwidth and no 45-layer extrapolation (a partition's fraction of copy is not a
GB10's); without it the extrapolation is there. The runs are made-up `generate --json` results over the tiny
EXL3 test model's config; the bytes come from the script's own byte model, so what is checked is the arithmetic
from there on (bytes x steps per second, the multiple, what is printed and written). Standard library only;
CTest runs it (label unit).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "tools", "device", "slice_roofline.py")
MODEL = os.path.join(ROOT, "resources", "models", "glm5-next-tiny-exl3")


class SliceRooflineReport(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.runs = []
        for batch, tps in ((1, 400.0), (4, 1000.0)):
            path = os.path.join(d, f"b{batch}.json")
            with open(path, "w") as f:
                json.dump({"concurrency": batch, "decode_tok_s": tps, "generated_tokens": 64 * batch,
                           "prompt_tokens": 256, "backend": "cuda", "distinct_prompts": batch}, f)
            self.runs += ["--run", path]
        self.bench = os.path.join(d, "bench.json")
        with open(self.bench, "w") as f:
            json.dump({"copy_bandwidth_GBps": 2600.0, "sms": 48, "sms_device": 132}, f)

    def tearDown(self):
        self.tmp.cleanup()

    def report(self, *extra):
        out = os.path.join(self.tmp.name, "out.json")
        r = subprocess.run([sys.executable, SCRIPT, "report", "--model", MODEL, *self.runs, "--bench", self.bench,
                            "--label", "NVIDIA H100 80GB HBM3, on 48 SMs", "--json", out, *extra],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            return r.stdout, json.load(f)

    def test_compute_only_gives_multiples_and_no_extrapolation(self):
        for gb10 in (273.0, 100.0):
            text, js = self.report("--compute-only", "--gb10-bw", str(gb10))
            self.assertTrue(js["compute_only"])
            self.assertEqual(js["gb10_nominal_GBps"], gb10)
            self.assertEqual(js["copy_bandwidth_GBps"], 2600.0)
            self.assertNotIn("extrapolation_45_layers_2xGB10_tp2", js)
            self.assertNotIn("extrapolation", text)
            measured = {m["batch"]: m for m in js["measured"]}
            self.assertEqual(sorted(measured), [1, 4])
            shown = []
            for batch, tps in ((1, 400.0), (4, 1000.0)):
                m = measured[batch]
                # bytes per step x steps per second (decode tok/s over the batch)
                self.assertAlmostEqual(m["achieved_GBps"], m["bytes_per_step"] * tps / batch / 1e9, places=9)
                self.assertAlmostEqual(m["gb10_nominal_multiple"], m["achieved_GBps"] / gb10, places=12)
                self.assertAlmostEqual(m["fraction_of_copy"], m["achieved_GBps"] / 2600.0, places=12)
                shown.append(f"b{batch}: {m['gb10_nominal_multiple']:.2f}x")
            self.assertIn(f"against a GB10's nominal {gb10:.0f} GB/s: " + "; ".join(shown), text)

    def test_without_compute_only_extrapolates(self):
        text, js = self.report()
        self.assertNotIn("compute_only", js)
        self.assertIn("extrapolation_45_layers_2xGB10_tp2", js)
        self.assertIn("extrapolation: 45 layers", text)
        self.assertNotIn("on an SM partition", text)
        for m in js["measured"]:
            self.assertNotIn("gb10_nominal_multiple", m)


if __name__ == "__main__":
    unittest.main(verbosity=2)
