// docs/cuda.md, "Memory and commands" (trace): traces deliver what the
// commands before them wrote; their copies run on the trace stream, where
// the fake holds them to show which later commands wait; summaries are
// computed on the device.
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/live.h"
#include "cuda_fixture.h"
#include "test_summary.h"

//===----------------------------------------------------------------------===//
// Traces
//===----------------------------------------------------------------------===//

typedef struct {
  int calls;
  uint32_t values[2][4];  // per call: the first word of up to 4 sources
  uint64_t lengths[2][4];
  uint32_t count[2];
  int null_data;  // a range came without an address
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
  int call = record->calls++;
  record->context_seen = submission_context;
  record->thread = pthread_self();
  if (call < 2) {
    record->count[call] = count;
    for (uint32_t i = 0; i < count && i < 4; ++i) {
      if (!data[i]) record->null_data = 1;
      if (lengths[i] >= 4) memcpy(&record->values[call][i], data[i], 4);
      record->lengths[call][i] = lengths[i];
    }
  }
  if (record->fail) {
    return hrt_status_make(HRT_STATUS_ABORTED, "trace callback refused");
  }
  return HRT_OK;
}

static void traces_deliver_staged_data_after_preceding_work(void) {
  CUDA_SETUP();
  for (int fail = 0; fail < 2; ++fail) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(case_device("cuda", &device));
    hrt_hal_executable_t* executable = NULL;
    CHECK_OK(case_builtins(device, &executable));
    uint32_t fill_ordinal = 0;
    CHECK_OK(hrt_hal_executable_lookup(executable, "fill_u32", &fill_ordinal));
    hrt_hal_buffer_t* buffer = NULL;
    hrt_hal_buffer_t* other = NULL;
    const uint32_t initial[2] = {111, 222};
    CHECK_OK(case_buffer(device, 16, NULL, &buffer));
    CHECK_OK(case_buffer(device, 8, initial, &other));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(case_command_buffer(device, &cb));
    trace_record_t record = {.fail = fail};
    hrt_hal_buffer_ref_t slot = {NULL, 0, 0, HRT_HAL_WHOLE_BUFFER};
    hrt_hal_buffer_ref_t sources[4] = {slot, range(buffer, 8, 8),
                                       range(other, 4, 4), range(other, 8, 0)};
    // A kernel writes the buffer, then the trace must see its result.
    const uint32_t fill_constants[2] = {4, 0x01020304};
    hrt_hal_dispatch_t fill = {executable, fill_ordinal,   {2, 1, 1}, {1, 1, 1},
                               2,          fill_constants, 1,         &slot, 0};
    CHECK_OK(hrt_hal_command_buffer_dispatch(cb, &fill));
    CHECK_OK(
        hrt_hal_command_buffer_trace(cb, sources, 4, record_trace, &record));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, slot, 0x0A0B0C0D, 4));
    CHECK_OK(
        hrt_hal_command_buffer_trace(cb, sources, 1, record_trace, &record));
    uint32_t after[4] = {0, 0, 0, 0};
    CHECK_OK(hrt_hal_command_buffer_read(cb, slot, after));
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
    CHECK(record.context_seen == &context);
    CHECK(!pthread_equal(record.thread, pthread_self()));
    CHECK(pthread_equal(record.thread, completion.thread));
    CHECK_EQ_INT(record.count[0], 4);
    CHECK_EQ_INT(record.null_data, 0);
    CHECK_EQ_INT(record.lengths[0][3], 0);
    CHECK_EQ_INT(record.values[0][0], 0x01020304);
    CHECK_EQ_INT(record.values[0][1], 0x01020304);
    CHECK_EQ_INT(record.values[0][2], 222);
    CHECK_EQ_INT(record.lengths[0][0], 16);
    CHECK_EQ_INT(record.lengths[0][1], 8);
    CHECK_EQ_INT(record.lengths[0][2], 4);
    if (fail) {
      // Later traces and reads do not reach the host.
      CHECK_STATUS(status, HRT_STATUS_ABORTED, "trace callback refused");
      CHECK_EQ_INT(record.calls, 1);
      CHECK_EQ_INT(after[0], 0);
    } else {
      CHECK_OK(status);
      CHECK_EQ_INT(record.calls, 2);
      CHECK_EQ_INT(record.values[1][0], 0x0A0B0C0D);
      CHECK_EQ_INT(after[3], 0x0A0B0C0D);
    }
  }
}

