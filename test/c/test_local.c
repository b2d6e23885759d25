// The CPU devices end to end: submissions, completions, dispatches through
// the built-in and user kernel libraries, reuse, semaphores, failures and
// teardown.
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/live.h"
#include "base/threads.h"
#include "hal/buffer_view.h"
#include "hal/driver.h"
#include "hal/builtin_signatures.h"
#include "hal/local/builtin_kernels.h"
#include "halrt/cpu_kernel.h"
#include "test.h"
#include "test_submit.h"

static const char* const kDeviceUris[] = {"local-sync", "local-task?workers=4"};
// Devices whose full traces go to the trace thread (local_device.h): a
// local-task device with workers runs them where they stand.
static const char* const kTraceThreadUris[] = {"local-sync",
                                               "local-task?workers=1"};

static void completions_run_off_the_submitting_thread(void) {
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kDeviceUris[d], &device));
    hrt_hal_buffer_t* buffer = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, NULL, &buffer));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(buffer), 0xAB, 1));
    hrt_hal_command_buffer_finalize(cb);
    completion_t completion;
    CHECK_OK(submit(device, cb, NULL, 0, &completion));
    CHECK_OK(completion_wait(&completion));
    CHECK(!pthread_equal(completion.thread, pthread_self()));
    CHECK(((unsigned char*)buffer->host_ptr)[15] == 0xAB);
    hrt_hal_command_buffer_release(cb);
    hrt_hal_buffer_release(buffer);
    hrt_hal_device_release(device);
  }
}

static void fill_copy_update_read_move_bytes(void) {
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kDeviceUris[d], &device));
    hrt_hal_buffer_t* a = NULL;
    hrt_hal_buffer_t* b = NULL;
    const uint16_t initial[4] = {1, 2, 3, 4};
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 8, initial, &a));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 8, NULL, &b));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    const uint16_t patch = 99;
    uint16_t out_a[4] = {0}, out_b[4] = {0};
    CHECK_OK(hrt_hal_command_buffer_fill(
        cb, (hrt_hal_buffer_ref_t){b, 0, 0, 4}, 0x7777, 2));
    CHECK_OK(hrt_hal_command_buffer_update(
        cb, &patch, 2, (hrt_hal_buffer_ref_t){a, 0, 2, 2}));
    CHECK_OK(hrt_hal_command_buffer_barrier(cb));
    CHECK_OK(hrt_hal_command_buffer_copy(
        cb, (hrt_hal_buffer_ref_t){a, 0, 0, 4},
        (hrt_hal_buffer_ref_t){b, 0, 4, 4}));
    CHECK_OK(hrt_hal_command_buffer_read(cb, whole(a), out_a));
    CHECK_OK(hrt_hal_command_buffer_read(cb, whole(b), out_b));
    hrt_hal_command_buffer_finalize(cb);
    completion_t completion;
    CHECK_OK(submit(device, cb, NULL, 0, &completion));
    CHECK_OK(completion_wait(&completion));
    CHECK(out_a[0] == 1 && out_a[1] == 99 && out_a[2] == 3 && out_a[3] == 4);
    CHECK(out_b[0] == 0x7777 && out_b[1] == 0x7777 && out_b[2] == 1 &&
          out_b[3] == 99);
    hrt_hal_command_buffer_release(cb);
    hrt_hal_buffer_release(a);
    hrt_hal_buffer_release(b);
    hrt_hal_device_release(device);
  }
}

static void reused_command_buffer_runs_on_new_bindings(void) {
  enum { N = 10007, SETS = 3 };
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kDeviceUris[d], &device));
    hrt_hal_executable_params_t params = {
        .format = HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
    hrt_hal_executable_t* executable = NULL;
    CHECK_OK(hrt_hal_device_create_executable(device, &params, &executable));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(record_add(device, executable, N, 37, &cb));
    // Several binding sets submitted back to back without waiting: each
    // output must hold its own inputs' sums, every element written.
    hrt_hal_buffer_t* buffers[SETS][3];
    completion_t completions[SETS];
    float* a = malloc(N * sizeof(float));
    float* b = malloc(N * sizeof(float));
    CHECK(a && b);
    for (int s = 0; s < SETS; ++s) {
      for (int i = 0; i < N; ++i) {
        a[i] = (float)(i * (s + 1));
        b[i] = (float)(s - i) * 0.5f;
      }
      CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, a, &buffers[s][0]));
      CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, b, &buffers[s][1]));
      CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL,
                                              &buffers[s][2]));
      memset(buffers[s][2]->host_ptr, 0xFF, N * 4);  // poison: NaN
      hrt_hal_buffer_ref_t table[3] = {whole(buffers[s][0]),
                                       whole(buffers[s][1]),
                                       whole(buffers[s][2])};
      CHECK_OK(submit(device, cb, table, 3, &completions[s]));
    }
    int wrong = 0;
    for (int s = 0; s < SETS; ++s) {
      CHECK_OK(completion_wait(&completions[s]));
      const float* out = buffers[s][2]->host_ptr;
      for (int i = 0; i < N; ++i) {
        float expected = (float)(i * (s + 1)) + (float)(s - i) * 0.5f;
        if (out[i] != expected) ++wrong;
      }
      CHECK_EQ_INT(completions[s].order,
                   completions[0].order + s);  // FIFO
    }
    CHECK_EQ_INT(wrong, 0);
    for (int s = 0; s < SETS; ++s) {
      for (int k = 0; k < 3; ++k) hrt_hal_buffer_release(buffers[s][k]);
    }
    free(a);
    free(b);
    hrt_hal_command_buffer_release(cb);
    hrt_hal_executable_release(executable);
    hrt_hal_device_release(device);
  }
}

static hrt_status_t load_test_library(hrt_hal_device_t* device,
                                      const char* variant,
                                      hrt_hal_executable_t** out) {
  const char* dir = getenv("HRT_TEST_KERNEL_DIR");
  char path[1024];
  snprintf(path, sizeof(path), "%s/kernels_%s.so", dir ? dir : ".", variant);
  hrt_hal_executable_params_t params = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_CPU_LIBRARY, .path = path};
  return hrt_hal_device_create_executable(device, &params, out);
}

static void user_kernel_libraries_load_and_run(void) {
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("local-task?workers=3", &device));
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(load_test_library(device, "good", &executable));
  uint32_t ordinal = 0;
  CHECK_OK(hrt_hal_executable_lookup(executable, "scale_u32", &ordinal));
  uint32_t input[100];
  for (int i = 0; i < 100; ++i) input[i] = (uint32_t)i;
  hrt_hal_buffer_t* in = NULL;
  hrt_hal_buffer_t* out = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, sizeof(input), input, &in));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, sizeof(input), NULL, &out));
  uint32_t constants[2] = {100, 3};
  hrt_hal_buffer_ref_t bindings[2] = {whole(in), whole(out)};
  hrt_hal_dispatch_t dispatch = {executable, ordinal, {7, 1, 1}, {1, 1, 1},
                                 2,          constants, 2,       bindings, 0};
  CHECK_OK(run_dispatch(device, &dispatch));
  const uint32_t* result = out->host_ptr;
  for (int i = 0; i < 100; ++i) CHECK_EQ_INT(result[i], 3 * i);
  hrt_hal_buffer_release(in);
  hrt_hal_buffer_release(out);
  hrt_hal_executable_release(executable);

  CHECK_STATUS(load_test_library(device, "bad_abi", &executable),
               HRT_STATUS_INVALID_ARGUMENT, "ABI version 2");
  CHECK_STATUS(load_test_library(device, "no_query", &executable),
               HRT_STATUS_NOT_FOUND, "halrt_kernel_library_query");
  CHECK_STATUS(load_test_library(device, "duplicate_names", &executable),
               HRT_STATUS_INVALID_ARGUMENT, "names kernel 'scale_u32' twice");
  CHECK_STATUS(load_test_library(device, "null_table", &executable),
               HRT_STATUS_INVALID_ARGUMENT, "returned no table");
  CHECK_STATUS(load_test_library(device, "missing", &executable),
               HRT_STATUS_UNAVAILABLE, "kernels_missing.so");
  hrt_hal_device_release(device);
}

