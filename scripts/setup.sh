#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install the packages, build, and run the main job on the
# embedded default model (resources/models/glm5-next-tiny-exl3, the EXL3 export of glm5-next-tiny):
#   - with a display: the control center `twinspark`, started with --serve: once the model is loaded it also
#     serves the OpenAI API (port: PORT when given here, else the deployment .env's PORT, else 8888; the
#     Server page switches it off and on);
#   - without one: `twinspark-cli serve`, the OpenAI-compatible API on http://127.0.0.1:PORT/v1 (the same rule:
#     PORT when given here, else the .env's, else 8888; its "listening on" line says which), in the foreground
#     until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
# A bad PORT is refused before anything is installed or built (the control center would otherwise fall back to
# the .env's port or 8888 without a word).
if [ -n "${PORT:-}" ] && ! { [[ "$PORT" =~ ^[0-9]{1,5}$ ]] && ((10#$PORT >= 1 && 10#$PORT <= 65535)); }; then
  echo "setup.sh: PORT must be a TCP port number (1-65535), got '$PORT'" >&2
  exit 2
fi
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWINSPARK_GUI=ON >/dev/null
cmake --build build -j "$(nproc)" --target twinspark twinspark-cli
MODEL=resources/models/glm5-next-tiny-exl3
GUI_ARGS=(--model "$MODEL" --serve)
SERVE_ARGS=(--model "$MODEL")
if [ -n "${PORT:-}" ]; then
  GUI_ARGS+=(--set "PORT=$PORT")
  SERVE_ARGS+=(--port "$PORT")
  WHERE="http://127.0.0.1:$PORT/v1"
else
  WHERE="http://127.0.0.1:8888/v1 unless the deployment .env sets PORT (the 'listening on' line below says)"
fi
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  echo "== TwinSpark control center on $MODEL, serving the OpenAI API once it is loaded (Server page)"
  if [ "$(id -u)" -eq 0 ] && [ -n "${SUDO_USER:-}" ]; then
    # Under sudo the GUI runs as the user who asked for it (their display, settings and .env).
    exec sudo -u "$SUDO_USER" DISPLAY="${DISPLAY:-}" WAYLAND_DISPLAY="${WAYLAND_DISPLAY:-}" \
         XDG_RUNTIME_DIR="/run/user/$(id -u "$SUDO_USER")" ./build/app/twinspark "${GUI_ARGS[@]}"
  fi
  exec ./build/app/twinspark "${GUI_ARGS[@]}"
fi
cat <<EOT
== TwinSpark: serving $MODEL as GLM-5.3-Flash-EXL3 on $WHERE (Ctrl-C stops it)
   try:  curl -s http://127.0.0.1:${PORT:-8888}/v1/chat/completions -H 'Content-Type: application/json' \\
           -d '{"model":"GLM-5.3-Flash-EXL3","messages":[{"role":"user","content":"What port does the TwinSpark API listen on?"}]}'
EOT
exec ./build/app/twinspark-cli serve "${SERVE_ARGS[@]}"
