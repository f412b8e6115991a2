#!/usr/bin/env bash
# A against B in one device call: rmacc-perf built from the working tree (A) and from the same
# tree with PATCH taken out (B), run in turns (A, B, A, B, ...) on the same shapes, so that the
# shared machine's drift falls on both. Needs .deps/ carried (as bench/gpu.sh). Ranks that share
# the GPU run under MPS. Logs and a table (ab.txt) under $OUT.
#   PATCH   the change to take out for B (a `git diff` of it; .deps/ is carried and ignored)
#   SHAPES  ranks:nodes of each run (default "4:2 2:2": the relay path, the proxy path)
#   ARGS    rmacc-perf arguments (default: alltoallv 1 KiB..16 MiB, 50 iterations)
#   RUNS    turns of each build per shape (default 3)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/rmacc-out}
: "${PATCH:?PATCH: the change to take out for the B build}"
SHAPES=${SHAPES:-"4:2 2:2"}
ARGS=${ARGS:-"alltoallv -b 1K -e 16M -f 4 -n 50 -w 5"}
RUNS=${RUNS:-3}
mkdir -p "$OUT"
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp CUDA_DEVICE_MAX_CONNECTIONS=16
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log

build() {  # build SRC DIR
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRMACC_WITH_CUDA=ON \
    -DRMACC_BUILD_TESTS=OFF -DRMACC_FABRIC_ROOT="$PWD/.deps" >> "$OUT/ab-build.log" 2>&1 &&
    cmake --build "$2" -j "$(nproc)" --target rmacc rmacc-perf >> "$OUT/ab-build.log" 2>&1
}
rm -rf /tmp/ab-b && mkdir -p /tmp/ab-b &&
  tar --exclude=./.git --exclude='./build*' -cf - . | tar -C /tmp/ab-b -xf - &&
  patch -s -d /tmp/ab-b -p1 -R < "$PATCH" || { echo "ab: could not take $PATCH out"; exit 1; }
build . build-ab-a && build /tmp/ab-b /tmp/ab-b/build || { tail -20 "$OUT/ab-build.log"; exit 1; }
echo "built in ${SECONDS}s"

ngpu=$(nvidia-smi -L | grep -c GPU)
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
mps=off
for shape in $SHAPES; do
  n=${shape%%:*} nodes=${shape##*:}
  if (( n > ngpu )) && [[ $mps == off ]]; then nvidia-cuda-mps-control -d && mps=on; fi
  for run in $(seq "$RUNS"); do
    for side in a b; do
      dir=$PWD/build-ab-a; [[ $side == b ]] && dir=/tmp/ab-b/build
      log="$OUT/ab-$side-${n}x${nodes}-$run.log"
      # shellcheck disable=SC2086
      RMACC_LIB=$dir/librmacc.so timeout 300 tools/rmacc-run -n "$n" --nodes "$nodes" \
        --timeout 290 -- "$dir/tools/rmacc-perf" $ARGS > "$log" 2>&1
      echo "$side ${n}x$nodes run $run: exit $?"
    done
  done
done
[[ $mps == on ]] && echo quit | nvidia-cuda-mps-control

# Per shape and size: the median time of each build's runs, and #wrong summed over its runs.
python3 bench/ab_table.py "$OUT" "$SHAPES" | tee "$OUT/ab.txt"
# The device tool brings back at most 8 files: the runs' logs go back as one archive.
(cd "$OUT" && tar czf ab-logs.tgz ab-*.log && rm -f ab-*.log)