//===----------------------------------------------------------------------===//
// Trace copies on the trace stream
//===----------------------------------------------------------------------===//

// What the traces of one test saw, in the order their callbacks ran.
typedef struct {
  int calls;
  uint32_t first_words[8];    // each call's first word of its first range
  int completions_before[8];  // completions of the binary when it ran
} trace_log_t;

static hrt_status_t log_trace(void* user_data, void* submission_context,
                              uint32_t count, const void* const* data,
                              const uint64_t* lengths,
                              hrt_hal_buffer_t* const* buffers) {
  (void)buffers;
  (void)submission_context;
  trace_log_t* log = user_data;
  if (log->calls < 8) {
    uint32_t word = 0;
    if (count && lengths[0] >= 4) memcpy(&word, data[0], 4);
    log->first_words[log->calls] = word;
    log->completions_before[log->calls] = atomic_load(&completion_counter);
  }
  ++log->calls;
  return HRT_OK;
}

// Makes a CUDA device (released when the case ends) and sets
// *out_main_stream to the fake's number of its main stream; its trace
// stream is the next (fakecuda.h). INTERNAL when the device made another
// number of streams than those two.
static hrt_status_t make_traced_device(hrt_hal_device_t** out_device,
                                       int* out_main_stream) {
  const int before = g_cuda.streams_created();
  HRT_RETURN_IF_ERROR(case_device("cuda", out_device));
  const int made = g_cuda.streams_created() - before;
  if (made != 2) {
    return hrt_status_make(HRT_STATUS_INTERNAL,
                           "the device made %d streams, not 2", made);
  }
  *out_main_stream = before + 1;
  return HRT_OK;
}

static fakecuda_stream_state_t stream_state(int serial) {
  fakecuda_stream_state_t state;
  g_cuda.stream_state(serial, &state);
  return state;
}

