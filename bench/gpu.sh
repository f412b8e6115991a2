#!/usr/bin/env bash
# One call on a GPU machine (the device tool's run): build, GPU tests, benchmarks beside their
# NCCL peers, logs under $OUT, and a compact summary last (bench/summary.py). Needs .deps/
# carried (libfabric 1.17 and googletest headers, unpacked Debian packages: see bench/README.md).
# Ranks that share a GPU run under MPS; one rank per GPU runs without.
#
# STEPS picks what runs, in this order (default: tests to loop, not yet run together; BUDGET_S
# skips what would not fit the device tool's 10 minutes):
#   tests      GPU tests (ctest -R Cuda|Gpu; 2 x 2 cases under MPS)
#   perf       rmacc-perf alltoall 1K..MAXSIZE (-m 1 and -m 0), 8 B per peer, put+signal latency
#   ncclapi    NCCL's ncclAlltoAll through its C API (lab/peers/nccl_perf.cc): kernel and CE paths
#   peer       PyTorch's all_to_all_single (bench/nccl_peer.py) and the copy-engine ceiling
#   overlap    rmacc-overlap: all-to-alls beside a cuBLAS GEMM loop, rmacc and NCCL
#   zipf       AlltoAllV zipf and uniform at equal bytes per rank
#   fixed      the small-call targets: 1 rank against NCCL at one rank, 1 x 2 at 8 B per peer
#              against put+signal, 1K..1M AlltoAll / AlltoAllV / device counts; RUNS turns
#   cost       host cost per call on one node (bench/call_cost.py)
#   dyncounts  AlltoAllV with device counts: rmaccAlltoAllvDynamic against the host-count call,
#              alone and behind the stream sync + D2H copy frameworks do (issue 13)
#   proxycpu   2 x 1 AlltoAllV at 1 KiB and 64 MiB: the rmacc-proxy thread's CPU share (issue 15)
#   loop       same-device copies (issue 11): AlltoAll 64K..1G with RMACC_LOCAL_COPY=direct
#              and =engines
#   graph      CUDA graph replays (rmacc-perf --graph) against the same calls uncaptured, same
#              run: AlltoAll and AlltoAllV with device counts, 1 node, 1K..64M (issue 13)
# and, only when named: sanitizer capsan pyunit random trace relay proxy gdr cost2
# graphnodes timeline padded
# (padded: rmaccAlltoAllvPadded beside rmaccAlltoAllvDynamic and the host-count call at the same
# zipf counts, 1 node, 1K..16M, uncaptured and as graph replays, same run: issue 49 item 3)
# (timeline: CUPTI traces of one 1 KiB call, bench/timeline/cupti_timeline.py: AlltoAll 1 x 1 and
# 1 x 2, uncaptured and --graph, AlltoAllV --counts device, NCCL at one rank)
# (capsan: compute-sanitizer memcheck over the captured dynamic call, 1 x 2 on one GPU; pyunit:
# the Python package's CUDA unittest, PYUNIT picks the cases; graphnodes: the graph step's calls
# on 3 emulated nodes x 1, where completion waits run on a stream of their own)
# ("all": everything).
# GPU_TESTS narrows the tests step (a ctest -R regex; default Cuda|Gpu).
# MAXSIZE caps the alltoall sweeps (default 4G). BUDGET_S (default 540): steps not yet started
# when the script has run that long are skipped, so the logs and the summary still come back
# inside the device tool's 10 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/rmacc-out}
DEFAULT_STEPS="tests perf ncclapi peer overlap zipf cost dyncounts proxycpu loop graph"
STEPS=${STEPS:-$DEFAULT_STEPS}
[[ $STEPS == all ]] && STEPS="sanitizer capsan $DEFAULT_STEPS random trace relay proxy gdr cost2 graphnodes padded"
MAXSIZE=${MAXSIZE:-4G}
BUDGET_S=${BUDGET_S:-540}
mkdir -p "$OUT"
has() {  # has STEP: named in STEPS, and time left to start it
  [[ " $STEPS " == *" $1 "* ]] || return 1
  if (( SECONDS > BUDGET_S )); then echo "== $1 skipped: ${SECONDS}s used of BUDGET_S=$BUDGET_S"; return 1; fi
  echo "-- step $1 at ${SECONDS}s" >> "$OUT/machine.txt"
}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp
# rmacc's streams hold stream-memory waits and must not share hardware queues
# (docs/configuration.md); 16 per process leaves room for 4 MPS clients on one GPU (4 x 32 ran
# out of channels).
export CUDA_DEVICE_MAX_CONNECTIONS=16
{
  nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -5; git log -1 --format='commit %H'
  echo "steps: $STEPS"
} > "$OUT/machine.txt" 2>&1

