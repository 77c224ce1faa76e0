#!/usr/bin/env bash
# The product's main job on a GPU: `twinspark-cli serve --backend cuda` on the EXL3 embedded model, driven over
# HTTP as a client would (issue 6; the GPU machine's usual build has no server — this needs the binary that
# `SERVER=1 bash scripts/gpu/prebuilt.sh` builds here, with its libraries):
#   1. start at GPU_MEM_UTIL 0.87: the device, the GPU self-test, the load and the KV plan, in that order (from
#      its log; the memory check between the device and the self-test says nothing when the share is free: step 4
#      shows its place), and the time to ready;
#   2. tools/device/serve_probe.py check: models, chat (plain and streamed, same text), 4 concurrent chats, a
#      token-id completion, malformed JSON answered 400 while the server keeps serving, /metrics' device-memory
#      gauges and request counts;
#   3. the restart race with itself: SIGTERM, and the next server started at once, while the first still holds
#      its ~69 GiB: the second must wait for that memory ("waiting for device memory"), then come up and answer;
#      the first's exit status and time to exit are reported;
#   4. GPU_MEM_UTIL 0.999 (more than is free): serve must stop with the advice, exit 2, before the self-test and
#      any upload;
#   5. one failed decode step: a server with TS_FAULT_OP=mhcPre@<n>:error (one call of the model's mHC mixing throws,
#      as an op out of memory would; n puts it in the third request's tenth step, inside a replayed decode graph)
#      driven by serve_probe.py fault: that request answers 500 with the reason, the next ones answer with the
#      same text as the ones before, the server stays healthy and goes on replaying decode steps from graphs.
#   6. a real lost GPU: a server with TS_FAULT_OP=embedding@<n>:trap (before that call a kernel traps: a CUDA sticky
#      error, the context lost; n puts it in the second request's decode steps) driven by serve_probe.py lost: that
#      request fails with "the GPU failed" and the context's loss, /health stops saying 200, and the server stops by
#      itself with exit 3 (not a crash in the unload on the dead context), its log saying so;
#   7. the same trap under `generate` (two requests, exit 3, both failed with the reason) and under the self-test
#      (stops at the case that lost the device, exit 3, no crash).
#   here:   SERVER=1 bash scripts/gpu/prebuilt.sh && bash scripts/gpu/device_tree.sh stash --room
#   device: (carry ["build-dev-srv/twinspark-cli.xz", "build-dev-srv/lib"]) bash scripts/gpu/serve_check.sh "$OUT"
#   here:   bash scripts/gpu/device_tree.sh restore
# SC_MODEL (the EXL3 embedded model), SC_BACKEND (cuda), SC_FAULT_AT (937, step 5), SC_TRAP_AT (40, step 6),
# SC_STEPS (all; `lost`: steps 6-7 alone, for a short device call).
# Results: $OUT/serve_check.txt (the summary), $OUT/serve{1,2,3,4,5}.log, $OUT/serve_probe.json, $OUT/serve_fault.json,
# $OUT/serve_lost.json, $OUT/trap_{generate,selftest}.log. Exit 1 when a step fails.
set -uo pipefail
OUT=${1:-/tmp/twinspark-gpu}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
B=build-dev-srv
mkdir -p build-gpu/app
xz -dc "$B/twinspark-cli.xz" >build-gpu/app/twinspark-cli-srv && chmod +x build-gpu/app/twinspark-cli-srv || exit 2
export LD_LIBRARY_PATH="$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
CLI=build-gpu/app/twinspark-cli-srv
MODEL=${SC_MODEL:-resources/models/glm5-next-tiny-exl3}
BE=${SC_BACKEND:-cuda}  # cpu: a dry run of this script on a machine without a GPU (the GPU-only checks then fail)
SC_FAULT_AT=${SC_FAULT_AT:-937}  # step 5's failing mhcPre call: 2 requests of 384 calls, then 10 steps of 16, then 9
# Step 6's embedding call: one per model step; 1 for the start-up profiling forward, 24 for the first request.
SC_TRAP_AT=${SC_TRAP_AT:-40}
SC_STEPS=${SC_STEPS:-all}
case "$SC_STEPS" in all|lost) ;; *) echo "serve_check: SC_STEPS must be all or lost, not '$SC_STEPS'" >&2; exit 2;; esac
GPU_FLAG=--gpu; [ "$BE" = cuda ] || GPU_FLAG=
R="$OUT/serve_check.txt"
PORT=8888
fails=0
say() { echo "$*" | tee -a "$R"; }
verdict() { if [ "$1" = ok ]; then say "ok   $2"; else say "FAIL $2"; fails=$((fails + 1)); fi; }
ts() { date +%s.%N; }
since() { python3 -c "print(round($(ts) - $1, 1))"; }

