#!/usr/bin/env bash
# Whether sm_120a and sm_121a compile the same device code: every CUDA source's device pass, preprocessed for both
# targets with the kernels' include paths and flags (nvcc -E), must be the same text. Then a build for sm_121a alone
# compiles every code path a build with sm_120a would, and scripts/test.sh leaves sm_120a out of the test build
# (~2 of a 2-core CI run's minutes). Exact where a grep for `__CUDA_ARCH__` comparisons is not: a macro wrapping the
# architecture, a header's feature macro (__CUDA_ARCH_FEAT_SM121_ALL, __CUDA_ARCH_SPECIFIC__) or an arithmetic use
# all show up as different text. (It is stricter than the compiler: `1200 / 100` and `1210 / 100` differ here although
# both are 12 — the kernels spell such branches so that every sm_12x target sees the same text.)
# Usage: scripts/cuda_sm12x_same.sh [FILE.cu ...]     (default: kernels/cuda/*.cu; ~8 s on 2 cores)
# Exit 0: the same text for every file; 1: a file differs (named, with its first differing lines); 2: no nvcc, or a
# file did not preprocess (its error printed). NVCC overrides the compiler; JOBS the parallel preprocessings.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "cuda_sm12x_same: no nvcc (looked for $NVCC)" >&2; exit 2; }
if [ $# -gt 0 ]; then FILES=("$@"); else FILES=("$ROOT"/kernels/cuda/*.cu); fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# One file: both targets' device text, then 0 (same), 1 (differs) or 2 (an error), as a line "<code> <file>".
one() {
  local f=$1 n a
  n=$(printf '%s' "$f" | md5sum | cut -c1-12)
  for a in 120a 121a; do
    # The kernels' flags (kernels/CMakeLists.txt): their include paths, C++17, -O3 -DNDEBUG, relaxed constexpr.
    if ! "$NVCC" -I"$ROOT/kernels" -I"$ROOT/engine" -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -E \
      -Xcompiler -P --generate-code "arch=compute_$a,code=sm_$a" -x cu "$f" -o "$TMP/$n.$a.ii" 2>"$TMP/$n.$a.err"; then
      echo "2 $f"
      return
    fi
  done
  if cmp -s "$TMP/$n.120a.ii" "$TMP/$n.121a.ii"; then echo "0 $f"; else echo "1 $f"; fi
}
export -f one
export NVCC ROOT TMP
results=$(printf '%s\0' "${FILES[@]}" | xargs -0 -n1 -P "${JOBS:-$(nproc)}" bash -c 'one "$1"' _)

rc=0
while read -r code f; do
  [ -n "$code" ] || continue
  n=$(printf '%s' "$f" | md5sum | cut -c1-12)
  if [ "$code" = 2 ]; then
    echo "cuda_sm12x_same: $f did not preprocess:" >&2
    head -20 "$TMP/$n.120a.err" "$TMP/$n.121a.err" 2>/dev/null >&2
    rc=2
  elif [ "$code" = 1 ]; then
    echo "cuda_sm12x_same: $f: sm_120a and sm_121a see different device code:"
    diff "$TMP/$n.120a.ii" "$TMP/$n.121a.ii" | head -8
    [ $rc = 2 ] || rc=1
  fi
done <<<"$results"
[ $rc = 0 ] && echo "cuda_sm12x_same: ${#FILES[@]} file(s): sm_120a and sm_121a see the same device code"
exit $rc