static void workgroups_spread_over_the_workers(void) {
  enum { GROUPS = 64, WORKERS = 4 };
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("local-task?workers=4", &device));
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(load_test_library(device, "good", &executable));
  uint32_t ordinal = 0;
  CHECK_OK(hrt_hal_executable_lookup(executable, "worker_ids", &ordinal));
  hrt_hal_buffer_t* out = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, GROUPS * 4, NULL, &out));
  hrt_hal_buffer_ref_t binding = whole(out);
  hrt_hal_dispatch_t dispatch = {executable, ordinal, {4, 4, 4}, {1, 1, 1},
                                 0,          NULL,    1,         &binding, 0};
  CHECK_OK(run_dispatch(device, &dispatch));
  const uint32_t* ids = out->host_ptr;
  int used[WORKERS + 1] = {0};
  int bad = 0;
  for (int g = 0; g < GROUPS; ++g) {
    if (ids[g] < 1 || ids[g] > WORKERS) {
      ++bad;
    } else {
      used[ids[g]] = 1;
    }
  }
  int distinct = used[1] + used[2] + used[3] + used[4];
  hrt_hal_buffer_release(out);
  hrt_hal_executable_release(executable);
  hrt_hal_device_release(device);
  CHECK_EQ_INT(bad, 0);  // every workgroup ran, with a valid worker id
  CHECK(distinct >= 2);
}

static void failing_kernel_fails_the_submission_naming_it(void) {
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kDeviceUris[d], &device));
    hrt_hal_executable_t* executable = NULL;
    CHECK_OK(load_test_library(device, "good", &executable));
    uint32_t ordinal = 0;
    CHECK_OK(hrt_hal_executable_lookup(executable, "fail_on", &ordinal));
    hrt_hal_semaphore_t* signal = NULL;
    CHECK_OK(hrt_hal_semaphore_create(0, &signal));
    hrt_hal_semaphore_point_t point = {signal, 1};
    uint32_t codes[2] = {7, HALRT_KERNEL_INVALID_ARGUMENT};
    hrt_status_code_t expected[2] = {HRT_STATUS_ABORTED,
                                     HRT_STATUS_INVALID_ARGUMENT};
    for (int c = 0; c < 2; ++c) {
      uint32_t constants[2] = {codes[c], 2};
      hrt_hal_dispatch_t dispatch = {executable, ordinal, {5, 1, 1}, {1, 1, 1},
                                     2,          constants, 0,       NULL, 0};
      hrt_hal_command_buffer_t* cb = NULL;
      CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
      CHECK_OK(hrt_hal_command_buffer_dispatch(cb, &dispatch));
      hrt_hal_command_buffer_finalize(cb);
      completion_t completion;
      completion_init(&completion);
      hrt_hal_submission_t submission = {
          .command_buffer = cb,
          .signals = c == 0 ? &point : NULL,
          .signal_count = c == 0 ? 1 : 0,
          .completion = {on_complete, &completion},
      };
      CHECK_OK(hrt_hal_device_queue_submit(device, &submission));
      hrt_hal_command_buffer_release(cb);
      CHECK_STATUS(completion_wait(&completion), expected[c],
                   "kernel 'fail_on'");
    }
    uint64_t value = 0;
    CHECK_STATUS(hrt_hal_semaphore_query(signal, &value), HRT_STATUS_ABORTED,
                 "returned 7 at workgroup [2, 0, 0]");
    hrt_hal_semaphore_release(signal);
    // The device still works after a failed submission.
    hrt_hal_buffer_t* buffer = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 4, NULL, &buffer));
    CHECK_OK(run_fill(device, whole(buffer), 5, 4));
    CHECK_EQ_INT(*(uint32_t*)buffer->host_ptr, 5);
    hrt_hal_buffer_release(buffer);
    hrt_hal_executable_release(executable);
    hrt_hal_device_release(device);
  }
}

static void submissions_wait_for_semaphores(void) {
  check_submissions_wait_for_semaphores("local-task?workers=2",
                                        /*foreign_device_loss=*/false,
                                        /*host_visible=*/true);
}

static void bad_submissions_are_rejected_without_side_effects(void) {
  hrt_hal_device_t* device = NULL;
  hrt_hal_device_t* other = NULL;
  CHECK_OK(make_device("local-sync", &device));
  CHECK_OK(make_device("local-sync", &other));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  hrt_hal_buffer_ref_t slot = {NULL, 0, 0, 8};
  CHECK_OK(hrt_hal_command_buffer_fill(cb, slot, 1, 4));
  completion_t completion;
  CHECK_STATUS(submit(device, cb, NULL, 0, &completion),
               HRT_STATUS_FAILED_PRECONDITION, "finalized");
  hrt_hal_command_buffer_finalize(cb);
  CHECK_STATUS(submit(other, cb, NULL, 0, &completion),
               HRT_STATUS_INVALID_ARGUMENT, "another device");
  CHECK_STATUS(submit(device, cb, NULL, 0, &completion),
               HRT_STATUS_INVALID_ARGUMENT, "uses 1 binding slots");
  hrt_hal_buffer_t* small = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 4, NULL, &small));
  hrt_hal_buffer_ref_t table[1] = {whole(small)};
  CHECK_STATUS(submit(device, cb, table, 1, &completion),
               HRT_STATUS_OUT_OF_RANGE, "command 0 fill target");
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_SUBMISSION), 0);
  hrt_hal_buffer_release(small);
  hrt_hal_command_buffer_release(cb);
  hrt_hal_device_release(device);
  hrt_hal_device_release(other);
}

// A submission whose caller holds its command buffer and buffers takes no
// references to them, still runs, and is refused without a completion.
static void caller_held_submissions_take_no_references(void) {
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("local-task?workers=2", &device));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, NULL, &buffer));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  hrt_hal_buffer_ref_t slot = {NULL, 0, 0, 16};
  CHECK_OK(hrt_hal_command_buffer_fill(cb, slot, 9, 4));
  hrt_hal_command_buffer_finalize(cb);
  hrt_hal_buffer_ref_t table[1] = {whole(buffer)};
  hrt_hal_submission_t refused = {.command_buffer = cb,
                                  .bindings = table,
                                  .binding_count = 1,
                                  .caller_holds = true};
  CHECK_STATUS(hrt_hal_device_queue_submit(device, &refused),
               HRT_STATUS_INVALID_ARGUMENT, "needs a completion");
  completion_t completion;
  completion_init(&completion);
  hrt_hal_semaphore_t* gate = NULL;
  CHECK_OK(hrt_hal_semaphore_create(0, &gate));
  hrt_hal_semaphore_point_t wait = {gate, 1};
  hrt_hal_submission_t held = refused;
  held.completion = (hrt_hal_completion_t){on_complete, &completion};
  held.waits = &wait;
  held.wait_count = 1;
  CHECK_OK(hrt_hal_device_queue_submit(device, &held));
  // Pending (it waits for the gate): no reference but the caller's own.
  CHECK_EQ_INT((int)atomic_load(&buffer->ref.count), 1);
  CHECK_OK(hrt_hal_semaphore_signal(gate, 1));
  CHECK_OK(completion_wait(&completion));
  hrt_hal_semaphore_release(gate);
  const uint32_t* words = buffer->host_ptr;
  CHECK_EQ_INT(words[0] == 9 && words[3] == 9, 1);
  CHECK_EQ_INT((int)atomic_load(&buffer->ref.count), 1);
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
}