# The libnccl.so.2 PyTorch loads (the NCCL its users get), found from the running process's
# mappings; else any under site-packages' nvidia/ or torch/lib. nccl-perf and rmacc-overlap take
# it from RMACC_NCCL_LIB.
find_nccl() {
  python3 - <<'EOF' 2>/dev/null
import glob, os, site, sys
try:
    import torch  # noqa: F401  (libtorch_cuda links libnccl)
    torch.cuda.nccl.version()
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "libnccl.so" in path and os.path.exists(path):
            print(path); sys.exit(0)
except Exception:
    pass
dirs = site.getsitepackages() + [site.getusersitepackages()]
for d in dirs:
    for pat in ("nvidia/**/libnccl.so*", "torch/lib/libnccl.so*"):
        hits = sorted(glob.glob(os.path.join(d, pat), recursive=True))
        if hits:
            print(hits[0]); sys.exit(0)
sys.exit(1)
EOF
}
export RMACC_NCCL_LIB=${RMACC_NCCL_LIB:-$(find_nccl)}
echo "nccl: ${RMACC_NCCL_LIB:-not found}" >> "$OUT/machine.txt"

cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DRMACC_WITH_CUDA=ON -DRMACC_BUILD_LAB=ON \
  -DRMACC_FABRIC_ROOT="$PWD/.deps" -DGTest_DIR="$PWD/.deps/usr/lib/x86_64-linux-gnu/cmake/GTest" \
  > "$OUT/build.log" 2>&1 && cmake --build build-gpu -j "$(nproc)" >> "$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; exit 1; }
echo "built in ${SECONDS}s"
export RMACC_LIB=$PWD/build-gpu/librmacc.so
ngpu=$(nvidia-smi -L | grep -c GPU)
local_ranks=$(( ngpu >= 2 ? ngpu : 2 ))  # 1 node: one rank per GPU, or 2 sharing one GPU

run_ranks() {  # run_ranks LOG NRANKS NODES TIMEOUT PROGRAM ARGS...: through rmacc-run, output to LOG
  local log=$1 n=$2 nodes=$3 t=$4; shift 4
  timeout $((t + 10)) tools/rmacc-run -n "$n" --nodes "$nodes" --timeout "$t" -- "$@" > "$log" 2>&1
}
perf() {  # perf NAME NRANKS NODES ARGS...: rmacc-perf, rank 0's table shown
  local name=$1 n=$2 nodes=$3; shift 3
  run_ranks "$OUT/perf-$name.log" "$n" "$nodes" 230 build-gpu/tools/rmacc-perf "$@"
  echo "== $name (exit $?)"; grep -vE "^\[[0-9]+\] \[rmacc\]" "$OUT/perf-$name.log" | grep -E "^\[0\]" | tail -14
}
quiet_perf() {  # as perf, but only the exit status and the footer lines (the summary has the rows)
  local name=$1 n=$2 nodes=$3; shift 3
  run_ranks "$OUT/perf-$name.log" "$n" "$nodes" 230 build-gpu/tools/rmacc-perf "$@"
  echo "== $name (exit $?): $(grep -hE "^\[0\] # (Out of bounds|Avg bus)" "$OUT/perf-$name.log" | cut -c5- | tr '\n' ' ')"
}

# compute-sanitizer before MPS (it does not run under MPS): one AlltoAllV across 2 emulated
# nodes x 1 rank (proxy + bounce) and one inside a node (CE), memcheck.
if has sanitizer; then
  for nodes in 1 2; do
    run_ranks "$OUT/sanitizer-$nodes.log" 2 $nodes 190 compute-sanitizer --tool memcheck \
      --error-exitcode 9 build-gpu/tools/rmacc-perf alltoallv -b 1M -e 1M -n 2 -w 1
    echo "compute-sanitizer memcheck, $nodes node(s): exit $?"; grep -E "ERROR SUMMARY" "$OUT/sanitizer-$nodes.log" | head -2
  done
  # put+signal into a device window of the other node (landing slots, H2D by its proxy).
  RMACC_DEBUG=INFO run_ranks "$OUT/sanitizer-putsignal.log" 2 2 190 compute-sanitizer --tool memcheck \
    --error-exitcode 9 build-gpu/tools/rmacc-perf putsignal -b 8 -e 16M -f 16 -n 3 -w 1
  echo "compute-sanitizer memcheck, putsignal 2 nodes: exit $?"; grep -E "ERROR SUMMARY" "$OUT/sanitizer-putsignal.log" | head -2
