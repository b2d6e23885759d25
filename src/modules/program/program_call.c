#include "modules/program/program_call.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/threads.h"
#include "modules/hal_module.h"

// One call in flight: the host context of its submissions, one per segment
// (program_record.h), with the host calls between them.
typedef struct hrt_program_call_s {
  hrt_vm_invocation_done_t done;
  const hrt_program_state_t* state;
  const hrt_function_t* function;
  const hrt_recorded_function_t* recorded;
  uint32_t function_ordinal;
  uint64_t sequence;
  uint64_t invocation;
  void* route;             // the invocation's (hrt_vm_call_t)
  uint32_t segment;        // the one submitted last
  int64_t host_start_ns;   // when the current host call started
  uint32_t slot_count;     // values and extra slots
  uint32_t output_count;
  uint32_t local_count;
  hrt_hal_buffer_view_t** outputs;  // [output_count], owned until done
  // [local_count], owned: locals, extra slots, host call outputs, and a
  // reference to each input's buffer (later segments still use it)
  hrt_hal_buffer_t** locals;
  hrt_hal_buffer_ref_t* bindings;  // [slot_count]
  // Profiled calls: when each call span of the current segment started.
  int64_t* span_starts;  // [recorded->max_span_count], or NULL
} hrt_program_call_t;

// The step after the current segment.
static const hrt_host_step_t* hrt_program_call_step(
    const hrt_program_call_t* call) {
  return call->recorded->segments[call->segment].host_call;
}

// Whether the sink may hold what the current segment reports until the
// call's end: it is the last segment, with no host call after it
// (debug_sink.h).
static bool hrt_program_call_may_hold(const hrt_program_call_t* call) {
  return hrt_program_call_step(call) == NULL;
}

// The health summary of f32 value `value` from chain_health_f32's counts
// (`bytes` of u32 [W][6][3]): the words of `step` summed over the W rows.
static void hrt_counted_health(const hrt_function_t* function, uint32_t value,
                               const uint8_t* counts, uint64_t bytes,
                               uint32_t step, hrt_hal_tensor_summary_t* out) {
  enum { ROW = HRT_BUILTIN_CHAIN_COUNTS * sizeof(uint32_t) };
  hrt_hal_tensor_summary_init(out);
  out->count = function->byte_lengths[value] / sizeof(float);
  for (uint64_t row = 0; row + ROW <= bytes; row += ROW) {
    uint32_t c[3];
    memcpy(c, counts + row + 3 * sizeof(uint32_t) * step, sizeof(c));
    out->nan_count += c[0];
    out->pos_inf_count += c[1];
    out->neg_inf_count += c[2];
  }
  hrt_hal_tensor_summary_finish(out, HRT_HAL_TRACE_HEALTH);
}

hrt_status_t hrt_program_call_trace(void* user_data, void* submission_context,
                                    uint32_t count, const void* const* data,
                                    const uint64_t* lengths,
                                    hrt_hal_buffer_t* const* buffers) {
  const hrt_trace_site_t* site = user_data;
  const hrt_program_call_t* call = submission_context;
  if (site->every > 1 && call->sequence % site->every != 0) return HRT_OK;
  const bool summary = site->mode != HRT_HAL_TRACE_FULL;
  hrt_trace_tensor_t tensors[HRT_HAL_MAX_TRACE_SOURCES];
  hrt_hal_tensor_summary_t counted[HRT_HAL_MAX_TRACE_SOURCES];
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t value = site->values[i];
    const hrt_vm_tensor_type_t* type = &site->function->types[value];
    const void* source = data[i];
    uint64_t length = lengths[i];
    if (site->steps) {
      hrt_counted_health(site->function, value, data[i], lengths[i],
                         site->steps[i], &counted[i]);
      source = &counted[i];
      length = sizeof(counted[i]);
    }
    if (summary && length != sizeof(hrt_hal_tensor_summary_t)) {
      return hrt_status_make(HRT_STATUS_INTERNAL,
                             "trace '%s': the device reported %llu bytes as "
                             "the summary of '%s' (expected %zu)",
                             site->key, (unsigned long long)length,
                             type->name, sizeof(hrt_hal_tensor_summary_t));
    }
    tensors[i] = (hrt_trace_tensor_t){
        .name = type->name,
        .element_type = type->element_type,
        .rank = type->rank,
        .shape = type->shape,
        .data = summary ? NULL : source,
        .byte_length = summary ? site->function->byte_lengths[value] : length,
        .buffer = summary || buffers == NULL ? NULL : buffers[i],
        .summary = summary ? source : NULL,
    };
  }
  hrt_trace_info_t info = {call->sequence,
                           site->function->qualified_name,
                           site->op_index,
                           hrt_time_now_ns(),
                           call->invocation,
                           site->mode,
                           false,
                           hrt_hal_module_device(site->state->hal),
                           hrt_program_call_may_hold(call)};
  return hrt_hal_module_trace(site->state->hal, site->key, &info, count,
                              tensors);
}

