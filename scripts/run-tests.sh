#!/usr/bin/env bash
# The test command (README quick start, CI): install, build, run every test.
# GPU tests skip themselves on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 1200 "$@"
