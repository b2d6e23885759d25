#!/usr/bin/env bash
# The GPU check of the CUDA device (see shared/tools/device-check.md and
# docs/cuda.md). Runs, on a machine with an NVIDIA GPU and libcuda:
#   1. the C tests of the CUDA device (test/c/test_cuda.c) against the real
#      driver, with the committed PTX/cubin of test/gpu/kernels.cu;
#   2. the mocha suite with the CUDA device selected (HALRT_TEST_DEVICES=cuda);
#   3. the benchmarks (bench/run.js), if the project has them.
# Logs go to $OUT (default ./gpu-out): summary.txt, environment.txt,
# test_cuda.log, mocha.log, bench.log.
#
# Nothing here needs npm or network. Prepare on the development machine:
#   npm run build && make -C test/c all     (addon, then build/ctest/*)
#   ../shared/tools/device-pack.sh          (node into .device/)
# carry .device, build/Release, build/ctest and node_modules (see step 2),
# and run there:  source .device/env.sh && bash test/gpu/run.sh
# When build/ctest/test_cuda is missing it is built here with cc (no node
# needed); mocha is skipped when node, node_modules or the addon is missing.
#
# HRT_GPU_DRY_RUN=1 runs the same steps against the fake driver
# (build/ctest/libfakecuda.so), to check this script without a GPU.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
failed=0

note() { echo "$*" | tee -a "$summary"; }

# Runs "$@" with a time limit, its output to log $1; records pass/fail.
step() {
  local name=$1 log=$out/$2 limit=$3
  shift 3
  local start=$SECONDS
  timeout "$limit" "$@" > "$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    note "PASS $name ($((SECONDS - start)) s)"
  else
    note "FAIL $name (exit $rc after $((SECONDS - start)) s; see $(basename "$log"))"
    failed=1
  fi
}

if [ "${HRT_GPU_DRY_RUN:-0}" = 1 ]; then
  note "DRY RUN against the fake driver (no GPU)"
  export HALRT_CUDA_LIBRARY=$root/build/ctest/libfakecuda.so
  export HRT_TEST_FAKECUDA=$HALRT_CUDA_LIBRARY
else
  export HRT_TEST_REAL_CUDA=1
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || true
  echo "nvcc: $(command -v nvcc >/dev/null && nvcc --version | tail -2 | head -1 || echo none)"
  echo "node: $(command -v node >/dev/null && node --version || echo none)"
} > "$out/environment.txt" 2>&1
note "$(grep -A1 '^name' "$out/environment.txt" | tail -1 || true)"

# 1. C tests on the GPU.
test_cuda=$root/build/ctest/test_cuda
if [ ! -x "$test_cuda" ]; then
  note "building test_cuda with cc (no prebuilt build/ctest/test_cuda)"
  mkdir -p "$out/build"
  test_cuda=$out/build/test_cuda
  sources=$(find src/base src/hal src/vm src/modules -name '*.c' | sort)
  # shellcheck disable=SC2086
  if ! cc -std=c11 -O2 -D_GNU_SOURCE -Isrc -Iinclude -Itest/c \
      test/c/test_cuda.c $sources -ldl -lpthread -lm -o "$test_cuda" \
      > "$out/build.log" 2>&1; then
    note "FAIL building test_cuda (see build.log)"
    failed=1
  fi
fi
if [ -x "$test_cuda" ]; then
  HRT_TEST_ROOT=$root HRT_TEST_KERNEL_DIR=$root/build/ctest \
    step "C tests (test_cuda)" test_cuda.log 300 "$test_cuda"
  grep -E '^(ok|FAIL) |passed|^  ' "$out/test_cuda.log" >> "$summary"
fi

# 2. The mocha suite on the CUDA device. node_modules may travel as is, or,
# to stay under the 64 MiB a run may carry, as a copy without typescript in
# .device/node_modules (cp -r node_modules .device/ && rm -r
# .device/node_modules/typescript).
mocha=$root/node_modules/.bin/mocha
[ -x "$mocha" ] || mocha=$root/.device/node_modules/.bin/mocha
if command -v node >/dev/null && [ -x "$mocha" ] && [ -f build/Release/halrt.node ]; then
  HALRT_TEST_DEVICES=cuda step "mocha (HALRT_TEST_DEVICES=cuda)" mocha.log 300 \
    node "$mocha"
  grep -E 'passing|failing|pending' "$out/mocha.log" >> "$summary"
else
  note "SKIP mocha: needs node on PATH, node_modules and build/Release/halrt.node"
fi

# 3. CUDA benchmarks, when the project has them: bench/run.js with the CUDA
# device selected the same way as for mocha.
if command -v node >/dev/null && [ -f bench/run.js ] && [ -f build/Release/halrt.node ]; then
  HALRT_TEST_DEVICES=cuda step "benchmarks (bench/run.js)" bench.log 300 \
    node bench/run.js
else
  note "SKIP benchmarks: no bench/run.js (figures from test_cuda's report_throughput above)"
fi

note "$([ $failed -eq 0 ] && echo 'GPU CHECK PASSED' || echo 'GPU CHECK FAILED')"
exit $failed
