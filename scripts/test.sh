#!/usr/bin/env bash
# The whole test suite: configure + build (RelWithDebInfo) and run every CTest test, then rebuild the
# unit tests under AddressSanitizer + UBSan (the malformed-file tests must never crash) and run them, then the
# threaded tests (engine, server, CLI) under ThreadSanitizer (scripts/tsan.sh).
# Usage: scripts/test.sh            (from anywhere; builds in build/, build-asan/ and build-tsan/)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
GUI=${TWINSPARK_GUI:-ON}
# Where the CUDA toolkit is installed (CI has nvcc 13 at /usr/local/cuda), its code must compile and link: ON
# makes a toolkit CMake cannot use fail the configure instead of quietly building the CPU backend alone.
# Elsewhere AUTO (CPU only without nvcc); TWINSPARK_CUDA in the environment overrides both.
HAVE_NVCC=0
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; then HAVE_NVCC=1; fi
if [ -z "${TWINSPARK_CUDA:-}" ]; then
  if [ $HAVE_NVCC = 1 ]; then TWINSPARK_CUDA=ON; else TWINSPARK_CUDA=AUTO; fi
fi

# The test build's CUDA targets: sm_90a (the H200 test machine) and sm_121a (the GB10). The product's fat binary
# also has sm_120a; where every CUDA source's device code preprocesses to the same text for sm_120a as for sm_121a
# (scripts/cuda_sm12x_same.sh, ~8 s), leaving it out still compiles every code path, and saves ~2 of a 2-core CI
# run's minutes; otherwise (or when that check cannot run) all three are built. TWINSPARK_CUDA_ARCHS overrides.
ARCHS=${TWINSPARK_CUDA_ARCHS:-"90a;121a"}
if [ -z "${TWINSPARK_CUDA_ARCHS:-}" ] && [ $HAVE_NVCC = 1 ] && [ "$TWINSPARK_CUDA" != OFF ] &&
  ! bash scripts/cuda_sm12x_same.sh; then
  echo "test.sh: sm_120a's device code is not (known to be) sm_121a's: building sm_120a too"
  ARCHS="90a;120a;121a"
fi
mkdir -p build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWINSPARK_GUI="$GUI" -DTWINSPARK_CUDA="$TWINSPARK_CUDA" \
      -DTWINSPARK_CUDA_ARCHS="$ARCHS" >build/configure.log || { cat build/configure.log; exit 1; }
grep -E '^-- TwinSpark:' build/configure.log   # what is built (server, GUI, CUDA, tests)
cmake --build build -j "$JOBS"
# The server tests drive twinspark-cli with the official `openai` npm client (tests/server; the version is pinned
# in its package-lock.json). They need Node 20+ and npm; without them those tests fail (never skip) and say so.
if command -v npm >/dev/null 2>&1; then
  npm ci --prefix tests/server --no-audit --no-fund >/dev/null
else
  echo "test.sh: npm not found: install Node 20+ and npm (tests/server needs them)" >&2
fi
(cd build && ctest --output-on-failure -j "$JOBS")

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTWINSPARK_ASAN=ON -DTWINSPARK_GUI=OFF \
      -DTWINSPARK_CUDA=OFF >/dev/null
# Only the unit tests run under the sanitizers: build just them (and what they link).
UNIT_TARGETS=$(for f in tests/unit/test_*.cpp; do basename "$f" .cpp; done)
cmake --build build-asan -j "$JOBS" --target $UNIT_TARGETS
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
   ctest --output-on-failure -j "$JOBS" -L unit)

JOBS=$JOBS bash scripts/tsan.sh
