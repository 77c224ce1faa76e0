#!/usr/bin/env bash
# ThreadSanitizer over the product's threads: the engine's step thread against the threads that submit and
# abort (test_engine: 200 random requests, test_fault_backend), the thread pool (test_dtype), the log sink
# (test_log), the OpenAI server's cpp-httplib workers driven by real clients over HTTP (test_server,
# test_serve_lifecycle, test_connection_probe, and the official `openai` npm client against `twinspark-cli serve`:
# test_server_openai_node), the CLI (test_cli) and the decode-step graphs' engine runs (test_graph_regions).
# Builds build-tsan/ (GUI and CUDA off: the Debian Qt libraries are not instrumented, and the CUDA backend needs a
# GPU) and fails when any process, the tests' children included, reports a race. Suppressions, each with its
# reason: tests/sanitizers/tsan.supp.
# Usage: scripts/tsan.sh            (scripts/test.sh runs it after the ASan stage; ~8 min of a 2-core machine)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
TESTS="test_engine test_fault_backend test_dtype test_log test_connection_probe test_server test_serve_lifecycle \
test_server_openai_node test_cli test_graph_regions"
BUILD_TARGETS="twinspark-cli test_engine test_fault_backend test_dtype test_log test_connection_probe test_server \
test_serve_lifecycle test_cli test_graph_regions"

mkdir -p build-tsan
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWINSPARK_TSAN=ON -DTWINSPARK_GUI=OFF \
      -DTWINSPARK_CUDA=OFF >build-tsan/configure.log || { cat build-tsan/configure.log; exit 1; }
cmake --build build-tsan -j "$JOBS" --target $BUILD_TARGETS

reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
regex="^($(echo $TESTS | tr ' ' '|'))\$"
# setarch -R: without address-space randomisation, so that GCC 12's TSan also starts on kernels whose mmap
# randomisation is wider than its memory layout expects ("unexpected memory mapping"). Children inherit it.
NORAND=()
if setarch "$(uname -m)" -R true 2>/dev/null; then NORAND=(setarch "$(uname -m)" -R); fi
rc=0
(cd build-tsan &&
  TSAN_OPTIONS="suppressions=$PWD/../tests/sanitizers/tsan.supp die_after_fork=0 log_path=$reports/tsan" \
  TS_TEST_RANDOM_LOAD_REQUESTS=200 QTEST_FUNCTION_TIMEOUT=1200000 \
  "${NORAND[@]}" ctest --output-on-failure -j "$JOBS" -R "$regex" --timeout 1200) || rc=$?
# Every process writes its own report file (tsan.<pid>), a child server's too: any file is a failure.
if compgen -G "$reports/tsan*" >/dev/null; then
  echo "tsan.sh: ThreadSanitizer reported:" >&2
  cat "$reports"/tsan* >&2
  grep -h '^SUMMARY' "$reports"/tsan* | sort | uniq -c >&2
  exit 1
fi
[ $rc = 0 ] && echo "tsan.sh: no data race reported by $(echo $TESTS | wc -w) tests"
exit $rc
