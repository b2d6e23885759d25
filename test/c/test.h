// A tiny test harness for the runtime's C unit tests.
//
// Each test file defines test functions and lists them in a TEST_MAIN table
// (a binary split across files: TEST_SUITE and TEST_MAIN_SUITES, below).
// CHECK* macros record a failure with file and line and return from the test;
// what a case defers with TEST_DEFER is released after it either way.
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

// Teardown. TEST_DEFER(fn, arg) registers a release, fn(arg), that the
// harness calls after the case returns, passed or failed (a CHECK returned
// early), last registered first: a case defers each release as it makes the
// object and then checks freely. `arg` must outlive the case (an object,
// never the case's stack); only the case's thread registers. A case that
// needs its objects gone before it goes on calls test_run_deferred();
// every_object_is_destroyed() calls it first. Registering more than
// TEST_DEFER_MAX fails the case, and what did not fit is not released.
#define TEST_DEFER_MAX 64

typedef struct hrt_test_deferred_s {
  void (*fn)(void*);
  void* arg;
} hrt_test_deferred_t;

extern hrt_test_deferred_t hrt_test_deferred_[TEST_DEFER_MAX];
extern int hrt_test_deferred_count_;

static inline void test_defer_(void (*fn)(void*), void* arg, const char* file,
                               int line) {
  if (hrt_test_deferred_count_ == TEST_DEFER_MAX) {
    fprintf(stderr, "%s:%d: more than TEST_DEFER_MAX (%d) deferred releases\n",
            file, line, TEST_DEFER_MAX);
    hrt_test_failed_ = 1;
    return;
  }
  hrt_test_deferred_[hrt_test_deferred_count_++] =
      (hrt_test_deferred_t){fn, arg};
}

#define TEST_DEFER(fn, arg) test_defer_((fn), (arg), __FILE__, __LINE__)

static inline void test_run_deferred(void) {
  while (hrt_test_deferred_count_ > 0) {
    const hrt_test_deferred_t deferred =
        hrt_test_deferred_[--hrt_test_deferred_count_];
    deferred.fn(deferred.arg);
  }
}

// Checks that every runtime object made so far has been destroyed, after
// running the case's deferred releases. A device whose last reference
// dropped on its own queue thread is freed by that thread as it exits, so
// the counts may take a moment to settle.
static inline void every_object_is_destroyed(void) {
  test_run_deferred();
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

typedef struct hrt_test_suite_s {
  const hrt_test_case_t* cases;
  size_t count;
} hrt_test_suite_t;

// Defines the suite `name` (external, for the file that lists the suites)
// with the cases given, in order.
#define TEST_SUITE(name, ...)                                   \
  static const hrt_test_case_t name##_cases_[] = {__VA_ARGS__}; \
  const hrt_test_suite_t name = {                               \
      name##_cases_, sizeof(name##_cases_) / sizeof(name##_cases_[0])}

// Runs the cases of `suites` in order, each followed by its deferred
// releases; a case may be selected by passing its name as argv[1].
static inline int test_main_(int argc, char** argv,
                             const hrt_test_suite_t* const* suites,
                             size_t suite_count) {
  int passed = 0, failed = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);  // in order with stderr in a log
  for (size_t s = 0; s < suite_count; ++s) {
    for (size_t i = 0; i < suites[s]->count; ++i) {
      const hrt_test_case_t* test = &suites[s]->cases[i];
      if (argc > 1 && strcmp(argv[1], test->name) != 0) continue;
      hrt_test_failed_ = 0;
      test->fn();
      test_run_deferred();
      printf("%s %s\n", hrt_test_failed_ ? "FAIL" : "ok  ", test->name);
      if (hrt_test_failed_) ++failed; else ++passed;
    }
  }
  const char* base = strrchr(argv[0], '/');
  printf("# %s\n%d passed, %d failed\n", base ? base + 1 : argv[0], passed,
         failed);
  return failed ? 1 : 0;
}

// The harness's state, defined once per binary by its main.
#define TEST_STATE_                                       \
  int hrt_test_failed_ = 0;                               \
  hrt_test_deferred_t hrt_test_deferred_[TEST_DEFER_MAX]; \
  int hrt_test_deferred_count_ = 0

// The main of a one-file binary: its cases, in order.
#define TEST_MAIN(...)                                                  \
  TEST_STATE_;                                                          \
  TEST_SUITE(hrt_test_cases_, __VA_ARGS__);                             \
  int main(int argc, char** argv) {                                     \
    static const hrt_test_suite_t* const suites[] = {&hrt_test_cases_}; \
    return test_main_(argc, argv, suites, 1);                           \
  }

// The main of a binary split across files: pointers to its suites, in order.
#define TEST_MAIN_SUITES(...)                                                  \
  TEST_STATE_;                                                                 \
  int main(int argc, char** argv) {                                            \
    static const hrt_test_suite_t* const suites[] = {__VA_ARGS__};             \
    return test_main_(argc, argv, suites, sizeof(suites) / sizeof(suites[0])); \
  }

#endif  // HRT_TEST_TEST_H_
