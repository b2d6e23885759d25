#!/usr/bin/env bash
# Planted bugs in src/hal/cuda/kernels/builtin.cu that the tests must catch.
# Each mutant is the file with one edit, built into its own copy of the
# driver test double; a test_cuda case run on that copy must fail, saying
# what is expected. An edit that no longer applies fails too (change the
# mutant with the kernel).
#
#   make -C test/c mutants [SANITIZE=1|thread]    (make run runs it last)
#
# Environment (from the Makefile): BUILD, SANITIZE, ROOT, MODEL_CXX (the
# C++ compiler and flags of the model), FAKECUDA_LINK and FAKECUDA_SRCS.
set -uo pipefail

failed=0
count=0

case $SANITIZE in
  1) build=asan ;;
  thread) build=tsan ;;
  *) build=plain ;;
esac

# mutant NAME BUILDS CASE EXPECTED EDIT: EDIT is a perl substitution over
# the whole file; EXPECTED an extended regex the failing run's output must
# match; BUILDS the builds that run it (plain, asan, tsan), each one that
# can see the bug.
mutant() {
  local name=$1 builds=$2 case=$3 expected=$4 edit=$5
  case " $builds " in *" $build "*) ;; *) return ;; esac
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
wrong='binding [0-9] element'
race='WARNING: ThreadSanitizer: data race'

# An off-by-one in every elementwise kernel's bound: each writes one
# element past its output (and reads past its inputs).
mutant grid_stride_bound 'plain asan' $match 'wrote past the end|AddressSanitizer' \
  's/i < \(n\); i \+= hrt_stride_/i <= (n); i += hrt_stride_/'
# matmul computes from its tiles before every thread has loaded them.
mutant matmul_tile_barrier 'plain asan tsan' $match "matmul_f32 $wrong|$race" \
  's/(b_tile\[ty\]\[tx\] =\n[^;]*;\n)\s*__syncthreads\(\);\n/$1/'
# The block reduction (softmax, reduce_sum) reads partials not yet merged.
mutant reduce_tree_barrier 'plain asan tsan' $match "(softmax_rows|reduce_sum)_f32 $wrong|$race" \
  's/(scratch\[t\] = op\(scratch\[t\], scratch\[t \+ width\]\);\n    \}\n)\s*__syncthreads\(\);\n/$1/'
# softmax's second reduction overwrites the first's result before every
# thread has read it.
mutant reduce_reuse_barrier 'plain asan tsan' $match "softmax_rows_f32 $wrong|$race" \
  's/\s*__syncthreads\(\);  \/\/ scratch is reused by the next call//'
# softmax's threads past the last column leave before the barriers.
mutant softmax_early_return 'plain asan tsan' $match 'barrier divergence' \
  's/if \(cols == 0\) return;/if (threadIdx.x >= cols) return;/'
# The summary tree merges partials not yet merged.
mutant summary_tree_barrier 'plain asan tsan' traces_summarize_every_dtype "source [0-9]: got|$race" \
  's/(hrt_summary_merge\(&shared\[t\], &shared\[t \+ width\]\);\n)\s*__syncthreads\(\);\n/$1/'
# matmul loads one column past a's last row into its tile; the product with
# b's zero padding leaves c right, so only AddressSanitizer sees it.
mutant matmul_tile_read_bound asan $match 'AddressSanitizer: (use-after-poison|heap-buffer-overflow)' \
  's/row < M && k0 \+ tx < K/row < M && k0 + tx <= K/'
# reduce_sum's rows share one scratch: without the barrier after a row's
# reduction, thread 0 stores the next row's partial while the others may
# still read the last result. Only thread 0's result is stored, so the
# output is right and only ThreadSanitizer sees it (softmax gets the
# barrier after each of its reductions instead, so it stays right).
mutant reduce_sum_reuse_barrier tsan $match "$race" \
  's/\s*__syncthreads\(\);  \/\/ scratch is reused by the next call//;
   s/(max = hrt_block_reduce\(scratch, max, hrt_max_op\(\)\);)/$1\n    __syncthreads();/;
   s/(const float scale = 1\.0f \/ hrt_block_reduce\(scratch, sum, hrt_add_op\(\)\);)/$1\n    __syncthreads();/'

echo "# mutants of builtin.cu"
echo "$((count - failed)) caught, $failed not"
[ $failed -eq 0 ]
