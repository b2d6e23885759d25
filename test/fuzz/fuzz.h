// Shared by the libFuzzer targets in this folder (see the README's
// "Fuzzing" section).
//
// A broken invariant aborts with the failed condition on stderr, so that
// libFuzzer reports it like any sanitizer error: with a stack and the input
// written under build/fuzz/crashes/.
#ifndef HRT_TEST_FUZZ_FUZZ_H_
#define HRT_TEST_FUZZ_FUZZ_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/status.h"

#define FUZZ_CHECK(cond)                                       \
  do {                                                         \
    if (!(cond)) fuzz_fail(__FILE__, __LINE__, #cond, HRT_OK); \
  } while (0)

// Checks that `expr` yields HRT_OK; prints and aborts otherwise.
#define FUZZ_CHECK_OK(expr)                               \
  do {                                                    \
    hrt_status_t fuzz_status_ = (expr);                   \
    if (fuzz_status_ != HRT_OK) {                         \
      fuzz_fail(__FILE__, __LINE__, #expr, fuzz_status_); \
    }                                                     \
  } while (0)

static inline void fuzz_fail(const char* file, int line, const char* what,
                             hrt_status_t status) {
  fprintf(stderr, "%s:%d: fuzz invariant failed: %s", file, line, what);
  if (status != HRT_OK) {
    fprintf(stderr, ": %s: %s", hrt_status_code_name(hrt_status_code(status)),
            hrt_status_message(status));
  }
  fprintf(stderr, "\n");
  abort();
}

// The targets' entry points, as libFuzzer declares them (C linkage).
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerInitialize(int* argc, char*** argv);

#endif  // HRT_TEST_FUZZ_FUZZ_H_
