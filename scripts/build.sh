#!/usr/bin/env bash
# Configures and builds rmacc into build/ (CUDA backend too when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j "$(nproc)"