static void device_released_on_its_own_thread_is_destroyed(void) {
  for (int d = 0; d < 2; ++d) {
    check_device_released_by_its_completion_is_destroyed(kDeviceUris[d]);
  }
}

typedef struct {
  int calls;
  uint32_t first_values[2];
  uint64_t lengths[2];
  void* context_seen;
  pthread_t thread;
  int fail;
} trace_record_t;

static hrt_status_t record_trace(void* user_data, void* submission_context,
                                 uint32_t count, const void* const* data,
                                 const uint64_t* lengths,
                                 hrt_hal_buffer_t* const* buffers) {
  (void)buffers;
  trace_record_t* record = user_data;
  record->calls++;
  record->context_seen = submission_context;
  record->thread = pthread_self();
  for (uint32_t i = 0; i < count && i < 2; ++i) {
    memcpy(&record->first_values[i], data[i], 4);
    record->lengths[i] = lengths[i];
  }
  if (record->fail) {
    return hrt_status_make(HRT_STATUS_ABORTED, "trace callback refused");
  }
  return HRT_OK;
}

static void traces_see_everything_before_them(void) {
  for (int fail = 0; fail < 2; ++fail) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kDeviceUris[fail], &device));
    hrt_hal_buffer_t* buffer = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 16, NULL, &buffer));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    trace_record_t record = {.fail = fail};
    hrt_hal_buffer_ref_t slot = {NULL, 0, 0, HRT_HAL_WHOLE_BUFFER};
    hrt_hal_buffer_ref_t part = {buffer, 0, 8, 8};
    hrt_hal_buffer_ref_t sources[2] = {slot, part};
    CHECK_OK(hrt_hal_command_buffer_fill(cb, slot, 0x01020304, 4));
    CHECK_OK(hrt_hal_command_buffer_trace(cb, sources, 2, record_trace,
                                          &record));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, slot, 0x0A0B0C0D, 4));
    CHECK_STATUS(hrt_hal_command_buffer_trace(cb, sources, 0, record_trace,
                                              &record),
                 HRT_STATUS_INVALID_ARGUMENT, "1 to 32 sources");
    hrt_hal_command_buffer_finalize(cb);
    completion_t completion;
    completion_init(&completion);
    hrt_hal_buffer_ref_t table[1] = {whole(buffer)};
    int context = 42;
    hrt_hal_submission_t submission = {
        .command_buffer = cb,
        .bindings = table,
        .binding_count = 1,
        .completion = {on_complete, &completion},
        .host_context = &context,
    };
    CHECK_OK(hrt_hal_device_queue_submit(device, &submission));
    hrt_status_t status = completion_wait(&completion);
    uint32_t final_value = *(uint32_t*)buffer->host_ptr;
    hrt_hal_command_buffer_release(cb);
    hrt_hal_buffer_release(buffer);
    hrt_hal_device_release(device);
    CHECK_EQ_INT(record.calls, 1);
    CHECK(record.context_seen == &context);
    CHECK(!pthread_equal(record.thread, pthread_self()));
    CHECK_EQ_INT(record.first_values[0], 0x01020304);
    CHECK_EQ_INT(record.first_values[1], 0x01020304);
    CHECK_EQ_INT(record.lengths[0], 16);
    CHECK_EQ_INT(record.lengths[1], 8);
    if (fail) {
      CHECK_STATUS(status, HRT_STATUS_ABORTED, "trace callback refused");
      // The fill after the trace writes what it read, so it waited for the
      // callback, saw its failure and did not run.
      CHECK_EQ_INT(final_value, 0x01020304);
    } else {
      CHECK_OK(status);
      CHECK_EQ_INT(final_value, 0x0A0B0C0D);
    }
  }
}

//===----------------------------------------------------------------------===//
// Trace snapshots: the callback runs on the device's trace thread while
// later commands go on; only later writers of a traced range wait for it.
// (On a local-task device with workers it runs at its place instead: see
// full_traces_with_workers_run_at_their_place.)
//===----------------------------------------------------------------------===//

// Words in a traced buffer: 128 KiB, so that a local device hands the trace
// to its trace thread rather than running it at once (it does that only for
// small traces while the thread is idle).
enum { SNAPSHOT_WORDS = 32768 };

// What a snapshot callback saw. It first sleeps `sleep_ms`, or waits for
// `gate` (10 s at most, so that a broken device fails the test rather than
// hanging it), then reads the first word of its first source.
typedef struct {
  int sleep_ms;
  hrt_notification_t* gate;
  bool gate_timed_out;
  uint32_t seen;
  pthread_t thread;
  atomic_bool returned;
} snapshot_t;

static void sleep_ms(int ms) {
  struct timespec pause = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
}

static hrt_status_t snapshot_trace(void* user_data, void* submission_context,
                                   uint32_t count, const void* const* data,
                                   const uint64_t* lengths,
                                   hrt_hal_buffer_t* const* buffers) {
  (void)buffers;
  (void)submission_context;
  (void)count;
  (void)lengths;
  snapshot_t* snapshot = user_data;
  if (snapshot->sleep_ms) sleep_ms(snapshot->sleep_ms);
  if (snapshot->gate) {
    snapshot->gate_timed_out = !hrt_notification_wait_until(
        snapshot->gate, hrt_time_now_ns() + 10000000000LL);
  }
  memcpy(&snapshot->seen, data[0], 4);
  snapshot->thread = pthread_self();
  atomic_store(&snapshot->returned, true);
  return HRT_OK;
}

static void snapshot_init(snapshot_t* snapshot, int sleep,
                          hrt_notification_t* gate) {
  memset(snapshot, 0, sizeof(*snapshot));
  snapshot->sleep_ms = sleep;
  snapshot->gate = gate;
  atomic_init(&snapshot->returned, false);
}

// A dispatch of the test library's scale_u32: out = in * factor over n
// words, `in` marked read-only as the built-ins' signatures mark theirs.
static hrt_status_t record_scale(hrt_hal_command_buffer_t* cb,
                                 hrt_hal_executable_t* executable,
                                 const uint32_t* constants,
                                 const hrt_hal_buffer_ref_t* in_out) {
  uint32_t ordinal = 0;
  HRT_RETURN_IF_ERROR(
      hrt_hal_executable_lookup(executable, "scale_u32", &ordinal));
  hrt_hal_dispatch_t dispatch = {executable, ordinal, {1, 1, 1},
                                 {1, 1, 1},  2,       constants,
                                 2,          in_out,  .read_only_bindings = 1u};
  return hrt_hal_command_buffer_dispatch(cb, &dispatch);
}

