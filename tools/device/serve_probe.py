#!/usr/bin/env python3
"""Drive a running `twinspark-cli serve` over HTTP with the standard library only (the GPU machine has no
internet and no `openai` package; the server tests here use the official client): the OpenAI surface a user's
client meets, on whatever backend the server runs. Used by scripts/gpu/serve_check.sh.

  serve_probe.py wait  --port P [--timeout 300]     until /health answers 200 (exit 1 on timeout)
  serve_probe.py check --port P [--gpu] [--json FILE]  the checks below; exit 1 when any fails
  serve_probe.py one   --port P                     one short chat completion (exit 1 unless it answers)
  serve_probe.py fault --port P [--gpu] [--json FILE]  against a server started with TS_FAULT_OP=<op>@<n>:error (one
                                                    failing call): the checks after `check`'s; exit 1 when any fails
  serve_probe.py lost  --port P [--gpu] [--json FILE]  against a server started with TS_FAULT_OP=<op>@<n>:trap (the
                                                    device made to trap: a real sticky error); exit 1 when any fails

`check`: /v1/models names the served model; a chat completion (non-streaming) returns text and usage; the same
streamed returns chunks ending in [DONE] whose text equals the non-streamed one's (greedy, same prompt); four
concurrent requests all answer; /v1/completions with a token-id prompt; malformed JSON gets 400 with an
OpenAI error object and the server keeps serving; /metrics carries the device-memory gauges (--gpu; none on a
host backend) and the
requests counted (vllm:request_success_total). Each check prints one line: ok / FAIL, what was seen.

`fault`: the same greedy chat is sent one request at a time until one fails (at most 12): it must answer 500 with
"the engine step failed" and the TS_FAULT_OP reason; the three after it must answer with the text the ones before it
had (nothing of the failed step was kept), /health must stay 200, /metrics must count one request finished with
"error", and (--gpu) decode steps must still be replayed from CUDA graphs after the failure — a failed step does not
turn graphs off for its batch size.

`lost`: the same chat, one request at a time, until one fails (at most 12): it must answer 5xx with "the GPU failed"
and (--gpu) the CUDA context's loss in the reason; /health must then answer 503 or no longer answer (the server stops
by itself: serve_check.sh checks its exit status, 3).
"""
import argparse
import json
import sys
import threading
import time
import urllib.error
import urllib.request

MODEL = "GLM-5.3-Flash-EXL3"


def request(port, path, body=None, timeout=120, raw=None):
    """(status, bytes) of one request; body is JSON-encoded unless raw bytes are given."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"} if data is not None else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def chat_body(prompt, max_tokens=24, stream=False):
    return {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "stream": stream}


def stream_text(port, body):
    """Text and chunk count of a streamed chat completion, and whether it ended with [DONE]."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    text, reasoning, chunks, done = "", "", 0, False
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                done = True
                break
            chunks += 1
            for c in json.loads(payload).get("choices", []):
                d = c.get("delta", {})
                reasoning += d.get("reasoning_content") or ""
                text += d.get("content") or ""
    return (reasoning, text), chunks, done


def message_text(resp):
    """(reasoning, answer): the embedded model thinks first, as GLM-5.3-Flash does."""
    m = resp["choices"][0]["message"]
    return m.get("reasoning_content") or "", m.get("content") or ""


def recorder(results):
    """record(name, ok, seen): one check into `results`, printed as ok / FAIL."""
    def record(name, ok, seen):
        results.append({"check": name, "ok": bool(ok), "seen": seen})
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {seen}", flush=True)
    return record


