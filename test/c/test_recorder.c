// The flight recorder sink (modules/sinks/recorder_sink.h): the ring of trace
// copies, its bounds, delivery, and every allocation failing.
#include <stdbool.h>
#include <stdlib.h>

#include "modules/sinks/recorder_sink.h"
#include "modules/sinks/stdio_sink.h"
#include "modules/sinks/tee_sink.h"
#include "test.h"

// The Makefile links this binary with malloc, calloc and free wrapped
// (-Wl,--wrap=...). While armed, allocation number `fail_at` (counted from
// 0 since arming) returns NULL; `count` says how many were made. While
// `tracking`, the sizes of the malloc blocks made and not yet freed are
// summed in `live_bytes`.
void* __real_malloc(size_t size);
void* __real_calloc(size_t count, size_t size);
void __real_free(void* ptr);

#define MAX_TRACKED 64
static struct {
  bool armed;
  long count;
  long fail_at;
  bool tracking;
  struct {
    void* ptr;
    size_t size;
  } blocks[MAX_TRACKED];
  uint64_t live_bytes;
} faults;

static bool fail_this_allocation(void) {
  return faults.armed && faults.count++ == faults.fail_at;
}
void* __wrap_malloc(size_t size) {
  void* ptr = fail_this_allocation() ? NULL : __real_malloc(size);
  for (int i = 0; ptr && faults.tracking && i < MAX_TRACKED; ++i) {
    if (faults.blocks[i].ptr == NULL) {
      faults.blocks[i].ptr = ptr;
      faults.blocks[i].size = size;
      faults.live_bytes += size;
      break;
    }
  }
  return ptr;
}
void* __wrap_calloc(size_t count, size_t size) {
  return fail_this_allocation() ? NULL : __real_calloc(count, size);
}
void __wrap_free(void* ptr) {
  for (int i = 0; ptr && i < MAX_TRACKED; ++i) {
    if (faults.blocks[i].ptr == ptr) {
      faults.blocks[i].ptr = NULL;
      faults.live_bytes -= faults.blocks[i].size;
      break;
    }
  }
  __real_free(ptr);
}
static void arm(long fail_at) {
  faults.armed = true;
  faults.count = 0;
  faults.fail_at = fail_at;
}
static void disarm(void) { faults.armed = false; }

// The wrapped sink: what it was handed, in order.
#define MAX_SEEN 16
typedef struct seen_s {
  int count;
  struct {
    char key[16];
    uint64_t sequence;
    uint64_t invocation;
    bool recorded;
    float first;
    int64_t dim;
  } traces[MAX_SEEN];
  int timings;
  int failures;
  int released;
  int flushes;
  int fail_trace;  // fail the trace with this index (or -1)
} seen_t;

static hrt_status_t seen_trace(void* user_data, const char* key,
                               const hrt_trace_info_t* info, uint32_t count,
                               const hrt_trace_tensor_t* tensors) {
  seen_t* seen = user_data;
  int index = seen->count++;
  if (index < MAX_SEEN) {
    snprintf(seen->traces[index].key, sizeof(seen->traces[index].key), "%s",
             key);
    seen->traces[index].sequence = info->sequence;
    seen->traces[index].invocation = info->invocation;
    seen->traces[index].recorded = info->recorded;
    seen->traces[index].first = count ? *(const float*)tensors[0].data : 0;
    seen->traces[index].dim = count ? tensors[0].shape[0] : 0;
  }
  if (index == seen->fail_trace) {
    return hrt_status_make(HRT_STATUS_INTERNAL, "sink failed trace %d", index);
  }
  return HRT_OK;
}
static void seen_timing(void* user_data, const hrt_dispatch_timing_t* events,
                        uint32_t count) {
  (void)events;
  ((seen_t*)user_data)->timings += (int)count;
}
static void seen_failed(void* user_data,
                        const hrt_invocation_failure_t* failure) {
  (void)failure;
  ++((seen_t*)user_data)->failures;
}
static void seen_flush(void* user_data) { ++((seen_t*)user_data)->flushes; }
static void seen_release(void* user_data) { ++((seen_t*)user_data)->released; }

static hrt_debug_sink_t seen_sink(seen_t* seen) {
  memset(seen, 0, sizeof(*seen));
  seen->fail_trace = -1;
  return (hrt_debug_sink_t){
      .buffer_view_trace = {seen_trace, seen},
      .dispatch_timing = {seen_timing, seen},
      .invocation_failed = {seen_failed, seen},
      .flush = {seen_flush, seen},
      .release = {seen_release, seen},
  };
}

