#!/usr/bin/env bash
# The addon built with a sanitizer (test/sanitize/Makefile) under the mocha
# tests, loaded through HALRT_ADDON:
#   test/sanitize/run.sh address   npm run test:asan: AddressSanitizer +
#       UndefinedBehaviorSanitizer; the whole mocha suite, then the CUDA pass
#       (test/run-cuda.js) through the fakecuda driver double built with
#       them too, so that our CUDA kernels' host builds are checked
#   test/sanitize/run.sh thread    npm run test:tsan: ThreadSanitizer; the C
#       unit tests (test/c, SANITIZE=thread), then the mocha files where the
#       addon's threads (queue, workers, completion, JS, worker_threads) meet:
#       the debug sink's, the sinks', the flight recorder's, trace
#       summaries', processes, stress, host modules, calls and prepared calls
# Exits non-zero when a test fails or when any process wrote a sanitizer
# report (under TSan: one that shows a frame of halrt's own; see the end);
# the reports are printed at the end.
#
# Node is not instrumented, so the sanitizer runtime must be the first
# library in the process: LD_PRELOAD. Child processes and workers that tests
# start inherit the environment and load the sanitized addon too. Every
# process writes its reports to build/<asan|tsan>/logs/ (log_path) rather
# than to a stderr a test may have captured.
# ASan: detect_leaks=0, because V8 and Node do not free everything at exit
# and LeakSanitizer would bury real findings under those.
# allow_user_segv_handler=0: Node's own SIGSEGV handler (for WebAssembly
# traps) would otherwise take a crash and re-raise it, so that the process
# dies by the signal without a report; fast_unwind_on_fatal=1 walks the frame
# pointers, because the default unwinder faults again on the frames of code
# that is no longer mapped (an unloaded addon).
# allocator_may_return_null=1 (both): tests ask for more memory than there is
# and expect RESOURCE_EXHAUSTED, not a sanitizer abort.
# TSan: exitcode=0, so that a report does not change the exit status tests
# assert on (the log decides); Node's own false positives are suppressed in
# tsan-node.supp.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
mode=${1:-}
case $mode in
  address) name=asan ;;
  thread) name=tsan ;;
  *) echo "usage: $0 address|thread" >&2; exit 2 ;;
esac

make -s -j"$(nproc)" -C test/sanitize SANITIZE="$mode" || exit 1
logs=$root/build/$name/logs
rm -rf "$logs"
mkdir -p "$logs"

status=0
start=$SECONDS
if [ "$mode" = address ]; then
  make -s -C test/c fakecuda || exit 1 # build/ctest/libfakecuda.so, for the tests' children
  make -s -C test/c fakecuda SANITIZE=1 || exit 1 # build/ctest-sanitize/libfakecuda.so
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:allow_user_segv_handler=0:fast_unwind_on_fatal=1:log_path=$logs/asan
  export UBSAN_OPTIONS=print_stacktrace=1:log_path=$logs/ubsan
  export HALRT_ADDON=$root/build/asan/halrt.node
  node node_modules/mocha/bin/mocha.js || status=1
  HALRT_TEST_FAKECUDA=$root/build/ctest-sanitize/libfakecuda.so node test/run-cuda.js || status=1
else
  make -s -C test/c run SANITIZE=thread || status=1
  export LD_PRELOAD="$(gcc -print-file-name=libtsan.so)"
  export TSAN_OPTIONS=exitcode=0:allocator_may_return_null=1:suppressions=$root/test/sanitize/tsan-node.supp:log_path=$logs/tsan
  export HALRT_ADDON=$root/build/tsan/halrt.node
  # Everything runs about ten times slower: a longer timeout.
  node --expose-gc node_modules/mocha/bin/mocha.js --no-config --timeout 120000 \
    test/debug-sink.test.js test/sink-lifetime.test.js test/sinks.test.js \
    test/flight-recorder.test.js test/trace-summary.test.js \
    test/processes.test.js test/stress.test.js test/host-module.test.js test/calls.test.js \
    test/prepared-call.test.js || status=1
fi
echo "test:$name: tests took $((SECONDS - start)) s"

reports=("$logs"/*)
failing=0
if [ -e "${reports[0]}" ]; then
  for report in "${reports[@]}"; do
    # Under TSan, Node and V8 are not instrumented and now and then a report
    # lies wholly inside them (tsan-node.supp names those seen so far). A
    # report naming nothing of halrt's (no hrt_* function, no halrt path) is
    # printed but does not fail the run; every other one does.
    if [ "$mode" = thread ] && ! grep -qE 'hrt_|halrt' "$report"; then
      echo "=== sanitizer report $report (inside Node alone: not failing the run)"
    else
      echo "=== sanitizer report $report"
      failing=$((failing + 1))
    fi
    cat "$report"
  done
  if [ $failing -gt 0 ]; then
    echo "test:$name: $failing process(es) wrote sanitizer reports, above" >&2
    status=1
  fi
fi
exit $status
