#!/usr/bin/env bash
# Predicted busbw per GPU at cluster scale (bench/results §6): rmacc-sim over 2..128 nodes x 8
# GPUs at 50 GB/s per GPU NIC, cross-rail penalised, three schedules, five traffic cases; JSON
# lines into lab/sim/data/sweep.jsonl, then the plot (lab/sim/data/busbw.png).
# NODES="2 4" or CASES="uniform-16M" narrow it; SIM=path picks the binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIM=${SIM:-build/lab/rmacc-sim}
NODES=${NODES:-"2 4 8 16 32 64 128"}
CASES=${CASES:-"uniform-16M uniform-256M zipf-16M zipf-256M moe-dsv3"}
OUT=${OUT:-lab/sim/data}
mkdir -p "$OUT"
: > "$OUT/sweep.jsonl"
# Two variants: "network" (host cost 0, every schedule: what the schedule itself allows) and
# "host" (rmacc with today's per-call host cost, preset h200-host: the driver's host time per
# backend call measured on an H200, the count exchange per node; the MoE dispatch also plans
# every call, as its counts change: 0.075 us per op of the rank's own plan, bench/results §9.1).
run() {  # case variant args...
  local c=$1 v=$2; shift 2
  "$SIM" "$@" --json | sed "s/^{/{\"case\":\"$c\",\"variant\":\"$v\",/" >> "$OUT/sweep.jsonl"
}
for n in $NODES; do
  for c in $CASES; do
    plan=()
    case $c in
      uniform-*|zipf-*) traffic=(--traffic "${c%%-*}" --bytes "${c#*-}") ;;
      moe-dsv3) traffic=(--traffic moe --tokens 4096 --hidden 7168 --elem-bytes 2 --experts 256
                         --topk 8 --node-limit 4)
                plan=(--plan-us-per-op 0.075) ;;
      *) echo "unknown case $c" >&2; exit 2 ;;
    esac
    # The verifier runs up to 16 nodes (it replays every byte range, minutes per plan above);
    # the planner is the same code at every size.
    verify=(); [ "$n" -gt 16 ] && verify=(--no-verify)
    echo "# $(date +%T) $n nodes, $c" >&2
    run "$c" network --preset h200 --nodes "$n" "${traffic[@]}" --schedule all "${verify[@]}" \
      --host-us 0 --enqueue-us-per-op 0
    run "$c" host --preset h200-host --nodes "$n" "${traffic[@]}" --schedule rmacc --no-verify \
      "${plan[@]}"
  done
done
/usr/bin/python3 lab/sim/sim_plot.py "$OUT/sweep.jsonl" "$OUT/busbw.png"
