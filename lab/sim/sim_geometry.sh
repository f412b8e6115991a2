#!/usr/bin/env bash
# Relay geometry against traffic (bench/results §20): rmacc-sim's rmacc schedule, network
# variant, on 8..128 nodes x 8 GPUs, with the 64 MiB relay cut into 4, 8, 16 or 32 slots,
# signals on the data endpoint (as the library) or on one of their own (--signal-endpoint),
# node rounds in NCCL's triangular order or paired (--round-order); each geometry fixed for
# the call (--no-fit-slots). JSON lines into lab/sim/data/geometry.jsonl, then a table of the
# fraction of each traffic's own bound. NODES, CASES, CONFIGS narrow it; SIM picks the binary.
# (The table in bench/results §20.2 is commit 0a14f66's, where "library" was the triangular order
# and
# the model ran a first call; this script now runs calls in steady state, bench/results §20.4.)
set -euo pipefail
cd "$(dirname "$0")/../.."
SIM=${SIM:-build/lab/rmacc-sim}
NODES=${NODES:-"8 16 32 64 128"}
CASES=${CASES:-"uniform-256M zipf-256M moe-dsv3"}
# slots:rounds-per-batch:signal endpoint:round order ("-": the library's default rounds per
# batch, slots / 2)
CONFIGS=${CONFIGS:-"4:-:0:triangular 8:4:0:triangular 16:4:0:triangular 32:4:0:triangular
  4:-:1:triangular 8:4:1:triangular 16:4:1:triangular
  4:-:0:paired 8:4:0:paired 16:4:0:paired 4:-:1:paired 8:4:1:paired 16:4:1:paired"}
OUT=${OUT:-lab/sim/data/geometry.jsonl}
: > "$OUT"
one() {  # config nodes case
  local cfg=$1 n=$2 c=$3 s r e order traffic
  IFS=: read -r s r e order <<< "$cfg"
  case $c in
    uniform-*|zipf-*) traffic=(--traffic "${c%%-*}" --bytes "${c#*-}") ;;
    moe-dsv3) traffic=(--traffic moe --tokens 4096 --hidden 7168 --elem-bytes 2 --experts 256
                       --topk 8 --node-limit 4) ;;
  esac
  local extra=(--relay-bytes 64M --relay-slots "$s" --round-order "$order" --no-fit-slots)
  [ "$r" != - ] && extra+=(--rounds-per-batch "$r")
  [ "$e" = 1 ] && extra+=(--signal-endpoint)
  "$SIM" --preset h200 --schedule rmacc --no-verify --host-us 0 --enqueue-us-per-op 0 \
    --nodes "$n" "${traffic[@]}" "${extra[@]}" --json |
    sed "s/^{/{\"case\":\"$c\",\"config\":\"$cfg\",/"
}
export -f one
export SIM
for cfg in $CONFIGS; do for n in $NODES; do for c in $CASES; do echo "$cfg $n $c"; done; done; done |
  xargs -P "$(nproc)" -n 3 bash -c 'one "$@"' _ >> "$OUT"
/usr/bin/python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
frac = {(r["config"], r["case"], r["nodes"]): r["node_bound_us"] / r["time_us"] for r in rows}
configs = list(dict.fromkeys(r["config"] for r in rows))
cases = list(dict.fromkeys(r["case"] for r in rows))
nodes = sorted({r["nodes"] for r in rows})
print("| slots:rounds/batch:endpoint:order | " + " | ".join(f"{c} {n}" for c in cases for n in nodes) + " |")
print("|---|" + "---:|" * (len(cases) * len(nodes)))
for g in configs:
    cells = [f"{frac[(g, c, n)]:.2f}" if (g, c, n) in frac else "" for c in cases for n in nodes]
    print(f"| {g} | " + " | ".join(cells) + " |")
PY
