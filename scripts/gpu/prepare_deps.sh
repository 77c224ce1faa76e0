#!/usr/bin/env bash
# Run HERE (the Debian build machine), before a device call: the GPU host has CUDA, CMake and Ninja but
# none of our Debian -dev packages, and it cannot download. This unpacks the two the engine needs there
# (nlohmann-json: header-only; PCRE2: header + static library) into .device-deps/ (git-ignored), which the
# device call names in `carry`. The HTTP server and the Qt parts are not built on the GPU host.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .device-deps && mkdir -p .device-deps/debs
( cd .device-deps/debs && apt-get download nlohmann-json3-dev libpcre2-dev >/dev/null 2>&1 )
for f in .device-deps/debs/*.deb; do dpkg -x "$f" .device-deps; done
# Only what the build reads: the headers, nlohmann's CMake config and the 8-bit PCRE2 static library
# (the call's working tree + carried paths are limited to 64 MiB).
rm -rf .device-deps/debs .device-deps/usr/share/doc .device-deps/usr/share/man .device-deps/usr/bin
find .device-deps -name 'libpcre2-16*' -o -name 'libpcre2-32*' -o -name 'libpcre2-posix*' -o -name '*.so*' | xargs rm -f
# Packed: the call's working tree + carried paths are limited to 64 MiB, and the tree is close to it.
tar cJf /tmp/ts-device-deps.tar.xz -C .device-deps usr && rm -rf .device-deps/usr && mv /tmp/ts-device-deps.tar.xz .device-deps/deps.tar.xz
ls -la .device-deps