fi

# MPS only while ranks share a GPU: without it their contexts time-slice (a put+signal
# ping-pong 142 us instead of 4 us), with it one rank per GPU pays for it (1-node AlltoAll at
# 256 KiB-1 MiB: ~98 us a call under MPS, 35-55 us without;
# docs/decisions.md#mps-in-bench).
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
mps=off
mps_for() {  # mps_for NRANKS: MPS on when NRANKS ranks must share the GPUs, off otherwise
  if (( $1 > ngpu )) && [[ $mps == off ]]; then
    nvidia-cuda-mps-control -d && mps=on && echo "MPS on for $1 ranks" >> "$OUT/machine.txt"
  elif (( $1 <= ngpu )) && [[ $mps == on ]]; then
    echo quit | nvidia-cuda-mps-control; mps=off; sleep 1
  fi
}

if has tests; then
  mps_for 4  # the 2 x 2 cases
  (cd build-gpu && timeout 500 ctest -R "${GPU_TESTS:-Cuda|Gpu}" --output-on-failure --timeout ${TEST_TIMEOUT_S:-400}) > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests: exit $?"; grep -E "tests passed|tests failed|Failed|Passed" "$OUT/gpu-tests.log" | tail -12
fi

if has perf; then
  mps_for "$local_ranks"
  # The one-way 8 B put+signal latency, then AlltoAll at 8 B per peer: same run, compared.
  quiet_perf putsignal-1node 2 1 putsignal -b 8 -e 64M -f 8 -n 100 -w 10
  quiet_perf alltoall-8B "$local_ranks" 1 alltoall -d uint8 -b $((8 * local_ranks)) -e $((8 * local_ranks)) -n 1000 -w 50
  quiet_perf alltoall-1node "$local_ranks" 1 alltoall -b 1K -e "$MAXSIZE" -f 4 -n 20 -w 5
  quiet_perf alltoall-1node-m0 "$local_ranks" 1 alltoall -m 0 -b 1M -e "$MAXSIZE" -f 4 -n 20 -w 5
fi

if has fixed; then  # the small-call targets (issue 49), RUNS turns alternated (default 3)
  for run in $(seq "${RUNS:-3}"); do
    mps_for 1
    quiet_perf fixed-1rank-$run 1 1 alltoall -b 1K -e 1M -f 4 -n 200 -w 20
    [[ -n $RMACC_NCCL_LIB ]] && run_ranks "$OUT/fixed-nccl-1rank-$run.log" 1 1 200 \
      build-gpu/lab/nccl-perf -b 1K -e 1M -f 4 -n 200 -w 20
    mps_for 2
    quiet_perf fixed-putsignal-$run 2 1 putsignal -b 8 -e 8 -n 1000 -w 50
    quiet_perf fixed-8B-$run 2 1 alltoall -d uint8 -b 16 -e 16 -n 1000 -w 50
    quiet_perf fixed-1x2-$run 2 1 alltoall -b 1K -e 1M -f 4 -n 200 -w 20
    quiet_perf fixed-v-1x2-$run 2 1 alltoallv --pattern uniform -b 1K -e 1M -f 4 -n 200 -w 20
    quiet_perf fixed-dyn-1x2-$run 2 1 alltoallv --pattern uniform --counts device -b 1K -e 1M -f 4 -n 200 -w 20
  done
  python3 bench/fixed_cost.py "$OUT" | tee "$OUT/fixed.txt"
fi

if has ncclapi; then  # one GPU per rank, without MPS
  mps_for 0
  if [[ -n $RMACC_NCCL_LIB ]]; then
    # NCCL's INFO lines show that the CE communicator took the policy and initialised its copy
    # engines ("Init CE"): without them the ce table would be the kernel path under another name.
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV run_ranks "$OUT/nccl-perf.log" "$ngpu" 1 280 \
      build-gpu/lab/nccl-perf -b 1K -e "$MAXSIZE" -f 4 -n 20 -w 5
    echo "== nccl C API (exit $?): $(grep -hE "^\[0\] # (nccl-perf alltoall|Out of bounds)" "$OUT/nccl-perf.log" | cut -c5- | tr '\n' ' ')"
    echo "   CE evidence: $(grep -c "Init CE" "$OUT/nccl-perf.log") 'Init CE' lines; $(grep -m1 -oE "CTA policy flags set to [0-9]+" "$OUT/nccl-perf.log" || echo "no CTA policy line")"
  else
    echo "== nccl C API skipped: no libnccl.so.2 found (set RMACC_NCCL_LIB)"
  fi
