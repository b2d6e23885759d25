// src/base: statuses, notifications, threads and dynamic libraries.
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include "base/alloc.h"
#include "base/dynlib.h"
#include "base/half.h"
#include "base/status.h"
#include "base/threads.h"
#include "test.h"

static void status_carries_code_and_formatted_message(void) {
  hrt_status_t status =
      hrt_status_make(HRT_STATUS_NOT_FOUND, "kernel '%s' (%d)", "add", 3);
  CHECK_EQ_INT(hrt_status_code(status), HRT_STATUS_NOT_FOUND);
  CHECK(strcmp(hrt_status_message(status), "kernel 'add' (3)") == 0);
  CHECK(strcmp(hrt_status_code_name(hrt_status_code(status)), "NOT_FOUND") ==
        0);
  hrt_status_t clone = hrt_status_clone(status);
  status = hrt_status_annotate(status, "loading %s", "m");
  CHECK(strcmp(hrt_status_message(status), "loading m: kernel 'add' (3)") ==
        0);
  CHECK(strcmp(hrt_status_message(clone), "kernel 'add' (3)") == 0);
  hrt_status_free(status);
  hrt_status_free(clone);
  CHECK(hrt_status_annotate(HRT_OK, "x") == HRT_OK);
  CHECK_EQ_INT(hrt_status_code(HRT_OK), HRT_STATUS_OK);
  CHECK(strcmp(hrt_status_code_name(HRT_STATUS_DEVICE_LOST), "DEVICE_LOST") ==
        0);
}

static void status_made_with_ok_code_is_internal(void) {
  hrt_status_t status = hrt_status_make(HRT_STATUS_OK, "oops");
  CHECK_EQ_INT(hrt_status_code(status), HRT_STATUS_INTERNAL);
  hrt_status_free(status);
}

static void long_messages_are_truncated_not_overrun(void) {
  char big[4000];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  hrt_status_t status = hrt_status_make(HRT_STATUS_INTERNAL, "%s", big);
  CHECK(strlen(hrt_status_message(status)) == 1023);
  hrt_status_free(status);
}

typedef struct {
  hrt_notification_t* notification;
  atomic_int woke;
} waiter_t;

static void* wait_for_notification(void* arg) {
  waiter_t* waiter = arg;
  if (hrt_notification_wait_until(waiter->notification,
                                  HRT_TIME_INFINITE_FUTURE)) {
    atomic_fetch_add(&waiter->woke, 1);
  }
  return NULL;
}

static void notification_wakes_every_waiter_once_set(void) {
  hrt_notification_t notification;
  hrt_notification_init(&notification);
  waiter_t waiter = {&notification, 0};
  hrt_thread_t threads[4];
  for (int i = 0; i < 4; ++i) {
    CHECK_OK(hrt_thread_create("waiter", wait_for_notification, &waiter,
                               &threads[i]));
  }
  CHECK(!hrt_notification_wait_until(&notification,
                                     hrt_time_now_ns() + 1000000));
  hrt_notification_set(&notification);
  for (int i = 0; i < 4; ++i) hrt_thread_join(&threads[i]);
  CHECK_EQ_INT(atomic_load(&waiter.woke), 4);
  CHECK(hrt_notification_is_set(&notification));
  CHECK(hrt_notification_wait_until(&notification, 0));
  hrt_notification_deinit(&notification);
}

typedef struct {
  hrt_thread_t thread;
  hrt_notification_t created;  // `thread` has been written
  int is_current;
} self_check_t;

static void* record_self(void* arg) {
  self_check_t* state = arg;
  hrt_notification_wait_until(&state->created, HRT_TIME_INFINITE_FUTURE);
  state->is_current = hrt_thread_is_current(&state->thread);
  return NULL;
}

static void thread_knows_itself(void) {
  self_check_t state = {.is_current = 0};
  hrt_notification_init(&state.created);
  CHECK_OK(hrt_thread_create("self", record_self, &state, &state.thread));
  hrt_notification_set(&state.created);
  hrt_thread_join(&state.thread);
  hrt_notification_deinit(&state.created);
  CHECK_EQ_INT(state.is_current, 1);
  CHECK(!hrt_thread_is_current(&state.thread));
}