// A dispatch that stores 1 into `flag` with release order, for the test
// thread to see that the queue has got past the commands before it.
static hrt_status_t record_store_release(hrt_hal_command_buffer_t* cb,
                                         hrt_hal_executable_t* executable,
                                         const hrt_hal_buffer_ref_t* flag) {
  static const uint32_t one = 1;
  uint32_t ordinal = 0;
  HRT_RETURN_IF_ERROR(
      hrt_hal_executable_lookup(executable, "store_release_u32", &ordinal));
  hrt_hal_dispatch_t dispatch = {executable, ordinal, {1, 1, 1}, {1, 1, 1}, 1,
                                 &one,       1,       flag,      0};
  return hrt_hal_command_buffer_dispatch(cb, &dispatch);
}

// Waits (5 s at most, less than a gated snapshot's 10) for the store of
// record_store_release.
static bool wait_for_flag(hrt_hal_buffer_t* flag) {
  int64_t deadline = hrt_time_now_ns() + 5000000000LL;
  while (__atomic_load_n((uint32_t*)flag->host_ptr, __ATOMIC_ACQUIRE) != 1) {
    if (hrt_time_now_ns() >= deadline) return false;
    sleep_ms(1);
  }
  return true;
}

// A fill, a copy's target and a dispatch's written binding that come after a
// trace (in the same submission or a later one) wait until its callback has
// returned: a callback that takes 100 ms still sees the values before them.
static void later_writers_wait_for_the_traces_before_them(void) {
  enum { N = SNAPSHOT_WORDS };
  static snapshot_t first, second, third;
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kTraceThreadUris[d], &device));
    hrt_hal_executable_t* executable = NULL;
    CHECK_OK(load_test_library(device, "good", &executable));
    static uint32_t threes[N], host[N];
    for (int i = 0; i < N; ++i) threes[i] = 3;
    hrt_hal_buffer_t *x = NULL, *y = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL, &x));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, threes, &y));
    snapshot_init(&first, 100, NULL);
    snapshot_init(&second, 100, NULL);
    snapshot_init(&third, 100, NULL);
    hrt_hal_command_buffer_t *a = NULL, *b = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &a));
    CHECK_OK(hrt_hal_command_buffer_fill(a, whole(x), 0x11111111, 4));
    hrt_hal_buffer_ref_t traced = whole(x);
    CHECK_OK(
        hrt_hal_command_buffer_trace(a, &traced, 1, snapshot_trace, &first));
    hrt_hal_command_buffer_finalize(a);
    CHECK_OK(hrt_hal_command_buffer_create(device, &b));
    CHECK_OK(hrt_hal_command_buffer_fill(b, whole(x), 0x22222222, 4));
    CHECK_OK(
        hrt_hal_command_buffer_trace(b, &traced, 1, snapshot_trace, &second));
    CHECK_OK(hrt_hal_command_buffer_copy(b, whole(y), whole(x)));
    CHECK_OK(
        hrt_hal_command_buffer_trace(b, &traced, 1, snapshot_trace, &third));
    const uint32_t constants[2] = {N, 5};
    const hrt_hal_buffer_ref_t in_out[2] = {whole(y), whole(x)};
    CHECK_OK(record_scale(b, executable, constants, in_out));
    CHECK_OK(hrt_hal_command_buffer_read(b, whole(x), host));
    hrt_hal_command_buffer_finalize(b);
    completion_t done_a, done_b;
    CHECK_OK(submit(device, a, NULL, 0, &done_a));
    CHECK_OK(submit(device, b, NULL, 0, &done_b));
    CHECK_OK(completion_wait(&done_a));
    CHECK_OK(completion_wait(&done_b));
    CHECK_EQ_INT(first.seen, 0x11111111);
    CHECK_EQ_INT(second.seen, 0x22222222);
    CHECK_EQ_INT(third.seen, 3);
    int wrong = 0;
    for (int i = 0; i < N; ++i) wrong += host[i] != 15;
    CHECK_EQ_INT(wrong, 0);
    hrt_hal_command_buffer_release(a);
    hrt_hal_command_buffer_release(b);
    hrt_hal_buffer_release(x);
    hrt_hal_buffer_release(y);
    hrt_hal_executable_release(executable);
    hrt_hal_device_release(device);
  }
}

// While a trace callback is blocked, the commands after it that only read
// the traced range run: a read into host memory, a copy from it and a
// dispatch reading it. A fill of the range after them waits for the
// callback, which still sees the traced values.
static void later_readers_do_not_wait_for_a_trace(void) {
  enum { N = SNAPSHOT_WORDS };
  static hrt_notification_t gate;
  static snapshot_t blocked;
  static uint32_t host_x[N], host_after[N];
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kTraceThreadUris[d], &device));
    hrt_hal_executable_t* executable = NULL;
    CHECK_OK(load_test_library(device, "good", &executable));
    hrt_hal_buffer_t *x = NULL, *y = NULL, *z = NULL, *flag = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL, &x));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL, &y));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL, &z));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 4, NULL, &flag));
    hrt_notification_init(&gate);
    snapshot_init(&blocked, 0, &gate);
    memset(host_x, 0, sizeof(host_x));
    memset(host_after, 0, sizeof(host_after));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(x), 7, 4));
    hrt_hal_buffer_ref_t traced = whole(x);
    CHECK_OK(
        hrt_hal_command_buffer_trace(cb, &traced, 1, snapshot_trace, &blocked));
    CHECK_OK(hrt_hal_command_buffer_read(cb, whole(x), host_x));
    CHECK_OK(hrt_hal_command_buffer_copy(cb, whole(x), whole(y)));
    const uint32_t constants[2] = {N, 3};
    const hrt_hal_buffer_ref_t in_out[2] = {whole(x), whole(z)};
    CHECK_OK(record_scale(cb, executable, constants, in_out));
    hrt_hal_buffer_ref_t flag_ref = whole(flag);
    CHECK_OK(record_store_release(cb, executable, &flag_ref));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(x), 9, 4));
    CHECK_OK(hrt_hal_command_buffer_read(cb, whole(x), host_after));
    hrt_hal_command_buffer_finalize(cb);
    completion_t done;
    CHECK_OK(submit(device, cb, NULL, 0, &done));
    // The flag is stored after the read, the copy and the dispatch: they
    // have run while the callback is still blocked. (Their results are
    // checked once the submission has completed, which orders them before
    // this thread for ThreadSanitizer too: the store is in uninstrumented
    // kernel code.)
    bool reached = wait_for_flag(flag);
    bool returned_before = atomic_load(&blocked.returned);
    hrt_notification_set(&gate);
    CHECK_OK(completion_wait(&done));
    CHECK(reached);
    CHECK(!returned_before);
    const uint32_t* y_words = y->host_ptr;
    const uint32_t* z_words = z->host_ptr;
    int wrong = 0;
    for (int i = 0; i < N; ++i) {
      wrong += host_x[i] != 7 || y_words[i] != 7 || z_words[i] != 21;
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK(!blocked.gate_timed_out);
    CHECK_EQ_INT(blocked.seen, 7);
    CHECK_EQ_INT(host_after[0], 9);
    CHECK_EQ_INT(host_after[N - 1], 9);
    hrt_notification_deinit(&gate);
    hrt_hal_command_buffer_release(cb);
    hrt_hal_buffer_release(x);
    hrt_hal_buffer_release(y);
    hrt_hal_buffer_release(z);
    hrt_hal_buffer_release(flag);
    hrt_hal_executable_release(executable);
    hrt_hal_device_release(device);
  }
}

