// Threaded stress of the runtime, bounded (about a second optimised): several
// threads invoke traced programs on shared devices, and the last references
// to devices, modules and sinks drop while their work is in flight. Written
// for the sanitizer builds above all (make run SANITIZE=thread finds races
// between submitting threads, queue threads, workers and completion
// threads; SANITIZE=1 finds use after free in teardown); the optimised run
// checks the same counts and values.
#include <stdatomic.h>

#include "base/threads.h"
#include "hal/buffer_view.h"
#include "modules/hal_module.h"
#include "modules/program/program_module.h"
#include "test.h"
#include "vm/context.h"
#include "vm/instance.h"

// y = relu(x + b) over 256 elements, each dispatch spread over 4
// workgroups. With every element of x and b 1, every traced and output
// element is 2.
static const char kProgram[] =
    "{\"format\": \"halrt.module/1\", \"name\": \"p\", \"executables\": "
    "{\"k\": {\"local\": {\"builtin\": true}}}, \"functions\": {\"main\": {"
    "\"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [256]}, "
    "{\"name\": \"b\", \"dtype\": \"f32\", \"shape\": [256]}], "
    "\"outputs\": [{\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [256]}], "
    "\"locals\": [{\"name\": \"s\", \"dtype\": \"f32\", \"shape\": [256]}], "
    "\"body\": [{\"op\": \"dispatch\", \"kernel\": \"k.add_f32\", "
    "\"workgroups\": [4], \"bindings\": [\"x\", \"b\", \"s\"], \"constants\": [256]}, "
    "{\"op\": \"trace\", \"key\": \"s\", \"values\": [\"s\"]}, "
    "{\"op\": \"dispatch\", \"kernel\": \"k.relu_f32\", \"workgroups\": [4], "
    "\"bindings\": [\"s\", \"y\"], \"constants\": [256]}, "
    "{\"op\": \"trace\", \"key\": \"y\", \"values\": [\"y\"]}]}}}";
// Two trace ops and, with trace_dispatches, one trace per dispatch.
enum { TRACES_PER_CALL = 4, VALUES = 256 };
static const float kExpected = 2.0f;

// Counts traces and checks every traced element (reading the snapshot is
// what lets a race detector see the copy against the sink).
typedef struct {
  atomic_int traces;
  atomic_int wrong_values;
  atomic_int releases;
} counting_sink_t;

static int wrong_elements(const float* data, uint64_t count) {
  int wrong = 0;
  for (uint64_t i = 0; i < count; ++i) wrong += data[i] != kExpected;
  return wrong;
}

static hrt_status_t count_trace(void* user_data, const char* key,
                                const hrt_trace_info_t* info, uint32_t count,
                                const hrt_trace_tensor_t* tensors) {
  (void)key;
  (void)info;
  counting_sink_t* sink = user_data;
  for (uint32_t i = 0; i < count; ++i) {
    atomic_fetch_add(&sink->wrong_values,
                     wrong_elements(tensors[i].data, tensors[i].byte_length / 4));
  }
  atomic_fetch_add(&sink->traces, 1);
  return HRT_OK;
}

static void count_release(void* user_data) {
  counting_sink_t* sink = user_data;
  atomic_fetch_add(&sink->releases, 1);
}

// Waits for the sink's release (or ends the binary: the sink is freed
// after); returns the release count.
static int sink_wait_released(counting_sink_t* sink) {
  POLL_OR_EXIT(atomic_load(&sink->releases) != 0, "the sink's release");
  return atomic_load(&sink->releases);
}

// Instance, device, HAL module with a counting sink, program, context.
typedef struct {
  counting_sink_t sink;
  hrt_vm_instance_t* instance;
  hrt_hal_device_t* device;
  hrt_vm_module_t* hal;
  hrt_vm_module_t* program;
  hrt_vm_context_t* context;
  hrt_vm_function_t function;
  hrt_hal_buffer_view_t* shared_b;  // b: ones, shared by every call
  atomic_int calls;                // invocations started on this setup
} setup_t;