// A trace of one f32[4] tensor filled with `value`, from invocation
// `sequence`.
static hrt_status_t record(hrt_debug_sink_t* sink, const char* key,
                           uint64_t sequence, float value) {
  static const int64_t shape[1] = {4};
  float data[4] = {value, value, value, value};
  hrt_trace_info_t info = {sequence, "m.f", 1, 0, 100 + sequence, HRT_HAL_TRACE_FULL, false, NULL, false};
  hrt_trace_tensor_t tensor = {
      "x", HRT_HAL_ELEMENT_TYPE_F32, 1, shape, data, sizeof(data), NULL, NULL};
  return sink->buffer_view_trace.fn(sink->buffer_view_trace.user_data, key,
                                    &info, 1, &tensor);
}

static uint64_t one_trace_bytes(const char* key) {
  static const int64_t shape[1] = {4};
  float data[4] = {0};
  hrt_trace_info_t info = {1, "m.f", 1, 0, 1, HRT_HAL_TRACE_FULL, false, NULL, false};
  hrt_trace_tensor_t tensor = {
      "x", HRT_HAL_ELEMENT_TYPE_F32, 1, shape, data, sizeof(data), NULL, NULL};
  return hrt_recorder_trace_bytes(key, &info, 1, &tensor);
}

static void keeps_the_last_traces_and_delivers_them_recorded(void) {
  seen_t seen;
  hrt_debug_sink_t inner = seen_sink(&seen), sink;
  hrt_recorder_sink_t* recorder = NULL;
  hrt_recorder_limits_t limits = {3, 0};
  CHECK_OK(hrt_recorder_sink_create(&inner, &limits, &recorder, &sink));
  for (int i = 1; i <= 5; ++i) CHECK_OK(record(&sink, "t", (uint64_t)i, i));
  hrt_dispatch_timing_t timing = {0};
  sink.dispatch_timing.fn(sink.dispatch_timing.user_data, &timing, 1);
  CHECK_EQ_INT(seen.count, 0);
  CHECK_EQ_INT(seen.timings, 1);
  hrt_recorder_held_t held = hrt_recorder_sink_held(recorder);
  CHECK_EQ_INT(held.traces, 3);
  CHECK_EQ_INT(held.bytes, 3 * one_trace_bytes("t"));
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_TRACE), 3);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_BYTES), held.bytes);
  hrt_invocation_failure_t failure = {6, "m.f", 106, HRT_STATUS_ABORTED};
  sink.invocation_failed.fn(sink.invocation_failed.user_data, &failure);
  CHECK_EQ_INT(seen.count, 3);
  CHECK_EQ_INT(seen.failures, 1);
  CHECK_EQ_INT(seen.flushes, 0);
  sink.flush.fn(sink.flush.user_data);
  CHECK_EQ_INT(seen.flushes, 1);
  for (int i = 0; i < 3; ++i) {
    CHECK_EQ_INT(seen.traces[i].sequence, 3 + i);
    CHECK(seen.traces[i].first == (float)(3 + i));
    CHECK_EQ_INT(seen.traces[i].dim, 4);
    CHECK(seen.traces[i].recorded);
    CHECK_EQ_INT(seen.traces[i].invocation, 106);
  }
  held = hrt_recorder_sink_held(recorder);
  CHECK_EQ_INT(held.traces, 0);
  CHECK_EQ_INT(held.bytes, 0);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_TRACE), 0);
  uint32_t delivered = 7;
  CHECK_OK(hrt_recorder_sink_deliver(recorder, 9, &delivered));
  CHECK_EQ_INT(delivered, 0);
  // Held traces go with the sink.
  CHECK_OK(record(&sink, "t", 7, 7));
  sink.release.fn(sink.release.user_data);
  CHECK_EQ_INT(seen.released, 1);
  CHECK_EQ_INT(seen.count, 3);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_TRACE), 0);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_BYTES), 0);
}

