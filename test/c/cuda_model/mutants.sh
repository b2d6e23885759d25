#!/usr/bin/env bash
# Planted bugs in src/hal/cuda/kernels/builtin.cu that the tests must catch.
# Each mutant is the file with one edit, built into its own copy of the
# driver test double; a test_cuda case run on that copy must fail, saying
# what is expected. An edit that no longer applies fails too (change the
# mutant with the kernel).
#
#   make -C test/c mutants [SANITIZE=1]    (make run runs it last)
#
# Environment (from the Makefile): BUILD, SANITIZE, ROOT, MODEL_CXX (the
# C++ compiler and flags of the model), FAKECUDA_LINK and FAKECUDA_SRCS.
set -uo pipefail

failed=0
count=0

# mutant NAME CASE EXPECTED EDIT [asan]: EDIT is a perl substitution over
# the whole file; EXPECTED an extended regex the failing run's output must
# match. With `asan`, only the AddressSanitizer build runs it (no other
# build can see the bug).
mutant() {
  local name=$1 case=$2 expected=$3 edit=$4 only=${5:-}
  if [ "$only" = asan ] && [ "$SANITIZE" != 1 ]; then return; fi
  count=$((count + 1))
  local dir="$BUILD/mutants/$name"
  mkdir -p "$dir/hal/cuda/kernels"
  local source="$ROOT/src/hal/cuda/kernels/builtin.cu"
  local copy="$dir/hal/cuda/kernels/builtin.cu"
  perl -0pe "$edit" "$source" > "$copy"
  if cmp -s "$source" "$copy"; then
    echo "FAIL mutant $name: its edit no longer applies to builtin.cu"
    failed=$((failed + 1))
    return
  fi
  # The mutant's copy comes first on the quoted-include path (-iquote), so
  # builtin_kernels.cc includes it instead of the real file.
  if ! $MODEL_CXX -iquote "$dir" -c "$ROOT/test/support/cuda_model/builtin_kernels.cc" \
      -o "$dir/builtin_kernels.o" > "$dir/build.log" 2>&1 ||
    ! $FAKECUDA_LINK $FAKECUDA_SRCS "$BUILD/model/cuda_model.o" "$dir/builtin_kernels.o" \
      -lpthread -lm -o "$dir/libfakecuda.so" >> "$dir/build.log" 2>&1; then
    echo "FAIL mutant $name: does not build"
    cat "$dir/build.log"
    failed=$((failed + 1))
    return
  fi
  HRT_TEST_FAKECUDA="$dir/libfakecuda.so" HRT_TEST_ROOT="$ROOT" \
    ASAN_OPTIONS=allocator_may_return_null=1 \
    "$BUILD/test_cuda" "$case" > "$dir/run.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] || ! grep -Eq "$expected" "$dir/run.log"; then
    echo "FAIL mutant $name: $case should fail with /$expected/ (exit status $rc); $dir/run.log:"
    tail -20 "$dir/run.log"
    failed=$((failed + 1))
  else
    echo "ok   mutant $name: $case fails ($(grep -Eo "$expected" "$dir/run.log" | head -1))"
  fi
}

match=builtin_kernels_match_the_cpu_device

# An off-by-one in every elementwise kernel's bound: each writes one
# element past its output (and reads past its inputs).
mutant grid_stride_bound $match 'wrote past the end|AddressSanitizer' \
  's/i < \(n\); i \+= hrt_stride_/i <= (n); i += hrt_stride_/'
# matmul computes from its tiles before every thread has loaded them.
mutant matmul_tile_barrier $match 'matmul_f32 binding 2 element' \
  's/(b_tile\[ty\]\[tx\] =\n[^;]*;\n)\s*__syncthreads\(\);\n/$1/'
# The block reduction (softmax, reduce_sum) reads partials not yet merged.
mutant reduce_tree_barrier $match '(softmax_rows|reduce_sum)_f32 binding 1 element' \
  's/(scratch\[t\] = op\(scratch\[t\], scratch\[t \+ width\]\);\n    \}\n)\s*__syncthreads\(\);\n/$1/'
# softmax's second reduction overwrites the first's result before every
# thread has read it.
mutant reduce_reuse_barrier $match 'softmax_rows_f32 binding 1 element' \
  's/\s*__syncthreads\(\);  \/\/ scratch is reused by the next call//'
# softmax's threads past the last column leave before the barriers.
mutant softmax_early_return $match 'barrier divergence' \
  's/if \(cols == 0\) return;/if (threadIdx.x >= cols) return;/'
# The summary tree merges partials not yet merged.
mutant summary_tree_barrier traces_summarize_every_dtype 'source [0-9]: got' \
  's/(hrt_summary_merge\(&shared\[t\], &shared\[t \+ width\]\);\n)\s*__syncthreads\(\);\n/$1/'
# matmul loads one column past a's last row into its tile; the product with
# b's zero padding leaves c right, so only AddressSanitizer sees it.
mutant matmul_tile_read_bound $match 'AddressSanitizer: (use-after-poison|heap-buffer-overflow)' \
  's/row < M && k0 \+ tx < K/row < M && k0 + tx <= K/' asan

echo "# mutants of builtin.cu"
echo "$((count - failed)) caught, $failed not"
[ $failed -eq 0 ]
