# Sourced by the GPU machine's scripts that run the CLI run_gpu_suite.sh (or PREBUILT=1) put in build-gpu earlier
# in the same device call: sets OUT (the script's first argument, default /tmp/twinspark-gpu; created), enters the
# repository root and sets CLI (another binary for A/B runs: CLI=...); exits 2 when the CLI is missing.
# slice_env.sh adds the full-width slice's directory on top of this.
OUT=${1:-/tmp/twinspark-gpu}
mkdir -p "$OUT"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
CLI=${CLI:-build-gpu/app/twinspark-cli}
[ -x "$CLI" ] || { echo "$CLI missing: run run_gpu_suite.sh first"; exit 2; }
