// VM contexts, the HAL module's debug sink and program modules, end to end
// on the CPU devices.
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include "base/threads.h"
#include "hal/driver.h"
#include "modules/hal_module.h"
#include "modules/program/program_internal.h"
#include "modules/program/program_module.h"
#include "test.h"
#include "vm/context.h"

// A dispatch timing as the recorder keeps it: the strings copied, because
// the event's pointers are valid only during the sink's call.
typedef struct {
  uint64_t sequence;
  char function[64];
  uint32_t op_index;
  char kernel[64];
  char device[64];
  int64_t start_ns;
  int64_t duration_ns;
} timing_record_t;

// A sink that records every trace (keys, info, first float of each tensor)
// and the first 8 dispatch timings.
typedef struct {
  hrt_mutex_t mutex;
  int count;
  char keys[64][48];
  uint64_t sequences[64];
  uint64_t invocations[64];
  uint32_t ops[64];
  uint32_t tensor_counts[64];
  float first[64];
  float sums[64];
  pthread_t thread;
  atomic_int releases;
  int fail_on;  // fail the trace with this index (or -1)
  int timing_count;
  timing_record_t timings[8];
  int flush_count;
  int traces_at_flush[8];  // `count` at each of the first 8 flushes
} recorder_t;

static hrt_status_t record(void* user_data, const char* key,
                           const hrt_trace_info_t* info, uint32_t count,
                           const hrt_trace_tensor_t* tensors) {
  recorder_t* recorder = user_data;
  hrt_mutex_lock(&recorder->mutex);
  int i = recorder->count++;
  if (i < 64) {
    snprintf(recorder->keys[i], sizeof(recorder->keys[i]), "%s", key);
    recorder->sequences[i] = info->sequence;
    recorder->invocations[i] = info->invocation;
    recorder->ops[i] = info->op_index;
    recorder->tensor_counts[i] = count;
    const float* data = tensors[0].data;
    recorder->first[i] = data[0];
    float sum = 0;
    for (uint64_t j = 0; j < tensors[0].byte_length / 4; ++j) sum += data[j];
    recorder->sums[i] = sum;
  }
  recorder->thread = pthread_self();
  hrt_mutex_unlock(&recorder->mutex);
  if (i == recorder->fail_on) {
    return hrt_status_make(HRT_STATUS_ABORTED, "sink refused trace %d", i);
  }
  return HRT_OK;
}

static void record_timing(void* user_data, const hrt_dispatch_timing_t* events,
                          uint32_t count) {
  recorder_t* recorder = user_data;
  hrt_mutex_lock(&recorder->mutex);
  for (uint32_t i = 0; i < count && recorder->timing_count < 8; ++i) {
    const hrt_dispatch_timing_t* event = &events[i];
    timing_record_t* timing = &recorder->timings[recorder->timing_count++];
    timing->sequence = event->sequence;
    snprintf(timing->function, sizeof(timing->function), "%s", event->function);
    timing->op_index = event->op_index;
    snprintf(timing->kernel, sizeof(timing->kernel), "%s", event->kernel);
    snprintf(timing->device, sizeof(timing->device), "%s", event->device);
    timing->start_ns = event->start_ns;
    timing->duration_ns = event->duration_ns;
  }
  hrt_mutex_unlock(&recorder->mutex);
}

static void record_flush(void* user_data) {
  recorder_t* recorder = user_data;
  hrt_mutex_lock(&recorder->mutex);
  if (recorder->flush_count < 8) {
    recorder->traces_at_flush[recorder->flush_count] = recorder->count;
  }
  ++recorder->flush_count;
  hrt_mutex_unlock(&recorder->mutex);
}

static void release_recorder(void* user_data) {
  recorder_t* recorder = user_data;
  atomic_fetch_add(&recorder->releases, 1);
}

static void recorder_init(recorder_t* recorder) {
  memset(recorder, 0, sizeof(*recorder));
  hrt_mutex_init(&recorder->mutex);
  recorder->fail_on = -1;
}

// Waits for the sink's release (or ends the binary) and returns the release
// count. The last reference to a HAL module may drop on the completion
// thread just after an invocation's `done`, so a recorder must outlive that.
static int recorder_wait_released(recorder_t* recorder) {
  POLL_OR_EXIT(atomic_load(&recorder->releases) != 0, "the sink's release");
  hrt_mutex_deinit(&recorder->mutex);
  return atomic_load(&recorder->releases);
}

static hrt_debug_sink_t recorder_sink(recorder_t* recorder) {
  hrt_debug_sink_t sink = {
      .buffer_view_trace = {record, recorder},
      .dispatch_timing = {record_timing, recorder},
      .flush = {record_flush, recorder},
      .release = {release_recorder, recorder},
  };
  return sink;
}

static const char kMlp[] =
    "{\"format\": \"halrt.module/1\", \"name\": \"mlp\","
    " \"executables\": {\"k\": {\"local\": {\"builtin\": true}}},"
    " \"functions\": {\"main\": {"
    "  \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4, 8]},"
    "              {\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [8, 16]}],"
    "  \"outputs\": [{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [4, 16]}],"
    "  \"locals\": [{\"name\": \"h\", \"dtype\": \"f32\", \"shape\": [4, 16]}],"
    "  \"body\": ["
    "   {\"op\": \"dispatch\", \"kernel\": \"k.matmul_f32\", \"workgroups\": [2, 2, 1],"
    "    \"bindings\": [\"x\", \"w\", \"h\"], \"constants\": [4, 8, 16]},"
    "   {\"op\": \"trace\", \"key\": \"after_matmul\", \"values\": [\"h\"]},"
    "   {\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [3],"
    "    \"bindings\": [\"h\", \"y\"], \"constants\": [64]},"
    "   {\"op\": \"barrier\"},"
    "   {\"op\": \"trace\", \"key\": \"after_relu\", \"values\": [\"y\", \"x\"]}"
    "  ]}}}";

typedef struct {
  hrt_notification_t done;
  hrt_status_t status;
  hrt_hal_buffer_view_t* outputs[8];
  uint32_t output_count;
} result_t;

static void on_done(void* user_data, hrt_status_t status,
                    hrt_hal_buffer_view_t* const* outputs,
                    uint32_t output_count) {
  result_t* result = user_data;
  result->status = status;
  result->output_count = output_count;
  for (uint32_t i = 0; i < output_count && i < 8; ++i) {
    result->outputs[i] = outputs[i];
  }
  hrt_notification_set(&result->done);
}

static hrt_status_t wait_result(result_t* result) {
  WAIT_OR_EXIT(&result->done, "an invocation's completion");
  hrt_notification_deinit(&result->done);
  return result->status;
}

// Everything a test needs: device, instance, HAL module, program, context.
typedef struct {
  hrt_vm_instance_t* instance;
  hrt_hal_device_t* device;
  hrt_vm_module_t* hal;
  hrt_vm_module_t* program;
  hrt_vm_context_t* context;
} fixture_t;