static void timed_wait_returns_after_deadline(void) {
  hrt_mutex_t mutex;
  hrt_cond_t cond;
  hrt_mutex_init(&mutex);
  hrt_cond_init(&cond);
  int64_t start = hrt_time_now_ns();
  hrt_mutex_lock(&mutex);
  // A true return is a spurious wake-up: wait again for the timeout.
  while (hrt_cond_wait_until(&cond, &mutex, start + 20000000)) {
  }
  hrt_mutex_unlock(&mutex);
  int64_t elapsed = hrt_time_now_ns() - start;
  hrt_cond_deinit(&cond);
  hrt_mutex_deinit(&mutex);
  CHECK(elapsed >= 20000000);
}

static void dynlib_missing_library_is_unavailable(void) {
  const char* paths[] = {"/nonexistent/libnothing.so", "libnothing-halrt.so"};
  hrt_dynlib_t* library = NULL;
  CHECK_STATUS(hrt_dynlib_open(paths, 2, &library), HRT_STATUS_UNAVAILABLE,
               "libnothing-halrt.so");
  CHECK(library == NULL);
}

static void dynlib_opens_first_loadable_and_finds_symbols(void) {
  const char* paths[] = {"/nonexistent/libm.so", "libm.so.6"};
  hrt_dynlib_t* library = NULL;
  CHECK_OK(hrt_dynlib_open(paths, 2, &library));
  CHECK(strcmp(hrt_dynlib_path(library), "libm.so.6") == 0);
  void* symbol = NULL;
  hrt_status_t status = hrt_dynlib_symbol(library, "cos", &symbol);
  int found = status == HRT_OK && symbol != NULL;
  hrt_status_free(status);
  status = hrt_dynlib_symbol(library, "no_such_symbol_halrt", &symbol);
  int missing = hrt_status_code(status) == HRT_STATUS_NOT_FOUND &&
                strstr(hrt_status_message(status), "no_such_symbol_halrt");
  hrt_status_free(status);
  hrt_dynlib_close(library);
  CHECK(found);
  CHECK(missing);
}

static void allocation_failure_is_resource_exhausted(void) {
  void* ptr = NULL;
  CHECK_STATUS(hrt_allocate(SIZE_MAX / 2, "a test", &ptr),
               HRT_STATUS_RESOURCE_EXHAUSTED, "a test");
  CHECK(ptr == NULL);
}

static void half_floats_round_trip_and_round_to_even(void) {
  CHECK_EQ_INT(hrt_f32_to_f16(1.0f), 0x3C00);
  CHECK_EQ_INT(hrt_f32_to_f16(-2.0f), 0xC000);
  CHECK_EQ_INT(hrt_f32_to_f16(65504.0f), 0x7BFF);
  CHECK_EQ_INT(hrt_f32_to_f16(65520.0f), 0x7C00);  // rounds up to inf
  CHECK_EQ_INT(hrt_f32_to_f16(5.9604645e-8f), 0x0001);  // smallest subnormal
  CHECK_EQ_INT(hrt_f32_to_f16(2.9e-8f), 0x0000);
  CHECK_EQ_INT(hrt_f32_to_f16(1.0f + 1.0f / 2048), 0x3C00);  // tie to even
  CHECK_EQ_INT(hrt_f32_to_f16(1.0f + 3.0f / 2048), 0x3C02);  // tie to even
  CHECK_EQ_INT(hrt_f32_to_f16(NAN) & 0x7E00, 0x7E00);
  CHECK_EQ_INT(hrt_f32_to_bf16(1.0f), 0x3F80);
  CHECK_EQ_INT(hrt_f32_to_bf16(1.00390625f), 0x3F80);  // tie to even
  CHECK_EQ_INT(hrt_f32_to_bf16(1.01171875f), 0x3F82);  // tie to even
  CHECK(hrt_bf16_to_f32(0xC000) == -2.0f);
  int mismatches = 0;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7C00) == 0x7C00 && (bits & 0x3FF)) continue;  // NaN
    if (hrt_f32_to_f16(hrt_f16_to_f32((uint16_t)bits)) != bits) ++mismatches;
  }
  CHECK_EQ_INT(mismatches, 0);
}

TEST_MAIN(TEST_CASE(status_carries_code_and_formatted_message),
          TEST_CASE(status_made_with_ok_code_is_internal),
          TEST_CASE(long_messages_are_truncated_not_overrun),
          TEST_CASE(notification_wakes_every_waiter_once_set),
          TEST_CASE(thread_knows_itself),
          TEST_CASE(timed_wait_returns_after_deadline),
          TEST_CASE(dynlib_missing_library_is_unavailable),
          TEST_CASE(dynlib_opens_first_loadable_and_finds_symbols),
          TEST_CASE(allocation_failure_is_resource_exhausted),
          TEST_CASE(half_floats_round_trip_and_round_to_even))
