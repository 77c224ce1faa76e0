#!/usr/bin/env bash
# Installs the Debian 12 packages TwinSpark builds and tests with. Idempotent; needs root (or sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
# libqt6opengl6-dev: Qt6Charts' CMake package requires Qt6OpenGL's, which qt6-charts-dev does not pull in
# (without recommends, a fresh Debian 12 configures with "Qt6Charts could not be found because dependency
# Qt6OpenGL could not be found"). g++-aarch64-linux-gnu: the aarch64_syntax test compiles the host sources for
# the DGX Spark's arm64 CPU (tests/build/aarch64_syntax.sh). qt6-translations-l10n: Qt's own strings (dialog
# buttons) in Chinese when the control center runs in Chinese; fonts-wqy-microhei (5 MB): Chinese glyphs where the
# desktop has none (ui/translations.h, applyLanguageFont). locales: the de_DE source the decimal-comma tests compile
# with localedef (tests/unit/test_runtime_settings.cpp, tests/gui/test_engine_settings.cpp).
PKGS=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev qt6-tools-dev qt6-tools-dev-tools qt6-l10n-tools libgl-dev
  qt6-translations-l10n fonts-wqy-microhei
  nlohmann-json3-dev libcpp-httplib-dev libssh2-1-dev libssl-dev libpcre2-dev
  python3 python3-numpy python3-jinja2 locales
  g++-aarch64-linux-gnu
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