// `options` may be NULL (the defaults).
static hrt_status_t fixture_create(const char* uri, const char* json,
                                   const hrt_debug_sink_t* sink,
                                   const hrt_hal_module_options_t* options,
                                   fixture_t* out) {
  memset(out, 0, sizeof(*out));
  HRT_RETURN_IF_ERROR(hrt_vm_instance_create(&out->instance));
  HRT_RETURN_IF_ERROR(
      hrt_vm_instance_create_device(out->instance, uri, &out->device));
  HRT_RETURN_IF_ERROR(
      hrt_hal_module_create(out->device, sink, options, &out->hal));
  HRT_RETURN_IF_ERROR(
      hrt_program_module_create(json, strlen(json), NULL, &out->program));
  hrt_vm_module_t* modules[2] = {out->hal, out->program};
  return hrt_vm_context_create(out->instance, modules, 2, &out->context);
}

static void fixture_release(fixture_t* fixture) {
  hrt_vm_context_release(fixture->context);
  hrt_vm_module_release(fixture->program);
  hrt_vm_module_release(fixture->hal);
  hrt_hal_device_release(fixture->device);
  hrt_vm_instance_release(fixture->instance);
}

static hrt_status_t make_tensor(hrt_hal_device_t* device, const float* data,
                                int64_t rows, int64_t cols,
                                hrt_hal_buffer_view_t** out) {
  hrt_hal_buffer_t* buffer = NULL;
  int64_t shape[2] = {rows, cols};
  HRT_RETURN_IF_ERROR(hrt_hal_device_allocate_buffer(
      device, (uint64_t)(rows * cols * 4), data, &buffer));
  hrt_status_t status = hrt_hal_buffer_view_create(
      buffer, 0, HRT_HAL_ELEMENT_TYPE_F32, 2, shape, out);
  hrt_hal_buffer_release(buffer);
  return status;
}

// Runs mlp.main of `f` once on x [4,8] and w [8,16], and waits. Returns the
// invocation's status (owned); on success the caller owns result->outputs
// and `*out_ids` (out_ids may be NULL) holds the invocation's numbers.
static hrt_status_t run_mlp(const fixture_t* f, const float* x, const float* w,
                            result_t* result,
                            hrt_vm_invocation_ids_t* out_ids) {
  hrt_vm_function_t function;
  HRT_RETURN_IF_ERROR(
      hrt_vm_context_lookup_function(f->context, "mlp.main", &function));
  hrt_hal_buffer_view_t* inputs[2] = {NULL, NULL};
  hrt_status_t status = make_tensor(f->device, x, 4, 8, &inputs[0]);
  if (status == HRT_OK) status = make_tensor(f->device, w, 8, 16, &inputs[1]);
  if (status == HRT_OK) {
    memset(result, 0, sizeof(*result));
    hrt_notification_init(&result->done);
    status = hrt_vm_invoke_async(f->context, &function, inputs, 2, NULL,
                                 (hrt_vm_invocation_done_t){on_done, result},
                                 out_ids);
    if (status == HRT_OK) {
      status = wait_result(result);
    } else {
      hrt_notification_deinit(&result->done);
    }
  }
  hrt_hal_buffer_view_release(inputs[0]);
  hrt_hal_buffer_view_release(inputs[1]);
  return status;
}

static void mlp_reference(const float* x, const float* w, float* y) {
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 16; ++j) {
      float sum = 0;
      for (int k = 0; k < 8; ++k) sum += x[i * 8 + k] * w[k * 16 + j];
      y[i * 16 + j] = sum > 0 ? sum : 0;
    }
  }
}

static void program_runs_and_traces_in_order(void) {
  static const char* const uris[] = {"local-sync", "local-task?workers=3"};
  for (int d = 0; d < 2; ++d) {
    recorder_t recorder;
    recorder_init(&recorder);
    hrt_debug_sink_t sink = recorder_sink(&recorder);
    fixture_t f;
    CHECK_OK(fixture_create(uris[d], kMlp, &sink, NULL, &f));
    hrt_vm_function_t function;
    CHECK_OK(hrt_vm_context_lookup_function(f.context, "mlp.main", &function));
    CHECK_EQ_INT(hrt_vm_function_def(&function)->input_count, 2);
    enum { RUNS = 3 };
    float x[RUNS][32], w[128], expected[RUNS][64];
    for (int k = 0; k < 128; ++k) w[k] = (float)((k * 7) % 11) - 5.0f;
    result_t results[RUNS];
    hrt_vm_invocation_ids_t ids[RUNS];
    hrt_hal_buffer_view_t* weights = NULL;
    CHECK_OK(make_tensor(f.device, w, 8, 16, &weights));
    for (int r = 0; r < RUNS; ++r) {
      for (int k = 0; k < 32; ++k) x[r][k] = (float)((k + r * 5) % 9) - 4.0f;
      mlp_reference(x[r], w, expected[r]);
      hrt_hal_buffer_view_t* inputs[2] = {NULL, weights};
      CHECK_OK(make_tensor(f.device, x[r], 4, 8, &inputs[0]));
      memset(&results[r], 0, sizeof(results[r]));
      hrt_notification_init(&results[r].done);
      hrt_vm_invocation_done_t done = {on_done, &results[r]};
      CHECK_OK(hrt_vm_invoke_async(f.context, &function, inputs, 2, NULL, done,
                                   &ids[r]));
      hrt_hal_buffer_view_release(inputs[0]);  // the call holds it
    }
    hrt_hal_buffer_view_release(weights);
    int wrong = 0;
    for (int r = 0; r < RUNS; ++r) {
      CHECK_OK(wait_result(&results[r]));
      CHECK_EQ_INT(results[r].output_count, 1);
      const float* y =
          hrt_hal_buffer_view_buffer(results[r].outputs[0])->host_ptr;
      for (int k = 0; k < 64; ++k) wrong += fabsf(y[k] - expected[r][k]) > 1e-4f;
      hrt_hal_buffer_view_release(results[r].outputs[0]);
    }
    CHECK_EQ_INT(wrong, 0);
    // Two traces per run, in program order, each run after the one before,
    // and the sink flushed once per run, after its traces.
    CHECK_EQ_INT(recorder.count, 2 * RUNS);
    CHECK_EQ_INT(recorder.flush_count, RUNS);
    for (int r = 0; r < RUNS; ++r) {
      CHECK_EQ_INT(recorder.traces_at_flush[r], 2 * (r + 1));
      CHECK(strcmp(recorder.keys[2 * r], "after_matmul") == 0);
      CHECK(strcmp(recorder.keys[2 * r + 1], "after_relu") == 0);
      // Numbered 1, 2, 3 in their context; ids unique.
      CHECK_EQ_INT(ids[r].sequence, r + 1);
      CHECK_EQ_INT(recorder.sequences[2 * r], r + 1);
      CHECK_EQ_INT(recorder.sequences[2 * r + 1], r + 1);
      CHECK_EQ_INT(recorder.invocations[2 * r], ids[r].invocation);
      CHECK(r == 0 || ids[r].invocation > ids[r - 1].invocation);
      CHECK_EQ_INT(recorder.ops[2 * r], 1);
      CHECK_EQ_INT(recorder.ops[2 * r + 1], 4);
      CHECK_EQ_INT(recorder.tensor_counts[2 * r + 1], 2);
      float relu_sum = 0;
      for (int k = 0; k < 64; ++k) relu_sum += expected[r][k];
      CHECK(fabsf(recorder.sums[2 * r + 1] - relu_sum) < 1e-3f);
    }
    CHECK(!pthread_equal(recorder.thread, pthread_self()));
    CHECK_EQ_INT(atomic_load(&recorder.releases), 0);
    fixture_release(&f);
    CHECK_EQ_INT(recorder_wait_released(&recorder), 1);
  }
}

