#!/usr/bin/env bash
# Installs what is missing (Debian packages), then configures and builds trainplan into build/.
# Usage: bash scripts/build.sh   (as root, or with sudo available)
#        bash scripts/build.sh --deps-only [PACKAGE...]   only installs what is missing, with these packages
#        too (scripts/test.sh --sanitize and scripts/fuzz.sh build into folders of their own)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make libcli11-dev libfmt-dev nlohmann-json3-dev catch2 gnuplot-nox)
deps_only=false
if [ "${1:-}" = "--deps-only" ]; then
  deps_only=true
  packages+=("${@:2}")
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

if $deps_only; then exit 0; fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >&2
cmake --build build -j "$(nproc)" >&2
