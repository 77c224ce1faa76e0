#!/usr/bin/env python3
"""tools/device/serve_probe.py — the HTTP probe scripts/gpu/serve_check.sh runs against `serve --backend cuda` —
against a real `twinspark-cli serve` on the CPU backend, so that its checks are known to read what the server
writes before a GPU call depends on them.

Why: the probe only runs in device calls, where a mistake costs a call. Its first GPU run of `fault --gpu` failed
for a bug of its own: it summed `twinspark:cuda_graph_replays`, but /metrics writes counters with a `_total` suffix,
and a name with no samples summed to 0 ("replays 0 at the failure, 0 after"). Here: metric_sum on /metrics text
(absent names are None, not 0), and `check`, `fault` and `lost` end to end on CPU servers (`fault`'s with one
failing step, TS_FAULT_OP=mhcPre@937:error as in serve_check.sh; `lost`'s with a lost device acted out), all their
checks passing and the lost one's server ending with exit 3; `fault --gpu` on the CPU fails only its graph check,
which must have read the counters (0 replays, not a missing metric).
Standard library only; CTest runs it (label server, with the server built) with TWINSPARK_CLI set to the build's CLI.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))  # tests/server/..
sys.path.insert(0, os.path.join(ROOT, "tools", "device"))
import serve_probe  # noqa: E402

PROBE = os.path.join(ROOT, "tools", "device", "serve_probe.py")
MODEL = os.path.join(ROOT, "resources", "models", "glm5-next-tiny-exl3")

METRICS = """# HELP twinspark:cuda_graph_replays Decode steps replayed from CUDA graphs.
# TYPE twinspark:cuda_graph_replays counter
twinspark:cuda_graph_replays_total{model_name="m",engine="0"} 7
vllm:request_success_total{model_name="m",finished_reason="stop"} 2
vllm:request_success_total{model_name="m",finished_reason="error"} 1
vllm:num_requests_running 3
"""


class MetricSum(unittest.TestCase):
    def test_labelled_and_plain_samples(self):
        self.assertEqual(serve_probe.metric_sum(METRICS, "twinspark:cuda_graph_replays_total"), 7)
        self.assertEqual(serve_probe.metric_sum(METRICS, "vllm:request_success_total"), 3)
        self.assertEqual(serve_probe.metric_sum(METRICS, "vllm:request_success_total", 'finished_reason="error"'), 1)
        self.assertEqual(serve_probe.metric_sum(METRICS, "vllm:num_requests_running"), 3)

    def test_a_filter_that_matches_nothing_is_zero(self):
        self.assertEqual(serve_probe.metric_sum(METRICS, "vllm:request_success_total", 'finished_reason="abort"'), 0)

    def test_an_absent_name_is_none_not_zero(self):
        # The family name of a counter (its HELP / TYPE lines) is not a sample; nor is a prefix of another name.
        self.assertIsNone(serve_probe.metric_sum(METRICS, "twinspark:cuda_graph_replays"))
        self.assertIsNone(serve_probe.metric_sum(METRICS, "vllm:request_success"))
        self.assertIsNone(serve_probe.metric_sum("", "vllm:request_success_total"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CpuServer(unittest.TestCase):
    """A `twinspark-cli serve --backend cpu` on the EXL3 embedded model for the tests of one class; FAULT (the
    TS_FAULT_OP value) or none. serve_check.sh likewise runs `check` and `fault` on servers of their own: `check`'s
    requests would spend the fault."""
    FAULT = None

    @classmethod
    def setUpClass(cls):
        cli = os.environ.get("TWINSPARK_CLI")
        if not cli or not os.access(cli, os.X_OK):
            raise RuntimeError("TWINSPARK_CLI must name the built twinspark-cli (CTest sets it)")
        cls.port = free_port()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.log = open(os.path.join(cls.tmp.name, "serve.log"), "w+")
        env = dict(os.environ, SKIP_OVERLAY_VERIFY="1")
        env.pop("TS_FAULT_OP", None)
        if cls.FAULT:
            env["TS_FAULT_OP"] = cls.FAULT
        cls.server = subprocess.Popen([cli, "serve", "--backend", "cpu", "--model", MODEL, "--port", str(cls.port)],
                                      stdout=cls.log, stderr=subprocess.STDOUT, env=env)
        waited = subprocess.run([sys.executable, PROBE, "wait", "--port", str(cls.port), "--timeout", "120"])
        if waited.returncode != 0:
            cls.tearDownClass()
            raise RuntimeError("the CPU server did not answer /health within 120 s")

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        cls.server.wait(timeout=60)
        cls.log.close()
        cls.tmp.cleanup()

    def probe(self, *args):
        out = os.path.join(self.tmp.name, "probe.json")
        run = subprocess.run([sys.executable, PROBE, *args, "--port", str(self.port), "--json", out],
                             capture_output=True, text=True, timeout=600)
        with open(out) as f:
            return run.returncode, {r["check"]: r for r in json.load(f)}, run.stdout + self.server_log()[-2000:]

    def server_log(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()


class Check(CpuServer):
    def test_check_passes(self):
        rc, results, out = self.probe("check")
        self.assertEqual(rc, 0, out)
        self.assertGreaterEqual(len(results), 8, out)
        self.assertTrue(all(r["ok"] for r in results.values()), out)


class Fault(CpuServer):
    FAULT = "mhcPre@937:error"  # serve_check.sh's SC_FAULT_AT: a decode step of the third request

    def test_1_fault_passes(self):
        rc, results, out = self.probe("fault")
        self.assertEqual(rc, 0, out)
        self.assertIn("call 937 of mhcPre failed", results["fault: a request fails"]["seen"])
        self.assertTrue(results["fault: one request counted as failed"]["ok"], out)

    def test_2_fault_gpu_reads_the_graph_counters(self):
        # The fault is spent: no request fails now, so the probe's fault checks fail as well; what matters here is
        # that the graph check read both counters — a CPU server replays no graphs, so 0 of each, never "absent".
        rc, results, out = self.probe("fault", "--gpu")
        self.assertEqual(rc, 1, out)
        graph = results["fault: decode steps still replayed from graphs after it"]
        self.assertFalse(graph["ok"])
        self.assertIn("replays 0.0 at the failure, 0.0 after; captures 0.0", graph["seen"])
        self.assertNotIn("no such metric", graph["seen"])


class Lost(CpuServer):
    FAULT = "embedding@30"  # the CPU acts a lost GPU out (serve_check.sh's step 6 makes a GPU trap for real)

    def test_lost_passes_and_the_server_stops_with_3(self):
        rc, results, out = self.probe("lost")
        self.assertEqual(rc, 0, out)
        self.assertIn("call 30 of embedding", results["lost: a request fails with the device's reason"]["seen"])
        self.assertEqual(self.server.wait(timeout=60), 3, self.server_log()[-2000:])
        self.assertIn("the server stops (exit 3)", self.server_log())
        # --gpu asks for a CUDA context's loss in the reason, which the CPU's acted-out loss does not name.
        self.assertNotIn("context is lost", results["lost: a request fails with the device's reason"]["seen"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
