#!/usr/bin/env bash
# Runs lab/probes/lock_probe.cu over every blocker x releaser pair (or BLOCKERS / RELEASERS), four
# processes at a time, one line per pair into $OUT/lock_probe.txt (bench/results §13.1).
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root
OUT=${OUT:-/tmp/rmacc-out}; mkdir -p "$OUT"
nvcc -O2 -arch=sm_90 -o /tmp/lock_probe lab/probes/lock_probe.cu -lcuda || exit 1
names=$(/tmp/lock_probe list)
B=${BLOCKERS:-$(sed -n 's/^blockers: //p' <<< "$names")}
R=${RELEASERS:-$(sed -n 's/^releasers: //p' <<< "$names")}
for b in $B; do for r in $R; do echo "$b $r"; done; done | xargs -P 4 -n 2 sh -c \
  'out=$(timeout 20 /tmp/lock_probe "$0" "$1" 2>&1); echo "$0 $1 rc=$? $(echo $out)"' |
  sort > "$OUT/lock_probe.txt"
grep -c STUCK "$OUT/lock_probe.txt" | xargs echo "stuck pairs:"
