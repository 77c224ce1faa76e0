#!/usr/bin/env bash
# CTest entry for the openai-client tests: checks that Node >= 20 and the pinned packages are present
# (failing loudly otherwise; nothing is skipped), then runs `node --test`.
# Usage: run_node_tests.sh PATH/TO/twinspark-cli MODEL_DIR TEST_FILE...   (files relative to tests/server)
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
if [ "$#" -lt 3 ]; then
  echo "usage: run_node_tests.sh PATH/TO/twinspark-cli MODEL_DIR TEST_FILE..." >&2
  exit 2
fi
# absolute paths: the tests run from tests/server
export TS_CLI="$(realpath "$1")" TS_CHAT_MODEL_DIR="$(realpath "$2")"
shift 2
cd "$here"
exec node --test --test-concurrency=1 "$@"