static void trace_dispatches_traces_every_dispatch_output(void) {
  recorder_t recorder;
  recorder_init(&recorder);
  hrt_debug_sink_t sink = recorder_sink(&recorder);
  fixture_t f;
  hrt_hal_module_options_t options = {.trace_dispatches = true};
  CHECK_OK(fixture_create("local-sync", kMlp, &sink, &options, &f));
  float x[32] = {1}, w[128] = {2};
  result_t result;
  CHECK_OK(run_mlp(&f, x, w, &result, NULL));
  hrt_hal_buffer_view_release(result.outputs[0]);
  fixture_release(&f);
  CHECK_EQ_INT(recorder.count, 4);
  CHECK(strcmp(recorder.keys[0], "main:0:matmul_f32") == 0);
  CHECK(recorder.first[0] == 2.0f);  // x[0][0] * w[0][0]
  CHECK(strcmp(recorder.keys[1], "after_matmul") == 0);
  CHECK(strcmp(recorder.keys[2], "main:2:relu_f32") == 0);
  CHECK(strcmp(recorder.keys[3], "after_relu") == 0);
  CHECK_EQ_INT(recorder_wait_released(&recorder), 1);
}

static void profiled_dispatches_report_timings(void) {
  recorder_t recorder;
  recorder_init(&recorder);
  hrt_debug_sink_t sink = recorder_sink(&recorder);
  fixture_t f;
  hrt_hal_module_options_t options = {.profile = true};
  CHECK_OK(fixture_create("local-task?workers=2", kMlp, &sink, &options, &f));
  float x[32] = {0}, w[128] = {0};
  int64_t before = hrt_time_now_ns();
  result_t result;
  CHECK_OK(run_mlp(&f, x, w, &result, NULL));
  int64_t after = hrt_time_now_ns();
  hrt_hal_buffer_view_release(result.outputs[0]);
  CHECK_EQ_INT(recorder.timing_count, 2);
  CHECK(strcmp(recorder.timings[0].kernel, "k.matmul_f32") == 0);
  CHECK_EQ_INT(recorder.timings[0].op_index, 0);
  CHECK(strcmp(recorder.timings[1].kernel, "k.relu_f32") == 0);
  CHECK_EQ_INT(recorder.timings[1].op_index, 2);
  CHECK_EQ_INT(recorder.timings[1].sequence, 1);
  CHECK(strcmp(recorder.timings[1].function, "mlp.main") == 0);
  CHECK(strcmp(recorder.timings[1].device, "local-task?workers=2") == 0);
  CHECK(recorder.timings[0].start_ns >= before);
  CHECK(recorder.timings[1].start_ns >=
        recorder.timings[0].start_ns + recorder.timings[0].duration_ns);
  CHECK(recorder.timings[1].start_ns + recorder.timings[1].duration_ns <= after);
  fixture_release(&f);
  CHECK_EQ_INT(recorder_wait_released(&recorder), 1);
}

// A key filter: keys holding "relu", and the keys it was asked about.
typedef struct {
  int asked;
  char keys[4][48];
} key_filter_t;

static bool relu_keys(void* user_data, const char* key) {
  key_filter_t* filter = user_data;
  if (filter->asked < 4) {
    snprintf(filter->keys[filter->asked], sizeof(filter->keys[0]), "%s", key);
  }
  filter->asked += 1;
  return strstr(key, "relu") != NULL;
}

static void dispatch_trace_filters_pick_keys_functions_and_invocations(void) {
  recorder_t recorder;
  recorder_init(&recorder);
  hrt_debug_sink_t sink = recorder_sink(&recorder);
  fixture_t f;
  memset(&f, 0, sizeof(f));
  CHECK_OK(hrt_vm_instance_create(&f.instance));
  CHECK_OK(hrt_vm_instance_create_device(f.instance, "local-sync", &f.device));
  const char* functions[2] = {"other", "main"};
  key_filter_t filter = {0};
  hrt_hal_module_options_t options = {.trace_dispatches = true,
                                      .trace_keys = {relu_keys, &filter},
                                      .trace_functions = functions,
                                      .trace_function_count = 2,
                                      .trace_every = 2};
  CHECK_OK(hrt_hal_module_create(f.device, &sink, &options, &f.hal));
  CHECK_OK(hrt_program_module_create(kMlp, strlen(kMlp), NULL, &f.program));
  uint32_t key_count = 0;
  const char* const* keys =
      hrt_program_module_dispatch_keys(f.program, &key_count);
  CHECK_EQ_INT(key_count, 2);
  CHECK(strcmp(keys[0], "main:0:matmul_f32") == 0);
  CHECK(strcmp(keys[1], "main:2:relu_f32") == 0);
  CHECK(hrt_program_module_isa(f.program) && !hrt_program_module_isa(f.hal));
  CHECK_EQ_INT(filter.asked, 0);  // asked only when a context links
  hrt_vm_module_t* modules[2] = {f.hal, f.program};
  CHECK_OK(hrt_vm_context_create(f.instance, modules, 2, &f.context));
  CHECK_EQ_INT(filter.asked, 2);
  CHECK(strcmp(filter.keys[0], "main:0:matmul_f32") == 0);
  CHECK(strcmp(filter.keys[1], "main:2:relu_f32") == 0);
  float x[32] = {0}, w[128] = {0};
  for (int run = 0; run < 3; ++run) {
    result_t result;
    CHECK_OK(run_mlp(&f, x, w, &result, NULL));
    hrt_hal_buffer_view_release(result.outputs[0]);
  }
  fixture_release(&f);
  CHECK_EQ_INT(recorder_wait_released(&recorder), 1);
  CHECK_EQ_INT(filter.asked, 2);  // never while the calls ran
  // Per invocation: the program's own two traces; the relu dispatch's trace
  // only for the 2nd (every 2); never the matmul's (the key filter).
  const char* expected[7] = {"after_matmul",    "after_relu", "after_matmul",
                             "main:2:relu_f32", "after_relu", "after_matmul",
                             "after_relu"};
  CHECK_EQ_INT(recorder.count, 7);
  for (int i = 0; i < 7; ++i) CHECK(strcmp(recorder.keys[i], expected[i]) == 0);
  CHECK_EQ_INT(recorder.sequences[3], 2);
}