fi

if has peer; then  # NCCL through PyTorch (needs one GPU per rank) and the copy-engine ceiling
  mps_for 0
  timeout 300 python3 bench/nccl_peer.py -b 1K -e "$MAXSIZE" -f 4 > "$OUT/nccl-peer.log" 2>&1
  echo "== torch nccl / ce ceiling (exit $?): $(grep -hE "^# NCCL" "$OUT/nccl-peer.log")"
fi

if has overlap; then
  mps_for 0
  bench/overlap build-gpu > "$OUT/overlap.log" 2>&1
  echo "== overlap (exit $?; table in the summary)"
fi

if has zipf; then  # equal bytes per rank; the summary compares them from 16M
  mps_for "$local_ranks"
  quiet_perf alltoallv-uniform-1node "$local_ranks" 1 alltoallv --pattern uniform -b 1M -e "$MAXSIZE" -f 4 -n 20 -w 5
  quiet_perf alltoallv-zipf-1node "$local_ranks" 1 alltoallv --pattern zipf -b 1M -e "$MAXSIZE" -f 4 -n 20 -w 5
fi

cost() {  # cost NRANKS NODES: where a small call's host time goes
  RMACC_DEBUG=INFO RMACC_DEBUG_SUBSYS=COLL,INIT,NET run_ranks "$OUT/cost-$1x$2.log" "$1" "$2" 110 \
    build-gpu/tools/rmacc-perf alltoallv -b 1K -e 1K -n 200 -w 10
  echo "== call cost, $1 ranks on $2 node(s): $(python3 bench/call_cost.py "$OUT/cost-$1x$2.log" 2>&1)"
  grep -hoE "proxy polls [a-z -]+|wait fd -?[0-9]+" "$OUT/cost-$1x$2.log" | sort | uniq -c
}
if has cost; then mps_for "$local_ranks"; cost "$local_ranks" 1; fi
if has cost2; then mps_for 4; cost 4 2; fi

if has random; then
  mps_for "$local_ranks"
  perf alltoallv-random-1node "$local_ranks" 1 alltoallv --pattern random -b 1K -e "$MAXSIZE" -f 4 -n 20 -w 5
fi
if has trace; then  # a timeline of small calls (stream ops and network hops), for bench/timeline.py
  mps_for 4
  for shape in "4 2" "4 4" "2 2" "4 1"; do
    set -- $shape
    RMACC_TRACE_FILE="$OUT/trace-$1x$2.%r.json" run_ranks "$OUT/trace-$1x$2.log" $1 $2 110 \
      build-gpu/tools/rmacc-perf alltoallv -b 1K -e 1K -n 30 -w 3
    perf small-$1x$2 $1 $2 alltoallv -b 1K -e 1M -f 32 -n 100 -w 10
  done
fi
# 2 emulated nodes x 2 ranks: the relay path, 4 ranks sharing the GPUs.
if has relay; then
  mps_for 4
  perf alltoallv-zipf-2x2 4 2 alltoallv --pattern zipf -b 1K -e 256M -f 4 -n 10 -w 3
  perf alltoallv-random-2x2 4 2 alltoallv --pattern random -b 1K -e 256M -f 16 -n 10 -w 3
  # The proxies' pacer on (tcp reports no link speed, so it is off by default here): data
  # writes in order at 2 GB/s, about loopback's rate; a check of the path, not a speed-up.
  RMACC_NET_PACE_GBPS=2 perf alltoallv-zipf-2x2-paced 4 2 alltoallv --pattern zipf -b 1K -e 256M -f 4 -n 10 -w 3
  # 5 emulated nodes: 4 remote sources a rank, so the completion waits run on a stream of their
  # own (src/exec/executor.cc classify); 5 x 2 has relays too. 10 MPS clients on one GPU get 8
  # hardware queues each (16 each ran out of channels at 4 x 32).
  mps_for 10
  # 3 emulated nodes x 2: relays that release themselves (plan_build.h libraryReleaseRelayUpTo)
  # and signals after the first relay puts (plan_build.h earlySignalPhase).
  perf alltoallv-zipf-3x2 6 3 alltoallv --pattern zipf -b 1K -e 64M -f 8 -n 5 -w 2
  # The same with 3 proxy threads a rank (tcp's default is one, Comm::usableProxyThreads): each
  # pair of ranks on its own thread's endpoint, one pacer and one signal lock shared.
  RMACC_PROXY_THREADS=3 perf alltoallv-zipf-3x2-threads 6 3 alltoallv --pattern zipf -b 1K -e 64M -f 8 -n 5 -w 2
  # And paced: the threads keep the rank's posting order for data (core/nic_pacer.h first).
  RMACC_PROXY_THREADS=3 RMACC_NET_PACE_GBPS=2 perf alltoallv-zipf-3x2-threads-paced 6 3 alltoallv --pattern zipf -b 1K -e 64M -f 8 -n 5 -w 2
  perf alltoallv-zipf-5x1 5 5 alltoallv --pattern zipf -b 1K -e 64M -f 8 -n 5 -w 2
  CUDA_DEVICE_MAX_CONNECTIONS=8 perf alltoallv-zipf-5x2 10 5 alltoallv --pattern zipf -b 1K -e 64M -f 8 -n 5 -w 2
