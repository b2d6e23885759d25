#!/usr/bin/env bash
# The GPU check of the CUDA device (shared/tools/device-check.md,
# docs/cuda.md "Checking on a GPU"), bounded to 8 minutes on an H200:
#
#   step                                              time limit
#   1. C tests: build/ctest/test_cuda on the real driver    60 s
#   2. mocha, whole suite, HALRT_TEST_DEVICES=cuda         180 s
#   3. bench/run.js --quick --no-install --only cuda        90 s
#      (rows 1-4 on cuda, launch overhead and trace D2H
#      against launch_loop.c's raw loops)
#   4. test/gpu/checks.js: built-ins on edge values, an     90 s
#      illegal address, profile timings, launch overhead
#      against a raw cuLaunchKernel loop (launch_loop.c),
#      JS-thread stalls, an NVRTC source kernel, the three
#      ONNX models of test/onnx.test.js node by node
#      against local-task (halrt.compare)
#
# and prints one table (step/check, PASS/FAIL/SKIP, seconds, key figures).
# Into $OUT (default ./gpu-out), at most 8 files as the device tool brings
# back: summary.txt (the table at its end), figures.json (every figure, for
# BENCHMARKS.md and docs/cuda.md), environment.txt, test_cuda.log,
# mocha.log, bench.log, checks.log, and build.log when something was built.
# Exit status 0 when nothing FAILed.
#
# Preparation, on the development machine (the GPU machine has no npm and
# no network):
#   npm ci                          addon (npm run build deletes build/)
#   make -C test/c all              build/ctest: test_cuda, libfakecuda.so
#   ../shared/tools/device-pack.sh  .device/: node and env.sh
#   bash test/gpu/prepare.sh        build/gpu: launch_loop, ctest/ (test_cuda
#                                   and its shared objects), models/ (the
#                                   ONNX models); what the run needs of
#                                   node_modules in .device/; prints the size
#                                   of the carry and fails over 64 MiB
# then carry [".device", "build/Release", "build/gpu"] (not node_modules:
# typescript alone is 23 MiB; not all of build: the C tests' other builds)
# and run there:  source .device/env.sh && bash test/gpu/run.sh
# A missing test_cuda (test/c/test_cuda.c with its sections,
# test/c/cuda/*.c) or build/gpu/launch_loop is built here with cc (no node
# needed; launch_loop before step 3, whose rows use it).
#
# HRT_GPU_DRY_RUN=1 runs the same steps against the fake driver
# (build/ctest/libfakecuda.so), to check this script without a GPU; the
# checks whose verdicts rest on GPU timings then say SKIP with their
# figures, and each step may take three times its limit (a 2-core machine
# runs the suite slower than the GPU machine's 16). HRT_GPU_STEPS=
# ctest,mocha,bench,checks (default: all) picks steps: `npm run
# test:gpu-dry` (in `npm test`, so in CI) is the dry run of all of them, so
# that a test that would fail on the GPU fails here first.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
rm -f "$out"/{summary.txt,figures.json,environment.txt,test_cuda.log,mocha.log,bench.log,checks.log,build.log}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
summary=$out/summary.txt
steps=${HRT_GPU_STEPS:-ctest,mocha,bench,checks}
started=$EPOCHREALTIME

