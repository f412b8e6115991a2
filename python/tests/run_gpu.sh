#!/usr/bin/env bash
# The Python package on a GPU machine (PyTorch with CUDA, torchrun): the same tests as CI on
# CUDA tensors (1 x 2, 2 x 1, 2 x 2 emulated nodes; ranks share GPUs when there are fewer than
# 4), backend="rmacc" against NCCL (test_backend: one rank, every GPU's rank with 2 GPUs or
# more), the MoE example (also with --backend rmacc, and its --decode step in CUDA graphs at one
# rank), the token dispatcher, the Python overhead per call (bench/python_overhead.py) and the
# benchmark against torch.distributed (NCCL), 1 node and 2
# emulated nodes. Usage: python/tests/run_gpu.sh [build dir, default build] [bench args...]
# Needs a CUDA build of rmacc (scripts/build.sh on that machine). STEP_TIMEOUT_S bounds each step.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd); shift || true
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp  # between emulated nodes
ngpu=$(python3 -c "import torch; print(torch.cuda.device_count())")
status=0
# Each step gets STEP_TIMEOUT_S (default 300). A step still running then is reported as hung:
# every thread of its Python processes with its kernel wait channel and state, then SIGABRT,
# which PYTHONFAULTHANDLER turns into each process's Python stack (and the CUDA driver's handler
# into a native one), then SIGKILL. A hang costs one step, not the device call, and says where.
export PYTHONFAULTHANDLER=1
step() {
  echo "=== $*"
  setsid "$@" & local pid=$! t=0
  while kill -0 $pid 2>/dev/null && (( t < ${STEP_TIMEOUT_S:-300} )); do sleep 1; t=$((t + 1)); done
  if kill -0 $pid 2>/dev/null; then
    echo "=== HUNG after ${t}s: $*"
    for p in $(pgrep -s $pid python); do
      echo "--- pid $p: $(tr '\0' ' ' < /proc/$p/cmdline)"
      for task in /proc/$p/task/*; do
        echo "    $(basename $task) $(cat $task/comm) $(awk '{print $3}' $task/stat) $(cat $task/wchan)"
      done
    done
    pkill -ABRT -s $pid python; sleep 5; kill -KILL -- -$pid 2>/dev/null
  fi
  wait $pid || { echo "=== FAILED: $*"; status=1; }
}

# The unittest's ranks share GPUs when there are fewer than 4: that needs MPS (without it two
# ranks on one H200 both stopped in their first synchronisation after a call).
mps=0
if [ "$ngpu" -lt 4 ] && command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/rmacc-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/rmacc-mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-cuda-mps-control -d && mps=1
fi
# rmacc's streams hold stream-memory waits and must not share hardware queues; up to 4 ranks
# share one GPU here, and 4 MPS clients of 32 connections each run out of channels (16 fit).
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-$(( ngpu < 4 ? 16 : 32 ))}
cd "$root/python/tests"
step env RMACC_TEST_DEVICE=cuda python3 -m unittest -v ${UNITTESTS:-test_rmacc test_backend}
cd "$root"
if [ $mps = 1 ]; then
  echo quit | nvidia-cuda-mps-control
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi

# torchrun as is: one node, one rank per GPU.
step torchrun --nproc-per-node "$ngpu" examples/moe_dispatch.py
step torchrun --nproc-per-node "$ngpu" examples/moe_dispatch.py --backend rmacc
step torchrun --nproc-per-node "$ngpu" examples/token_dispatcher.py
# Issue 49 item 5: the decode step in CUDA graphs, rmacc and NCCL at one rank in one run, then
# with every GPU; what the Python layer adds per call (Python call minus the C call).
step torchrun --nproc-per-node 1 examples/moe_dispatch.py --decode --iters 50
[ "$ngpu" -ge 2 ] && step torchrun --nproc-per-node "$ngpu" examples/moe_dispatch.py --decode --iters 50
step torchrun --nproc-per-node 1 bench/python_overhead.py --device cuda
step torchrun --nproc-per-node "$ngpu" bench/torch_a2a.py "$@"
# Emulated nodes with one torchrun: each rank's RMACC_HOSTNAME from its LOCAL_RANK
# (2 nodes x ngpu/2 ranks; ranks of "different nodes" talk through the proxy over tcp).
# NCCL refuses two ranks on one GPU, so this needs 2 GPUs or more.
if [ "$ngpu" -ge 2 ]; then
  per_node=$(( ngpu / 2 ))
  emulate="RMACC_HOSTNAME=node\$((LOCAL_RANK / $per_node)) exec python3"
  step torchrun --nproc-per-node $(( per_node * 2 )) --no-python bash -c \
    "$emulate examples/moe_dispatch.py"
  step torchrun --nproc-per-node $(( per_node * 2 )) --no-python bash -c \
    "$emulate bench/torch_a2a.py -e 64M $*"  # the proxy path over tcp: smaller sizes
fi
exit $status
