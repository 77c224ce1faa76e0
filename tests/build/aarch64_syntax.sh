#!/usr/bin/env bash
# The product's machine, a DGX Spark, is arm64 (Grace CPU + GB10); CI and this repository's builds are x86_64.
# This compiles every host source of the engine, the CPU backend, the server and the CLI for aarch64 with
# Debian's cross compiler (g++-aarch64-linux-gnu, scripts/install-deps.sh), syntax and templates only
# (-fsyntax-only: no link, no arm64 libraries needed), so x86-only code — intrinsics without a portable path,
# x86 builtins, assumptions of the x86 ABI in templates — fails here instead of on the target. Header-only and
# arch-independent headers (nlohmann, cpp-httplib, PCRE2's pcre2.h) come from the host's /usr/include, searched
# after the cross sysroot. engine/serve/auth.cpp is left out: OpenSSL's headers need the arm64 package's generated
# opensslconf.h, which the amd64 one cannot stand in for; auth.cpp itself is a SHA-256 call and a memcmp.
# The CUDA sources and the Qt control center are not covered (nvcc and Qt for arm64 are not installed here).
# Usage: tests/build/aarch64_syntax.sh [SOURCE_DIR]   (CTest: aarch64_syntax)
set -uo pipefail
SRC=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
CXX=aarch64-linux-gnu-g++
command -v "$CXX" >/dev/null || { echo "aarch64_syntax: $CXX not found (Debian package g++-aarch64-linux-gnu; scripts/install-deps.sh installs it)"; exit 1; }
cd "$SRC"
files=$(ls engine/*/*.cpp kernels/*.cpp kernels/cpu/*.cpp app/cli/*.cpp | grep -v '^engine/serve/auth\.cpp$')
# One compiler per core; each failure prints its file and the first errors.
check() {
  out=$("$CXX" -std=c++20 -fsyntax-only -Iengine -Ikernels -Iapp -idirafter /usr/include "$1" 2>&1) && return 0
  printf 'FAIL %s\n%s\n' "$1" "$(echo "$out" | head -20)"
  return 1
}
export -f check
export CXX
n=$(echo "$files" | wc -l)
log=$(echo "$files" | xargs -P "$(nproc)" -I{} bash -c 'check "$1"' _ {} 2>&1)
failed=$(printf '%s\n' "$log" | grep -c '^FAIL ')
printf '%s\n' "$log" | grep -v '^$'
echo "aarch64_syntax: $n files, $failed failed"
[ "$failed" -eq 0 ]
