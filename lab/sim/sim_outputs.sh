#!/usr/bin/env bash
# rmacc-sim's output at a fixed set of shapes, for checking that a change leaves the simulator's
# answers byte-identical (issue 51: the simulator is finished). sim.sh's two variants (network:
# every schedule, no host cost; host: rmacc with the h200-host costs) and the text report, at 2
# and 8 nodes, for uniform 16M, zipf 256M and the MoE dispatch, and the loopback preset. The
# planner's wall-clock build time, the one measured figure in the output, is masked.
#   SIM=build/lab/rmacc-sim lab/sim/sim_outputs.sh /tmp/before   # then again after, and
#   diff -r /tmp/before /tmp/after
set -euo pipefail
cd "$(dirname "$0")/../.."
SIM=${SIM:-build/lab/rmacc-sim}
OUT=${1:?usage: sim_outputs.sh OUT_DIR}
mkdir -p "$OUT"
mask() { sed -E 's/"plan_ms":[0-9.]+/"plan_ms":T/; s/ in [0-9.]+ ms$/ in T ms/'; }
cases=("--traffic uniform --bytes 16M" "--traffic zipf --bytes 256M"
       "--traffic moe --tokens 4096 --hidden 7168 --elem-bytes 2 --experts 256 --topk 8 --node-limit 4")
names=(uniform-16M zipf-256M moe-dsv3)
for n in 2 8; do
  for i in 0 1 2; do
    read -ra traffic <<< "${cases[$i]}"
    c="$n-${names[$i]}"
    plan=(); [ "${names[$i]}" = moe-dsv3 ] && plan=(--plan-us-per-op 0.075)  # as sim.sh plans it
    "$SIM" --preset h200 --nodes "$n" "${traffic[@]}" --schedule all --host-us 0 \
      --enqueue-us-per-op 0 --json | mask > "$OUT/network-$c.jsonl"
    "$SIM" --preset h200-host --nodes "$n" "${traffic[@]}" --schedule rmacc --no-verify \
      "${plan[@]}" --json | mask > "$OUT/host-$c.jsonl"
    "$SIM" --preset h200 --nodes "$n" "${traffic[@]}" --schedule all | mask > "$OUT/text-$c.txt"
  done
done
"$SIM" --preset h200-loopback --nodes 2 --gpus 2 --traffic zipf --bytes 16M | mask > "$OUT/loopback.txt"
