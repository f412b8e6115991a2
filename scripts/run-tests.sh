#!/usr/bin/env bash
# The test command (README quick start, CI): install, build (the lab too: lab/), run every test.
# GPU tests skip themselves on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DRMACC_BUILD_LAB=ON
cd build
ctest --output-on-failure --timeout 1200 "$@"
