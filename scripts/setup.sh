#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install the packages, build, and run the main job.
# Today the main job is the CPU engine generating from a bundled glm5_next checkpoint; the control
# center (twinspark) and `twinspark-cli serve` on the embedded default model take its place when they
# land (see the status table in README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWINSPARK_GUI=OFF >/dev/null
cmake --build build -j "$(nproc)"
MODEL=tests/golden/data/tiny_a
echo "== twinspark-cli generate on $MODEL (a random-weight glm5_next test checkpoint: the ids are not text)"
./build/app/twinspark-cli generate --model "$MODEL" --prompt-ids 11,12,13,14,15,16,17,18 --max-tokens 32 --ignore-eos