// Each context numbers its own calls from 1; calls that fail before they
// start use no number; invocation ids are unique across contexts.
static void invocations_are_numbered_per_context(void) {
  recorder_t recorder;
  recorder_init(&recorder);
  hrt_debug_sink_t sink = recorder_sink(&recorder);
  fixture_t f;
  CHECK_OK(fixture_create("local-sync", kMlp, &sink, NULL, &f));
  hrt_vm_context_t* second = NULL;
  hrt_vm_module_t* modules[2] = {f.hal, f.program};
  CHECK_OK(hrt_vm_context_create(f.instance, modules, 2, &second));
  fixture_t g = f;  // the same modules, the second context
  g.context = second;
  float x[32] = {0}, w[128] = {0};
  // Refused inputs (checked by the context), and an input on another
  // device (refused by the program once the call has its number).
  hrt_vm_function_t function;
  CHECK_OK(hrt_vm_context_lookup_function(f.context, "mlp.main", &function));
  hrt_hal_device_t* other = NULL;
  CHECK_OK(hrt_vm_instance_create_device(f.instance, "local-sync", &other));
  hrt_hal_buffer_view_t* inputs[2] = {NULL, NULL};
  CHECK_OK(make_tensor(f.device, x, 4, 8, &inputs[0]));
  CHECK_OK(make_tensor(other, w, 8, 16, &inputs[1]));
  hrt_vm_invocation_done_t done = {on_done, NULL};
  CHECK_STATUS(
      hrt_vm_invoke_async(f.context, &function, inputs, 1, NULL, done, NULL),
      HRT_STATUS_INVALID_ARGUMENT, "takes 2 inputs");
  CHECK_STATUS(
      hrt_vm_invoke_async(f.context, &function, inputs, 2, NULL, done, NULL),
      HRT_STATUS_INVALID_ARGUMENT, "is on another device");
  hrt_hal_buffer_view_release(inputs[0]);
  hrt_hal_buffer_view_release(inputs[1]);
  hrt_hal_device_release(other);
  // f, g, f, g, g.
  const fixture_t* order[5] = {&f, &g, &f, &g, &g};
  const uint64_t sequences[5] = {1, 1, 2, 2, 3};
  hrt_vm_invocation_ids_t ids[5];
  for (int i = 0; i < 5; ++i) {
    result_t result;
    CHECK_OK(run_mlp(order[i], x, w, &result, &ids[i]));
    hrt_hal_buffer_view_release(result.outputs[0]);
    CHECK_EQ_INT(ids[i].sequence, sequences[i]);
    CHECK(i == 0 || ids[i].invocation > ids[i - 1].invocation);
  }
  CHECK_EQ_INT(recorder.count, 10);
  for (int i = 0; i < 10; ++i) {
    CHECK_EQ_INT(recorder.sequences[i], sequences[i / 2]);
    CHECK_EQ_INT(recorder.invocations[i], ids[i / 2].invocation);
  }
  hrt_vm_context_release(second);
  fixture_release(&f);
  CHECK_EQ_INT(recorder_wait_released(&recorder), 1);
}

static void sink_error_fails_only_its_invocation(void) {
  recorder_t recorder;
  recorder_init(&recorder);
  recorder.fail_on = 0;
  hrt_debug_sink_t sink = recorder_sink(&recorder);
  fixture_t f;
  CHECK_OK(fixture_create("local-task?workers=2", kMlp, &sink, NULL, &f));
  float x[32] = {0}, w[128] = {0};
  for (int run = 0; run < 2; ++run) {
    result_t result;
    hrt_status_t status = run_mlp(&f, x, w, &result, NULL);
    if (run == 0) {
      CHECK_STATUS(status, HRT_STATUS_ABORTED, "sink refused trace 0");
      CHECK_EQ_INT(result.output_count, 0);
    } else {
      CHECK_OK(status);
      hrt_hal_buffer_view_release(result.outputs[0]);
    }
  }
  // The failing trace stopped its invocation: the second trace of run 0
  // never ran, run 1 traced twice.
  CHECK_EQ_INT(recorder.count, 3);
  fixture_release(&f);
  CHECK_EQ_INT(recorder_wait_released(&recorder), 1);
}

// Drops the context from the completion: the HAL module and its sink are
// released on the device's completion thread.
typedef struct {
  fixture_t* fixture;
  hrt_notification_t done;
} drop_t;

static void drop_everything(void* user_data, hrt_status_t status,
                            hrt_hal_buffer_view_t* const* outputs,
                            uint32_t output_count) {
  drop_t* drop = user_data;
  hrt_status_free(status);
  for (uint32_t i = 0; i < output_count; ++i) {
    hrt_hal_buffer_view_release(outputs[i]);
  }
  fixture_release(drop->fixture);
  hrt_notification_set(&drop->done);
}

static void sink_released_once_from_the_completion_thread(void) {
  recorder_t recorder;
  recorder_init(&recorder);
  hrt_debug_sink_t sink = recorder_sink(&recorder);
  fixture_t f;
  CHECK_OK(fixture_create("local-sync", kMlp, &sink, NULL, &f));
  hrt_vm_function_t function;
  CHECK_OK(hrt_vm_context_lookup_function(f.context, "mlp.main", &function));
  float x[32] = {0}, w[128] = {0};
  hrt_hal_buffer_view_t* inputs[2] = {NULL, NULL};
  CHECK_OK(make_tensor(f.device, x, 4, 8, &inputs[0]));
  CHECK_OK(make_tensor(f.device, w, 8, 16, &inputs[1]));
  drop_t drop = {.fixture = &f};
  hrt_notification_init(&drop.done);
  // Keep the context alive only through the invocation.
  hrt_vm_context_t* context = f.context;
  hrt_vm_context_retain(context);
  CHECK_OK(hrt_vm_invoke_async(
      context, &function, inputs, 2, NULL,
      (hrt_vm_invocation_done_t){drop_everything, &drop}, NULL));
  hrt_vm_context_release(context);
  hrt_hal_buffer_view_release(inputs[0]);
  hrt_hal_buffer_view_release(inputs[1]);
  WAIT_OR_EXIT(&drop.done, "the invocation's completion");
  hrt_notification_deinit(&drop.done);
  // The invocation's own context reference is dropped after `done`.
  CHECK_EQ_INT(recorder_wait_released(&recorder), 1);
  CHECK_EQ_INT(recorder.count, 2);
}

static void failed_hal_module_creation_does_not_release_the_sink(void) {
  recorder_t recorder;
  recorder_init(&recorder);
  hrt_debug_sink_t sink = recorder_sink(&recorder);
  sink.buffer_view_trace.fn = NULL;
  hrt_vm_instance_t* instance = NULL;
  hrt_hal_device_t* device = NULL;
  CHECK_OK(hrt_vm_instance_create(&instance));
  CHECK_OK(hrt_vm_instance_create_device(instance, "local-sync", &device));
  hrt_vm_module_t* hal = NULL;
  CHECK_STATUS(hrt_hal_module_create(device, &sink, NULL, &hal),
               HRT_STATUS_INVALID_ARGUMENT, "buffer_view_trace");
  CHECK_EQ_INT(atomic_load(&recorder.releases), 0);
  hrt_hal_device_release(device);
  hrt_vm_instance_release(instance);
  hrt_mutex_deinit(&recorder.mutex);
}

