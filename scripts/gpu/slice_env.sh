# Sourced by the full-width slice's device scripts (first_step.sh, prefill_ab.sh, decode_step_ab.sh), after
# run_gpu_suite.sh has built build-gpu and written the slice (SLICE=1) in the same device call: sets OUT (the
# script's first argument, default /tmp/twinspark-gpu; created), enters the repository root, and sets CLI, SL
# (SLICE_LAYERS, 4) and SDIR (SLICE_DIR, /tmp/twinspark-slice-L<SL>); exits 2 when either is missing.
source "$(dirname "${BASH_SOURCE[0]}")/cli_env.sh" "$@"  # OUT, CLI (another binary for A/B runs: ab_binaries.sh)
SL=${SLICE_LAYERS:-4}
SDIR=${SLICE_DIR:-/tmp/twinspark-slice-L$SL}
[ -x "$CLI" ] && [ -f "$SDIR/config.json" ] || { echo "run run_gpu_suite.sh (SLICE=1) first"; exit 2; }