typedef struct {
  int calls;
  hrt_hal_tensor_summary_t summary;
  uint64_t length;
} summary_seen_t;

static hrt_status_t keep_summary(void* user_data, void* submission_context,
                                 uint32_t count, const void* const* data,
                                 const uint64_t* lengths,
                                 hrt_hal_buffer_t* const* buffers) {
  (void)buffers;
  (void)submission_context;
  (void)count;
  summary_seen_t* seen = user_data;
  seen->calls++;
  seen->length = lengths[0];
  memcpy(&seen->summary, data[0], sizeof(seen->summary));
  return HRT_OK;
}

// A summary trace is computed at its place in the program and holds no
// range: while the callbacks are queued behind a blocked one (a full trace
// of another buffer), a read and a fill of the summarized range after it
// run, and its summary is still of the values before them.
static void summary_traces_make_no_reader_or_writer_wait(void) {
  enum { N = SNAPSHOT_WORDS };
  static hrt_notification_t gate;
  static snapshot_t blocked;
  static uint32_t host_x[N], host_after[N];
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kTraceThreadUris[d], &device));
    hrt_hal_executable_t* executable = NULL;
    CHECK_OK(load_test_library(device, "good", &executable));
    hrt_hal_buffer_t *x = NULL, *y = NULL, *flag = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL, &x));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL, &y));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 4, NULL, &flag));
    hrt_notification_init(&gate);
    snapshot_init(&blocked, 0, &gate);
    summary_seen_t seen = {0};
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(x), 7, 4));
    hrt_hal_buffer_ref_t other = whole(y);
    CHECK_OK(
        hrt_hal_command_buffer_trace(cb, &other, 1, snapshot_trace, &blocked));
    hrt_hal_buffer_ref_t summarized = whole(x);
    const hrt_hal_element_type_t u32 = HRT_HAL_ELEMENT_TYPE_U32;
    CHECK_OK(hrt_hal_command_buffer_trace_mode(
        cb, HRT_HAL_TRACE_SUMMARY, &summarized, &u32, 1, keep_summary, &seen));
    CHECK_OK(hrt_hal_command_buffer_read(cb, whole(x), host_x));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(x), 9, 4));
    hrt_hal_buffer_ref_t flag_ref = whole(flag);
    CHECK_OK(record_store_release(cb, executable, &flag_ref));
    CHECK_OK(hrt_hal_command_buffer_read(cb, whole(x), host_after));
    hrt_hal_command_buffer_finalize(cb);
    completion_t done;
    CHECK_OK(submit(device, cb, NULL, 0, &done));
    bool reached = wait_for_flag(flag);
    bool returned_before = atomic_load(&blocked.returned);
    hrt_notification_set(&gate);
    CHECK_OK(completion_wait(&done));
    CHECK(reached);
    CHECK(!returned_before);
    CHECK(!blocked.gate_timed_out);
    CHECK_EQ_INT(seen.calls, 1);
    CHECK_EQ_INT(seen.length, sizeof(hrt_hal_tensor_summary_t));
    CHECK_EQ_INT(seen.summary.count, N);
    CHECK(seen.summary.min == 7 && seen.summary.max == 7);
    CHECK(seen.summary.sum == 7.0 * N);
    CHECK_EQ_INT(host_x[N - 1], 7);
    CHECK_EQ_INT(host_after[0], 9);
    hrt_notification_deinit(&gate);
    hrt_hal_command_buffer_release(cb);
    hrt_hal_buffer_release(x);
    hrt_hal_buffer_release(y);
    hrt_hal_buffer_release(flag);
    hrt_hal_executable_release(executable);
    hrt_hal_device_release(device);
  }
}

// The order log of traces_timings_and_completions_keep_program_order: one
// entry per callback, 'T'/'D'/'C' << 16 | submission << 8 | command.
enum { ORDER_SUBMISSIONS = 8, ORDER_LOG = 128 };
typedef struct {
  hrt_mutex_t mutex;
  int count;
  uint32_t entries[ORDER_LOG];
} order_log_t;
static order_log_t order_log;

typedef struct {
  int index;  // the submission's
  completion_t completion;
} order_submission_t;

static void order_append(char kind, int submission, uint32_t command) {
  hrt_mutex_lock(&order_log.mutex);
  if (order_log.count < ORDER_LOG) {
    order_log.entries[order_log.count] =
        (uint32_t)kind << 16 | (uint32_t)submission << 8 | command;
  }
  order_log.count++;
  hrt_mutex_unlock(&order_log.mutex);
}

// user_data: the command index; 2 ms each, so the trace thread lags.
static hrt_status_t order_trace(void* user_data, void* submission_context,
                                uint32_t count, const void* const* data,
                                const uint64_t* lengths,
                                hrt_hal_buffer_t* const* buffers) {
  (void)buffers;
  (void)count;
  (void)data;
  (void)lengths;
  sleep_ms(2);
  const order_submission_t* sub = submission_context;
  order_append('T', sub->index, *(const uint32_t*)user_data);
  return HRT_OK;
}

static void order_timing(void* host_context, uint32_t command_index,
                         int64_t start_ns, int64_t duration_ns) {
  (void)start_ns;
  (void)duration_ns;
  const order_submission_t* sub = host_context;
  order_append('D', sub->index, command_index);
}

static void order_complete(void* user_data, hrt_status_t status) {
  order_submission_t* sub = user_data;
  order_append('C', sub->index, 0);
  on_complete(&sub->completion, status);
}