def check(port, results, gpu):
    record = recorder(results)

    st, b = request(port, "/v1/models")
    ids = [m.get("id") for m in json.loads(b).get("data", [])] if st == 200 else []
    record("models", st == 200 and MODEL in ids, f"status {st}, ids {ids}")

    prompt = "Count from 1 to 20, separated by commas."
    t0 = time.time()
    st, b = request(port, "/v1/chat/completions", chat_body(prompt))
    dt = time.time() - t0
    r = json.loads(b) if st == 200 else {}
    plain = message_text(r) if st == 200 else ("", "")
    usage = r.get("usage", {})
    record("chat", st == 200 and any(plain) and usage.get("completion_tokens", 0) > 0,
           f"status {st} in {dt:.2f} s, {usage}, finish {r.get('choices', [{}])[0].get('finish_reason')}, "
           f"reasoning {plain[0][:40]!r}, answer {plain[1][:40]!r}")

    streamed, chunks, done = stream_text(port, chat_body(prompt, stream=True))
    record("chat stream", done and chunks > 1 and streamed == plain,
           f"{chunks} chunks, [DONE] {done}, same reasoning and answer as non-streamed: {streamed == plain}")

    out = [None] * 4

    def one(i):
        try:
            out[i] = request(port, "/v1/chat/completions", chat_body(f"Say the number {i} in words.", 32))
        except Exception as e:  # noqa: BLE001 - reported below
            out[i] = (0, str(e).encode())

    t0 = time.time()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sts = [o[0] for o in out]
    record("4 concurrent chats", all(s == 200 for s in sts), f"statuses {sts} in {time.time() - t0:.2f} s")

    st, b = request(port, "/v1/completions", {"model": MODEL, "prompt": [1, 2, 3, 4], "max_tokens": 8,
                                              "temperature": 0})
    r = json.loads(b) if st == 200 else {}
    record("completions (token ids)", st == 200 and r.get("usage", {}).get("completion_tokens", 0) > 0,
           f"status {st}, usage {r.get('usage')}")

    st, b = request(port, "/v1/chat/completions", raw=b'{"model": "x", "messages": [')
    try:
        err = json.loads(b).get("error", {})
    except ValueError:
        err = {}
    record("malformed JSON", st == 400 and err.get("message"), f"status {st}, error {err.get('message', b[:80])!r}")
    st, _ = request(port, "/health")
    record("still healthy after the bad request", st == 200, f"status {st}")

    st, b = request(port, "/metrics")
    text = b.decode() if st == 200 else ""
    gauges = {}
    for line in text.splitlines():
        if line.startswith("twinspark:device_memory"):
            k, v = line.rsplit(" ", 1)
            gauges[k] = float(v)
    total = next((v for k, v in gauges.items() if "device_memory_total_bytes" in k), 0)
    free = next((v for k, v in gauges.items() if "device_memory_free_bytes" in k), -1)
    if gpu:
        record("metrics: device memory", st == 200 and 0 <= free <= total and total > 0,
               f"total {total / 2**30:.2f} GiB, free {free / 2**30:.2f} GiB")
    else:  # a host backend has no device memory to show
        record("metrics: no device memory on a host backend", st == 200 and not gauges, f"{sorted(gauges)}")
    # 1 chat + 1 streamed + 4 concurrent + 1 completion answered so far.
    done = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total") and "abort" not in line)
    record("metrics: requests counted", st == 200 and done >= 7, f"vllm:request_success_total {done:g} (>= 7)")


def metric_sum(text, name, where=""):
    """Sum of the samples of one metric (labelled or not) whose line contains `where`; None when /metrics has no
    sample of that name at all (a misspelt name — counters end in _total — must not read as a count of 0)."""
    samples = [line for line in text.splitlines() if line.startswith(name + " ") or line.startswith(name + "{")]
    if not samples:
        return None
    return sum(float(line.rsplit(" ", 1)[1]) for line in samples if where in line)


def until_one_fails(port, body, attempts):
    """Sends `body` as a chat, one request at a time, until one does not answer 200 (at most `attempts`).
    Returns (the texts of those that answered, (status, error message) of the failed one or None, requests sent);
    a server that stopped answering counts as status 0."""
    before, failed, n = [], None, 0
    while failed is None and n < attempts:
        n += 1
        try:
            st, b = request(port, "/v1/chat/completions", body)
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            failed = (0, f"no answer: {e}")
            break
        if st == 200:
            before.append(message_text(json.loads(b)))
            continue
        try:
            failed = (st, json.loads(b).get("error", {}).get("message", ""))
        except ValueError:
            failed = (st, b.decode(errors="replace")[:300])
    return before, failed, n


