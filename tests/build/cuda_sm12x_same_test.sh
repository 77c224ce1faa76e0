#!/usr/bin/env bash
# scripts/cuda_sm12x_same.sh on small CUDA sources whose answer is known: the same device code for sm_120a and
# sm_121a (exit 0), different code — a comparison with 1210, and the form a grep would miss, the architecture behind
# a macro — (exit 1, the file named), a file that does not preprocess (exit 2). scripts/test.sh decides from it
# whether the test build needs sm_120a.
# Usage: cuda_sm12x_same_test.sh <source dir>
set -uo pipefail
SRC=${1:?source dir}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
expect() {  # expect <exit code> <what the output must contain> <files...>
  local want=$1 text=$2
  shift 2
  out=$(bash "$SRC/scripts/cuda_sm12x_same.sh" "$@" 2>&1)
  rc=$?
  if [ "$rc" = "$want" ] && grep -qF -- "$text" <<<"$out"; then
    echo "ok   exit $rc for $(cd "$T" && basename -a "$@" | tr '\n' ' ')"
  else
    echo "FAIL exit $rc (want $want, output with '$text') for $*:"; echo "$out"
    fails=$((fails + 1))
  fi
}
cat >"$T/same.cu" <<'CU'
// Branches at 900 and 1200 only: every sm_12x target takes the same one.
__global__ void k(int* p) {
#if __CUDA_ARCH__ >= 1200
  *p = 12;
#elif __CUDA_ARCH__ >= 900
  *p = 9;
#endif
}
CU
cat >"$T/at1210.cu" <<'CU'
__global__ void k(int* p) {
#if __CUDA_ARCH__ >= 1210
  *p = 121;
#else
  *p = 0;
#endif
}
CU
cat >"$T/macro.cu" <<'CU'
#define TS_ARCH_OF_THIS_PASS __CUDA_ARCH__
__global__ void k(int* p) { *p = TS_ARCH_OF_THIS_PASS; }
CU
cat >"$T/broken.cu" <<'CU'
#include "no_such_header_anywhere.cuh"
CU
expect 0 "2 file(s): sm_120a and sm_121a see the same device code" "$T/same.cu" "$SRC/kernels/cuda/cuda_exl3_prefill.cu"
expect 1 "at1210.cu: sm_120a and sm_121a see different device code" "$T/at1210.cu"
expect 1 "macro.cu: sm_120a and sm_121a see different device code" "$T/same.cu" "$T/macro.cu"
expect 2 "broken.cu did not preprocess" "$T/broken.cu" "$T/same.cu"
[ $fails = 0 ] && echo "cuda_sm12x_same_test: all passed"
exit $fails