static void contexts_check_names_and_inputs(void) {
  fixture_t f;
  CHECK_OK(fixture_create("local-sync", kMlp, NULL, NULL, &f));
  hrt_vm_function_t function;
  CHECK_STATUS(hrt_vm_context_lookup_function(f.context, "mlp.nope", &function),
               HRT_STATUS_NOT_FOUND, "module 'mlp' has no function 'nope'");
  CHECK_STATUS(hrt_vm_context_lookup_function(f.context, "other.main",
                                              &function),
               HRT_STATUS_NOT_FOUND, "no module 'other'");
  CHECK_STATUS(hrt_vm_context_lookup_function(f.context, "main", &function),
               HRT_STATUS_INVALID_ARGUMENT, "'module.function'");
  CHECK_OK(hrt_vm_context_lookup_function(f.context, "mlp.main", &function));
  float data[128] = {0};
  hrt_hal_buffer_view_t* good = NULL;
  hrt_hal_buffer_view_t* wrong_shape = NULL;
  CHECK_OK(make_tensor(f.device, data, 4, 8, &good));
  CHECK_OK(make_tensor(f.device, data, 8, 4, &wrong_shape));
  hrt_vm_invocation_done_t done = {on_done, NULL};
  hrt_hal_buffer_view_t* inputs[2] = {good, wrong_shape};
  CHECK_STATUS(
      hrt_vm_invoke_async(f.context, &function, inputs, 1, NULL, done, NULL),
      HRT_STATUS_INVALID_ARGUMENT, "mlp.main: takes 2 inputs (got 1)");
  CHECK_STATUS(
      hrt_vm_invoke_async(f.context, &function, inputs, 2, NULL, done, NULL),
      HRT_STATUS_INVALID_ARGUMENT,
      "input 1 ('w') must have shape [8,16] (got [8,4])");
  // An input from another device.
  hrt_hal_device_t* other = NULL;
  CHECK_OK(hrt_vm_instance_create_device(f.instance, "local-sync", &other));
  hrt_hal_buffer_view_t* foreign = NULL;
  CHECK_OK(make_tensor(other, data, 8, 16, &foreign));
  inputs[1] = foreign;
  CHECK_STATUS(
      hrt_vm_invoke_async(f.context, &function, inputs, 2, NULL, done, NULL),
      HRT_STATUS_INVALID_ARGUMENT, "input 1 ('w') is on another");
  hrt_hal_buffer_view_release(foreign);
  hrt_hal_device_release(other);
  hrt_hal_buffer_view_release(good);
  hrt_hal_buffer_view_release(wrong_shape);
  // Two modules with one name; a program without a HAL module.
  hrt_vm_module_t* twice[2] = {f.program, f.program};
  hrt_vm_context_t* context = NULL;
  CHECK_STATUS(hrt_vm_context_create(f.instance, twice, 2, &context),
               HRT_STATUS_INVALID_ARGUMENT, "both named 'mlp'");
  CHECK_STATUS(hrt_vm_context_create(f.instance, &f.program, 1, &context),
               HRT_STATUS_NOT_FOUND, "imports 'hal'");
  fixture_release(&f);
}

// Module JSON built from a function body and declarations, for error cases.
static hrt_status_t try_module(const char* executables, const char* values,
                               const char* body) {
  char json[4096];
  snprintf(json, sizeof(json),
           "{\"format\": \"halrt.module/1\", \"name\": \"m\", \"executables\": "
           "%s, \"functions\": {\"f\": {%s, \"body\": [%s]}}}",
           executables, values, body);
  hrt_vm_module_t* module = NULL;
  hrt_status_t status =
      hrt_program_module_create(json, strlen(json), NULL, &module);
  hrt_vm_module_release(module);
  return status;
}

