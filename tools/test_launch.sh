#!/usr/bin/env bash
# rmacc-perf started the way torchrun and mpirun start it (no rmacc-run): rank 0 makes the unique
# id and shares it through a file in $TMPDIR (tools/perf/launch.cc), the other rank polls for it,
# and rank 0 removes it after init. Host backend, 2 processes on this machine.
#   tools/test_launch.sh path/to/rmacc-perf
set -u
perf=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# launch NAME VARS...: two ranks with the launcher's variables (the rank's own are appended).
launch() {
  local name=$1; shift
  local pids=() r
  for r in 0 1; do
    # shellcheck disable=SC2046  # rank_vars gives whole VAR=value words
    env RMACC_BACKEND=host TMPDIR="$tmp" "$@" $(rank_vars $r) \
      timeout 100 "$perf" alltoall -b 1K -e 16K -f 4 -n 2 -w 1 >"$tmp/$name.$r" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for r in 0 1; do wait "${pids[$r]}" || rc=$?; done
  if [ "$rc" != 0 ]; then fail "$name: exit $rc"; cat "$tmp/$name".*; return; fi
  # rank 0 prints the table: three sizes, every one checked with 0 wrong values.
  local rows
  rows=$(grep -cE "^ +[0-9]+ +[0-9]+ +float .* 0$" "$tmp/$name.0")
  [ "$rows" = 3 ] && pass "$name: table" || { fail "$name: $rows checked rows"; cat "$tmp/$name.0"; }
  grep -q "launcher $name" "$tmp/$name.0" && pass "$name: detected" || fail "$name: launcher not detected"
  if compgen -G "$tmp/rmacc-perf-id-*" >/dev/null; then fail "$name: id file left behind"; else pass "$name: id file removed"; fi
}

rank_vars() { echo "RANK=$1 LOCAL_RANK=$1"; }
launch torchrun WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + $$ % 10000)) TORCHELASTIC_RUN_ID=t$$

rank_vars() { echo "OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_LOCAL_RANK=$1"; }
launch mpirun OMPI_COMM_WORLD_SIZE=2 PMIX_NAMESPACE=test-$$

echo "$fails failure(s)"
[ "$fails" = 0 ]
