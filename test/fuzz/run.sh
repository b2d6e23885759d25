#!/usr/bin/env bash
# Builds the fuzz targets and runs each for a bounded time (npm run fuzz).
#
#   test/fuzz/run.sh                  every target, HALRT_FUZZ_SECONDS each (30)
#   test/fuzz/run.sh json program     only those targets
#
# Each target starts from its committed seeds (test/fuzz/corpus/<target>) and
# the inputs earlier runs kept (build/fuzz/corpus/<target>, where new ones
# are added). Prints one line of stats per target. Exits non-zero when a
# target crashes, leaks or hangs, after printing the report and the path of
# the input, kept under build/fuzz/crashes/<target>/; rerun it with
# build/fuzz/fuzz_<target> <path>.
set -uo pipefail
cd "$(dirname "$0")/../.."

seconds=${HALRT_FUZZ_SECONDS:-30}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(json program trace_batch)

make -s -j"$(nproc)" -C test/fuzz || exit 1

# UBSan stops at the first error (the targets are built with
# -fno-sanitize-recover) and prints a stack; allocations the runtime asks
# for beyond libFuzzer's memory limit fail instead of aborting, as in the
# C tests.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1}

failed=0
for target in "${targets[@]}"; do
  binary=build/fuzz/fuzz_$target
  seeds=test/fuzz/corpus/$target
  corpus=build/fuzz/corpus/$target
  crashes=build/fuzz/crashes/$target
  log=build/fuzz/$target.log
  if [ ! -x "$binary" ] || [ ! -d "$seeds" ]; then
    echo "fuzz: unknown target '$target'" >&2
    failed=1
    continue
  fi
  mkdir -p "$corpus" "$crashes"
  dict=()
  [ "$target" = trace_batch ] || dict=(-dict=test/fuzz/module.dict)
  "$binary" "$corpus" "$seeds" "${dict[@]}" \
    -max_total_time="$seconds" -max_len=4096 -timeout=60 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$crashes/" >"$log" 2>&1
  status=$?
  # "#N DONE cov: C ft: F corp: K/S ..." is libFuzzer's last status line.
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  features=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  kept=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  printf 'fuzz %-12s %10s execs %7s/s  cov %6s  ft %6s  corpus %5s  (%ss)\n' \
    "$target" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${features:-?}" \
    "${kept:-?}" "$seconds"
  if [ $status -ne 0 ]; then
    failed=1
    echo "fuzz $target FAILED (exit $status); log: $log"
    grep -E -A 40 '^==[0-9]+==ERROR|runtime error|fuzz invariant failed|ERROR: libFuzzer' \
      "$log" | head -n 60
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "fuzz $target input: ${artifact:-see $log}"
    [ -z "$artifact" ] || echo "reproduce: $binary $artifact"
  fi
done
exit $failed
