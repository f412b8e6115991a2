#!/usr/bin/env bash
# Installs what building and testing rmacc needs on Debian/Ubuntu (skips what is there).
set -euo pipefail
# python3-torch (Debian: 1.13, CPU) and venv/pip/setuptools/wheel: the Python package, its
# tests and its offline pip install test (no PyPI anywhere).
pkgs=(build-essential cmake ninja-build pkg-config libfabric-dev libfabric-bin libgtest-dev
      libopenmpi-dev openmpi-bin python3 python3-torch python3-venv python3-pip python3-setuptools
      python3-wheel)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
# Machines without a package registry (GPU hosts) go on with what they have; the build then
# names what is missing (libfabric headers can come from RMACC_FABRIC_ROOT, see docs/usage.md).
if ! $sudo apt-get update -q || ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
    --no-install-recommends "${missing[@]}"; then
  echo "warning: could not install ${missing[*]}; continuing with what is installed" >&2
fi
