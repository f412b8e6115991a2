#!/usr/bin/env bash
# Host CPU per small call, old build against new, in alternated runs (issue 49 item 2: host time
# per call <= 10 us at 1 x 2 and 2 x 1, <= 5 us of it on the caller's thread): rmacc-perf
# alltoallv at 1 KiB per rank with --host-cpu, host backend, emulated nodes over libfabric tcp
# loopback. Both runs use this tree's rmacc-perf (public API only); the old one loads the old
# library first (LD_LIBRARY_PATH), so only the library differs. Medians per build and shape.
# Usage: BASE_LIB=/dir/with/old/librmacc.so.0 bench/host_cpu_ab.sh [REPEATS] [ITERS]
#   (BUILD: this tree's build directory, default build/; SHAPES default "1x2 2x1"; logs in $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out}
B=${BUILD:-build}
: "${BASE_LIB:?BASE_LIB must name the directory of the old librmacc.so.0}"
mkdir -p "$OUT"
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp
rows="$OUT/host-cpu-ab.txt"
: > "$rows"
for rep in $(seq 1 "${1:-3}"); do
  for shape in ${SHAPES:-1x2 2x1}; do
    nodes=${shape%x*}; per=${shape#*x}; np=$((nodes * per))
    for build in old new; do
      lib=""; [ "$build" = old ] && lib="$BASE_LIB"
      log="$OUT/host-cpu-$build-$shape-$rep.log"
      LD_LIBRARY_PATH="$lib" tools/rmacc-run --timeout 300 -n "$np" --nodes "$nodes" -- \
        "$B/tools/rmacc-perf" alltoallv -b 1K -e 1K -n "${2:-1000}" -w 50 --host-cpu > "$log" 2>&1
      t=$(grep -E "^\[0\] +1024 " "$log" | awk '{print $5}')
      read -r all caller < <(sed -nE 's/.*host CPU per call: ([0-9.]+) us, ([0-9.]+) us.*/\1 \2/p' "$log")
      echo "$build $shape $rep ${t:-nan} ${all:-nan} ${caller:-nan}" | tee -a "$rows"
    done
  done
done
python3 - "$rows" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print("build shape runs | us/call (wall) | host CPU us/call | on caller's thread  (medians)")
for shape in dict.fromkeys(r[1] for r in rows):
    for build in ("old", "new"):
        sel = [r for r in rows if r[0] == build and r[1] == shape]
        med = [st.median(float(r[i]) for r in sel) for i in (3, 4, 5)]
        print("%-5s %-5s %4d | %14.1f | %16.2f | %18.2f" % (build, shape, len(sel), *med))
PY
