#include "napi/js_recorder.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "modules/hal_module.h"
#include "napi/js_args.h"
#include "napi/js_common.h"
#include "napi/js_hal_module.h"

// One dump in flight.
typedef struct hrt_js_dump_s {
  hrt_js_message_t message;   // first: the channel hands this back
  hrt_js_channel_t* channel;  // retained until delivered
  hrt_js_sink_t* sink;        // retained, or NULL
  hrt_vm_module_t* module;    // retained until the completion
  napi_deferred deferred;     // JS thread only
  uint64_t cause;             // the recorded traces' info.invocation
  uint32_t count;             // written by the completion
  hrt_status_t status;        // written by the completion
} hrt_js_dump_t;

// Dumps are named apart from invocations, whose ids count up from 1: theirs
// count down from 2^53 (ids travel to JavaScript as doubles, exact below
// 2^53), so that what a sink callback throws for a recorded trace is found
// by the dump that delivered it.
static atomic_uint_fast64_t hrt_js_last_dump;

static void hrt_js_dump_free(hrt_js_dump_t* dump) {
  if (dump->module != NULL) hrt_vm_module_release(dump->module);
  hrt_status_free(dump->status);
  if (dump->sink != NULL) hrt_js_sink_release(dump->sink);
  hrt_js_channel_release(dump->channel);
  free(dump);
}

// JS thread (env != NULL), or teardown (env == NULL: free only).
static void hrt_js_dump_deliver(napi_env env, hrt_js_channel_t* channel,
                                hrt_js_message_t* message) {
  (void)channel;
  hrt_js_dump_t* dump = (hrt_js_dump_t*)message;
  if (env == NULL) {
    hrt_js_dump_free(dump);
    return;
  }
  napi_value thrown =
      dump->sink ? hrt_js_sink_take_error(env, dump->sink, dump->cause) : NULL;
  if (thrown != NULL) {
    napi_value error = hrt_js_error_with_cause(
        env,
        hrt_status_make(HRT_STATUS_ABORTED,
                        "halModule.flightRecorder.dump: the debug sink threw "
                        "while handling a recorded trace"),
        thrown);
    napi_reject_deferred(env, dump->deferred, error ? error : thrown);
  } else if (dump->status != HRT_OK) {
    hrt_status_t status = dump->status;
    dump->status = HRT_OK;
    hrt_js_reject_status(
        env, dump->deferred,
        hrt_status_annotate(status, "halModule.flightRecorder.dump"));
  } else {
    napi_value count = NULL;
    if (napi_create_uint32(env, dump->count, &count) == napi_ok) {
      napi_resolve_deferred(env, dump->deferred, count);
    } else {
      napi_reject_deferred(env, dump->deferred, hrt_js_take_pending(env));
    }
  }
  if (dump->sink != NULL) {
    hrt_js_sink_end_invocation(env, dump->sink);
  } else {
    hrt_js_channel_end_work(env, dump->channel);
  }
  hrt_js_dump_free(dump);
}

// Device completion thread (a libuv worker thread for a lost device, see
// hrt_js_dump_off_queue). Never calls N-API. The held traces are host
// copies: they are delivered whatever the device says.
static void hrt_js_dump_complete(void* user_data, hrt_status_t status) {
  hrt_js_dump_t* dump = user_data;
  hrt_status_free(status);
  dump->status = hrt_recorder_sink_deliver(
      hrt_hal_module_recorder(dump->module), dump->cause, &dump->count);
  // Post before dropping the module: its last reference (close() meanwhile)
  // releases the sink, which finishes the channel and refuses later posts.
  // Once posted, `dump` belongs to the JS thread.
  hrt_vm_module_t* module = dump->module;
  dump->module = NULL;
  if (!hrt_js_channel_post(dump->channel, &dump->message)) {
    hrt_js_dump_free(dump);
  }
  hrt_vm_module_release(module);
}

// A dump the device's queue refuses because the device is lost: it runs on
// a libuv worker thread instead, which may block on the sink as the
// completion thread would (the held traces are host copies).
typedef struct hrt_js_dump_work_s {
  napi_async_work work;
  hrt_js_dump_t* dump;  // handed to hrt_js_dump_complete
} hrt_js_dump_work_t;

static void hrt_js_dump_work_execute(napi_env env, void* data) {
  (void)env;
  hrt_js_dump_work_t* work = data;
  hrt_js_dump_complete(work->dump, HRT_OK);
}

static void hrt_js_dump_work_done(napi_env env, napi_status status,
                                  void* data) {
  (void)status;
  hrt_js_dump_work_t* work = data;
  napi_delete_async_work(env, work->work);
  free(work);
}

