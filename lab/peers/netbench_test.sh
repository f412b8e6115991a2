#!/usr/bin/env bash
# lab_netbench_runs: fi-netbench and rmacc-netbench each run on tcp loopback and print one row
# per size (8 B, 64 B, 512 B, 4 KiB, 32 KiB); a benchmark that fails, hangs or prints no figures
# fails the test. Usage: netbench_test.sh FI_NETBENCH RMACC_NETBENCH
set -euo pipefail
export FI_PROVIDER=tcp FI_TCP_IFACE=lo
for bench in "$1" "$2"; do
  out=$(timeout 50 "$bench" -p tcp -b 8 -e 32K -f 8 -n 20)
  echo "$out"
  rows=$(grep -cE '^ +[0-9]+ +[0-9.]+ +[0-9.]+$' <<<"$out" || true)
  if [ "$rows" -ne 5 ]; then
    echo "$(basename "$bench"): $rows rows, want 5" >&2
    exit 1
  fi
done