static void hrt_program_dispatch_timing(void* host_context,
                                        uint32_t command_index,
                                        int64_t start_ns, int64_t duration_ns) {
  const hrt_program_call_t* call = host_context;
  const hrt_program_state_t* state = call->state;
  const hrt_command_origin_t* origin =
      &call->recorded->segments[call->segment].origins[command_index];
  hrt_dispatch_timing_t event = {
      .sequence = call->sequence,
      .invocation = call->invocation,
      .function = origin->function->qualified_name,
      .op_index = origin->op_index,
      .kernel = origin->function->ops[origin->op_index].kernel,
      .device = hrt_hal_device_info(state->device)->uri,
      .start_ns = start_ns,
      .duration_ns = duration_ns,
      .may_hold = hrt_program_call_may_hold(call),
  };
  hrt_hal_module_dispatch_timing(state->hal, &event, 1);
  // The calls whose inlined dispatches start or end here.
  const hrt_segment_t* segment = &call->recorded->segments[call->segment];
  for (uint32_t i = 0; i < segment->span_count; ++i) {
    const hrt_call_span_t* span = &segment->spans[i];
    if (span->first == command_index) call->span_starts[i] = start_ns;
    if (span->last != command_index) continue;
    event.function = span->caller->qualified_name;
    event.op_index = span->op_index;
    event.kernel = span->callee;
    event.start_ns = call->span_starts[i];
    event.duration_ns = start_ns + duration_ns - call->span_starts[i];
    hrt_hal_module_dispatch_timing(state->hal, &event, 1);
  }
}

static void hrt_program_call_release_locals(hrt_program_call_t* call) {
  for (uint32_t i = 0; i < call->local_count; ++i) {
    hrt_hal_buffer_release(call->locals[i]);
  }
  call->local_count = 0;
}

static void hrt_program_call_free(hrt_program_call_t* call,
                                  bool release_outputs) {
  hrt_program_call_release_locals(call);
  for (uint32_t i = 0; release_outputs && i < call->output_count; ++i) {
    hrt_hal_buffer_view_release(call->outputs[i]);
  }
  hrt_free_recycled(call);  // made on the invoking thread
}

static void hrt_program_call_complete(void* user_data, hrt_status_t status) {
  hrt_program_call_t* call = user_data;
  hrt_vm_invocation_done_t done = call->done;
  // Locals go back to the device before the caller hears of the completion,
  // so that the caller's next call can reuse their memory.
  hrt_program_call_release_locals(call);
  if (status == HRT_OK) {
    hrt_hal_module_flush(call->state->hal);
    done.fn(done.user_data, HRT_OK, call->outputs, call->output_count);
    hrt_program_call_free(call, false);
  } else {
    // The sink hears of the failure (a flight recorder delivers what it
    // kept) before the caller does.
    hrt_invocation_failure_t failure = {
        call->sequence, call->function->qualified_name, call->invocation,
        hrt_status_code(status)};
    hrt_hal_module_invocation_failed(call->state->hal, &failure);
    hrt_hal_module_flush(call->state->hal);
    hrt_program_call_free(call, true);
    done.fn(done.user_data, status, NULL, 0);
  }
}

