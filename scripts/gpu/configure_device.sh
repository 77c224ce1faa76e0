#!/usr/bin/env bash
# The GPU machine's build configuration, one place for both ways of building it: run_gpu_suite.sh (on the GPU
# machine) and prebuilt.sh (here). Release, no GUI / server / tests, CUDA for ARCHS, headers from the
# .device-deps prefix. SERVER=1 (prebuilt.sh's, only here: the GPU machine has no cpp-httplib or OpenSSL headers)
# builds the OpenAI server too, against this machine's packages, so `serve --backend cuda` can run there.
#   bash scripts/gpu/configure_device.sh BUILD_DIR DEPS_PREFIX ARCHS   (cmake's output on stdout / stderr)
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: configure_device.sh BUILD_DIR DEPS_PREFIX ARCHS" >&2; exit 2; }
cd "$(dirname "$0")/../.."
cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTWINSPARK_GUI=OFF -DTWINSPARK_SERVER=$([ "${SERVER:-0}" = 1 ] && echo ON || echo OFF) \
  -DTWINSPARK_TESTS=OFF -DTWINSPARK_CUDA=ON "-DTWINSPARK_CUDA_ARCHS=$3" -DCMAKE_PREFIX_PATH="$2" \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