static void bad_modules_name_the_field(void) {
  const char* k = "{\"k\": {\"local\": {\"builtin\": true}}}";
  const char* v =
      "\"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [4]}],"
      " \"outputs\": [{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [4]}],"
      " \"locals\": [{\"name\": \"i\", \"dtype\": \"i32\", \"shape\": [2]}]";
  CHECK_OK(try_module(k, v, "{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\","
                            " \"workgroups\": [1], \"bindings\": [\"a\", \"b\"],"
                            " \"constants\": [4]}"));
  static const struct {
    const char* body;
    hrt_status_code_t code;
    const char* message;
  } cases[] = {
      {"{\"op\": \"dispatch\", \"kernel\": \"k.nope_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\"]}",
       HRT_STATUS_NOT_FOUND,
       "functions.f.body[0].kernel: unknown built-in kernel 'nope_f32'"},
      {"{\"op\": \"dispatch\", \"kernel\": \"q.relu_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\", \"b\"], \"constants\": [4]}",
       HRT_STATUS_NOT_FOUND, "unknown executable 'q'"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\", \"z\"], \"constants\": [4]}",
       HRT_STATUS_NOT_FOUND, "functions.f.body[0].bindings[1]: unknown value 'z'"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\", \"b\"], \"constants\": [5]}",
       HRT_STATUS_INVALID_ARGUMENT,
       "bindings[0]: kernel 'relu_f32' needs 20 bytes here"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\", \"i\"], \"constants\": [2]}",
       HRT_STATUS_INVALID_ARGUMENT, "needs f32 here but 'i' is i32"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [0],"
       " \"bindings\": [\"a\", \"b\"], \"constants\": [4]}",
       HRT_STATUS_INVALID_ARGUMENT,
       "functions.f.body[0].workgroups[0]: must be an integer in [1,"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [1, 99999],"
       " \"bindings\": [\"a\", \"b\"], \"constants\": [4]}",
       HRT_STATUS_INVALID_ARGUMENT, "workgroups[1]: must be an integer in [1, 65535]"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\", \"b\"]}",
       HRT_STATUS_INVALID_ARGUMENT, "takes 2 bindings and 1 constants"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\", \"b\"], \"constants\": [4], \"extra\": 1}",
       HRT_STATUS_INVALID_ARGUMENT, "body[0]: unknown field 'extra'"},
      {"{\"op\": \"copy\", \"source\": \"a\", \"target\": \"i\"}",
       HRT_STATUS_INVALID_ARGUMENT, "copy source 'a' has 16 bytes but target"},
      {"{\"op\": \"fill\", \"target\": \"i\", \"value\": 0.5}",
       HRT_STATUS_INVALID_ARGUMENT, "body[0].value: 0.5 is not a i32 value"},
      {"{\"op\": \"trace\", \"key\": \"\", \"values\": [\"a\"]}",
       HRT_STATUS_INVALID_ARGUMENT, "body[0].key: must not be empty"},
      {"{\"op\": \"trace\", \"key\": \"t\", \"values\": []}",
       HRT_STATUS_INVALID_ARGUMENT, "values: must name 1 to 32 values"},
      {"{\"op\": \"jump\"}", HRT_STATUS_INVALID_ARGUMENT,
       "body[0].op: unknown op 'jump'"},
      {"7", HRT_STATUS_INVALID_ARGUMENT, "body[0]: must be an object"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\", \"b\"], \"constants\": [4.5]}",
       HRT_STATUS_INVALID_ARGUMENT,
       "constants[0]: kernel 'relu_f32' takes an integer here (got 4.5)"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\", \"b\"], \"constants\": [{\"f32\": 4}]}",
       HRT_STATUS_INVALID_ARGUMENT,
       "constants[0]: kernel 'relu_f32' takes an integer here"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [1],"
       " \"bindings\": [\"a\", \"b\"], \"constants\": [18446744073709551616]}",
       HRT_STATUS_INVALID_ARGUMENT, "does not fit in 32 bits"},
      {"{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\","
       " \"workgroups\": [65536, 65535, 2],"
       " \"bindings\": [\"a\", \"b\"], \"constants\": [4]}",
       HRT_STATUS_INVALID_ARGUMENT, "workgroups: 8589803520 workgroups exceed"},
      {"{\"op\": \"fill\", \"target\": \"b\", \"value\": 1, \"value\": 2}",
       HRT_STATUS_INVALID_ARGUMENT, "member 'value' appears twice"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    CHECK_STATUS(try_module(k, v, cases[i].body), cases[i].code,
                 cases[i].message);
  }
  CHECK_STATUS(try_module(k,
                          "\"inputs\": [{\"name\": \"a\", \"dtype\": \"f33\","
                          " \"shape\": [4]}], \"outputs\": []",
                          ""),
               HRT_STATUS_INVALID_ARGUMENT,
               "functions.f.inputs[0].dtype: unknown dtype 'f33'");
  CHECK_STATUS(try_module(k,
                          "\"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\","
                          " \"shape\": [-1]}], \"outputs\": []",
                          ""),
               HRT_STATUS_INVALID_ARGUMENT, "inputs[0].shape[0]: must be an");
  CHECK_STATUS(try_module(k,
                          "\"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\","
                          " \"shape\": [1]}], \"outputs\": [{\"name\": \"a\","
                          " \"dtype\": \"f32\", \"shape\": [1]}]",
                          ""),
               HRT_STATUS_INVALID_ARGUMENT, "value 'a' is declared twice");
  CHECK_STATUS(try_module("{\"k\": {\"local\": {\"library\": \"k.so\"}}}", v, ""),
               HRT_STATUS_INVALID_ARGUMENT,
               "executables.k.local.library: relative path 'k.so' needs a "
               "module file");
  CHECK_STATUS(try_module("{\"k\": {\"metal\": {}}}", v, ""),
               HRT_STATUS_INVALID_ARGUMENT, "executables.k: unknown field");
  CHECK_STATUS(try_module("{\"k\": {\"local\": {\"builtin\": false}}}", v, ""),
               HRT_STATUS_INVALID_ARGUMENT, "local.builtin: must be true");
  // A whole-number f32 constant is an f32 for the built-in axpy.
  hrt_vm_module_t* module = NULL;
  const char* axpy =
      "{\"format\": \"halrt.module/1\", \"name\": \"m\","
      " \"executables\": {\"k\": {\"local\": {\"builtin\": true}}},"
      " \"functions\": {\"f\": {"
      "  \"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [4]}],"
      "  \"outputs\": [{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [4]}],"
      "  \"body\": [{\"op\": \"dispatch\", \"kernel\": \"k.axpy_f32\","
      "   \"workgroups\": [1], \"bindings\": [\"a\", \"a\", \"b\"],"
      "   \"constants\": [4, 2]}]}}}";
  fixture_t f;
  CHECK_OK(fixture_create("local-sync", axpy, NULL, NULL, &f));
  hrt_vm_function_t function;
  CHECK_OK(hrt_vm_context_lookup_function(f.context, "m.f", &function));
  float a[4] = {1, 2, 3, -4};
  hrt_hal_buffer_t* buffer = NULL;
  int64_t shape[1] = {4};
  hrt_hal_buffer_view_t* input = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(f.device, 16, a, &buffer));
  CHECK_OK(hrt_hal_buffer_view_create(buffer, 0, HRT_HAL_ELEMENT_TYPE_F32, 1,
                                      shape, &input));
  hrt_hal_buffer_release(buffer);
  result_t result = {.output_count = 0};
  hrt_notification_init(&result.done);
  CHECK_OK(hrt_vm_invoke_async(f.context, &function, &input, 1, NULL,
                               (hrt_vm_invocation_done_t){on_done, &result},
                               NULL));
  hrt_hal_buffer_view_release(input);
  CHECK_OK(wait_result(&result));
  const float* b = hrt_hal_buffer_view_buffer(result.outputs[0])->host_ptr;
  int axpy_ok = b[0] == 3 && b[1] == 6 && b[2] == 9 && b[3] == -12;
  hrt_hal_buffer_view_release(result.outputs[0]);
  fixture_release(&f);
  CHECK(axpy_ok);
  const char* wrong_format = "{\"format\": \"halrt.module/2\", \"name\": \"m\","
                             " \"functions\": {}}";
  CHECK_STATUS(hrt_program_module_create(wrong_format, strlen(wrong_format),
                                         NULL, &module),
               HRT_STATUS_INVALID_ARGUMENT, "format: 'halrt.module/2'");
  const char* reserved = "{\"format\": \"halrt.module/1\", \"name\": \"hal\","
                         " \"functions\": {}}";
  CHECK_STATUS(hrt_program_module_create(reserved, strlen(reserved), NULL,
                                         &module),
               HRT_STATUS_INVALID_ARGUMENT, "'hal' is reserved");
  CHECK_STATUS(hrt_program_module_create("{", 1, NULL, &module),
               HRT_STATUS_INVALID_ARGUMENT, "invalid JSON at line 1");
  CHECK(module == NULL);
}

static void cuda_only_executables_fail_to_link_on_cpu(void) {
  const char* json =
      "{\"format\": \"halrt.module/1\", \"name\": \"g\","
      " \"executables\": {\"k\": {\"cuda\": {\"ptx\": {\"text\": \".version 8.0\"}}}},"
      " \"functions\": {}}";
  hrt_vm_module_t* program = NULL;
  CHECK_OK(hrt_program_module_create(json, strlen(json), NULL, &program));
  hrt_vm_instance_t* instance = NULL;
  hrt_hal_device_t* device = NULL;
  hrt_vm_module_t* hal = NULL;
  CHECK_OK(hrt_vm_instance_create(&instance));
  CHECK_OK(hrt_vm_instance_create_device(instance, "local-sync", &device));
  CHECK_OK(hrt_hal_module_create(device, NULL, NULL, &hal));
  hrt_vm_module_t* modules[2] = {hal, program};
  hrt_vm_context_t* context = NULL;
  CHECK_STATUS(hrt_vm_context_create(instance, modules, 2, &context),
               HRT_STATUS_NOT_FOUND,
               "executables.k: no executable for device kind 'local'");
  hrt_vm_module_release(program);
  hrt_vm_module_release(hal);
  hrt_hal_device_release(device);
  hrt_vm_instance_release(instance);
}