// Allocates the call's outputs, locals and extra slots (program_record.h)
// and fills its binding table. `*out_zero_count`: how many outputs are the
// caller's views that the first op does not write whole (zeroed first).
static hrt_status_t hrt_prepare_call(hrt_hal_device_t* device,
                                     const hrt_function_t* function,
                                     const hrt_recorded_function_t* recorded,
                                     const hrt_vm_function_def_t* def,
                                     const hrt_vm_call_t* vm_call,
                                     hrt_program_call_t* call,
                                     uint32_t* out_zero_count) {
  for (uint32_t i = 0; i < def->input_count; ++i) {
    hrt_hal_buffer_t* buffer = hrt_hal_buffer_view_buffer(vm_call->inputs[i]);
    if (buffer->device != device) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "input %u ('%s') is on another device than the "
                             "context's HAL module (%s)",
                             i, def->inputs[i].name,
                             hrt_hal_device_info(device)->uri);
    }
    call->bindings[i] = hrt_hal_buffer_view_ref(vm_call->inputs[i]);
    hrt_hal_buffer_retain(buffer);
    call->locals[call->local_count++] = buffer;
  }
  // Each buffer is checked alone by the device; together they must fit too,
  // or zeroing them would exhaust the host (the process killed, not an
  // error).
  uint64_t memory = hrt_hal_device_info(device)->total_memory;
  if (memory != 0 && recorded->call_bytes > memory) {
    return hrt_status_make(
        HRT_STATUS_RESOURCE_EXHAUSTED,
        "%s: one call allocates %llu bytes of outputs and "
        "locals, more than the %llu bytes of %s",
        function->qualified_name, (unsigned long long)recorded->call_bytes,
        (unsigned long long)memory, hrt_hal_device_info(device)->uri);
  }
  const uint32_t slots = function->value_count + recorded->extra_count;
  for (uint32_t v = def->input_count; v < slots; ++v) {
    const bool extra = v >= function->value_count;
    const uint64_t bytes = extra
                               ? recorded->extra_bytes[v - function->value_count]
                               : function->byte_lengths[v];
    if (bytes == HRT_SLOT_BOUND_LATER || (!extra && function->unused[v])) {
      call->bindings[v] = (hrt_hal_buffer_ref_t){
          call->state->placeholder, 0, 0, HRT_HAL_WHOLE_BUFFER};
      continue;
    }
    if (!extra && v >= function->constant_base) {
      // Commands bind constants directly; the slot holds one all the same.
      call->bindings[v] = (hrt_hal_buffer_ref_t){
          call->state->constants[v - function->constant_base], 0, 0,
          HRT_HAL_WHOLE_BUFFER};
      continue;
    }
    // A value whose first op writes all of it needs no zero fill first.
    const bool overwritten = !extra && function->overwritten[v];
    const uint32_t output = v - def->input_count;
    const bool is_output = !extra && output < def->output_count;
    hrt_hal_buffer_view_t* given =
        is_output && vm_call->outputs ? vm_call->outputs[output] : NULL;
    if (given && hrt_hal_buffer_view_buffer(given)->device == device &&
        hrt_hal_buffer_view_byte_length(given) == bytes) {
      hrt_hal_buffer_view_retain(given);
      call->outputs[output] = given;
      call->output_count = output + 1;
      call->bindings[v] = hrt_hal_buffer_view_ref(given);
      if (!overwritten) ++*out_zero_count;
      continue;
    }
    hrt_hal_buffer_t* buffer = NULL;
    HRT_RETURN_IF_ERROR(hrt_hal_device_allocate_buffer(
        device, bytes, overwritten ? HRT_HAL_UNINITIALIZED : NULL, &buffer));
    if (is_output) {
      const hrt_vm_tensor_type_t* type = &function->types[v];
      hrt_status_t status =
          hrt_hal_buffer_view_create(buffer, 0, type->element_type, type->rank,
                                     type->shape, &call->outputs[output]);
      hrt_hal_buffer_release(buffer);  // the view holds it
      HRT_RETURN_IF_ERROR(status);
      call->output_count = output + 1;
    } else {
      call->locals[call->local_count++] = buffer;
    }
    call->bindings[v] =
        (hrt_hal_buffer_ref_t){buffer, 0, 0, HRT_HAL_WHOLE_BUFFER};
  }
  return HRT_OK;
}

static void hrt_program_segment_done(void* user_data, hrt_status_t status);