// A [VALUES] f32 view of ones.
static hrt_status_t make_ones(hrt_hal_device_t* device,
                              hrt_hal_buffer_view_t** out) {
  float data[VALUES];
  for (int i = 0; i < VALUES; ++i) data[i] = 1.0f;
  hrt_hal_buffer_t* buffer = NULL;
  int64_t shape[1] = {VALUES};
  HRT_RETURN_IF_ERROR(
      hrt_hal_device_allocate_buffer(device, sizeof(data), data, &buffer));
  hrt_status_t status = hrt_hal_buffer_view_create(
      buffer, 0, HRT_HAL_ELEMENT_TYPE_F32, 1, shape, out);
  hrt_hal_buffer_release(buffer);
  return status;
}

// On error the caller still calls setup_release (which skips what is NULL).
static hrt_status_t setup_create(const char* uri, setup_t* out) {
  memset(out, 0, sizeof(*out));
  hrt_debug_sink_t sink = {
      .buffer_view_trace = {count_trace, &out->sink},
      .release = {count_release, &out->sink},
  };
  hrt_hal_module_options_t options = {.trace_dispatches = true};
  HRT_RETURN_IF_ERROR(hrt_vm_instance_create(&out->instance));
  HRT_RETURN_IF_ERROR(
      hrt_vm_instance_create_device(out->instance, uri, &out->device));
  HRT_RETURN_IF_ERROR(
      hrt_hal_module_create(out->device, &sink, &options, &out->hal));
  HRT_RETURN_IF_ERROR(hrt_program_module_create(kProgram, strlen(kProgram),
                                                NULL, &out->program));
  hrt_vm_module_t* modules[2] = {out->hal, out->program};
  HRT_RETURN_IF_ERROR(
      hrt_vm_context_create(out->instance, modules, 2, &out->context));
  HRT_RETURN_IF_ERROR(
      hrt_vm_context_lookup_function(out->context, "p.main", &out->function));
  return make_ones(out->device, &out->shared_b);
}

// Drops the setup's own references; work in flight keeps what it needs.
static void setup_release(setup_t* setup) {
  if (setup->shared_b) hrt_hal_buffer_view_release(setup->shared_b);
  if (setup->context) hrt_vm_context_release(setup->context);
  if (setup->program) hrt_vm_module_release(setup->program);
  if (setup->hal) hrt_vm_module_release(setup->hal);
  if (setup->device) hrt_hal_device_release(setup->device);
  if (setup->instance) hrt_vm_instance_release(setup->instance);
}

// A submitting thread's invocations: how many are in flight, and what their
// completions found. `done` runs on completion threads.
typedef struct {
  hrt_mutex_t mutex;
  hrt_cond_t cond;
  int in_flight;
  int completed;
  int failed;
  int wrong_values;
} calls_t;

static void calls_init(calls_t* calls) {
  memset(calls, 0, sizeof(*calls));
  hrt_mutex_init(&calls->mutex);
  hrt_cond_init(&calls->cond);
}

static void calls_deinit(calls_t* calls) {
  hrt_cond_deinit(&calls->cond);
  hrt_mutex_deinit(&calls->mutex);
}

static void call_done(void* user_data, hrt_status_t status,
                      hrt_hal_buffer_view_t* const* outputs,
                      uint32_t output_count) {
  calls_t* calls = user_data;
  int wrong = 0;
  if (status == HRT_OK && output_count == 1) {
    const float* y = hrt_hal_buffer_view_buffer(outputs[0])->host_ptr;
    wrong = y ? wrong_elements(y, VALUES) : VALUES;
  }
  for (uint32_t i = 0; i < output_count; ++i) {
    hrt_hal_buffer_view_release(outputs[i]);
  }
  hrt_mutex_lock(&calls->mutex);
  calls->failed += status != HRT_OK || output_count != 1;
  calls->wrong_values += wrong;
  calls->completed += 1;
  calls->in_flight -= 1;
  hrt_cond_broadcast(&calls->cond);
  hrt_mutex_unlock(&calls->mutex);
  hrt_status_free(status);
}

// Waits until at most `limit` calls are in flight, or ends the binary (the
// calls' completions write into `calls`).
static void calls_wait_at_most(calls_t* calls, int limit) {
  const int64_t deadline = hrt_time_now_ns() + TEST_PATIENCE_NS;
  hrt_mutex_lock(&calls->mutex);
  while (calls->in_flight > limit && hrt_time_now_ns() < deadline) {
    hrt_cond_wait_until(&calls->cond, &calls->mutex, deadline);
  }
  const bool ok = calls->in_flight <= limit;
  hrt_mutex_unlock(&calls->mutex);
  if (!ok) test_gave_up_waiting(__FILE__, __LINE__, "the calls' completions");
}

