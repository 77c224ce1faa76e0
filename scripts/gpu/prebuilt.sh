#!/usr/bin/env bash
# Run HERE: build the GPU machine's twinspark-cli on this machine, so that a device call spends its time on
# the GPU instead of ~4–5 minutes of building (measured: a binary built here runs there — the device image is
# Ubuntu 24.04 with glibc 2.39, newer than this machine's Debian 12 — eighteenth session, docs/PERFORMANCE.md).
# The build is run_gpu_suite.sh's configuration (configure_device.sh: Release, GUI / server / tests off, CUDA
# for ARCHS, the deps of .device-deps) in build-dev/; the binary is stripped and xz-compressed to
# build-dev/twinspark-cli.xz (~15 MB), and the shared libraries it needs beyond the CUDA toolkit's and the C/C++
# runtime's are copied to build-dev/lib. The tree plus that file exceed the call's 64 MiB unless the BF16
# embedded model stays here: `device_tree.sh stash --room`.
#   here:   bash scripts/gpu/prebuilt.sh && bash scripts/gpu/device_tree.sh stash --room
#   device: PREBUILT=1 bash scripts/gpu/run_gpu_suite.sh "$OUT"   (carry ["build-dev/twinspark-cli.xz", "build-dev/lib"])
#   here:   bash scripts/gpu/device_tree.sh restore
# Env: ARCHS (90a), JOBS (ninja -j; default all cores). About 9 minutes on 2 cores from scratch.
# SERVER=1: with the OpenAI server (`serve`), in build-dev-srv/ (its own build: the server's link libraries —
# cpp-httplib, OpenSSL, zlib, brotli — travel in build-dev-srv/lib); device: scripts/gpu/serve_check.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=build-dev
[ "${SERVER:-0}" = 1 ] && B=build-dev-srv
ARCHS=${ARCHS:-90a}
mkdir -p "$B/deps" "$B/lib"
[ -d "$B/deps/usr/include/nlohmann" ] || tar xJf .device-deps/deps.tar.xz -C "$B/deps"
bash scripts/gpu/configure_device.sh "$B" "$PWD/$B/deps/usr" "$ARCHS" >"$B/configure.log"
ninja -C "$B" ${JOBS:+-j"$JOBS"} twinspark-cli
strip -o "$B/twinspark-cli.stripped" "$B/app/twinspark-cli"
xz -9 -T0 -c "$B/twinspark-cli.stripped" >"$B/twinspark-cli.xz"
rm -f "$B/twinspark-cli.stripped" "$B"/lib/*
# Everything ldd resolves outside the CUDA toolkit and the C / C++ runtime travels (today: libpcre2-8).
ldd "$B/app/twinspark-cli" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
  libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libgcc_s.so*|libstdc++.so*|ld-linux*|libcuda*|libcublas*) ;;
  *) cp -L "$lib" "$B/lib/" ;;
  esac
done
echo "prebuilt: $B/twinspark-cli.xz ($(du -h "$B/twinspark-cli.xz" | cut -f1)), libs: $(ls "$B/lib" | tr '\n' ' ')"
if [ "${SERVER:-0}" = 1 ]; then next='bash scripts/gpu/serve_check.sh "$OUT"'; else next='PREBUILT=1 bash scripts/gpu/run_gpu_suite.sh "$OUT"'; fi
echo "carry: [\"$B/twinspark-cli.xz\", \"$B/lib\"]   (device: $next)"