if [ "$SC_STEPS" = all ]; then  # steps 1-5
say "== serve --backend $BE --model $MODEL --gpu-mem-util 0.87 on $(nvidia-smi --query-gpu=name --format=csv,noheader)"
t0=$(ts)
$CLI serve --backend $BE --model "$MODEL" --port $PORT --gpu-mem-util 0.87 >"$OUT/serve1.log" 2>&1 &
s1=$!
if python3 tools/device/serve_probe.py wait --port $PORT --timeout 300; then
  verdict ok "ready in $(since "$t0") s"
else
  verdict fail "not ready after 300 s"; tail -20 "$OUT/serve1.log" | tee -a "$R"; kill -9 $s1 2>/dev/null; exit 1
fi
# The start-up order: memory check, self-test, weights, KV plan.
order=$(grep -n -E "backend cuda|GPU self-test passed|weights on the device|KV plan" "$OUT/serve1.log" | cut -d: -f1 | tr '\n' ' ')
grep -E "backend|self-test|weights on the device|device memory|KV plan|ready in" "$OUT/serve1.log" | tee -a "$R"
if [ "$(echo $order | tr ' ' '\n' | sort -n | tr '\n' ' ')" = "$order" ] && [ "$(echo $order | wc -w)" -ge 4 ]; then
  verdict ok "start-up order: device, self-test, weights, KV plan (log lines $order)"
else
  verdict fail "start-up order (log lines $order)"
fi
python3 tools/device/serve_probe.py check $GPU_FLAG --port $PORT --json "$OUT/serve_probe.json" 2>&1 | tee -a "$R"
[ "${PIPESTATUS[0]}" = 0 ] && verdict ok "the API checks" || verdict fail "the API checks"
say "GPU memory used while serving: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)"

say "== restart: SIGTERM, and the next server started at once"
kill -TERM $s1
t1=$(ts)
$CLI serve --backend $BE --model "$MODEL" --port $((PORT + 1)) --gpu-mem-util 0.87 >"$OUT/serve2.log" 2>&1 &
s2=$!
wait $s1
rc1=$?
say "first server: exit $rc1 $(since "$t1") s after SIGTERM; $(grep -E 'shutting down|stopped' "$OUT/serve1.log" | tr '\n' ' ')"
[ $rc1 = 0 ] && verdict ok "first server exited cleanly" || verdict fail "first server's exit status $rc1"
if python3 tools/device/serve_probe.py wait --port $((PORT + 1)) --timeout 300 &&
  python3 tools/device/serve_probe.py one --port $((PORT + 1)) | tee -a "$R"; then
  verdict ok "second server ready $(since "$t1") s after the first's SIGTERM, and answering"
else
  verdict fail "second server"; tail -20 "$OUT/serve2.log" | tee -a "$R"
fi
grep -E "waiting for device memory|device memory:|self-test|KV plan|error" "$OUT/serve2.log" | head -6 | tee -a "$R"
if grep -q "waiting for device memory" "$OUT/serve2.log"; then
  say "restart race exercised: the second server waited for the first's memory"
else
  say "restart race NOT exercised: the first server's memory was free before the second checked"
fi
kill -TERM $s2; wait $s2; say "second server: exit $?"

say "== serve --gpu-mem-util 0.999 (more than is free)"
TS_MEM_WAIT_S=5 timeout 120 $CLI serve --backend $BE --model "$MODEL" --port $((PORT + 2)) --gpu-mem-util 0.999 >"$OUT/serve3.log" 2>&1
rc3=$?
grep -E "error|weights on the device" "$OUT/serve3.log" | tee -a "$R"
# The start-up check comes before the self-test and the load: neither may have started.
if [ $rc3 = 2 ] && grep -q "GPU_MEM_UTIL" "$OUT/serve3.log" && ! grep -q -E "weights on the device|self-test" "$OUT/serve3.log"; then
  verdict ok "refused with the advice before the self-test and any upload (exit 2)"
else
  verdict fail "0.999: exit $rc3"
fi
say "== one failed decode step (TS_FAULT_OP=mhcPre@$SC_FAULT_AT:error, SKIP_OVERLAY_VERIFY=1)"
# mhcPre runs twice per layer and forward: 16 calls per step on the embedded model (8 layers); a 24-token request is
# one prefill and 23 decode steps, 384 calls. Calls of the start-up profiling forward count too (a few steps' worth):
# the probe sends requests until one fails.
SKIP_OVERLAY_VERIFY=1 TS_FAULT_OP="mhcPre@$SC_FAULT_AT:error" $CLI serve --backend $BE --model "$MODEL" \
  --port $((PORT + 3)) --gpu-mem-util 0.87 >"$OUT/serve4.log" 2>&1 &
