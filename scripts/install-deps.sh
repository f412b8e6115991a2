#!/usr/bin/env bash
# Installs what building and testing rmacc needs on Debian/Ubuntu (skips what is there).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libfabric-dev libfabric-bin libgtest-dev
      libopenmpi-dev openmpi-bin python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