// JS thread: queues `dump` on a worker thread; false (nothing queued) when
// that cannot be done.
static bool hrt_js_dump_off_queue(napi_env env, hrt_js_dump_t* dump) {
  hrt_js_dump_work_t* work = calloc(1, sizeof(*work));
  napi_value name = NULL;
  if (work == NULL ||
      napi_create_string_utf8(env, "halrt.flightRecorder.dump",
                              NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_create_async_work(env, NULL, name, hrt_js_dump_work_execute,
                             hrt_js_dump_work_done, work,
                             &work->work) != napi_ok) {
    free(work);
    return false;
  }
  work->dump = dump;
  if (napi_queue_async_work(env, work->work) != napi_ok) {
    napi_delete_async_work(env, work->work);
    free(work);
    return false;
  }
  return true;
}

// The HalModule `this` of a recorder method, pinned for the call.
static bool hrt_js_recorder_this(napi_env env, napi_callback_info info,
                                 const char* method,
                                 hrt_js_module_handle_t** out_handle) {
  napi_value this_arg = NULL;
  hrt_js_wrap_t* wrap = NULL;
  if (!hrt_js_args_get(env, info, 0, NULL, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, this_arg, &hrt_js_hal_module_class, method, NULL,
                         false, &wrap)) {
    return false;
  }
  *out_handle = wrap->handle;
  return true;
}

napi_value hrt_js_recorder_state(napi_env env, napi_callback_info info) {
  static const char* const method = "halModule.flightRecorder";
  hrt_js_module_handle_t* handle = NULL;
  napi_value state = NULL;
  if (!hrt_js_recorder_this(env, info, method, &handle)) return NULL;
  hrt_recorder_sink_t* recorder = hrt_hal_module_recorder(handle->module);
  if (recorder == NULL) {
    HRT_NAPI_CALL(env, napi_get_null(env, &state));
    return state;
  }
  const hrt_recorder_limits_t* limits =
      &hrt_hal_module_options(handle->module)->flight_recorder;
  hrt_recorder_held_t held = hrt_recorder_sink_held(recorder);
  HRT_NAPI_CALL(env, napi_create_object(env, &state));
  bool ok = limits->traces
                ? hrt_js_set_number(env, state, "traces", limits->traces)
                : hrt_js_set_number(env, state, "bytes", (double)limits->bytes);
  ok = ok && hrt_js_set_number(env, state, "heldTraces", held.traces) &&
       hrt_js_set_number(env, state, "heldBytes", (double)held.bytes) &&
       hrt_js_set_number(env, state, "skipped", (double)held.skipped);
  return ok ? state : NULL;
}

napi_value hrt_js_recorder_dump(napi_env env, napi_callback_info info) {
  static const char* const method = "halModule.flightRecorder.dump";
  hrt_js_env_t* state = hrt_js_env_get(env);
  hrt_js_module_handle_t* handle = NULL;
  if (state == NULL || !hrt_js_recorder_this(env, info, method, &handle)) {
    return hrt_js_rejected_with_pending(env);
  }
  if (hrt_hal_module_recorder(handle->module) == NULL) {
    hrt_js_throw(env, HRT_STATUS_FAILED_PRECONDITION,
                 "%s: the HAL module has no flight recorder", method);
    return hrt_js_rejected_with_pending(env);
  }
  hrt_hal_device_t* device = hrt_hal_module_device(handle->module);
  hrt_hal_command_buffer_t* command_buffer = NULL;
  hrt_js_dump_t* dump = NULL;
  hrt_status_t status = hrt_hal_command_buffer_create(device, &command_buffer);
  if (status == HRT_OK) {
    hrt_hal_command_buffer_finalize(command_buffer);
    status = hrt_allocate_zeroed(sizeof(*dump), "a dump", (void**)&dump);
  }
  napi_value promise = NULL;
  if (status == HRT_OK &&
      napi_create_promise(env, &dump->deferred, &promise) != napi_ok) {
    free(dump);
    hrt_hal_command_buffer_release(command_buffer);
    return hrt_js_rejected_with_pending(env);
  }
  if (status != HRT_OK) {
    if (command_buffer != NULL) hrt_hal_command_buffer_release(command_buffer);
    hrt_js_throw_status(env, hrt_status_annotate(status, "%s", method));
    return hrt_js_rejected_with_pending(env);
  }
  dump->message.deliver = hrt_js_dump_deliver;
  dump->message.settles_only = true;
  dump->cause = (1ull << 53) - (atomic_fetch_add(&hrt_js_last_dump, 1) + 1);
  dump->sink = handle->sink;
  if (dump->sink != NULL) hrt_js_sink_retain(dump->sink);
  dump->channel = dump->sink ? hrt_js_sink_channel(dump->sink) : state->channel;
  hrt_js_channel_retain(dump->channel);
  dump->module = handle->module;
  hrt_vm_module_retain(dump->module);
  hrt_hal_submission_t submission = {
      .command_buffer = command_buffer,
      .completion = {hrt_js_dump_complete, dump},
  };
  status = hrt_hal_device_queue_submit(device, &submission);
  hrt_hal_command_buffer_release(command_buffer);
  if (hrt_status_code(status) == HRT_STATUS_DEVICE_LOST &&
      hrt_js_dump_off_queue(env, dump)) {
    hrt_status_free(status);
    status = HRT_OK;
  }
  if (status != HRT_OK) {
    hrt_js_reject_status(env, dump->deferred,
                         hrt_status_annotate(status, "%s", method));
    hrt_js_dump_free(dump);
    return promise;
  }
  if (dump->sink != NULL) {
    hrt_js_sink_begin_invocation(env, dump->sink);
  } else {
    hrt_js_channel_begin_work(env, dump->channel);
  }
  return promise;
}