def fault(port, results, gpu, attempts=12):
    record = recorder(results)

    def metrics():
        st, b = request(port, "/metrics")
        return b.decode() if st == 200 else ""

    body = chat_body("Count from 1 to 20, separated by commas.", 24)
    before, failed, n = until_one_fails(port, body, attempts)
    replays_at_fault = metric_sum(metrics(), "twinspark:cuda_graph_replays_total")
    why = failed[1] if failed else ""
    record("fault: a request fails", failed is not None and failed[0] == 500 and "the engine step failed" in why
           and "TS_FAULT_OP=" in why,
           f"request {n} of at most {attempts}: " + (f"status {failed[0]}, {why[:160]!r}" if failed else "none failed"))
    after = []
    for _ in range(3):
        st, b = request(port, "/v1/chat/completions", body)
        after.append(message_text(json.loads(b)) if st == 200 else ("", f"status {st}"))
    ref = before[0] if before else (after[0] if after else None)
    record("fault: the requests after it answer as the ones before",
           len(after) == 3 and all(a == ref and any(a) for a in after) and all(b == ref for b in before),
           f"{len(before)} before, 3 after; same text: {[a == ref for a in after]}; "
           f"{'(the first request failed: the after ones compared among themselves) ' if not before else ''}"
           f"answer {ref[1][:40] if ref else ''!r}")
    st, _ = request(port, "/health")
    record("fault: still healthy", st == 200, f"status {st}")
    text = metrics()
    errors = metric_sum(text, "vllm:request_success_total", 'finished_reason="error"')
    record("fault: one request counted as failed", errors == 1, f"finished_reason=\"error\" {errors}")
    if gpu:
        replays = metric_sum(text, "twinspark:cuda_graph_replays_total")
        captures = metric_sum(text, "twinspark:cuda_graph_captures_total")
        record("fault: decode steps still replayed from graphs after it",
               None not in (replays, replays_at_fault) and replays > replays_at_fault,
               f"replays {replays_at_fault} at the failure, {replays} after; captures {captures}"
               + (" (no such metric in /metrics)" if None in (replays, replays_at_fault, captures) else ""))


def lost(port, results, gpu, attempts=12):
    record = recorder(results)
    body = chat_body("Count from 1 to 20, separated by commas.", 24)
    _, failed, n = until_one_fails(port, body, attempts)
    why = failed[1] if failed else ""
    record("lost: a request fails with the device's reason",
           failed is not None and failed[0] >= 500 and "the GPU failed" in why
           and (not gpu or "context is lost" in why),
           f"request {n} of at most {attempts}: " + (f"status {failed[0]}, {why[:300]!r}" if failed else "none failed"))
    try:
        st, _ = request(port, "/health", timeout=10)
        seen = f"status {st}"
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        st, seen = 0, f"no answer ({e}): the server has stopped"
    record("lost: /health no longer says healthy", st in (0, 503), seen)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["wait", "check", "one", "fault", "lost"])
    ap.add_argument("--port", type=int, default=8888)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json")
    ap.add_argument("--gpu", action="store_true", help="the server runs on a GPU: /metrics must show its memory")
    a = ap.parse_args()
    if a.what == "wait":
        end = time.time() + a.timeout
        while time.time() < end:
            try:
                if request(a.port, "/health", timeout=5)[0] == 200:
                    return 0
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        return 1
    if a.what == "one":
        st, b = request(a.port, "/v1/chat/completions", chat_body("Hello!", 8))
        print(f"one chat: status {st}, {message_text(json.loads(b))}" if st == 200 else f"one chat: status {st}")
        return 0 if st == 200 else 1
    results = []
    {"fault": fault, "lost": lost, "check": check}[a.what](a.port, results, a.gpu)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