fi
if has proxy; then  # 2 emulated nodes x 1 (proxy path only)
  mps_for 2
  perf alltoallv-2x1 2 2 alltoallv -b 1K -e 256M -f 4 -n 10 -w 3
  # put+signal between device windows of two nodes: D2H staging, network, the target's landing
  # slots, H2D by the target's proxy.
  perf putsignal-2x1 2 2 putsignal -b 8 -e 256M -f 8 -n 20 -w 3
  # The same into pinned host windows: the network writes them directly (no landing).
  perf putsignal-2x1-hostwindow 2 2 putsignal --window host -b 8 -e 256M -f 8 -n 20 -w 3
fi
if has dyncounts; then  # same sizes, same zipf matrix: the three places counts can come from
  mps_for "$local_ranks"
  for src in host sync device; do
    perf counts-$src "$local_ranks" 1 alltoallv --pattern zipf --counts $src -b 1K -e 1G -f 8 -n 20 -w 5
  done
fi
if has proxycpu; then  # one GPU per rank: the production setting
  mps_for 2
  perf proxycpu-1K 2 2 alltoallv --proxy-cpu -b 1K -e 1K -n 5000 -w 50
  perf proxycpu-64M 2 2 alltoallv --proxy-cpu -b 64M -e 64M -n 20 -w 3
fi
if has loop; then  # one rank per GPU, without MPS: the production shape
  mps_for 0
  for lc in direct engines; do
    RMACC_LOCAL_COPY=$lc perf alltoall-loop-$lc "$ngpu" 1 alltoall -b 64K -e 1G -f 4 -n 20 -w 5
  done
fi
if has graph; then  # the same calls uncaptured and as graph replays, same run (issue 13)
  mps_for "$local_ranks"
  for g in "" --graph; do
    perf alltoall${g:+-graph} "$local_ranks" 1 alltoall -b 1K -e 64M -f 8 -n 100 -w 10 $g
    perf counts-device${g:+-graph} "$local_ranks" 1 alltoallv --pattern zipf --counts device -b 1K -e 64M -f 8 -n 100 -w 10 $g
  done
fi
if has graphnodes; then  # graph replays across 3 emulated nodes: a stream of completion waits captured too
  mps_for 3
  for g in "" --graph; do
    perf alltoall-3x1${g:+-graph} 3 3 alltoall -b 1K -e 16M -f 8 -n 20 -w 3 $g
    perf counts-device-3x1${g:+-graph} 3 3 alltoallv --pattern zipf --counts device -b 1K -e 16M -f 8 -n 20 -w 3 $g
  done
fi
if has padded; then  # slots of the largest block against the packed calls, same counts (issue 49)
  mps_for "$local_ranks"
  for g in "" --graph; do
    for src in padded device host; do
      perf padded-$src${g:+-graph} "$local_ranks" 1 alltoallv --pattern zipf --counts $src -b 1K -e 16M -f 4 -n 100 -w 10 $g
    done
  done