// Waits (10 s at most) until stream `serial` holds at least `count`
// operations: the issue thread has enqueued them.
static void wait_for_stream_operations(int serial, int count) {
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  while (stream_state(serial).unfinished < count &&
         hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

// Waits (10 s at most) until stream `serial` can run nothing more: it has
// run everything, or its next operation waits for an event.
static fakecuda_stream_state_t wait_until_stream_stops(int serial) {
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  fakecuda_stream_state_t state = stream_state(serial);
  while (state.unfinished != 0 && !state.waiting &&
         hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
    state = stream_state(serial);
  }
  return state;
}

// A fill of a traced buffer enqueued after the trace waits for the trace's
// copy, so the trace shows the values from before the fill; the fill and
// a later trace still happen.
static void later_writers_wait_for_trace_copies(void) {
  FAKE_ONLY();
  hrt_hal_device_t* device = NULL;
  int main_stream = 0;
  CHECK_OK(make_traced_device(&device, &main_stream));
  const int trace_stream = main_stream + 1;
  const uint32_t initial[4] = {1, 2, 3, 4};
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(case_buffer(device, 16, initial, &buffer));
  uint32_t settle[4];
  CHECK_OK(read_back(device, buffer, settle));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(case_command_buffer(device, &cb));
  trace_log_t log = {0};
  hrt_hal_buffer_ref_t traced = whole(buffer);
  uint32_t after[4] = {0, 0, 0, 0};
  CHECK_OK(hrt_hal_command_buffer_trace(cb, &traced, 1, log_trace, &log));
  CHECK_OK(hrt_hal_command_buffer_fill(cb, range(buffer, 4, 8), 9, 4));
  CHECK_OK(hrt_hal_command_buffer_trace(cb, &traced, 1, log_trace, &log));
  CHECK_OK(hrt_hal_command_buffer_read(cb, traced, after));
  hrt_hal_command_buffer_finalize(cb);
  hold_stream(trace_stream);
  completion_t completion;
  CHECK_OK(submit(device, cb, NULL, 0, &completion));
  // Each trace: wait for the stream, copy, record.
  wait_for_stream_operations(trace_stream, 6);
  const fakecuda_stream_state_t held = wait_until_stream_stops(main_stream);
  release_stream(trace_stream);
  CHECK_OK(completion_wait(&completion));
  // The stream stopped at the fill, waiting for the held copy.
  CHECK_EQ_INT(held.waiting, 1);
  CHECK(held.unfinished > 0);
  CHECK_EQ_INT(log.calls, 2);
  CHECK_EQ_INT(log.first_words[0], 1);
  CHECK_EQ_INT(log.first_words[1], 1);
  CHECK_EQ_INT(after[1], 9);
  CHECK_EQ_INT(after[2], 9);
  CHECK_EQ_INT(after[3], 4);
}

// Commands that only read a traced buffer (a copy from it, a built-in
// dispatch whose read_only_bindings mark it, a read of it) run while the
// trace's copy is still held; the trace still reaches its callback before
// the submission completes.
static void later_readers_do_not_wait_for_trace_copies(void) {
  FAKE_ONLY();
  hrt_hal_device_t* device = NULL;
  int main_stream = 0;
  CHECK_OK(make_traced_device(&device, &main_stream));
  const int trace_stream = main_stream + 1;
  hrt_hal_executable_t* executable = NULL;
  CHECK_OK(case_builtins(device, &executable));
  uint32_t add = 0;
  CHECK_OK(hrt_hal_executable_lookup(executable, "add_f32", &add));
  const float initial[4] = {5, 6, 7, 8};
  hrt_hal_buffer_t* buffer = NULL;
  hrt_hal_buffer_t* copy = NULL;
  hrt_hal_buffer_t* sum = NULL;
  CHECK_OK(case_buffer(device, 16, initial, &buffer));
  CHECK_OK(case_buffer(device, 16, NULL, &copy));
  CHECK_OK(case_buffer(device, 16, NULL, &sum));
  float settle[4];
  CHECK_OK(read_back(device, sum, settle));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(case_command_buffer(device, &cb));
  trace_log_t log = {0};
  hrt_hal_buffer_ref_t traced = whole(buffer);
  float read[4] = {0, 0, 0, 0};
  const uint32_t n = 4;
  hrt_hal_buffer_ref_t add_bindings[3] = {traced, traced, whole(sum)};
  // a and b read-only, as the program module marks a built-in's inputs.
  hrt_hal_dispatch_t twice = {executable, add, {1, 1, 1},    {64, 1, 1}, 1,
                              &n,         3,   add_bindings, 3};
  CHECK_OK(hrt_hal_command_buffer_trace(cb, &traced, 1, log_trace, &log));
  CHECK_OK(hrt_hal_command_buffer_copy(cb, traced, whole(copy)));
  CHECK_OK(hrt_hal_command_buffer_dispatch(cb, &twice));
  CHECK_OK(hrt_hal_command_buffer_read(cb, traced, read));
  hrt_hal_command_buffer_finalize(cb);
  hold_stream(trace_stream);
  const int enqueued = stream_state(main_stream).enqueued;
  completion_t completion;
  CHECK_OK(submit(device, cb, NULL, 0, &completion));
  // The stream: the trace's fork event, the copy, the launch, the read
  // and the final event; the trace stream: wait, copy, record.
  wait_for_stream_operations(trace_stream, 3);
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  while (stream_state(main_stream).enqueued < enqueued + 5 &&
         hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  const fakecuda_stream_state_t ran = wait_until_stream_stops(main_stream);
  const int traced_while_held = log.calls;
  const bool completed_while_held = hrt_notification_is_set(&completion.done);
  release_stream(trace_stream);
  CHECK_OK(completion_wait(&completion));
  float copied[4] = {0, 0, 0, 0};
  float sums[4] = {0, 0, 0, 0};
  CHECK_OK(read_back(device, copy, copied));
  CHECK_OK(read_back(device, sum, sums));
  // Everything on the stream ran with the trace copy held.
  CHECK_EQ_INT(ran.unfinished, 0);
  CHECK_EQ_INT(traced_while_held, 0);
  CHECK(!completed_while_held);
  CHECK_EQ_INT(log.calls, 1);
  float traced_first = 0;
  memcpy(&traced_first, &log.first_words[0], 4);
  CHECK(traced_first == 5);
  CHECK(log.completions_before[0] <= completion.order);
  CHECK(read[3] == 8);
  CHECK(copied[0] == 5 && copied[3] == 8);
  CHECK(sums[0] == 10 && sums[3] == 16);
}

// A summary trace is computed on the trace stream: with that held, a copy
// from the summarized buffer after it runs, a fill of it waits, and the
// summary is of the values before the fill.
static void summary_traces_make_later_writers_wait_not_readers(void) {
  FAKE_ONLY();
  hrt_hal_device_t* device = NULL;
  int main_stream = 0;
  CHECK_OK(make_traced_device(&device, &main_stream));
  const int trace_stream = main_stream + 1;
  const float initial[4] = {1, 2, 3, 4};
  hrt_hal_buffer_t* buffer = NULL;
  hrt_hal_buffer_t* copy = NULL;
  CHECK_OK(case_buffer(device, 16, initial, &buffer));
  CHECK_OK(case_buffer(device, 16, NULL, &copy));
  float settle[4];
  CHECK_OK(read_back(device, copy, settle));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(case_command_buffer(device, &cb));
  summary_log_t log;
  memset(&log, 0, sizeof(log));
  hrt_hal_buffer_ref_t traced = whole(buffer);
  const hrt_hal_element_type_t f32 = HRT_HAL_ELEMENT_TYPE_F32;
  float after[4] = {0, 0, 0, 0};
  CHECK_OK(hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_SUMMARY, &traced,
                                             &f32, 1, summary_log_trace, &log));
  CHECK_OK(hrt_hal_command_buffer_copy(cb, traced, whole(copy)));
  CHECK_OK(hrt_hal_command_buffer_fill(cb, traced, 0x41100000, 4));  // 9.0f
  CHECK_OK(hrt_hal_command_buffer_read(cb, traced, after));
  hrt_hal_command_buffer_finalize(cb);
  hold_stream(trace_stream);
  const int enqueued = stream_state(main_stream).enqueued;
  completion_t completion;
  CHECK_OK(submit(device, cb, NULL, 0, &completion));
  wait_for_stream_operations(trace_stream, 3);
  // The stream reads as waiting once its next operation waits, which may
  // be while the copy before it still runs: wait for the copy too. And it
  // may stop before the fill is enqueued at all (the device's queue thread
  // enqueues the commands one by one): wait until the fill waits.
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  fakecuda_stream_state_t held = wait_until_stream_stops(main_stream);
  while ((!held.waiting || held.enqueued - enqueued - held.unfinished < 2) &&
         hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
    held = wait_until_stream_stops(main_stream);
  }
  release_stream(trace_stream);
  CHECK_OK(completion_wait(&completion));
  float copied[4] = {0, 0, 0, 0};
  CHECK_OK(read_back(device, copy, copied));
  // The stream ran the trace's fork and the copy, then stopped at the fill.
  CHECK_EQ_INT(held.waiting, 1);
  CHECK(held.enqueued - enqueued - held.unfinished >= 2);
  CHECK(copied[0] == 1 && copied[3] == 4);
  CHECK_EQ_INT(log.calls, 1);
  CHECK_EQ_INT(log.lengths[0], sizeof(hrt_hal_tensor_summary_t));
  CHECK(log.summaries[0].min == 1 && log.summaries[0].max == 4);
  CHECK(log.summaries[0].sum == 10 && log.summaries[0].sum_squares == 30);
  CHECK(after[0] == 9 && after[3] == 9);
}

// Traces of two submissions, with writes of the traced buffer between
// them, reach their callbacks in program order, each before its own
// submission completes, and each shows the values of its point in the
// program: a writer in the second submission waits for the first one's
// trace too.
static void traces_keep_program_order_across_submissions(void) {
  FAKE_ONLY();
  hrt_hal_device_t* device = NULL;
  int main_stream = 0;
  CHECK_OK(make_traced_device(&device, &main_stream));
  const int trace_stream = main_stream + 1;
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(case_buffer(device, 64, NULL, &buffer));
  uint32_t settle[16];
  CHECK_OK(read_back(device, buffer, settle));
  trace_log_t log = {0};
  hrt_hal_buffer_ref_t traced = whole(buffer);
  hrt_hal_command_buffer_t* cbs[2] = {NULL, NULL};
  for (uint32_t i = 0; i < 2; ++i) {
    CHECK_OK(case_command_buffer(device, &cbs[i]));
    // First: trace 0, fill 1, trace 1. Second: fill 2, trace 2, fill 3,
    // trace 3.
    if (i == 0) {
      CHECK_OK(
          hrt_hal_command_buffer_trace(cbs[i], &traced, 1, log_trace, &log));
    }
    for (uint32_t k = 0; k < 1 + i; ++k) {
      CHECK_OK(hrt_hal_command_buffer_fill(cbs[i], traced, i + k + 1, 4));
      CHECK_OK(
          hrt_hal_command_buffer_trace(cbs[i], &traced, 1, log_trace, &log));
    }
    hrt_hal_command_buffer_finalize(cbs[i]);
  }
  hold_stream(trace_stream);
  completion_t completions[2];
  CHECK_OK(submit(device, cbs[0], NULL, 0, &completions[0]));
  hrt_status_t submitted = submit(device, cbs[1], NULL, 0, &completions[1]);
  if (submitted == HRT_OK) {
    wait_for_stream_operations(trace_stream, 12);
    (void)wait_until_stream_stops(main_stream);
  }
  release_stream(trace_stream);
  CHECK_OK(completion_wait(&completions[0]));
  CHECK_OK(submitted);
  CHECK_OK(completion_wait(&completions[1]));
  CHECK_EQ_INT(log.calls, 4);
  for (int k = 0; k < 4; ++k) CHECK_EQ_INT(log.first_words[k], k);
  CHECK(completions[0].order < completions[1].order);
  CHECK(log.completions_before[1] <= completions[0].order);
  CHECK(log.completions_before[2] > completions[0].order);
  CHECK(log.completions_before[3] <= completions[1].order);
}

// A device released, or its context destroyed, while a trace's copy is
// held: the submission still completes (DEVICE_LOST without the trace when
// the context went), and the device is freed.
static void pending_trace_copies_survive_release_and_loss(void) {
  FAKE_ONLY();
  for (int lose = 0; lose < 2; ++lose) {
    hrt_hal_device_t* device = NULL;
    int main_stream = 0;
    CHECK_OK(make_traced_device(&device, &main_stream));
    const int trace_stream = main_stream + 1;
    const uint32_t initial[2] = {42, 43};
    hrt_hal_buffer_t* buffer = NULL;
    hrt_hal_buffer_t* other = NULL;
    CHECK_OK(case_buffer(device, 8, initial, &buffer));
    CHECK_OK(case_buffer(device, 8, NULL, &other));
    uint32_t settle[2];
    CHECK_OK(read_back(device, other, settle));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(case_command_buffer(device, &cb));
    trace_log_t log = {0};
    hrt_hal_buffer_ref_t traced = whole(buffer);
    CHECK_OK(hrt_hal_command_buffer_trace(cb, &traced, 1, log_trace, &log));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(other), 7, 4));
    hrt_hal_command_buffer_finalize(cb);
    // Held by hand, not with hold_stream(): test_run_deferred() below drops
    // the case's references, and would end that hold too.
    g_cuda.hold_stream(trace_stream, 1);
    completion_t completion;
    hrt_status_t submitted = submit(device, cb, NULL, 0, &completion);
    // Only the submission holds the device and its buffers now.
    test_run_deferred();
    if (submitted == HRT_OK) {
      wait_for_stream_operations(trace_stream, 3);
      (void)wait_until_stream_stops(main_stream);
      if (lose) g_cuda.destroy_contexts();
    }
    g_cuda.hold_stream(trace_stream, 0);
    CHECK_OK(submitted);
    hrt_status_t status = completion_wait(&completion);
    wait_for_no_devices();
    CHECK_EQ_INT(hrt_live_count(HRT_LIVE_DEVICE), 0);
    if (lose) {
      CHECK_STATUS(status, HRT_STATUS_DEVICE_LOST,
                   "CUDA_ERROR_CONTEXT_IS_DESTROYED");
      CHECK_EQ_INT(log.calls, 0);
    } else {
      CHECK_OK(status);
      CHECK_EQ_INT(log.calls, 1);
      CHECK_EQ_INT(log.first_words[0], 42);
    }
  }
}

