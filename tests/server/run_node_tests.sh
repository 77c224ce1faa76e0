#!/usr/bin/env bash
# CTest entry for the openai-client tests: checks that Node >= 20 and the pinned packages are present
# (failing loudly otherwise; nothing is skipped), then runs `node --test`.
# Usage: run_node_tests.sh PATH/TO/twinspark-cli CHAT_MODEL_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node >/dev/null 2>&1; then
  echo "FAIL: node is not installed (Node 20 or newer is needed for tests/server)" >&2
  exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "FAIL: node $(node --version) is too old; tests/server needs Node 20 or newer" >&2
  exit 1
fi
if [ ! -f "$here/node_modules/openai/package.json" ]; then
  echo "FAIL: the openai npm package is missing; run: npm ci --prefix tests/server" >&2
  exit 1
fi
export TS_CLI="$1" TS_CHAT_MODEL_DIR="$2"
cd "$here"
exec node --test --test-concurrency=1 "$here"/*.test.mjs