static void bytes_bound_evicts_the_oldest_and_skips_oversized(void) {
  seen_t seen;
  hrt_debug_sink_t inner = seen_sink(&seen), sink;
  hrt_recorder_sink_t* recorder = NULL;
  uint64_t one = one_trace_bytes("k");
  hrt_recorder_limits_t limits = {0, 2 * one + one / 2};
  CHECK_OK(hrt_recorder_sink_create(&inner, &limits, &recorder, &sink));
  for (int i = 1; i <= 4; ++i) CHECK_OK(record(&sink, "k", (uint64_t)i, i));
  hrt_recorder_held_t held = hrt_recorder_sink_held(recorder);
  CHECK_EQ_INT(held.traces, 2);
  CHECK_EQ_INT(held.bytes, 2 * one);
  CHECK_EQ_INT(held.skipped, 0);
  // A longer key makes a copy larger than the whole bound: not kept, and
  // the ring keeps what it held.
  char key[512];
  memset(key, 'a', sizeof(key) - 1);
  key[sizeof(key) - 1] = '\0';
  limits.bytes = one_trace_bytes(key) - 1;
  hrt_debug_sink_t small_sink;
  seen_t small_seen;
  hrt_debug_sink_t small_inner = seen_sink(&small_seen);
  hrt_recorder_sink_t* small = NULL;
  CHECK_OK(
      hrt_recorder_sink_create(&small_inner, &limits, &small, &small_sink));
  CHECK_OK(record(&small_sink, "k", 1, 1));
  CHECK_OK(record(&small_sink, key, 2, 2));
  held = hrt_recorder_sink_held(small);
  CHECK_EQ_INT(held.traces, 1);
  CHECK_EQ_INT(held.skipped, 1);
  small_sink.release.fn(small_sink.release.user_data);
  uint32_t delivered = 0;
  CHECK_OK(hrt_recorder_sink_deliver(recorder, 5, &delivered));
  CHECK_EQ_INT(delivered, 2);
  CHECK_EQ_INT(seen.traces[0].sequence, 3);
  CHECK_EQ_INT(seen.traces[1].sequence, 4);
  sink.release.fn(sink.release.user_data);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_TRACE), 0);
}

// Large and small traces in turn: the memory the ring holds (what malloc
// gave it) never exceeds the bound, and liveObjects' bytes are that memory
// (a small trace once reused a large one's block and counted only its own
// size, so the ring grew far past the bound).
static void bytes_bound_counts_the_memory_held(void) {
  seen_t seen;
  hrt_debug_sink_t inner = seen_sink(&seen), sink;
  hrt_recorder_sink_t* recorder = NULL;
  char big[400];
  memset(big, 'b', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  const uint64_t large = one_trace_bytes(big), small = one_trace_bytes("k");
  hrt_recorder_limits_t limits = {0, large + 2 * small};
  CHECK_OK(hrt_recorder_sink_create(&inner, &limits, &recorder, &sink));
  faults.tracking = true;
  uint64_t sequence = 0, most = 0;
  for (int cycle = 0; cycle < 8; ++cycle) {
    CHECK_OK(record(&sink, big, ++sequence, 1));
    for (int i = 0; i < 3; ++i) {
      CHECK_OK(record(&sink, "k", ++sequence, 2));
      if (faults.live_bytes > most) most = faults.live_bytes;
      CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_BYTES), faults.live_bytes);
      CHECK_EQ_INT(hrt_recorder_sink_held(recorder).bytes, faults.live_bytes);
    }
  }
  faults.tracking = false;
  CHECK(most <= limits.bytes);
  sink.release.fn(sink.release.user_data);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_BYTES), 0);
}

static void a_failing_sink_still_gets_every_trace(void) {
  seen_t seen;
  hrt_debug_sink_t inner = seen_sink(&seen), sink;
  hrt_recorder_sink_t* recorder = NULL;
  hrt_recorder_limits_t limits = {4, 0};
  CHECK_OK(hrt_recorder_sink_create(&inner, &limits, &recorder, &sink));
  for (int i = 1; i <= 3; ++i) CHECK_OK(record(&sink, "t", (uint64_t)i, i));
  seen.fail_trace = 1;
  uint32_t delivered = 0;
  CHECK_STATUS(hrt_recorder_sink_deliver(recorder, 1, &delivered),
               HRT_STATUS_INTERNAL, "sink failed trace 1");
  CHECK_EQ_INT(seen.count, 3);
  CHECK_EQ_INT(hrt_recorder_sink_held(recorder).traces, 0);
  sink.release.fn(sink.release.user_data);
}

static void refuses_limits_out_of_range(void) {
  seen_t seen;
  hrt_debug_sink_t inner = seen_sink(&seen), sink;
  hrt_recorder_sink_t* recorder = NULL;
  const hrt_recorder_limits_t bad[] = {{0, 0},
                                       {2, 10},
                                       {HRT_RECORDER_MAX_TRACES + 1, 0},
                                       {0, HRT_RECORDER_MAX_BYTES + 1}};
  const char* texts[] = {"exactly one", "exactly one", "traces", "bytes"};
  for (int i = 0; i < 4; ++i) {
    CHECK_STATUS(hrt_recorder_sink_create(&inner, &bad[i], &recorder, &sink),
                 HRT_STATUS_INVALID_ARGUMENT, texts[i]);
  }
  CHECK_EQ_INT(seen.released, 0);  // the caller still owns it
}

