#include "modules/hal_module.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "modules/sinks/tensor_stats.h"

typedef struct hrt_hal_module_s {
  hrt_vm_module_t base;
  hrt_hal_device_t* device;          // retained
  hrt_debug_sink_t sink;             // released exactly once, in destroy
  hrt_recorder_sink_t* recorder;     // owned by `sink`, or NULL
  hrt_hal_module_options_t options;  // strings point into `arena`
  hrt_arena_t arena;
} hrt_hal_module_t;

static void hrt_hal_module_free(hrt_hal_module_t* module) {
  hrt_arena_deinit(&module->arena);
  free(module);
}

static hrt_status_t hrt_filters_oom(void) {
  return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                         "out of host memory copying trace filters");
}

// Copies the function names of `options` into the module.
static hrt_status_t hrt_hal_module_copy_filters(
    hrt_hal_module_t* module, const hrt_hal_module_options_t* options) {
  hrt_hal_module_options_t* copy = &module->options;
  if (options->trace_function_count) {
    const char** names = hrt_arena_alloc(
        &module->arena, options->trace_function_count * sizeof(char*));
    if (!names) return hrt_filters_oom();
    for (uint32_t i = 0; i < options->trace_function_count; ++i) {
      const char* name = options->trace_functions[i];
      names[i] = hrt_arena_strndup(&module->arena, name, strlen(name));
      if (!names[i]) return hrt_filters_oom();
    }
    copy->trace_functions = names;
  }
  return HRT_OK;
}

static void hrt_hal_module_destroy(hrt_vm_module_t* base) {
  hrt_hal_module_t* module = (hrt_hal_module_t*)base;
  module->sink.release.fn(module->sink.release.user_data);
  hrt_hal_device_release(module->device);
  hrt_vm_module_deinitialize(base);
  hrt_hal_module_free(module);
}

// The HAL module keeps nothing per context: programs reach the device and
// sink through the module itself.
static hrt_status_t hrt_hal_module_create_state(hrt_vm_module_t* module,
                                                hrt_vm_context_t* context,
                                                void** out_state) {
  (void)context;
  *out_state = module;
  return HRT_OK;
}

static void hrt_hal_module_free_state(hrt_vm_module_t* module, void* state) {
  (void)module;
  (void)state;
}

static hrt_status_t hrt_hal_module_begin_call(hrt_vm_module_t* module,
                                              void* state,
                                              const hrt_vm_call_t* call) {
  (void)state;
  (void)call;
  return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                         "module '%s' exports no functions", module->name);
}

static const hrt_vm_module_vtable_t hrt_hal_module_vtable = {
    .destroy = hrt_hal_module_destroy,
    .create_state = hrt_hal_module_create_state,
    .free_state = hrt_hal_module_free_state,
    .begin_call = hrt_hal_module_begin_call,
};

hrt_status_t hrt_hal_module_create(hrt_hal_device_t* device,
                                   const hrt_debug_sink_t* sink,
                                   const hrt_hal_module_options_t* options,
                                   hrt_vm_module_t** out_module) {
  if (sink && (!sink->buffer_view_trace.fn || !sink->release.fn)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "a debug sink needs buffer_view_trace and release "
                           "callbacks");
  }
  hrt_hal_module_t* module = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*module), "hal module", (void**)&module));
  if (options) {
    module->options = *options;
    module->options.trace_functions = NULL;
    hrt_status_t status = hrt_hal_module_copy_filters(module, options);
    if (status != HRT_OK) {
      hrt_hal_module_free(module);
      return status;
    }
  }
  module->sink = sink ? *sink : hrt_debug_sink_null();
  const hrt_recorder_limits_t* limits = &module->options.flight_recorder;
  if (limits->traces || limits->bytes) {
    hrt_status_t status =
        sink ? hrt_recorder_sink_create(sink, limits, &module->recorder,
                                        &module->sink)
             : hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "a flight recorder needs a debug sink");
    if (status != HRT_OK) {
      hrt_hal_module_free(module);
      return status;
    }
  }
  module->device = device;
  hrt_hal_device_retain(device);
  hrt_vm_module_initialize(&hrt_hal_module_vtable, "hal", 0, NULL,
                           &module->base);
  *out_module = &module->base;
  return HRT_OK;
}

hrt_status_t hrt_hal_module_import(hrt_vm_context_t* context,
                                   const hrt_vm_module_t* importer,
                                   hrt_vm_module_t** out_hal) {
  void* state = NULL;
  HRT_RETURN_IF_ERROR(hrt_status_annotate(
      hrt_vm_context_find_module(context, "hal", out_hal, &state),
      "module '%s' imports 'hal'", importer->name));
  if (!hrt_hal_module_isa(*out_hal)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "module '%s' imports 'hal', but the module named "
                           "'hal' is not a HAL module",
                           importer->name);
  }
  return HRT_OK;
}