// Submissions back to back, each with its own buffers (nothing orders them
// but the FIFO), alternately [dispatch, trace, dispatch, trace, dispatch]
// and [dispatch]: every dispatch time, trace and completion reaches the host
// in program order, each completion after its submission's traces.
static void traces_timings_and_completions_keep_program_order(void) {
  enum { N = SNAPSHOT_WORDS };
  static const uint32_t trace_commands[2] = {1, 3};
  static order_submission_t subs[ORDER_SUBMISSIONS];
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kTraceThreadUris[d], &device));
    hrt_hal_executable_t* executable = NULL;
    CHECK_OK(load_test_library(device, "good", &executable));
    hrt_mutex_init(&order_log.mutex);
    order_log.count = 0;
    const uint32_t constants[2] = {N, 2};
    hrt_hal_buffer_ref_t slots[4];
    for (uint32_t i = 0; i < 4; ++i) {
      slots[i] = (hrt_hal_buffer_ref_t){NULL, i, 0, HRT_HAL_WHOLE_BUFFER};
    }
    hrt_hal_command_buffer_t *traced = NULL, *plain = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &traced));
    for (int k = 0; k < 3; ++k) {
      hrt_hal_buffer_ref_t in_out[2] = {slots[0], slots[1 + k]};
      CHECK_OK(record_scale(traced, executable, constants, in_out));
      if (k < 2) {
        CHECK_OK(hrt_hal_command_buffer_trace(
            traced, &slots[1 + k], 1, order_trace, (void*)&trace_commands[k]));
      }
    }
    hrt_hal_command_buffer_finalize(traced);
    CHECK_OK(hrt_hal_command_buffer_create(device, &plain));
    const hrt_hal_buffer_ref_t plain_in_out[2] = {slots[0], slots[1]};
    CHECK_OK(record_scale(plain, executable, constants, plain_in_out));
    hrt_hal_command_buffer_finalize(plain);
    hrt_hal_buffer_t* buffers[ORDER_SUBMISSIONS][4];
    for (int s = 0; s < ORDER_SUBMISSIONS; ++s) {
      hrt_hal_buffer_ref_t table[4];
      for (int i = 0; i < 4; ++i) {
        CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL,
                                                &buffers[s][i]));
        table[i] = whole(buffers[s][i]);
      }
      subs[s].index = s;
      completion_init(&subs[s].completion);
      hrt_hal_submission_t submission = {
          .command_buffer = s % 2 ? plain : traced,
          .bindings = table,
          .binding_count = 4,
          .completion = {order_complete, &subs[s]},
          .host_context = &subs[s],
          .dispatch_timing = order_timing,
      };
      CHECK_OK(hrt_hal_device_queue_submit(device, &submission));
    }
    for (int s = 0; s < ORDER_SUBMISSIONS; ++s) {
      CHECK_OK(completion_wait(&subs[s].completion));
    }
    uint32_t expected[ORDER_LOG];
    int count = 0;
    for (int s = 0; s < ORDER_SUBMISSIONS; ++s) {
      uint32_t sub = (uint32_t)s << 8;
      if (s % 2) {
        expected[count++] = 'D' << 16 | sub | 0;
      } else {
        expected[count++] = 'D' << 16 | sub | 0;
        expected[count++] = 'T' << 16 | sub | 1;
        expected[count++] = 'D' << 16 | sub | 2;
        expected[count++] = 'T' << 16 | sub | 3;
        expected[count++] = 'D' << 16 | sub | 4;
      }
      expected[count++] = 'C' << 16 | sub;
    }
    CHECK_EQ_INT(order_log.count, count);
    int first_wrong = -1;
    for (int i = 0; i < count && first_wrong < 0; ++i) {
      if (order_log.entries[i] != expected[i]) first_wrong = i;
    }
    if (first_wrong >= 0) {
      fprintf(stderr, "entry %d: %c sub %u command %u, expected %c %u %u\n",
              first_wrong, order_log.entries[first_wrong] >> 16,
              order_log.entries[first_wrong] >> 8 & 0xFF,
              order_log.entries[first_wrong] & 0xFF,
              expected[first_wrong] >> 16, expected[first_wrong] >> 8 & 0xFF,
              expected[first_wrong] & 0xFF);
    }
    CHECK_EQ_INT(first_wrong, -1);
    for (int s = 0; s < ORDER_SUBMISSIONS; ++s) {
      for (int i = 0; i < 4; ++i) hrt_hal_buffer_release(buffers[s][i]);
    }
    hrt_mutex_deinit(&order_log.mutex);
    hrt_hal_command_buffer_release(traced);
    hrt_hal_command_buffer_release(plain);
    hrt_hal_executable_release(executable);
    hrt_hal_device_release(device);
  }
}

// release_everything, recording the thread it ran on.
static pthread_t released_on;
static void record_and_release_everything(void* user_data,
                                          hrt_status_t status) {
  released_on = pthread_self();
  release_everything(user_data, status);
}

// The last reference to a device drops in a completion that the trace thread
// runs (its trace was still blocked when the queue finished the
// submission), and, in a second device, in a completion the queue thread
// runs after an earlier trace started the trace thread: either way the
// device is destroyed, both threads end, and everything is freed.
static void device_released_with_traces_in_flight_is_destroyed(void) {
  static hrt_notification_t gate, done;
  static snapshot_t blocked;
  static last_ref_t refs;
  for (int d = 0; d < 2; ++d) {
    wait_for_live_devices(0);
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kTraceThreadUris[d], &device));
    hrt_hal_executable_t* executable = NULL;
    CHECK_OK(load_test_library(device, "good", &executable));
    hrt_hal_buffer_t *x = NULL, *flag = NULL, *fence_flag = NULL;
    CHECK_OK(
        hrt_hal_device_allocate_buffer(device, SNAPSHOT_WORDS * 4, NULL, &x));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 4, NULL, &flag));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 4, NULL, &fence_flag));
    hrt_notification_init(&gate);
    hrt_notification_init(&done);
    snapshot_init(&blocked, 0, &gate);
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(x), 5, 4));
    hrt_hal_buffer_ref_t traced = whole(x);
    CHECK_OK(
        hrt_hal_command_buffer_trace(cb, &traced, 1, snapshot_trace, &blocked));
    hrt_hal_buffer_ref_t flag_ref = whole(flag);
    CHECK_OK(record_store_release(cb, executable, &flag_ref));
    hrt_hal_command_buffer_finalize(cb);
    refs = (last_ref_t){device, cb, x, &done, 0};
    hrt_hal_submission_t submission = {
        .command_buffer = cb,
        .completion = {record_and_release_everything, &refs},
    };
    CHECK_OK(hrt_hal_device_queue_submit(device, &submission));
    // A second submission stores fence_flag: the queue thread starts it only
    // once it has finished the first, so the first's finish has been handed
    // to the trace thread (its flag alone comes before that). It keeps the
    // device until its own finish, which the trace thread runs after the
    // first's.
    hrt_hal_command_buffer_t* fence = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &fence));
    hrt_hal_buffer_ref_t fence_ref = whole(fence_flag);
    CHECK_OK(record_store_release(fence, executable, &fence_ref));
    hrt_hal_command_buffer_finalize(fence);
    hrt_hal_submission_t fenced = {.command_buffer = fence};
    CHECK_OK(hrt_hal_device_queue_submit(device, &fenced));
    hrt_hal_command_buffer_release(fence);  // the submission keeps it
    bool reached = wait_for_flag(flag) && wait_for_flag(fence_flag);
    hrt_hal_buffer_release(flag);  // the command buffers keep them
    hrt_hal_buffer_release(fence_flag);
    hrt_hal_executable_release(executable);
    hrt_notification_set(&gate);
    WAIT_OR_EXIT(&done, "the completion releasing the device");
    CHECK(reached);
    CHECK_EQ_INT(blocked.seen, 5);
    CHECK(pthread_equal(released_on, blocked.thread));
    wait_for_live_devices(0);
    CHECK_EQ_INT(hrt_live_count(HRT_LIVE_DEVICE), 0);
    hrt_notification_deinit(&gate);
    hrt_notification_deinit(&done);

    // The trace thread is started, and idle by the time the last submission
    // finishes unless it is still ending the run() one's: the last
    // reference then drops on the queue thread (or, rarely, the trace
    // thread).
    CHECK_OK(make_device(kTraceThreadUris[d], &device));
    CHECK_OK(
        hrt_hal_device_allocate_buffer(device, SNAPSHOT_WORDS * 4, NULL, &x));
    snapshot_init(&blocked, 0, NULL);
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    traced = whole(x);
    CHECK_OK(
        hrt_hal_command_buffer_trace(cb, &traced, 1, snapshot_trace, &blocked));
    hrt_hal_command_buffer_finalize(cb);
    CHECK_OK(run(device, cb, NULL, 0));
    hrt_hal_command_buffer_release(cb);
    CHECK(atomic_load(&blocked.returned));
    sleep_ms(20);
    hrt_notification_init(&done);
    refs = (last_ref_t){device, NULL, x, &done, 0};
    CHECK_OK(hrt_hal_command_buffer_create(device, &refs.cb));
    CHECK_OK(hrt_hal_command_buffer_fill(refs.cb, whole(x), 1, 1));
    hrt_hal_command_buffer_finalize(refs.cb);
    hrt_hal_submission_t last = {
        .command_buffer = refs.cb,
        .completion = {record_and_release_everything, &refs},
    };
    CHECK_OK(hrt_hal_device_queue_submit(device, &last));
    WAIT_OR_EXIT(&done, "the completion releasing the device");
    wait_for_live_devices(0);
    CHECK_EQ_INT(hrt_live_count(HRT_LIVE_DEVICE), 0);
    hrt_notification_deinit(&done);
  }
}