//===----------------------------------------------------------------------===//
// Summaries on the device
//===----------------------------------------------------------------------===//

// Runs one trace of `buffer` in `mode` (f32) on `device`.
static hrt_status_t run_trace_f32(hrt_hal_device_t* device,
                                  hrt_hal_buffer_t* buffer,
                                  hrt_hal_trace_mode_t mode,
                                  summary_log_t* log) {
  hrt_hal_command_buffer_t* cb = NULL;
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(device, &cb));
  hrt_hal_buffer_ref_t source = whole(buffer);
  const hrt_hal_element_type_t f32 = HRT_HAL_ELEMENT_TYPE_F32;
  return run_recorded(device, cb,
                      hrt_hal_command_buffer_trace_mode(
                          cb, mode, &source, &f32, 1, summary_log_trace, log));
}

// The summary scratch is one cuMemAlloc, made at the device's first summary
// trace (not for a full trace), reused by later ones, and freed with the
// device.
static void summary_scratch_is_made_once_and_freed_with_the_device(void) {
  FAKE_ONLY();
  // Devices of earlier cases may still be freeing theirs.
  const long long live_before = wait_for_allocations(0);
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device_with_pools(true, &device));
  const float values[4] = {1, -2, 3, NAN};
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(case_buffer(device, 16, values, &buffer));
  summary_log_t full, summary, health;
  memset(&full, 0, sizeof(full));
  memset(&summary, 0, sizeof(summary));
  memset(&health, 0, sizeof(health));
  const long long calls_before = fake_memory().mem_alloc_calls;
  CHECK_OK(run_trace_f32(device, buffer, HRT_HAL_TRACE_FULL, &full));
  const long long calls_after_full = fake_memory().mem_alloc_calls;
  CHECK_OK(run_trace_f32(device, buffer, HRT_HAL_TRACE_SUMMARY, &summary));
  CHECK_OK(run_trace_f32(device, buffer, HRT_HAL_TRACE_HEALTH, &health));
  const long long calls_after = fake_memory().mem_alloc_calls;
  CHECK_EQ_INT(calls_after_full, calls_before);
  CHECK_EQ_INT(calls_after, calls_before + 1);
  test_run_deferred();  // the device frees its scratch
  CHECK_EQ_INT(wait_for_allocations(live_before), live_before);
  CHECK_EQ_INT(full.lengths[0], 16);
  CHECK(summary.summaries[0].sum == 2 && summary.summaries[0].nan_count == 1);
  CHECK(health.summaries[0].nan_count == 1 && isnan(health.summaries[0].sum));
}

// Summary and health traces of every dtype, with every special value, a
// sub-range, an empty range, all NaNs and 3 MiB, computed on the device,
// equal the host's element-by-element fold.
static void traces_summarize_every_dtype(void) {
  CUDA_SETUP();
  hrt_hal_device_t* device = NULL;
  CHECK_OK(case_device("cuda", &device));
  check_trace_summaries(device);
}

TEST_SUITE(cuda_traces,
           TEST_CASE(traces_deliver_staged_data_after_preceding_work),
           TEST_CASE(later_writers_wait_for_trace_copies),
           TEST_CASE(later_readers_do_not_wait_for_trace_copies),
           TEST_CASE(traces_keep_program_order_across_submissions),
           TEST_CASE(pending_trace_copies_survive_release_and_loss),
           TEST_CASE(traces_summarize_every_dtype),
           TEST_CASE(summary_traces_make_later_writers_wait_not_readers),
           TEST_CASE(summary_scratch_is_made_once_and_freed_with_the_device));