static void every_allocation_failing_is_an_error_and_leaks_nothing(void) {
  seen_t seen;
  hrt_debug_sink_t inner = seen_sink(&seen), sink;
  hrt_recorder_sink_t* recorder = NULL;
  hrt_recorder_limits_t limits = {2, 0};
  arm(0);
  CHECK_STATUS(hrt_recorder_sink_create(&inner, &limits, &recorder, &sink),
               HRT_STATUS_RESOURCE_EXHAUSTED, "flight recorder");
  disarm();
  CHECK_EQ_INT(seen.released, 0);
  CHECK_OK(hrt_recorder_sink_create(&inner, &limits, &recorder, &sink));
  CHECK_OK(record(&sink, "t", 1, 1));
  arm(0);
  CHECK_STATUS(record(&sink, "lost", 2, 2), HRT_STATUS_RESOURCE_EXHAUSTED,
               "trace 'lost'");
  disarm();
  CHECK_EQ_INT(hrt_recorder_sink_held(recorder).traces, 1);
  CHECK_OK(record(&sink, "t", 3, 3));
  // Full: the oldest copy is reused for the next trace, which allocates
  // nothing.
  arm(0);
  CHECK_OK(record(&sink, "t", 4, 4));
  CHECK_EQ_INT(faults.count, 0);
  // A larger trace than the one evicted needs a new allocation: failing, it
  // loses the evicted trace and keeps the rest.
  char key[64] = "a-much-longer-key-than-t";
  CHECK_STATUS(record(&sink, key, 5, 5), HRT_STATUS_RESOURCE_EXHAUSTED, key);
  disarm();
  CHECK_EQ_INT(hrt_recorder_sink_held(recorder).traces, 1);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_TRACE), 1);
  uint32_t delivered = 0;
  CHECK_OK(hrt_recorder_sink_deliver(recorder, 1, &delivered));
  CHECK_EQ_INT(delivered, 1);
  CHECK_EQ_INT(seen.traces[0].sequence, 4);
  sink.release.fn(sink.release.user_data);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_TRACE), 0);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_RECORDED_BYTES), 0);
}

// What the recorder delivers says it was recorded (stdio), and a tee
// passes invocation failures on to every sink.
static void native_sinks_see_recorded_traces_and_failures(void) {
  char* text = NULL;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  CHECK(stream);
  seen_t seen;
  hrt_debug_sink_t parts[2] = {seen_sink(&seen)};
  CHECK_OK(hrt_stdio_sink_create(stream, 8, &parts[1]));
  hrt_debug_sink_t tee, sink;
  CHECK_OK(hrt_tee_sink_create(parts, 2, &tee));
  hrt_recorder_sink_t* recorder = NULL;
  hrt_recorder_limits_t limits = {1, 0};
  CHECK_OK(hrt_recorder_sink_create(&tee, &limits, &recorder, &sink));
  CHECK_OK(record(&sink, "probe", 3, 1.5f));
  hrt_invocation_failure_t failure = {4, "m.f", 104, HRT_STATUS_ABORTED};
  sink.invocation_failed.fn(sink.invocation_failed.user_data, &failure);
  sink.release.fn(sink.release.user_data);
  fclose(stream);
  const char* expected =
      "=== probe (m.f op 1, invocation 3, recorded) ===\n"
      "x: 4xf32=[1.5 1.5 1.5 1.5]\n";
  int same = strcmp(text, expected) == 0;
  if (!same) fprintf(stderr, "got:\n%s", text);
  free(text);
  CHECK(same);
  CHECK_EQ_INT(seen.count, 1);
  CHECK_EQ_INT(seen.failures, 1);
  CHECK_EQ_INT(seen.released, 1);
}

TEST_MAIN(TEST_CASE(keeps_the_last_traces_and_delivers_them_recorded),
          TEST_CASE(bytes_bound_evicts_the_oldest_and_skips_oversized),
          TEST_CASE(bytes_bound_counts_the_memory_held),
          TEST_CASE(a_failing_sink_still_gets_every_trace),
          TEST_CASE(refuses_limits_out_of_range),
          TEST_CASE(every_allocation_failing_is_an_error_and_leaks_nothing),
          TEST_CASE(native_sinks_see_recorded_traces_and_failures))