// Zeroes the outputs written into the caller's views that the first op does
// not write whole, as a new buffer would be: a submission of its own ahead
// of the call's (the queue runs them in order).
static hrt_status_t hrt_program_call_zero(hrt_program_call_t* call,
                                          const hrt_vm_function_def_t* def,
                                          const hrt_vm_call_t* vm_call) {
  hrt_hal_command_buffer_t* zero = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_hal_command_buffer_create(call->state->device, &zero));
  hrt_status_t status = HRT_OK;
  for (uint32_t o = 0; o < def->output_count && status == HRT_OK; ++o) {
    const uint32_t v = def->input_count + o;
    if (call->function->overwritten[v] || call->outputs[o] == NULL ||
        call->outputs[o] != vm_call->outputs[o]) {
      continue;
    }
    status = hrt_hal_command_buffer_fill(zero, call->bindings[v], 0, 1);
  }
  if (status == HRT_OK) {
    hrt_hal_command_buffer_finalize(zero);
    hrt_hal_submission_t submission = {.command_buffer = zero};
    status = hrt_hal_device_queue_submit(call->state->device, &submission);
  }
  hrt_hal_command_buffer_release(zero);
  return status;
}

// Submits segment call->segment.
static hrt_status_t hrt_program_call_submit(hrt_program_call_t* call) {
  const hrt_program_state_t* state = call->state;
  hrt_hal_submission_t submission = {
      .command_buffer = call->recorded->segments[call->segment].command_buffer,
      .bindings = call->bindings,
      .binding_count = call->slot_count,
      .completion = {hrt_program_segment_done, call},
      .host_context = call,
      .dispatch_timing = hrt_hal_module_options(state->hal)->profile
                             ? hrt_program_dispatch_timing
                             : NULL,
      // Until its last segment completes, the call holds every buffer of
      // its table (inputs and locals retained, outputs in their views, the
      // constants and the placeholder in the state, which its invocation's
      // context keeps, with the recorded command buffers).
      .caller_holds = true,
  };
  return hrt_hal_device_queue_submit(state->device, &submission);
}

// Whether the current segment has no commands (a host call comes first,
// or two come in a row): it is not submitted.
static bool hrt_program_segment_empty(const hrt_program_call_t* call) {
  return hrt_hal_command_buffer_count(
             call->recorded->segments[call->segment].command_buffer) == 0;
}

// `status` (not OK) as the failure of the current host call, naming it.
static hrt_status_t hrt_host_step_error(const hrt_program_call_t* call,
                                        hrt_status_t status) {
  const hrt_host_step_t* step = hrt_program_call_step(call);
  return hrt_status_annotate(status, "functions.%s.body[%u]: call '%s'",
                             strchr(step->caller->qualified_name, '.') + 1,
                             step->op_index, step->callee);
}

static hrt_status_t hrt_program_host_begin(hrt_program_call_t* call);

// A host call has ended (on the completion thread of the device that ran
// its upload): its outputs go to the staging slots, and the next segment is
// submitted.
static void hrt_program_host_done(void* user_data, hrt_status_t status,
                                  hrt_hal_buffer_view_t* const* outputs,
                                  uint32_t output_count) {
  hrt_program_call_t* call = user_data;
  const hrt_host_step_t* step = hrt_program_call_step(call);
  if (hrt_hal_module_options(call->state->hal)->profile) {
    const int64_t now = hrt_time_now_ns();
    hrt_dispatch_timing_t event = {
        .sequence = call->sequence,
        .invocation = call->invocation,
        .function = step->caller->qualified_name,
        .op_index = step->op_index,
        .kernel = step->callee,
        .device = hrt_hal_device_info(call->state->device)->uri,
        .start_ns = call->host_start_ns,
        .duration_ns = now - call->host_start_ns,
    };
    hrt_hal_module_dispatch_timing(call->state->hal, &event, 1);
  }
  if (status != HRT_OK) {
    hrt_program_call_complete(call, hrt_host_step_error(call, status));
    return;
  }
  for (uint32_t j = 0; j < output_count; ++j) {
    hrt_hal_buffer_t* buffer = hrt_hal_buffer_view_buffer(outputs[j]);
    hrt_hal_buffer_retain(buffer);
    call->locals[call->local_count++] = buffer;
    call->bindings[step->staging_slots[j]] = hrt_hal_buffer_view_ref(outputs[j]);
    hrt_hal_buffer_view_release(outputs[j]);
  }
  // Once the next step has started, `call` may complete and be freed on
  // another thread at any time: nothing reads it after a start succeeds.
  ++call->segment;
  if (!hrt_program_segment_empty(call)) {
    status = hrt_program_call_submit(call);
  } else if (hrt_program_call_step(call)) {
    status = hrt_program_host_begin(call);
    if (status != HRT_OK) status = hrt_host_step_error(call, status);
  } else {
    status = HRT_OK;  // an empty last segment: nothing left to run
    hrt_program_call_complete(call, status);
    return;
  }
  if (status != HRT_OK) hrt_program_call_complete(call, status);
}