static void fills_store_values_in_each_dtype(void) {
  const char* json =
      "{\"format\": \"halrt.module/1\", \"name\": \"m\", \"functions\": {\"f\": {"
      " \"inputs\": [], \"outputs\": ["
      "  {\"name\": \"h\", \"dtype\": \"f16\", \"shape\": [2]},"
      "  {\"name\": \"b\", \"dtype\": \"bf16\", \"shape\": [2]},"
      "  {\"name\": \"d\", \"dtype\": \"f64\", \"shape\": [2]},"
      "  {\"name\": \"i\", \"dtype\": \"i8\", \"shape\": [3]},"
      "  {\"name\": \"q\", \"dtype\": \"bool\", \"shape\": [1]}],"
      " \"body\": ["
      "  {\"op\": \"fill\", \"target\": \"h\", \"value\": 1.5},"
      "  {\"op\": \"fill\", \"target\": \"b\", \"value\": -2},"
      "  {\"op\": \"fill\", \"target\": \"d\", \"value\": 0.1},"
      "  {\"op\": \"fill\", \"target\": \"i\", \"value\": -3},"
      "  {\"op\": \"fill\", \"target\": \"q\", \"value\": true}]}}}";
  fixture_t f;
  CHECK_OK(fixture_create("local-sync", json, NULL, NULL, &f));
  hrt_vm_function_t function;
  CHECK_OK(hrt_vm_context_lookup_function(f.context, "m.f", &function));
  result_t result = {.output_count = 0};
  hrt_notification_init(&result.done);
  CHECK_OK(hrt_vm_invoke_async(f.context, &function, NULL, 0, NULL,
                               (hrt_vm_invocation_done_t){on_done, &result},
                               NULL));
  CHECK_OK(wait_result(&result));
  CHECK_EQ_INT(result.output_count, 5);
  const uint16_t* h = hrt_hal_buffer_view_buffer(result.outputs[0])->host_ptr;
  const uint16_t* b = hrt_hal_buffer_view_buffer(result.outputs[1])->host_ptr;
  const double* d = hrt_hal_buffer_view_buffer(result.outputs[2])->host_ptr;
  const int8_t* i = hrt_hal_buffer_view_buffer(result.outputs[3])->host_ptr;
  const uint8_t* q = hrt_hal_buffer_view_buffer(result.outputs[4])->host_ptr;
  int ok = h[0] == 0x3E00 && h[1] == 0x3E00 && b[1] == 0xC000 &&
           d[1] == 0.1 && i[2] == -3 && q[0] == 1;
  for (uint32_t k = 0; k < result.output_count; ++k) {
    hrt_hal_buffer_view_release(result.outputs[k]);
  }
  fixture_release(&f);
  CHECK(ok);
}

// Which outputs and locals a call allocates without zeroing
// (hrt_function_t.overwritten): those whose first op writes every byte and
// reads none.
static void values_written_whole_by_their_first_op_skip_the_zero_fill(void) {
  const char* json =
      "{\"format\": \"halrt.module/1\", \"name\": \"m\", "
      "\"executables\": {\"k\": {\"local\": {\"builtin\": true}}}, "
      "\"functions\": {\"f\": {"
      " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4]}],"
      " \"outputs\": ["
      "  {\"name\": \"whole\", \"dtype\": \"f32\", \"shape\": [4]},"
      "  {\"name\": \"part\", \"dtype\": \"f32\", \"shape\": [4]},"
      "  {\"name\": \"unused\", \"dtype\": \"f32\", \"shape\": [4]},"
      "  {\"name\": \"c\", \"dtype\": \"f32\", \"shape\": [2, 2]}],"
      " \"locals\": ["
      "  {\"name\": \"inplace\", \"dtype\": \"f32\", \"shape\": [4]},"
      "  {\"name\": \"filled\", \"dtype\": \"f32\", \"shape\": [4]},"
      "  {\"name\": \"copied\", \"dtype\": \"f32\", \"shape\": [4]},"
      "  {\"name\": \"traced\", \"dtype\": \"f32\", \"shape\": [4]},"
      "  {\"name\": \"source\", \"dtype\": \"f32\", \"shape\": [4]}],"
      " \"body\": ["
      "  {\"op\": \"dispatch\", \"kernel\": \"k.add_f32\", \"workgroups\": [1],"
      "   \"bindings\": [\"x\", \"x\", \"whole\"], \"constants\": [4]},"
      "  {\"op\": \"dispatch\", \"kernel\": \"k.add_f32\", \"workgroups\": [1],"
      "   \"bindings\": [\"x\", \"x\", \"part\"], \"constants\": [3]},"
      "  {\"op\": \"dispatch\", \"kernel\": \"k.matmul_f32\", \"workgroups\": [1],"
      "   \"bindings\": [\"x\", \"x\", \"c\"], \"constants\": [2, 2, 2]},"
      "  {\"op\": \"dispatch\", \"kernel\": \"k.add_f32\", \"workgroups\": [1],"
      "   \"bindings\": [\"inplace\", \"x\", \"inplace\"], \"constants\": [4]},"
      "  {\"op\": \"fill\", \"target\": \"filled\", \"value\": 1},"
      "  {\"op\": \"copy\", \"source\": \"source\", \"target\": \"copied\"},"
      "  {\"op\": \"trace\", \"key\": \"t\", \"values\": [\"traced\"]},"
      "  {\"op\": \"fill\", \"target\": \"traced\", \"value\": 1}]}}}";
  // x, whole, part, unused, c, inplace, filled, copied, traced, source
  static const bool kWant[] = {false, true,  false, false, true,
                               false, true,  true,  false, false};
  hrt_vm_module_t* module = NULL;
  CHECK_OK(hrt_program_module_create(json, strlen(json), NULL, &module));
  const hrt_function_t* f = &((hrt_program_module_t*)module)->functions[0];
  bool same = f->value_count == sizeof(kWant);
  for (uint32_t v = 0; same && v < f->value_count; ++v) {
    if (f->overwritten[v] != kWant[v]) {
      fprintf(stderr, "value '%s': overwritten %d\n", f->types[v].name,
              f->overwritten[v]);
      same = false;
    }
  }
  hrt_vm_module_release(module);
  CHECK(same);
}

// A view of `count` f32 on `device` holding `value` everywhere.
static hrt_hal_buffer_view_t* filled_view(hrt_hal_device_t* device,
                                          int64_t count, float value) {
  float data[16];
  for (int i = 0; i < 16; ++i) data[i] = value;
  hrt_hal_buffer_t* buffer = NULL;
  hrt_hal_buffer_view_t* view = NULL;
  hrt_status_t status = hrt_hal_device_allocate_buffer(
      device, (uint64_t)count * 4, data, &buffer);
  if (status == HRT_OK) {
    status = hrt_hal_buffer_view_create(buffer, 0, HRT_HAL_ELEMENT_TYPE_F32, 1,
                                        &count, &view);
  }
  hrt_hal_buffer_release(buffer);
  hrt_status_free(status);
  return view;
}