// Of two statuses (both owned), keeps the first failure and frees the other.
static hrt_status_t first_failure(hrt_status_t first, hrt_status_t next) {
  if (first == HRT_OK) return next;
  hrt_status_free(next);
  return first;
}

// Starts one invocation of `setup` with a fresh x of ones. The caller holds
// references to the setup's context and device (borrowed here).
static hrt_status_t start_call(setup_t* setup, calls_t* calls) {
  hrt_hal_buffer_view_t* inputs[2] = {NULL, setup->shared_b};
  HRT_RETURN_IF_ERROR(make_ones(setup->device, &inputs[0]));
  hrt_mutex_lock(&calls->mutex);
  calls->in_flight += 1;
  hrt_mutex_unlock(&calls->mutex);
  atomic_fetch_add(&setup->calls, 1);
  hrt_status_t status =
      hrt_vm_invoke_async(setup->context, &setup->function, inputs, 2, NULL,
                          (hrt_vm_invocation_done_t){call_done, calls}, NULL);
  if (status != HRT_OK) {
    hrt_mutex_lock(&calls->mutex);
    calls->in_flight -= 1;
    hrt_mutex_unlock(&calls->mutex);
  }
  hrt_hal_buffer_view_release(inputs[0]);
  return status;
}

//===----------------------------------------------------------------------===//
// Threads sharing devices
//===----------------------------------------------------------------------===//

enum { SHARED_SETUPS = 3, SHARED_THREADS = 4, CALLS_PER_THREAD = 120,
       MAX_IN_FLIGHT = 8 };

typedef struct {
  setup_t* setups;  // SHARED_SETUPS, shared by every thread
  int index;
  calls_t calls;
  hrt_status_t status;  // the first failure to start a call (owned)
} submitter_t;

static void* submit_to_shared_setups(void* arg) {
  submitter_t* submitter = arg;
  for (int i = 0; i < CALLS_PER_THREAD && submitter->status == HRT_OK; ++i) {
    calls_wait_at_most(&submitter->calls, MAX_IN_FLIGHT - 1);
    setup_t* setup = &submitter->setups[(submitter->index + i) % SHARED_SETUPS];
    submitter->status = start_call(setup, &submitter->calls);
  }
  calls_wait_at_most(&submitter->calls, 0);
  return NULL;
}

static void threads_invoke_traced_programs_on_shared_devices(void) {
  static const char* const uris[SHARED_SETUPS] = {
      "local-task?workers=2", "local-task?workers=3", "local-sync"};
  setup_t setups[SHARED_SETUPS];
  for (int s = 0; s < SHARED_SETUPS; ++s) {
    hrt_status_t status = setup_create(uris[s], &setups[s]);
    if (status != HRT_OK) setup_release(&setups[s]);
    CHECK_OK(status);
  }
  submitter_t submitters[SHARED_THREADS];
  hrt_thread_t threads[SHARED_THREADS];
  for (int t = 0; t < SHARED_THREADS; ++t) {
    submitters[t] = (submitter_t){.setups = setups, .index = t};
    calls_init(&submitters[t].calls);
    CHECK_OK(hrt_thread_create("submitter", submit_to_shared_setups,
                               &submitters[t], &threads[t]));
  }
  int completed = 0, failed = 0, wrong = 0;
  hrt_status_t first_error = HRT_OK;
  for (int t = 0; t < SHARED_THREADS; ++t) {
    hrt_thread_join(&threads[t]);
    completed += submitters[t].calls.completed;
    failed += submitters[t].calls.failed;
    wrong += submitters[t].calls.wrong_values;
    calls_deinit(&submitters[t].calls);
    first_error = first_failure(first_error, submitters[t].status);
  }
  CHECK_OK(first_error);
  CHECK_EQ_INT(completed, SHARED_THREADS * CALLS_PER_THREAD);
  CHECK_EQ_INT(failed, 0);
  CHECK_EQ_INT(wrong, 0);
  int traces = 0;
  for (int s = 0; s < SHARED_SETUPS; ++s) {
    CHECK_EQ_INT(atomic_load(&setups[s].sink.traces),
                 TRACES_PER_CALL * atomic_load(&setups[s].calls));
    CHECK_EQ_INT(atomic_load(&setups[s].sink.wrong_values), 0);
    traces += atomic_load(&setups[s].sink.traces);
    setup_release(&setups[s]);
  }
  CHECK_EQ_INT(traces, TRACES_PER_CALL * SHARED_THREADS * CALLS_PER_THREAD);
  for (int s = 0; s < SHARED_SETUPS; ++s) {
    CHECK_EQ_INT(sink_wait_released(&setups[s].sink), 1);
  }
  every_object_is_destroyed();
}

