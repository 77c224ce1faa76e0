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
rm -rf .device-deps/debs .device-deps/usr/share/doc
du -sh .device-deps
