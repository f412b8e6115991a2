#!/usr/bin/env bash
# The sanitizer pass of CI (.ci/run, after the normal suite); its findings are recorded in
# bench/results/06-reliability.md.
#   scripts/run-sanitizers.sh [address|thread] [extra ctest args]
# address (default): ASan+UBSan build in build-asan/; LeakSanitizer also checks every forked
#   rank (tests/support/multiprocess.cc), UB is fatal. Runs the suite without the slowest
#   data-volume cases (chosen to fit CI's 90 minutes on 2 cores next to the normal suite).
# thread: ThreadSanitizer build in build-tsan/, over the bootstrap, RMA, proxy and AlltoAllV
#   tests. Not in CI (a TSan build and run take longer than CI has left); run it by hand.
# No CUDA and no tools in these builds: the GPU code cannot run here anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-address}
shift || true
case "$kind" in
  address)
    dir=build-asan flags=address,undefined
    targets=(bootstrap_test net_logic_test fabric_test proxy_test proxy_faults_test landing_test rma_test errors_test alltoallv_test
             alltoallv_faults_test host_backend_test
             config_test planner_test planner_calls_test verifier_test topology_test bounce_test reliability_test captured_calls_test alltoallv_dynamic_test
             lifecycle_test host_abort_test rma_zero_size_test paused_peer_test mem_alloc_limits_test
             graph_plan_test alltoallv_padded_test timeout_teardown_test direct_calls_test)
    # Out: the 1 GiB call, the parameter sweep's larger shapes (2x2 and 3x3 stay), the soak
    # (it measures RSS, which ASan's shadow and quarantine change), the Python package (its
    # interpreter would need the ASan runtime preloaded).
    exclude='NOT_BUILT|package_install|python_|OneGibibyte|Soak|AlltoallvCase\.ByteExact/(1x8|8x1|2x4|4x2)_'
    export ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    export LSAN_OPTIONS=suppressions=$PWD/scripts/sanitizer/lsan.supp:print_suppressions=0
    ;;
  thread)
    dir=build-tsan flags=thread
    targets=(bootstrap_test net_logic_test fabric_test proxy_test proxy_faults_test landing_test rma_test alltoallv_test
             alltoallv_faults_test
             lifecycle_test host_abort_test)
    exclude='NOT_BUILT|package_install|python_|OneGibibyte|Soak|AlltoallvCase\.ByteExact/(1x8|8x1|2x4|4x2)_'
    # Ranks leave with _exit, which skips TSan's exit code: reports go to files, counted below.
    rm -rf "$PWD/$dir/tsan-logs" && mkdir -p "$PWD/$dir/tsan-logs"
    export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 log_path=$PWD/$dir/tsan-logs/r suppressions=$PWD/scripts/sanitizer/tsan.supp"
    ;;
  *) echo "usage: $0 [address|thread] [ctest args]" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRMACC_WITH_CUDA=OFF \
  -DRMACC_BUILD_TOOLS=OFF -DRMACC_SANITIZE="$flags" >/dev/null
cmake --build "$dir" -j "$(nproc)" --target "${targets[@]}"
cd "$dir"
rc=0
ctest --output-on-failure --timeout 900 -E "$exclude" "$@" || rc=$?
if [ "$kind" = thread ]; then
  n=$(cat tsan-logs/r.* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer' || true)
  echo "ThreadSanitizer: $n reports (in $dir/tsan-logs)"
  [ "$n" -eq 0 ] || rc=1
fi
exit $rc
