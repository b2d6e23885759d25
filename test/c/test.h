// A tiny test harness for the runtime's C unit tests.
//
// Each test file defines test functions and lists them in a TEST_MAIN table.
// CHECK* macros record a failure with file and line and return from the test.
// The binary ends with the line "N passed, M failed" and exits non-zero on any
// failure.
#ifndef HRT_TEST_TEST_H_
#define HRT_TEST_TEST_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/live.h"
#include "base/status.h"
#include "base/threads.h"

extern int hrt_test_failed_;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
              #cond);                                                 \
      hrt_test_failed_ = 1;                                           \
      return;                                                         \
    }                                                                 \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                 \
  do {                                                                     \
    long long a_ = (long long)(a), b_ = (long long)(b);                    \
    if (a_ != b_) {                                                        \
      fprintf(stderr, "%s:%d: %s == %s failed: %lld vs %lld\n", __FILE__, \
              __LINE__, #a, #b, a_, b_);                                   \
      hrt_test_failed_ = 1;                                                \
      return;                                                              \
    }                                                                      \
  } while (0)

// Checks that `expr` is HRT_OK; prints the status message otherwise.
#define CHECK_OK(expr)                                                    \
  do {                                                                    \
    hrt_status_t s_ = (expr);                                             \
    if (s_ != HRT_OK) {                                                   \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__,   \
              #expr, hrt_status_code_name(hrt_status_code(s_)),           \
              hrt_status_message(s_));                                    \
      hrt_status_free(s_);                                                \
      hrt_test_failed_ = 1;                                               \
      return;                                                             \
    }                                                                     \
  } while (0)

// Checks that `expr` fails with `code` and that its message contains `text`.
#define CHECK_STATUS(expr, code, text)                                      \
  do {                                                                      \
    hrt_status_t s_ = (expr);                                               \
    int ok_ = hrt_status_code(s_) == (code) &&                              \
              strstr(hrt_status_message(s_), (text)) != NULL;               \
    if (!ok_) {                                                             \
      fprintf(stderr, "%s:%d: %s: expected %s containing '%s', got %s: %s\n", \
              __FILE__, __LINE__, #expr, hrt_status_code_name(code), (text), \
              hrt_status_code_name(hrt_status_code(s_)),                    \
              hrt_status_message(s_));                                      \
    }                                                                       \
    hrt_status_free(s_);                                                    \
    if (!ok_) {                                                             \
      hrt_test_failed_ = 1;                                                 \
      return;                                                               \
    }                                                                       \
  } while (0)

// How long a case waits for another thread before the binary gives up:
// far beyond any case's work, even under a sanitizer on a loaded machine.
#define TEST_PATIENCE_NS 120000000000LL

// Ends the test binary (exit 1, naming the place and what it waited for).
// A case must not return while another thread may still write into its
// stack (a completion, a release), or that write corrupts what runs next.
static inline void test_gave_up_waiting(const char* file, int line,
                                        const char* what) {
  fprintf(stderr, "%s:%d: %s did not happen in %lld s; exiting\n", file, line,
          what, TEST_PATIENCE_NS / 1000000000LL);
  fflush(stdout);
  _exit(1);
}

// Waits for `notification` (an hrt_notification_t*), or ends the binary.
#define WAIT_OR_EXIT(notification, what)                             \
  do {                                                               \
    if (!hrt_notification_wait_until(                                \
            (notification), hrt_time_now_ns() + TEST_PATIENCE_NS)) { \
      test_gave_up_waiting(__FILE__, __LINE__, (what));              \
    }                                                                \
  } while (0)

// Polls `cond` every millisecond until it holds, or ends the binary.
#define POLL_OR_EXIT(cond, what)                                          \
  do {                                                                    \
    const int64_t deadline_ = hrt_time_now_ns() + TEST_PATIENCE_NS;       \
    while (!(cond)) {                                                     \
      if (hrt_time_now_ns() > deadline_) {                                \
        test_gave_up_waiting(__FILE__, __LINE__, (what));                 \
      }                                                                   \
      nanosleep(&(struct timespec){0, 1000000}, NULL);                    \
    }                                                                     \
  } while (0)

// Checks that every runtime object made so far has been destroyed. A device
// whose last reference dropped on its own queue thread is freed by that
// thread as it exits, so the counts may take a moment to settle.
static inline void every_object_is_destroyed(void) {
  for (int attempt = 0; attempt < 5000; ++attempt) {
    int64_t total = 0;
    for (int kind = 0; kind < HRT_LIVE_KIND_COUNT_; ++kind) {
      int64_t live = hrt_live_count((hrt_live_kind_t)kind);
      total += live < 0 ? -live : live;
    }
    if (total == 0) break;
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  for (int kind = 0; kind < HRT_LIVE_KIND_COUNT_; ++kind) {
    int64_t live = hrt_live_count((hrt_live_kind_t)kind);
    if (live != 0) {
      fprintf(stderr, "live %s: %lld\n",
              hrt_live_kind_name((hrt_live_kind_t)kind), (long long)live);
    }
    CHECK_EQ_INT(live, 0);
  }
}

typedef struct hrt_test_case_s {
  const char* name;
  void (*fn)(void);
} hrt_test_case_t;

#define TEST_CASE(fn) {#fn, fn}

// Runs every case; a case may be selected by passing its name as argv[1].
#define TEST_MAIN(...)                                                     \
  int hrt_test_failed_ = 0;                                                \
  int main(int argc, char** argv) {                                        \
    static const hrt_test_case_t cases[] = {__VA_ARGS__};                  \
    int passed = 0, failed = 0;                                            \
    setvbuf(stdout, NULL, _IOLBF, 0); /* in order with stderr in a log */  \
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {        \
      if (argc > 1 && strcmp(argv[1], cases[i].name) != 0) continue;       \
      hrt_test_failed_ = 0;                                                \
      cases[i].fn();                                                       \
      printf("%s %s\n", hrt_test_failed_ ? "FAIL" : "ok  ", cases[i].name); \
      if (hrt_test_failed_) ++failed; else ++passed;                       \
    }                                                                      \
    const char* base_ = strrchr(argv[0], '/');                             \
    printf("# %s\n%d passed, %d failed\n", base_ ? base_ + 1 : argv[0],    \
           passed, failed);                                                \
    return failed ? 1 : 0;                                                 \
  }

#endif  // HRT_TEST_TEST_H_