s4=$!
if python3 tools/device/serve_probe.py wait --port $((PORT + 3)) --timeout 300; then
  python3 tools/device/serve_probe.py fault $GPU_FLAG --port $((PORT + 3)) --json "$OUT/serve_fault.json" 2>&1 | tee -a "$R"
  [ "${PIPESTATUS[0]}" = 0 ] && verdict ok "a failed step fails its request only" || verdict fail "the failed-step checks"
  grep -E "engine step failed|TS_FAULT_OP" "$OUT/serve4.log" | head -3 | tee -a "$R"
else
  verdict fail "fault server not ready"; tail -20 "$OUT/serve4.log" | tee -a "$R"
fi
kill -TERM $s4; wait $s4; say "fault server: exit $?"
fi  # steps 1-5

# On the CPU (a dry run) a trap is refused up front; the dry run acts the loss out instead (:device-lost).
TRAP=trap; [ "$BE" = cuda ] || TRAP=device-lost
say "== a lost GPU (TS_FAULT_OP=embedding@$SC_TRAP_AT:$TRAP, SKIP_OVERLAY_VERIFY=1)"
SKIP_OVERLAY_VERIFY=1 TS_FAULT_OP="embedding@$SC_TRAP_AT:$TRAP" $CLI serve --backend $BE --model "$MODEL" \
  --port $((PORT + 4)) --gpu-mem-util 0.87 >"$OUT/serve5.log" 2>&1 &
s5=$!
if python3 tools/device/serve_probe.py wait --port $((PORT + 4)) --timeout 300; then
  python3 tools/device/serve_probe.py lost $GPU_FLAG --port $((PORT + 4)) --json "$OUT/serve_lost.json" 2>&1 |
    tee -a "$R"
  if [ "${PIPESTATUS[0]}" = 0 ]; then verdict ok "a lost GPU fails the request with the reason"
  else verdict fail "the lost-GPU checks"; fi
  t5=$(ts)
  for _ in $(seq 1 120); do kill -0 $s5 2>/dev/null || break; sleep 0.5; done
  if kill -0 $s5 2>/dev/null; then
    verdict fail "the server did not stop by itself within 60 s of the loss"; kill -9 $s5
  fi
  wait $s5; rc5=$?
  grep -E "the GPU failed|stops|sticky|making the device trap|terminate|Abort|Segmentation" "$OUT/serve5.log" |
    head -6 | tee -a "$R"
  if [ $rc5 = 3 ] && grep -q "the server stops (exit 3)" "$OUT/serve5.log" && \
     ! grep -q -E "terminate called|Aborted|Segmentation fault" "$OUT/serve5.log"; then
    verdict ok "the server stopped by itself, exit 3, $(since "$t5") s after the failed request"
  else
    verdict fail "lost-GPU server: exit $rc5"
  fi
else
  verdict fail "lost-GPU server not ready"; tail -20 "$OUT/serve5.log" | tee -a "$R"; kill -9 $s5 2>/dev/null
fi

say "== the same trap under generate and the self-test"
TS_FAULT_OP="embedding@3:$TRAP" $CLI generate --backend $BE --model tests/golden/data/tiny_b \
  --prompt-ids "1,7,3;4,5,6" --concurrency 2 --max-tokens 8 >"$OUT/trap_generate.log" 2>&1
rc6=$?
grep -E "GPU failed|error" "$OUT/trap_generate.log" | head -4 | tee -a "$R"
if [ $rc6 = 3 ] && grep -q "2 of 2 request(s) failed; request 0: the GPU failed" "$OUT/trap_generate.log" && \
   ! grep -q -E "terminate called|Aborted|Segmentation fault" "$OUT/trap_generate.log"; then
  verdict ok "generate: both requests failed with the reason, exit 3"
else
  verdict fail "generate under the trap: exit $rc6"
fi
TS_FAULT_OP="linear@5:$TRAP" $CLI selftest --backend $BE --model none >"$OUT/trap_selftest.log" 2>&1
rc7=$?
tail -3 "$OUT/trap_selftest.log" | tee -a "$R"
if [ $rc7 = 3 ] && grep -q "the GPU failed in the self-test's" "$OUT/trap_selftest.log" && \
   ! grep -q -E "terminate called|Aborted|Segmentation fault" "$OUT/trap_selftest.log"; then
  verdict ok "selftest: stopped at the case that lost the device, exit 3"
else
  verdict fail "selftest under the trap: exit $rc7"
fi

say "serve_check: $fails failed"
[ $fails = 0 ]