bool hrt_hal_module_isa(const hrt_vm_module_t* module) {
  return module->vtable == &hrt_hal_module_vtable;
}

hrt_hal_device_t* hrt_hal_module_device(const hrt_vm_module_t* hal_module) {
  return ((const hrt_hal_module_t*)hal_module)->device;
}

const hrt_hal_module_options_t* hrt_hal_module_options(
    const hrt_vm_module_t* hal_module) {
  return &((const hrt_hal_module_t*)hal_module)->options;
}

// The nonFinite check of one traced tensor: ABORTED naming it when it holds
// NaN or Inf (from its summary's counts, or its data's first bad index).
static hrt_status_t hrt_hal_module_check_finite(
    const char* key, const hrt_trace_tensor_t* tensor) {
  const hrt_hal_tensor_summary_t* summary = tensor->summary;
  if (summary) {
    if (summary->nan_count + summary->pos_inf_count + summary->neg_inf_count ==
        0) {
      return HRT_OK;
    }
    return hrt_status_make(
        HRT_STATUS_ABORTED,
        "trace '%s': tensor '%s' holds non-finite values (%llu NaN, "
        "%llu +Inf, %llu -Inf of %llu elements)",
        key, tensor->name, (unsigned long long)summary->nan_count,
        (unsigned long long)summary->pos_inf_count,
        (unsigned long long)summary->neg_inf_count,
        (unsigned long long)summary->count);
  }
  uint64_t index = 0;
  if (!hrt_tensor_find_nonfinite(tensor, &index)) return HRT_OK;
  return hrt_status_make(HRT_STATUS_ABORTED,
                         "trace '%s': tensor '%s' holds a non-finite value "
                         "at index %llu",
                         key, tensor->name, (unsigned long long)index);
}

hrt_status_t hrt_hal_module_trace(const hrt_vm_module_t* hal_module,
                                  const char* key, const hrt_trace_info_t* info,
                                  uint32_t count,
                                  const hrt_trace_tensor_t* tensors) {
  const hrt_hal_module_t* module = (const hrt_hal_module_t*)hal_module;
  for (uint32_t i = 0; module->options.reject_nonfinite && i < count; ++i) {
    hrt_status_t status = hrt_hal_module_check_finite(key, &tensors[i]);
    if (status == HRT_OK) continue;
    // The recorder shows the rejected trace last; without memory for it,
    // the rejection still says what was wrong.
    if (module->recorder != NULL) {
      hrt_status_free(hrt_recorder_sink_record(module->recorder, key, info,
                                               count, tensors));
    }
    return status;
  }
  return module->sink.buffer_view_trace.fn(
      module->sink.buffer_view_trace.user_data, key, info, count, tensors);
}

hrt_recorder_sink_t* hrt_hal_module_recorder(
    const hrt_vm_module_t* hal_module) {
  return ((const hrt_hal_module_t*)hal_module)->recorder;
}

void hrt_hal_module_invocation_failed(const hrt_vm_module_t* hal_module,
                                      const hrt_invocation_failure_t* failure) {
  const hrt_hal_module_t* module = (const hrt_hal_module_t*)hal_module;
  if (module->sink.invocation_failed.fn) {
    module->sink.invocation_failed.fn(module->sink.invocation_failed.user_data,
                                      failure);
  }
}

void hrt_hal_module_flush(const hrt_vm_module_t* hal_module) {
  const hrt_hal_module_t* module = (const hrt_hal_module_t*)hal_module;
  if (module->sink.flush.fn) {
    module->sink.flush.fn(module->sink.flush.user_data);
  }
}

void hrt_hal_module_dispatch_timing(const hrt_vm_module_t* hal_module,
                                    const hrt_dispatch_timing_t* events,
                                    uint32_t count) {
  const hrt_hal_module_t* module = (const hrt_hal_module_t*)hal_module;
  if (module->sink.dispatch_timing.fn) {
    module->sink.dispatch_timing.fn(module->sink.dispatch_timing.user_data,
                                    events, count);
  }
}

bool hrt_hal_module_traces_dispatch(const hrt_vm_module_t* hal_module,
                                    const char* function, const char* key) {
  const hrt_hal_module_t* module = (const hrt_hal_module_t*)hal_module;
  const hrt_hal_module_options_t* options = &module->options;
  if (!options->trace_dispatches) return false;
  if (options->trace_function_count) {
    bool listed = false;
    for (uint32_t i = 0; i < options->trace_function_count && !listed; ++i) {
      listed = strcmp(options->trace_functions[i], function) == 0;
    }
    if (!listed) return false;
  }
  return !options->trace_keys.fn ||
         options->trace_keys.fn(options->trace_keys.user_data, key);
}
