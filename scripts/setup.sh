#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install the packages, build, and run the main job — the
# OpenAI-compatible server on the embedded default model (resources/models/glm5-next-tiny), in the
# foreground on http://127.0.0.1:8888/v1 until Ctrl-C. (The control center `twinspark` takes its place on
# machines with a display once it is built; see the README's status table.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWINSPARK_GUI=OFF >/dev/null
cmake --build build -j "$(nproc)"
MODEL=resources/models/glm5-next-tiny
PORT=${PORT:-8888}
cat <<EOT
== TwinSpark: serving $MODEL as GLM-5.3-Flash-EXL3 on http://127.0.0.1:$PORT/v1 (Ctrl-C stops it)
   try:  curl -s http://127.0.0.1:$PORT/v1/chat/completions -H 'Content-Type: application/json' \\
           -d '{"model":"GLM-5.3-Flash-EXL3","messages":[{"role":"user","content":"What port does TwinSpark use?"}]}'
EOT
exec ./build/app/twinspark-cli serve --model "$MODEL" --port "$PORT"