static void outputs_are_written_into_the_callers_views(void) {
  const char* json =
      "{\"format\": \"halrt.module/1\", \"name\": \"m\", "
      "\"executables\": {\"k\": {\"local\": {\"builtin\": true}}}, "
      "\"functions\": {\"f\": {"
      " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4]}],"
      " \"outputs\": ["
      "  {\"name\": \"whole\", \"dtype\": \"f32\", \"shape\": [4]},"
      "  {\"name\": \"part\", \"dtype\": \"f32\", \"shape\": [4]},"
      "  {\"name\": \"fresh\", \"dtype\": \"f32\", \"shape\": [4]}],"
      " \"body\": ["
      "  {\"op\": \"dispatch\", \"kernel\": \"k.add_f32\", \"workgroups\": [1],"
      "   \"bindings\": [\"x\", \"x\", \"whole\"], \"constants\": [4]},"
      "  {\"op\": \"dispatch\", \"kernel\": \"k.add_f32\", \"workgroups\": [1],"
      "   \"bindings\": [\"x\", \"x\", \"part\"], \"constants\": [3]},"
      "  {\"op\": \"fill\", \"target\": \"fresh\", \"value\": 5}]}}}";
  fixture_t f;
  CHECK_OK(fixture_create("local-task?workers=2", json, NULL, NULL, &f));
  hrt_vm_function_t function;
  CHECK_OK(hrt_vm_context_lookup_function(f.context, "m.f", &function));
  hrt_hal_buffer_view_t* x = filled_view(f.device, 4, 1.0f);
  // whole and part are the caller's (dirty), fresh is not given; a view of
  // the wrong size is not written into.
  hrt_hal_buffer_view_t* given[3] = {filled_view(f.device, 4, 9.0f),
                                     filled_view(f.device, 4, 9.0f), NULL};
  hrt_hal_buffer_view_t* small = filled_view(f.device, 2, 9.0f);
  CHECK(x && given[0] && given[1] && small);
  for (int run = 0; run < 2; ++run) {
    given[2] = run == 0 ? NULL : small;
    result_t result = {.output_count = 0};
    hrt_notification_init(&result.done);
    CHECK_OK(hrt_vm_invoke_in_place(
        f.context, &function, &x, 1, given, NULL,
        (hrt_vm_invocation_done_t){on_done, &result}, NULL));
    CHECK_OK(wait_result(&result));
    CHECK_EQ_INT(result.output_count, 3);
    CHECK(result.outputs[0] == given[0]);
    CHECK(result.outputs[1] == given[1]);
    CHECK(result.outputs[2] != small);
    const float* whole = hrt_hal_buffer_view_buffer(given[0])->host_ptr;
    const float* part = hrt_hal_buffer_view_buffer(given[1])->host_ptr;
    const float* fresh =
        hrt_hal_buffer_view_buffer(result.outputs[2])->host_ptr;
    for (int i = 0; i < 4; ++i) {
      CHECK(whole[i] == 2.0f);
      CHECK(part[i] == (i < 3 ? 2.0f : 0.0f));  // zeroed, as a new buffer is
      CHECK(fresh[i] == 5.0f);
    }
    for (int i = 0; i < 3; ++i) hrt_hal_buffer_view_release(result.outputs[i]);
    // Dirty again for the second run.
    float* dirty = hrt_hal_buffer_view_buffer(given[1])->host_ptr;
    for (int i = 0; i < 4; ++i) dirty[i] = 9.0f;
  }
  hrt_hal_buffer_view_release(small);
  hrt_hal_buffer_view_release(given[0]);
  hrt_hal_buffer_view_release(given[1]);
  hrt_hal_buffer_view_release(x);
  fixture_release(&f);
}

static void nonfinite_guard_rejects_naming_key_and_index(void) {
  const char* json =
      "{\"format\": \"halrt.module/1\", \"name\": \"m\","
      " \"executables\": {\"k\": {\"local\": {\"builtin\": true}}},"
      " \"functions\": {\"f\": {"
      "  \"inputs\": [{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [4]}],"
      "  \"outputs\": [{\"name\": \"q\", \"dtype\": \"f32\", \"shape\": [4]}],"
      "  \"body\": [{\"op\": \"dispatch\", \"kernel\": \"k.div_f32\","
      "   \"workgroups\": [1], \"bindings\": [\"a\", \"a\", \"q\"],"
      "   \"constants\": [4]},"
      "   {\"op\": \"trace\", \"key\": \"ratio\", \"values\": [\"q\"]}]}}}";
  recorder_t recorder;
  recorder_init(&recorder);
  hrt_debug_sink_t sink = recorder_sink(&recorder);
  fixture_t f;
  hrt_hal_module_options_t options = {.reject_nonfinite = true};
  CHECK_OK(fixture_create("local-sync", json, &sink, &options, &f));
  hrt_vm_function_t function;
  CHECK_OK(hrt_vm_context_lookup_function(f.context, "m.f", &function));
  for (int run = 0; run < 2; ++run) {
    float a[4] = {1, 2, run ? 3.0f : 0.0f, 4};  // 0/0 is NaN at index 2
    hrt_hal_buffer_t* buffer = NULL;
    int64_t shape[1] = {4};
    hrt_hal_buffer_view_t* input = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(f.device, 16, a, &buffer));
    CHECK_OK(hrt_hal_buffer_view_create(buffer, 0, HRT_HAL_ELEMENT_TYPE_F32, 1,
                                        shape, &input));
    hrt_hal_buffer_release(buffer);
    result_t result = {.output_count = 0};
    hrt_notification_init(&result.done);
    CHECK_OK(hrt_vm_invoke_async(f.context, &function, &input, 1, NULL,
                                 (hrt_vm_invocation_done_t){on_done, &result},
                                 NULL));
    hrt_hal_buffer_view_release(input);
    hrt_status_t status = wait_result(&result);
    if (run == 0) {
      CHECK_STATUS(status, HRT_STATUS_ABORTED,
                   "trace 'ratio': tensor 'q' holds a non-finite value at "
                   "index 2");
    } else {
      CHECK_OK(status);
      hrt_hal_buffer_view_release(result.outputs[0]);
    }
  }
  CHECK_EQ_INT(recorder.count, 1);  // the sink saw only the finite trace
  fixture_release(&f);
  CHECK_EQ_INT(recorder_wait_released(&recorder), 1);
}

TEST_MAIN(TEST_CASE(program_runs_and_traces_in_order),
          TEST_CASE(trace_dispatches_traces_every_dispatch_output),
          TEST_CASE(sink_error_fails_only_its_invocation),
          TEST_CASE(sink_released_once_from_the_completion_thread),
          TEST_CASE(failed_hal_module_creation_does_not_release_the_sink),
          TEST_CASE(contexts_check_names_and_inputs),
          TEST_CASE(bad_modules_name_the_field),
          TEST_CASE(cuda_only_executables_fail_to_link_on_cpu),
          TEST_CASE(fills_store_values_in_each_dtype),
          TEST_CASE(values_written_whole_by_their_first_op_skip_the_zero_fill),
          TEST_CASE(outputs_are_written_into_the_callers_views),
          TEST_CASE(nonfinite_guard_rejects_naming_key_and_index),
          TEST_CASE(profiled_dispatches_report_timings),
          TEST_CASE(dispatch_trace_filters_pick_keys_functions_and_invocations),
          TEST_CASE(invocations_are_numbered_per_context),
          TEST_CASE(every_object_is_destroyed))