//===----------------------------------------------------------------------===//
// Last references dropped while work is in flight
//===----------------------------------------------------------------------===//

enum { TEARDOWN_THREADS = 3, TEARDOWN_ROUNDS = 12, TEARDOWN_CALLS = 16 };

typedef struct {
  setup_t* setup;
  calls_t* calls;
  hrt_status_t status;  // owned
} teardown_submitter_t;

// Holds its own references to the setup's context and device (taken by the
// creating thread) and drops them as soon as its calls are started.
static void* submit_then_let_go(void* arg) {
  teardown_submitter_t* submitter = arg;
  for (int i = 0; i < TEARDOWN_CALLS && submitter->status == HRT_OK; ++i) {
    submitter->status = start_call(submitter->setup, submitter->calls);
  }
  hrt_vm_context_release(submitter->setup->context);
  hrt_hal_device_release(submitter->setup->device);
  return NULL;
}

// One round: a setup whose creator lets go at once while TEARDOWN_THREADS
// threads start calls on it and let go in turn; the last reference to the
// device, the HAL module (and so the sink's release) drops on a submitting
// thread or on a completion thread, whichever is last.
static void teardown_round(const char* uri) {
  setup_t* setup = calloc(1, sizeof(*setup));
  CHECK(setup != NULL);
  hrt_status_t status = setup_create(uri, setup);
  if (status != HRT_OK) setup_release(setup);
  CHECK_OK(status);
  calls_t calls;
  calls_init(&calls);
  teardown_submitter_t submitters[TEARDOWN_THREADS];
  hrt_thread_t threads[TEARDOWN_THREADS];
  // b stays with the setup: the threads borrow it until joined.
  for (int t = 0; t < TEARDOWN_THREADS; ++t) {
    submitters[t] = (teardown_submitter_t){setup, &calls, HRT_OK};
    hrt_vm_context_retain(setup->context);
    hrt_hal_device_retain(setup->device);
    CHECK_OK(hrt_thread_create("teardown", submit_then_let_go, &submitters[t],
                               &threads[t]));
  }
  hrt_vm_context_release(setup->context);
  hrt_vm_module_release(setup->program);
  hrt_vm_module_release(setup->hal);
  hrt_vm_instance_release(setup->instance);
  hrt_hal_device_release(setup->device);
  hrt_status_t first_error = HRT_OK;
  for (int t = 0; t < TEARDOWN_THREADS; ++t) {
    hrt_thread_join(&threads[t]);
    first_error = first_failure(first_error, submitters[t].status);
  }
  hrt_hal_buffer_view_release(setup->shared_b);
  calls_wait_at_most(&calls, 0);
  int completed = calls.completed, failed = calls.failed,
      wrong = calls.wrong_values;
  calls_deinit(&calls);
  int releases = sink_wait_released(&setup->sink);
  int traces = atomic_load(&setup->sink.traces);
  int sink_wrong = atomic_load(&setup->sink.wrong_values);
  free(setup);
  CHECK_OK(first_error);
  CHECK_EQ_INT(completed, TEARDOWN_THREADS * TEARDOWN_CALLS);
  CHECK_EQ_INT(failed, 0);
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(releases, 1);
  CHECK_EQ_INT(traces, TRACES_PER_CALL * TEARDOWN_THREADS * TEARDOWN_CALLS);
  CHECK_EQ_INT(sink_wrong, 0);
}

static void devices_released_with_traced_calls_in_flight(void) {
  static const char* const uris[] = {"local-task?workers=2", "local-sync",
                                     "local-task?workers=3"};
  for (int round = 0; round < TEARDOWN_ROUNDS && !hrt_test_failed_; ++round) {
    teardown_round(uris[round % 3]);
  }
  if (!hrt_test_failed_) every_object_is_destroyed();
}

TEST_MAIN(TEST_CASE(threads_invoke_traced_programs_on_shared_devices),
          TEST_CASE(devices_released_with_traced_calls_in_flight))