// What a trace on a device with workers did: the copies it made with
// hrt_hal_device_copy_host (spread over the workers) and on the test thread
// (a memcpy) match the traced bytes at every size.
typedef struct {
  hrt_hal_device_t* device;
  hrt_notification_t* gate;
  pthread_t thread;
  int wrong;
} copying_trace_t;

static const uint64_t kCopySizes[] = {0, 5, 131071, 131072, 131073,
                                      (1u << 20) + 3};

static int copies_differ(hrt_hal_device_t* device, const uint8_t* source,
                         uint64_t length) {
  int wrong = 0;
  uint8_t* copy = malloc((size_t)length + 2);
  if (!copy) return 1;
  for (size_t k = 0; k < 2 * sizeof(kCopySizes) / sizeof(kCopySizes[0]); ++k) {
    // At an odd offset from the start, so chunks split unaligned bytes;
    // every size both ways.
    const uint64_t size = kCopySizes[k / 2];
    const uint64_t n = size < length - 1 ? size : length - 1;
    memset(copy, 0xEE, (size_t)length + 2);
    hrt_hal_device_copy_host(device, copy + 1, source + 1, n, k % 2 == 1);
    wrong += memcmp(copy + 1, source + 1, (size_t)n) != 0 || copy[0] != 0xEE ||
             copy[n + 1] != 0xEE;
  }
  free(copy);
  return wrong;
}

static hrt_status_t copying_trace(void* user_data, void* submission_context,
                                  uint32_t count, const void* const* data,
                                  const uint64_t* lengths,
                                  hrt_hal_buffer_t* const* buffers) {
  (void)buffers;
  (void)submission_context;
  (void)count;
  copying_trace_t* trace = user_data;
  trace->thread = pthread_self();
  trace->wrong = copies_differ(trace->device, data[0], lengths[0]);
  if (!hrt_notification_wait_until(trace->gate,
                                   hrt_time_now_ns() + 10000000000LL)) {
    ++trace->wrong;
  }
  return HRT_OK;
}

// On local-task with workers a full trace runs on the queue thread at its
// place: the command after it waits for the callback, which may spread its
// copies over the idle workers.
static void full_traces_with_workers_run_at_their_place(void) {
  enum { N = (1 << 18) + 7 };  // words: a copy of several chunks
  static hrt_notification_t gate;
  static uint32_t words[N];
  for (uint32_t i = 0; i < N; ++i) words[i] = i * 2654435761u;
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("local-task?workers=4", &device));
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(load_test_library(device, "good", &executable));
  hrt_hal_buffer_t *x = NULL, *flag = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, sizeof(words), words, &x));
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 4, NULL, &flag));
  hrt_notification_init(&gate);
  copying_trace_t trace = {device, &gate, pthread_self(), 0};
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  hrt_hal_buffer_ref_t traced = whole(x);
  CHECK_OK(hrt_hal_command_buffer_trace(cb, &traced, 1, copying_trace, &trace));
  hrt_hal_buffer_ref_t flag_ref = whole(flag);
  CHECK_OK(record_store_release(cb, executable, &flag_ref));
  hrt_hal_command_buffer_finalize(cb);
  completion_t done;
  CHECK_OK(submit(device, cb, NULL, 0, &done));
  sleep_ms(30);
  const uint32_t early =
      __atomic_load_n((uint32_t*)flag->host_ptr, __ATOMIC_ACQUIRE);
  hrt_notification_set(&gate);
  CHECK_OK(completion_wait(&done));
  CHECK_EQ_INT(early, 0);
  CHECK_EQ_INT(*(uint32_t*)flag->host_ptr, 1);
  CHECK(!pthread_equal(trace.thread, pthread_self()));
  CHECK_EQ_INT(trace.wrong, 0);
  // Off the queue thread the same copies are memcpys.
  CHECK_EQ_INT(copies_differ(device, (const uint8_t*)words, sizeof(words)), 0);
  hrt_notification_deinit(&gate);
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(x);
  hrt_hal_buffer_release(flag);
  hrt_hal_executable_release(executable);
  hrt_hal_device_release(device);
}

static void builtin_signatures_match_the_kernel_library(void) {
  const halrt_kernel_library_t* library = hrt_local_builtin_kernel_library();
  uint32_t matched = 0;
  for (uint32_t i = 0; i < library->kernel_count; ++i) {
    const halrt_kernel_entry_t* entry = &library->kernels[i];
    const hrt_builtin_signature_t* signature =
        hrt_builtin_signature_find(entry->name);
    if (!signature) fprintf(stderr, "no signature for %s\n", entry->name);
    CHECK(signature != NULL);
    CHECK_EQ_INT(signature->binding_count, entry->binding_count);
    CHECK_EQ_INT(signature->constant_count, entry->constant_count);
    ++matched;
  }
  // And no signature without a kernel: the names in docs/kernels.md.
  static const char* const names[] = {
      "fill_u32", "copy_u8", "add_f32", "sub_f32", "mul_f32", "div_f32",
      "max_f32", "add_i32", "sub_i32", "mul_i32", "div_i32", "max_i32",
      "axpy_f32", "relu_f32", "matmul_f32", "softmax_rows_f32",
      "reduce_sum_f32", "binary_f32", "unary_f32", "conv2d_f32",
      "pool2d_f32", "bmm_f32", "strided_copy_f32", "chain_f32", "chain_health_f32", "resize2d_f32",
      "where_f32"};
  CHECK_EQ_INT(matched, sizeof(names) / sizeof(names[0]));
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    CHECK(hrt_builtin_signature_find(names[i]) != NULL);
  }
  // Strided bindings need 1 + the last element's offset; dense ones the
  // product; a zero dimension nothing.
  const uint32_t one[3] = {1, 1, 1};
  const hrt_builtin_signature_t* binary =
      hrt_builtin_signature_find("binary_f32");
  uint32_t broadcast[19] = {0, 1, 1, 1, 1, 2, 3, 0, 0, 0, 0, 3, 1,
                            0, 0, 0, 0, 0, 1};
  CHECK_EQ_INT(hrt_builtin_binding_min_bytes(binary, 0, broadcast, one), 24);
  CHECK_EQ_INT(hrt_builtin_binding_min_bytes(binary, 1, broadcast, one), 12);
  CHECK_EQ_INT(hrt_builtin_binding_min_bytes(binary, 2, broadcast, one), 24);
  broadcast[2] = 0;
  CHECK_EQ_INT(hrt_builtin_binding_min_bytes(binary, 0, broadcast, one), 0);
  CHECK_EQ_INT(hrt_builtin_binding_min_bytes(binary, 2, broadcast, one), 0);
  uint32_t constants[3] = {3, 5, 7};
  const hrt_builtin_signature_t* matmul =
      hrt_builtin_signature_find("matmul_f32");
  CHECK_EQ_INT(hrt_builtin_binding_min_bytes(matmul, 0, constants, one), 60);
  CHECK_EQ_INT(hrt_builtin_binding_min_bytes(matmul, 1, constants, one), 140);
  CHECK_EQ_INT(hrt_builtin_binding_min_bytes(matmul, 2, constants, one), 84);
  CHECK(matmul->bindings[2].written && !matmul->bindings[0].written);
  // chain_health_f32's counts: 18 words per workgroup of the grid.
  const hrt_builtin_signature_t* chain =
      hrt_builtin_signature_find("chain_health_f32");
  const uint32_t grid[3] = {3, 2, 5};
  CHECK_EQ_INT(hrt_builtin_binding_min_bytes(chain, 3, constants, grid),
               30 * 18 * 4);
  CHECK(chain->bindings[3].written);
}