note() { echo "$*" | tee -a "$summary"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
wanted() { [[ ",$steps," == *",$1,"* ]]; }
# A step's row for the table: name, PASS/FAIL/SKIP, seconds, figure.
row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$work/steps.tsv"; }

# Runs "$@" with a time limit, its output to $out/$2; one row.
step() {
  local name=$1 logname=$2 log=$out/$2 limit=$(($3 * scale))
  shift 3
  note "== $name (limit $limit s) =="
  local start=$EPOCHREALTIME
  timeout -k 10 "$limit" "$@" > "$log" 2>&1
  local rc=$?
  local took
  took=$(since "$start")
  if [ $rc -eq 0 ]; then
    row "$name" PASS "$took" ""
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    row "$name" FAIL "$took" "timed out after $limit s; see $logname"
  else
    row "$name" FAIL "$took" "exit $rc; see $logname"
  fi
  note "   $([ $rc -eq 0 ] && echo PASS || echo "FAIL (exit $rc)") in $took s"
}

skip() {
  row "$1" SKIP 0 "$2"
  note "== $1: SKIP ($2)"
}

# Builds $2 from the sources $3... with cc when it is missing; build.log
# says how it went.
build() {
  local what=$1 binary=$2
  shift 2
  [ -x "$binary" ] && return 0
  note "building $what with cc (no prebuilt $(basename "$binary"))"
  mkdir -p "$(dirname "$binary")"
  cc -std=c11 -O2 -D_GNU_SOURCE -Isrc -Iinclude -Itest/c "$@" -ldl -lpthread -lm -o "$binary" >> "$out/build.log" 2>&1
}

scale=1
if [ "${HRT_GPU_DRY_RUN:-0}" = 1 ]; then
  scale=3
  note "DRY RUN against the fake driver (no GPU)"
  export HALRT_CUDA_LIBRARY=$root/build/ctest/libfakecuda.so
  export HRT_TEST_FAKECUDA=$HALRT_CUDA_LIBRARY
else
  export HRT_TEST_REAL_CUDA=1
fi

# node_modules as installed, or the copy test/gpu/prepare.sh puts in .device.
modules=$root/node_modules
[ -d "$modules/mocha" ] || modules=$root/.device/node_modules
export NODE_PATH=$modules
have_node() { command -v node > /dev/null && [ -f build/Release/halrt.node ]; }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -a)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || true
  echo "nvcc: $(command -v nvcc > /dev/null && nvcc --version | tail -2 | head -1 || echo none)"
  echo "node: $(command -v node > /dev/null && node --version || echo none)"
  echo "steps: $steps; dry run: ${HRT_GPU_DRY_RUN:-0}"
} > "$out/environment.txt" 2>&1
note "$(grep -A1 '^name' "$out/environment.txt" | tail -1 || true)"

# 1. C tests on the GPU.
if wanted ctest; then
  # make -C test/c's build, prepare.sh's copy of it, or one built here.
  test_cuda=$root/build/ctest/test_cuda
  [ -x "$test_cuda" ] || test_cuda=$root/build/gpu/ctest/test_cuda
  [ -x "$test_cuda" ] || test_cuda=$work/test_cuda
  mapfile -t runtime < <(find src/base src/hal src/vm src/modules -name '*.c' | sort)
  if build test_cuda "$test_cuda" test/c/test_cuda.c test/c/cuda/*.c "${runtime[@]}"; then
    HRT_TEST_ROOT=$root HRT_TEST_KERNEL_DIR=$(dirname "$test_cuda") \
      step "C tests (test_cuda)" test_cuda.log 60 "$test_cuda"
  else
    row "C tests (test_cuda)" FAIL 0 "building test_cuda failed; see build.log"
  fi
fi

# 2. The whole mocha suite with the CUDA device selected.
if wanted mocha; then
  if have_node && [ -f "$modules/mocha/bin/mocha.js" ]; then
    HALRT_TEST_DEVICES=cuda step "mocha (HALRT_TEST_DEVICES=cuda)" mocha.log 180 \
      node "$modules/mocha/bin/mocha.js"
  else
    skip "mocha (HALRT_TEST_DEVICES=cuda)" "needs node on PATH, mocha in node_modules or .device/node_modules, and the addon"
  fi
fi

# The raw loops of the bench's CUDA rows and of the launch check.
if wanted bench || wanted checks; then
  launch_loop=$root/build/gpu/launch_loop
  # One older than its source may lack a mode the rows use: rebuilt.
  if [ "$launch_loop" -ot test/gpu/launch_loop.c ] && command -v cc > /dev/null; then rm -f "$launch_loop"; fi
  build launch_loop "$launch_loop" test/gpu/launch_loop.c ||
    note "building launch_loop failed (see build.log): its bench rows say so, the launch check says SKIP"
fi

# 3. The CUDA rows of the benchmarks.
if wanted bench; then
  if have_node; then
    step "bench (--quick --only cuda)" bench.log 90 \
      node bench/run.js --quick --no-install --only cuda --json "$work/bench.json"
  else
    skip "bench (--quick --only cuda)" "needs node on PATH and the addon"
  fi
fi

# 4. The extra checks (their rows join the table).
if wanted checks; then
  if have_node; then
    step "checks (test/gpu/checks.js)" checks.log 90 \
      node --expose-gc test/gpu/checks.js --json "$work/checks.json"
  else
    skip "checks (test/gpu/checks.js)" "needs node on PATH and the addon"
  fi
fi

note ""
note "summary ($(since "$started") s in all):"
if command -v node > /dev/null && node test/gpu/summary.js "$work" "$out" > "$work/table.txt" 2>&1; then
  tee -a "$summary" < "$work/table.txt"
else
  cat "$work/table.txt" 2> /dev/null
  tee -a "$summary" < "$work/steps.tsv"
fi
! grep -q $'\tFAIL\t' "$work/steps.tsv"