// Starts the host call after the current segment, on views of its
// arguments' slots.
static hrt_status_t hrt_program_host_begin(hrt_program_call_t* call) {
  const hrt_host_step_t* step = hrt_program_call_step(call);
  const uint32_t count = step->def->input_count;
  hrt_hal_buffer_view_t** views = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed((count + 1) * sizeof(*views),
                                          "call", (void**)&views));
  hrt_status_t status = HRT_OK;
  for (uint32_t i = 0; i < count && status == HRT_OK; ++i) {
    const hrt_vm_tensor_type_t* type = &step->def->inputs[i];
    const hrt_hal_buffer_ref_t* ref = &call->bindings[step->arg_slots[i]];
    status = hrt_hal_buffer_view_create(ref->buffer, ref->offset,
                                        type->element_type, type->rank,
                                        type->shape, &views[i]);
  }
  if (status == HRT_OK) {
    hrt_vm_call_t vm_call = {
        .function_ordinal = step->ordinal,
        .inputs = views,
        .input_count = count,
        .sequence = call->sequence,
        .invocation = call->invocation,
        .route = call->route,
        .done = {hrt_program_host_done, call},
    };
    call->host_start_ns = hrt_time_now_ns();
    status = step->module->vtable->begin_call(step->module, step->state,
                                              &vm_call);
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (views[i]) hrt_hal_buffer_view_release(views[i]);
  }
  free(views);
  return status;
}

static void hrt_program_segment_done(void* user_data, hrt_status_t status) {
  hrt_program_call_t* call = user_data;
  if (status == HRT_OK && hrt_program_call_step(call)) {
    status = hrt_program_host_begin(call);
    if (status == HRT_OK) return;
    status = hrt_host_step_error(call, status);
  }
  hrt_program_call_complete(call, status);
}

hrt_status_t hrt_program_call_begin(hrt_vm_module_t* base, void* opaque,
                                    const hrt_vm_call_t* vm_call) {
  hrt_program_module_t* module = (hrt_program_module_t*)base;
  hrt_program_state_t* state = opaque;
  const hrt_function_t* function =
      &module->functions[vm_call->function_ordinal];
  const hrt_vm_function_def_t* def = &module->defs[vm_call->function_ordinal];
  const hrt_recorded_function_t* recorded =
      &state->functions[vm_call->function_ordinal];
  uint32_t values = function->value_count + recorded->extra_count;
  const uint32_t spans = hrt_hal_module_options(state->hal)->profile
                             ? recorded->max_span_count
                             : 0;
  hrt_program_call_t* call = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_recycled(
      sizeof(*call) + spans * sizeof(int64_t) +
          values * (sizeof(hrt_hal_buffer_ref_t) + 2 * sizeof(void*)),
      "call", (void**)&call));
  call->span_starts = (int64_t*)(call + 1);
  call->bindings = (hrt_hal_buffer_ref_t*)(call->span_starts + spans);
  call->outputs = (hrt_hal_buffer_view_t**)(call->bindings + values);
  call->locals = (hrt_hal_buffer_t**)(call->outputs + values);
  call->done = vm_call->done;
  call->state = state;
  call->function = function;
  call->recorded = recorded;
  call->function_ordinal = vm_call->function_ordinal;
  call->sequence = vm_call->sequence;
  call->invocation = vm_call->invocation;
  call->route = vm_call->route;
  call->slot_count = values;
  uint32_t zero_count = 0;
  hrt_status_t status = hrt_prepare_call(state->device, function, recorded, def,
                                         vm_call, call, &zero_count);
  if (status == HRT_OK && zero_count > 0) {
    status = hrt_program_call_zero(call, def, vm_call);
  }
  if (status == HRT_OK) {
    // A host call that comes first starts here, with nothing submitted.
    status = hrt_program_segment_empty(call) && hrt_program_call_step(call)
                 ? hrt_program_host_begin(call)
                 : hrt_program_call_submit(call);
  }
  if (status != HRT_OK) hrt_program_call_free(call, true);
  return status;
}