// A trace callback that lends its range (hal/device.h) into `loan`.
typedef struct lender_s {
  hrt_hal_device_t* device;
  hrt_hal_loan_t* loan;
  uint32_t spare[SNAPSHOT_WORDS];
} lender_t;

static hrt_status_t lending_trace(void* user_data, void* submission_context,
                                  uint32_t count, const void* const* data,
                                  const uint64_t* lengths,
                                  hrt_hal_buffer_t* const* buffers) {
  (void)submission_context;
  (void)count;
  lender_t* lender = user_data;
  lender->loan = hrt_hal_device_lend(lender->device, buffers[0], data[0],
                                     lengths[0], lender->spare);
  return HRT_OK;
}

// Submits [fill `x` with `word`, store 1 into `flag`]; the caller waits.
static void submit_fill_then_flag(hrt_hal_device_t* device,
                                  hrt_hal_executable_t* executable,
                                  hrt_hal_buffer_t* x, uint32_t word,
                                  hrt_hal_buffer_t* flag, completion_t* done) {
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(x), word, 4));
  const hrt_hal_buffer_ref_t flag_ref = whole(flag);
  CHECK_OK(record_store_release(cb, executable, &flag_ref));
  hrt_hal_command_buffer_finalize(cb);
  CHECK_OK(submit(device, cb, NULL, 0, done));
  hrt_hal_command_buffer_release(cb);
}

static int words_differ(const uint32_t* words, uint32_t expected) {
  int wrong = 0;
  for (int i = 0; i < SNAPSHOT_WORDS; ++i) wrong += words[i] != expected;
  return wrong;
}

// Runs [fill `x` with `before` unless 0, trace `x` lending it into
// `lender`, fill `x` with `after` unless 0, read `x` into `host`] and waits.
static void lend_between_fills(hrt_hal_device_t* device, hrt_hal_buffer_t* x,
                               uint32_t before, uint32_t after,
                               lender_t* lender, uint32_t* host) {
  memset(lender, 0, sizeof(*lender));
  lender->device = device;
  const hrt_hal_buffer_ref_t traced = whole(x);
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  if (before) CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(x), before, 4));
  CHECK_OK(hrt_hal_command_buffer_trace(cb, &traced, 1, lending_trace, lender));
  if (after) CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(x), after, 4));
  CHECK_OK(hrt_hal_command_buffer_read(cb, whole(x), host));
  hrt_hal_command_buffer_finalize(cb);
  completion_t done;
  CHECK_OK(submit(device, cb, NULL, 0, &done));
  CHECK_OK(completion_wait(&done));
  hrt_hal_command_buffer_release(cb);
  CHECK(lender->loan != NULL);
}

// A loan keeps the traced bytes: a writer that comes while it is only lent
// copies them into the spare first and goes on; one that comes while it is
// open waits for the close. The loan keeps the buffer alive, and gives it
// back when closed, abandoned or not, once JavaScript had only the spare.
static void loans_keep_the_traced_bytes_until_closed(void) {
  enum { N = SNAPSHOT_WORDS };
  static lender_t lender;
  static uint32_t host[N];
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(kDeviceUris[d], &device));
    hrt_hal_executable_t* executable = NULL;
    CHECK_OK(load_test_library(device, "good", &executable));
    hrt_hal_buffer_t *x = NULL, *flag = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, N * 4, NULL, &x));
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 4, NULL, &flag));

    // Lent, then written in the same submission: copied first.
    lend_between_fills(device, x, 0x11111111, 0x22222222, &lender, host);
    const uint32_t* seen = hrt_hal_loan_open(lender.loan);
    CHECK(seen == lender.spare);
    CHECK_EQ_INT(words_differ(seen, 0x11111111), 0);
    CHECK_EQ_INT(words_differ(host, 0x22222222), 0);
    hrt_hal_loan_close(lender.loan, false);

    // Open, then written by a later submission: it waits for the close.
    lend_between_fills(device, x, 0x33333333, 0, &lender, host);
    seen = hrt_hal_loan_open(lender.loan);
    CHECK(seen == x->host_ptr);
    completion_t done;
    submit_fill_then_flag(device, executable, x, 0x44444444, flag, &done);
    sleep_ms(50);
    CHECK_EQ_INT(__atomic_load_n((uint32_t*)flag->host_ptr, __ATOMIC_ACQUIRE),
                 0);
    CHECK_EQ_INT(words_differ(seen, 0x33333333), 0);
    hrt_hal_loan_close(lender.loan, false);
    CHECK_OK(completion_wait(&done));
    CHECK_EQ_INT(words_differ(x->host_ptr, 0x44444444), 0);

    // Abandoned once copied (JavaScript could only hold the spare): the
    // buffer goes back as after a close.
    lend_between_fills(device, x, 0, 0x55555555, &lender, host);
    seen = hrt_hal_loan_open(lender.loan);
    CHECK(seen == lender.spare);
    CHECK_EQ_INT(words_differ(seen, 0x44444444), 0);
    hrt_hal_loan_close(lender.loan, true);
    CHECK_EQ_INT(words_differ(host, 0x55555555), 0);

    hrt_hal_buffer_release(x);
    hrt_hal_buffer_release(flag);
    hrt_hal_executable_release(executable);
    hrt_hal_device_release(device);
  }
}

TEST_MAIN(TEST_CASE(completions_run_off_the_submitting_thread),
          TEST_CASE(fill_copy_update_read_move_bytes),
          TEST_CASE(caller_held_submissions_take_no_references),
          TEST_CASE(reused_command_buffer_runs_on_new_bindings),
          TEST_CASE(user_kernel_libraries_load_and_run),
          TEST_CASE(workgroups_spread_over_the_workers),
          TEST_CASE(failing_kernel_fails_the_submission_naming_it),
          TEST_CASE(submissions_wait_for_semaphores),
          TEST_CASE(bad_submissions_are_rejected_without_side_effects),
          TEST_CASE(device_released_on_its_own_thread_is_destroyed),
          TEST_CASE(traces_see_everything_before_them),
          TEST_CASE(later_writers_wait_for_the_traces_before_them),
          TEST_CASE(later_readers_do_not_wait_for_a_trace),
          TEST_CASE(summary_traces_make_no_reader_or_writer_wait),
          TEST_CASE(traces_timings_and_completions_keep_program_order),
          TEST_CASE(device_released_with_traces_in_flight_is_destroyed),
          TEST_CASE(full_traces_with_workers_run_at_their_place),
          TEST_CASE(loans_keep_the_traced_bytes_until_closed),
          TEST_CASE(builtin_signatures_match_the_kernel_library),
          TEST_CASE(every_object_is_destroyed))
