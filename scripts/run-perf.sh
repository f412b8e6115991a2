#!/usr/bin/env bash
# The main job (README quick start): install, build, run rmacc-perf alltoallv.
# With GPUs: one rank per GPU on this node. Without: the host backend, 4 ranks as 2 emulated
# nodes x 2 (so the relay path and the network proxy over libfabric tcp both run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
export FI_PROVIDER=${FI_PROVIDER:-tcp} FI_TCP_IFACE=${FI_TCP_IFACE:-lo}
if command -v nvidia-smi >/dev/null && ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU) && [ "$ngpu" -gt 0 ]; then
  exec tools/rmacc-run -n "$ngpu" -- build/tools/rmacc-perf alltoallv -b 1K -e 1G -f 4 "$@"
fi
exec tools/rmacc-run -n 4 --nodes 2 -- build/tools/rmacc-perf alltoallv -b 1K -e 16M -f 4 "$@"