fi
if has timeline; then  # CUPTI traces of small calls, read by bench/timeline/cupti_timeline.py
  cupti_lib=$(python3 -c "import glob,site; h=sorted(glob.glob(site.getsitepackages()[0]+'/nvidia/**/libcupti.so*', recursive=True)); print(h[0] if h else '')" 2>/dev/null)
  tl() {  # tl NAME NRANKS PROGRAM ARGS...: traces under $OUT/timeline-NAME, table in its .txt
    local name=$1 n=$2; shift 2; local dir=$OUT/timeline-$name; mkdir -p "$dir"
    CUDA_INJECTION64_PATH=$PWD/build-gpu/tools/librmacc-cupti-trace.so CUPTI_TRACE_DIR=$dir \
      CUPTI_TRACE_LIB=${CUPTI_TRACE_LIB:-$cupti_lib} run_ranks "$dir.log" "$n" 1 120 "$@"
    python3 bench/timeline/cupti_timeline.py "$dir" > "$dir.txt" 2>&1
    echo "== timeline $name (exit $?): $(grep -E '^# r0' "$dir.txt" | cut -c1-200)"; grep -E '^#   kernels' "$dir.txt" | head -2
    tar czf "$dir.tgz" -C "$OUT" "timeline-$name" && rm -rf "$dir"
  }
  for n in 1 2; do
    mps_for $n
    tl alltoall-1x$n $n build-gpu/tools/rmacc-perf alltoall -b 1K -e 1K -n 200 -w 20
    tl alltoall-graph-1x$n $n build-gpu/tools/rmacc-perf alltoall -b 1K -e 1K -n 200 -w 20 --graph
    tl counts-device-1x$n $n build-gpu/tools/rmacc-perf alltoallv --pattern zipf --counts device -b 1K -e 1K -n 200 -w 20
  done
  mps_for 0
  [[ -n $RMACC_NCCL_LIB ]] && tl nccl-1x1 1 build-gpu/lab/nccl-perf -b 1K -e 1K -n 200 -w 20
fi
if has gdr; then  # what the GPU-direct probe finds: tcp (no FI_HMEM) and shm (FI_HMEM offered)
  mps_for 2
  for prov in tcp shm; do
    RMACC_NET_PROVIDER=$prov FI_PROVIDER=$prov RMACC_DEBUG=INFO RMACC_DEBUG_SUBSYS=NET \
      run_ranks "$OUT/gdr-$prov.log" 2 2 50 build-gpu/tools/rmacc-perf putsignal -b 8 -e 4K -f 8 -n 5 -w 1
    echo "== GPU-direct probe, provider $prov (exit $?)"; grep -hE "FI_HMEM|GPU-direct|hmem" "$OUT/gdr-$prov.log" | sort -u | cut -c1-400
  done
fi
# The captured dynamic call under memcheck, 5 replays (two ranks; sharing one GPU without MPS,
# which the sanitizer does not support, they time-slice).
if has pyunit; then  # the Python package's CUDA tests at 1 x 2 (CUDA graphs included), ranks sharing a GPU
  mps_for 4
  (cd python/tests && RMACC_TEST_DEVICE=cuda PYTHONPATH=$PWD/../../build-gpu/python timeout ${PYUNIT_TIMEOUT_S:-200} \
    python3 -m unittest -v ${PYUNIT:-test_rmacc.Correctness.test_1x2}) > "$OUT/pyunit.log" 2>&1
  echo "== python unittest (exit $?): $(grep -E "^(OK|FAILED|Ran)" "$OUT/pyunit.log" | tr '\n' ' ')"
fi
if has capsan; then
  mps_for 0
  RMACC_TEST_REPLAYS=5 timeout ${CAPSAN_TIMEOUT_S:-240} compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/cuda_capture_test \
    --gtest_filter='Shapes/GpuCapture.*/1x2_window1:Shapes/GpuFixedGraph.*/1x2_1600B_window1:Shapes/GpuFixedGraph.*/1x1_4194304B_window20' \
    > "$OUT/sanitizer-capture.log" 2>&1
  echo "compute-sanitizer memcheck, CUDA graph tests: exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer-capture.log" | head -6
fi

mps_for 0

# Last, so that it is what the device tool's 12,000-character tail shows.
echo "== summary (${SECONDS}s; commit $(git log -1 --format=%h); $ngpu GPUs; $(grep -m1 -oE 'NCCL [0-9.]+' "$OUT/nccl-perf.log" 2>/dev/null || echo 'NCCL C API not run'))"
python3 bench/summary.py "$OUT" | tee "$OUT/summary.txt"

# The device tool brings back at most 8 files: everything goes back as one archive.
tar czf /tmp/rmacc-logs.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/rmacc-logs.tgz "$OUT/logs.tgz"
