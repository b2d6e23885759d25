#include "modules/program/program_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "modules/callback_module.h"
#include "modules/hal_module.h"
#include "modules/program/program_call.h"
#include "modules/program/program_module.h"

// Bounds on what inlining may make of one function (calls may nest, each
// level multiplying the ops): slots of its binding table, and commands.
#define HRT_RECORD_MAX_SLOTS 65536u
#define HRT_RECORD_MAX_COMMANDS (1u << 20)

// One function whose ops are being recorded: the top function, or a callee
// inlined at a call.
typedef struct hrt_frame_s {
  const hrt_program_state_t* state;  // whose executables its ops use
  const hrt_function_t* function;
  const hrt_vm_function_def_t* def;
  const uint32_t* slots;  // [value_count]: the slot of each value
} hrt_frame_t;

typedef struct hrt_recorder_s {
  hrt_program_state_t* state;  // the top function's: hal, arena
  hrt_vm_context_t* context;   // callees resolve against it
  const char* module_name;     // the top function's module
  uint32_t value_count;        // the top function's: extra slots follow
  hrt_recorded_function_t* out;
  uint32_t segment_capacity;
  // The segment being recorded: out->segments[out->segment_count - 1].
  hrt_hal_command_buffer_t* command_buffer;
  uint32_t noted;  // its commands whose origin is set
  uint32_t origin_capacity;
  uint32_t extra_capacity;
} hrt_recorder_t;

static hrt_hal_buffer_ref_t hrt_slot(uint32_t slot) {
  return (hrt_hal_buffer_ref_t){NULL, slot, 0, HRT_HAL_WHOLE_BUFFER};
}

// Where value `v` of `frame` is: its slot, or for a module constant the
// buffer of the frame's state, bound directly.
static hrt_hal_buffer_ref_t hrt_value_ref(const hrt_frame_t* frame,
                                          uint32_t v) {
  const uint32_t base = frame->function->constant_base;
  if (v < base) return hrt_slot(frame->slots[v]);
  return (hrt_hal_buffer_ref_t){frame->state->constants[v - base], 0, 0,
                                HRT_HAL_WHOLE_BUFFER};
}

// The commands recorded since the last note came from op `op_index` of
// `function`.
static hrt_status_t hrt_note(hrt_recorder_t* recorder,
                             const hrt_function_t* function,
                             uint32_t op_index) {
  const uint32_t count = hrt_hal_command_buffer_count(recorder->command_buffer);
  if (count > HRT_RECORD_MAX_COMMANDS) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "with its calls inlined the function has more "
                           "than %u commands",
                           HRT_RECORD_MAX_COMMANDS);
  }
  hrt_segment_t* segment =
      &recorder->out->segments[recorder->out->segment_count - 1];
  if (count > recorder->origin_capacity) {
    uint32_t capacity = recorder->origin_capacity * 2 + 16;
    if (capacity < count) capacity = count;
    HRT_RETURN_IF_ERROR(hrt_reallocate(segment->origins,
                                       capacity * sizeof(hrt_command_origin_t),
                                       "command map",
                                       (void**)&segment->origins));
    recorder->origin_capacity = capacity;
  }
  for (uint32_t c = recorder->noted; c < count; ++c) {
    segment->origins[c] = (hrt_command_origin_t){function, op_index};
  }
  recorder->noted = count;
  return HRT_OK;
}

// A new extra slot of `bytes` bytes.
static hrt_status_t hrt_extra_slot(hrt_recorder_t* recorder, uint64_t bytes,
                                   uint32_t* out_slot) {
  hrt_recorded_function_t* out = recorder->out;
  if (recorder->value_count + out->extra_count >= HRT_RECORD_MAX_SLOTS) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "with its calls inlined the function has more "
                           "than %u values",
                           HRT_RECORD_MAX_SLOTS);
  }
  if (out->extra_count == recorder->extra_capacity) {
    uint32_t capacity = recorder->extra_capacity * 2 + 8;
    HRT_RETURN_IF_ERROR(hrt_reallocate(out->extra_bytes,
                                       capacity * sizeof(uint64_t), "values",
                                       (void**)&out->extra_bytes));
    recorder->extra_capacity = capacity;
  }
  out->extra_bytes[out->extra_count] = bytes;
  if (bytes != HRT_SLOT_BOUND_LATER) {
    out->call_bytes = bytes > UINT64_MAX - out->call_bytes
                          ? UINT64_MAX
                          : out->call_bytes + bytes;
  }
  *out_slot = recorder->value_count + out->extra_count++;
  return HRT_OK;
}

// Starts a new segment (the first, or the one after a host call).
static hrt_status_t hrt_begin_segment(hrt_recorder_t* recorder) {
  hrt_recorded_function_t* out = recorder->out;
  if (out->segment_count == recorder->segment_capacity) {
    uint32_t capacity = recorder->segment_capacity * 2 + 2;
    HRT_RETURN_IF_ERROR(hrt_reallocate(out->segments,
                                       capacity * sizeof(hrt_segment_t),
                                       "segments", (void**)&out->segments));
    recorder->segment_capacity = capacity;
  }
  hrt_segment_t* segment = &out->segments[out->segment_count];
  *segment = (hrt_segment_t){0};
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(recorder->state->device,
                                                    &segment->command_buffer));
  ++out->segment_count;
  recorder->command_buffer = segment->command_buffer;
  recorder->noted = 0;
  recorder->origin_capacity = 0;
  return HRT_OK;
}

// A trace of `values`; with `counts` (a trace op's), their health comes
// from those counts values, traced in full and summed in
// hrt_program_call_trace.
static hrt_status_t hrt_add_trace(hrt_recorder_t* recorder,
                                  const hrt_frame_t* frame, uint32_t op_index,
                                  const char* key, hrt_hal_trace_mode_t mode,
                                  uint32_t count, const uint32_t* values,
                                  const uint32_t* counts, const uint8_t* steps,
                                  uint32_t every) {
  hrt_program_state_t* state = recorder->state;
  hrt_trace_site_t* site = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_arena_allocate(&state->arena, sizeof(*site), "trace", (void**)&site));
  *site = (hrt_trace_site_t){state, frame->function, op_index, key, values,
                             every, mode,            counts ? steps : NULL};
  const uint32_t* read = counts ? counts : values;
  hrt_hal_buffer_ref_t sources[HRT_HAL_MAX_TRACE_SOURCES];
  hrt_hal_element_type_t types[HRT_HAL_MAX_TRACE_SOURCES];
  for (uint32_t i = 0; i < count; ++i) {
    sources[i] = hrt_value_ref(frame, read[i]);
    types[i] = frame->function->types[read[i]].element_type;
  }
  return hrt_hal_command_buffer_trace_mode(
      recorder->command_buffer, counts ? HRT_HAL_TRACE_FULL : mode, sources,
      types, count, hrt_program_call_trace, site);
}

// A dispatch's written bindings become one trace's sources.
_Static_assert(HRT_HAL_MAX_DISPATCH_BINDINGS <= HRT_HAL_MAX_TRACE_SOURCES,
               "every binding a dispatch writes fits in one trace");

// Traces what a dispatch writes: the bindings its signature marks written,
// or (user kernels) every binding that is neither an input of its function
// nor a module constant; only
// when the HAL module's dispatch-trace filters cover the dispatch.
static hrt_status_t hrt_add_dispatch_trace(hrt_recorder_t* recorder,
                                           const hrt_frame_t* frame,
                                           uint32_t op_index) {
  const hrt_op_t* op = &frame->function->ops[op_index];
  hrt_program_state_t* state = recorder->state;
  uint32_t* written = NULL;
  HRT_RETURN_IF_ERROR(hrt_arena_allocate(&state->arena,
                                         op->operand_count * sizeof(uint32_t),
                                         "trace", (void**)&written));
  uint32_t count = 0;
  for (uint32_t i = 0; i < op->operand_count; ++i) {
    const uint32_t v = op->operands[i];
    bool writes = op->signature ? op->signature->bindings[i].written
                                : v >= frame->def->input_count &&
                                      v < frame->function->constant_base;
    if (writes) written[count++] = v;
  }
  if (count == 0) return HRT_OK;
  const char* function_name = strchr(frame->function->qualified_name, '.') + 1;
  if (!hrt_hal_module_traces_dispatch(state->hal, function_name, op->key)) {
    return HRT_OK;
  }
  const hrt_hal_module_options_t* options = hrt_hal_module_options(state->hal);
  return hrt_add_trace(recorder, frame, op_index, op->key, options->trace_mode,
                       count, written, NULL, NULL, options->trace_every);
}

static hrt_status_t hrt_record_dispatch(hrt_recorder_t* recorder,
                                        const hrt_frame_t* frame,
                                        const hrt_op_t* op) {
  hrt_hal_executable_t* executable = frame->state->executables[op->executable];
  uint32_t ordinal = 0;
  HRT_RETURN_IF_ERROR(
      hrt_hal_executable_lookup(executable, op->entry, &ordinal));
  hrt_hal_buffer_ref_t bindings[HRT_HAL_MAX_DISPATCH_BINDINGS];
  uint32_t read_only = 0;
  for (uint32_t i = 0; i < op->operand_count; ++i) {
    bindings[i] = hrt_value_ref(frame, op->operands[i]);
    if (op->signature && !op->signature->bindings[i].written) {
      read_only |= 1u << i;
    }
  }
  hrt_hal_dispatch_t dispatch = {
      .executable = executable,
      .entry_ordinal = ordinal,
      .workgroup_count = {op->workgroup_count[0], op->workgroup_count[1],
                          op->workgroup_count[2]},
      .workgroup_size = {op->workgroup_size[0], op->workgroup_size[1],
                         op->workgroup_size[2]},
      .constant_count = op->constant_count,
      .constants = op->constants,
      .binding_count = op->operand_count,
      .bindings = bindings,
      .read_only_bindings = read_only,
  };
  return hrt_hal_command_buffer_dispatch(recorder->command_buffer, &dispatch);
}

static hrt_status_t hrt_record_frame(hrt_recorder_t* recorder,
                                     const hrt_frame_t* frame);

// "a.f calls b.g" for the call ops of `module`'s functions that go to
// `callee_module`, written into `out` (the first one found); false if none.
static bool hrt_find_call_to(const hrt_vm_module_t* module,
                             const char* callee_module, char* out,
                             size_t size) {
  if (!hrt_program_module_isa(module)) return false;
  const hrt_program_module_t* program = (const hrt_program_module_t*)module;
  const size_t length = strlen(callee_module);
  for (uint32_t f = 0; f < module->function_count; ++f) {
    const hrt_function_t* function = &program->functions[f];
    for (uint32_t i = 0; i < function->op_count; ++i) {
      const char* callee = function->ops[i].callee;
      if (function->ops[i].kind == HRT_OP_CALL &&
          strncmp(callee, callee_module, length) == 0 &&
          callee[length] == '.') {
        snprintf(out, size, "%s calls %s", function->qualified_name, callee);
        return true;
      }
    }
  }
  return false;
}

// The module and function a call op names, with the module's state: a
// program module's, or a callback module's.
static hrt_status_t hrt_resolve_callee(hrt_recorder_t* recorder,
                                       const hrt_frame_t* frame,
                                       const hrt_op_t* op,
                                       hrt_vm_module_t** out_module,
                                       void** out_state,
                                       uint32_t* out_ordinal) {
  const char* dot = strchr(op->callee, '.');
  char module_name[256];
  snprintf(module_name, sizeof(module_name), "%.*s", (int)(dot - op->callee),
           op->callee);
  hrt_status_t status = hrt_vm_context_find_module(
      recorder->context, module_name, out_module, out_state);
  if (status != HRT_OK) {
    const hrt_vm_module_t* later =
        hrt_vm_context_module_named(recorder->context, module_name);
    char back[600];
    if (later &&
        hrt_find_call_to(later, recorder->module_name, back, sizeof(back))) {
      hrt_status_free(status);
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "a cycle of calls: %s calls %s, and %s",
                             frame->function->qualified_name, op->callee, back);
    }
    return status;
  }
  if (!hrt_program_module_isa(*out_module) &&
      !hrt_callback_module_isa(*out_module)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "module '%s' is neither a program module nor a "
                           "host module; a call goes to a function of one",
                           module_name);
  }
  return hrt_vm_module_lookup_function(*out_module, dot + 1, out_ordinal);
}

// INVALID_ARGUMENT when value `value` of the caller is not of `type`.
static hrt_status_t hrt_check_call_type(const hrt_frame_t* frame,
                                        const hrt_op_t* op, const char* what,
                                        uint32_t index, uint32_t value,
                                        const hrt_vm_tensor_type_t* type) {
  const hrt_vm_tensor_type_t* given = &frame->function->types[value];
  bool same = given->element_type == type->element_type &&
              given->rank == type->rank;
  for (uint32_t d = 0; same && d < type->rank; ++d) {
    same = given->shape[d] == type->shape[d];
  }
  if (same) return HRT_OK;
  char given_shape[HRT_HAL_SHAPE_TEXT_MAX], wanted_shape[HRT_HAL_SHAPE_TEXT_MAX];
  hrt_hal_shape_format(given->rank, given->shape, given_shape);
  hrt_hal_shape_format(type->rank, type->shape, wanted_shape);
  return hrt_status_make(
      HRT_STATUS_INVALID_ARGUMENT,
      "%s[%u] '%s' is %s%s, but %s '%s' of %s is %s%s", what, index,
      given->name, hrt_hal_element_type_name(given->element_type), given_shape,
      what[0] == 'a' ? "input" : "output", type->name, op->callee,
      hrt_hal_element_type_name(type->element_type), wanted_shape);
}

// The call op `op_index` of `frame` whose callee's commands start at
// `begin` in the current segment: its span, when it has dispatches.
static hrt_status_t hrt_add_span(hrt_recorder_t* recorder, uint32_t begin,
                                 const hrt_frame_t* frame, uint32_t op_index) {
  const hrt_hal_command_buffer_t* commands = recorder->command_buffer;
  const uint32_t end = hrt_hal_command_buffer_count(commands);
  uint32_t first = UINT32_MAX, last = 0;
  for (uint32_t c = begin; c < end; ++c) {
    if (hrt_hal_command_buffer_at(commands, c)->type !=
        HRT_HAL_COMMAND_DISPATCH) {
      continue;
    }
    if (first == UINT32_MAX) first = c;
    last = c;
  }
  if (first == UINT32_MAX) return HRT_OK;
  hrt_recorded_function_t* out = recorder->out;
  hrt_segment_t* segment = &out->segments[out->segment_count - 1];
  HRT_RETURN_IF_ERROR(hrt_reallocate(
      segment->spans, (segment->span_count + 1) * sizeof(hrt_call_span_t),
      "call spans", (void**)&segment->spans));
  segment->spans[segment->span_count++] = (hrt_call_span_t){
      first, last, frame->function, op_index,
      frame->function->ops[op_index].callee};
  if (segment->span_count > out->max_span_count) {
    out->max_span_count = segment->span_count;
  }
  return HRT_OK;
}

// A call of a callback module: the segment ends; the host call runs after
// it on the arguments' slots, its outputs bound to staging slots, which the
// next segment starts by copying to the results.
// The state's placeholder buffer (program_state.h), made on first use.
static hrt_status_t hrt_ensure_placeholder(hrt_program_state_t* program) {
  if (program->placeholder) return HRT_OK;
  return hrt_hal_device_allocate_buffer(program->device, 16, NULL,
                                        &program->placeholder);
}

static hrt_status_t hrt_record_host_call(hrt_recorder_t* recorder,
                                         const hrt_frame_t* frame,
                                         uint32_t op_index,
                                         hrt_vm_module_t* module, void* state,
                                         uint32_t ordinal) {
  const hrt_op_t* op = &frame->function->ops[op_index];
  const hrt_vm_function_def_t* def = &module->functions[ordinal];
  hrt_program_state_t* program = recorder->state;
  HRT_RETURN_IF_ERROR(hrt_ensure_placeholder(program));
  hrt_host_step_t* step = NULL;
  uint32_t* slots = NULL;
  HRT_RETURN_IF_ERROR(hrt_arena_allocate(&program->arena, sizeof(*step),
                                         "call", (void**)&step));
  HRT_RETURN_IF_ERROR(hrt_arena_allocate(
      &program->arena, ((size_t)op->operand_count + 1) * sizeof(uint32_t),
      "call", (void**)&slots));
  for (uint32_t i = 0; i < op->arg_count; ++i) {
    slots[i] = frame->slots[op->operands[i]];
  }
  for (uint32_t j = 0; j < def->output_count; ++j) {
    HRT_RETURN_IF_ERROR(hrt_extra_slot(recorder, HRT_SLOT_BOUND_LATER,
                                       &slots[op->arg_count + j]));
  }
  *step = (hrt_host_step_t){module,         state,  ordinal,
                            def,            op->callee, frame->function,
                            op_index,       slots,  slots + op->arg_count};
  HRT_RETURN_IF_ERROR(hrt_note(recorder, frame->function, op_index));
  recorder->out->segments[recorder->out->segment_count - 1].host_call = step;
  hrt_hal_command_buffer_finalize(recorder->command_buffer);
  HRT_RETURN_IF_ERROR(hrt_begin_segment(recorder));
  for (uint32_t j = 0; j < def->output_count; ++j) {
    HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_copy(
        recorder->command_buffer, hrt_slot(step->staging_slots[j]),
        hrt_slot(frame->slots[op->operands[op->arg_count + j]])));
  }
  return HRT_OK;
}

// A call op: for a program module, the callee's ops, on slots mapped from
// the call's args and results (outputs zero-filled first, as a call's
// outputs start), its locals and the outputs it cannot write in place on
// extra slots; for a callback module, a host call between segments.
static hrt_status_t hrt_record_call(hrt_recorder_t* recorder,
                                    const hrt_frame_t* frame,
                                    uint32_t op_index) {
  const hrt_op_t* op = &frame->function->ops[op_index];
  hrt_vm_module_t* module = NULL;
  void* state = NULL;
  uint32_t ordinal = 0;
  HRT_RETURN_IF_ERROR(
      hrt_resolve_callee(recorder, frame, op, &module, &state, &ordinal));
  const hrt_vm_function_def_t* def = &module->functions[ordinal];
  const uint32_t result_count = op->operand_count - op->arg_count;
  if (op->arg_count != def->input_count || result_count != def->output_count) {
    return hrt_status_make(
        HRT_STATUS_INVALID_ARGUMENT,
        "%s takes %u input%s and gives %u output%s, but the call has %u "
        "arg%s and %u result%s",
        op->callee, def->input_count, def->input_count == 1 ? "" : "s",
        def->output_count, def->output_count == 1 ? "" : "s", op->arg_count,
        op->arg_count == 1 ? "" : "s", result_count,
        result_count == 1 ? "" : "s");
  }
  for (uint32_t i = 0; i < op->operand_count; ++i) {
    const bool arg = i < op->arg_count;
    const uint32_t index = arg ? i : i - op->arg_count;
    HRT_RETURN_IF_ERROR(hrt_check_call_type(
        frame, op, arg ? "args" : "results", index, op->operands[i],
        arg ? &def->inputs[index] : &def->outputs[index]));
  }
  if (hrt_callback_module_isa(module)) {
    return hrt_record_host_call(recorder, frame, op_index, module, state,
                                ordinal);
  }
  const hrt_program_module_t* program = (const hrt_program_module_t*)module;
  const hrt_function_t* callee = &program->functions[ordinal];
  uint32_t* slots = NULL;
  HRT_RETURN_IF_ERROR(hrt_arena_allocate(
      &recorder->state->arena, callee->value_count * sizeof(uint32_t),
      "call", (void**)&slots));
  for (uint32_t i = 0; i < op->arg_count; ++i) {
    slots[i] = frame->slots[op->operands[i]];
  }
  for (uint32_t j = 0; j < result_count; ++j) {
    const uint32_t value = op->operands[op->arg_count + j];
    bool aliased = false;
    for (uint32_t i = 0; i < op->arg_count; ++i) {
      aliased |= op->operands[i] == value;
    }
    const uint32_t v = def->input_count + j;
    if (aliased) {
      HRT_RETURN_IF_ERROR(
          hrt_extra_slot(recorder, callee->byte_lengths[v], &slots[v]));
    } else {
      slots[v] = frame->slots[value];
      HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_fill(recorder->command_buffer,
                                                      hrt_slot(slots[v]), 0, 1));
    }
  }
  for (uint32_t v = def->input_count + def->output_count;
       v < callee->constant_base; ++v) {
    if (callee->unused[v]) {
      slots[v] = 0;  // never bound: no op uses it
      continue;
    }
    HRT_RETURN_IF_ERROR(
        hrt_extra_slot(recorder, callee->byte_lengths[v], &slots[v]));
  }
  HRT_RETURN_IF_ERROR(hrt_note(recorder, frame->function, op_index));
  const uint32_t segment = recorder->out->segment_count;
  const uint32_t begin = hrt_hal_command_buffer_count(recorder->command_buffer);
  const hrt_frame_t inner = {state, callee, def, slots};
  HRT_RETURN_IF_ERROR(hrt_record_frame(recorder, &inner));
  if (segment == recorder->out->segment_count) {  // no host call inside
    HRT_RETURN_IF_ERROR(hrt_add_span(recorder, begin, frame, op_index));
  }
  for (uint32_t j = 0; j < result_count; ++j) {
    const uint32_t target = frame->slots[op->operands[op->arg_count + j]];
    const uint32_t source = slots[def->input_count + j];
    if (source != target) {
      HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_copy(
          recorder->command_buffer, hrt_slot(source), hrt_slot(target)));
    }
  }
  return HRT_OK;
}

static hrt_status_t hrt_record_op(hrt_recorder_t* recorder,
                                  const hrt_frame_t* frame, uint32_t op_index) {
  const hrt_op_t* op = &frame->function->ops[op_index];
  hrt_hal_command_buffer_t* command_buffer = recorder->command_buffer;
  switch (op->kind) {
    case HRT_OP_DISPATCH:
      return hrt_record_dispatch(recorder, frame, op);
    case HRT_OP_FILL:
      return hrt_hal_command_buffer_fill(command_buffer,
                                         hrt_value_ref(frame, op->operands[0]),
                                         op->pattern, op->pattern_length);
    case HRT_OP_COPY:
      return hrt_hal_command_buffer_copy(command_buffer,
                                         hrt_value_ref(frame, op->operands[0]),
                                         hrt_value_ref(frame, op->operands[1]));
    case HRT_OP_TRACE:
      return hrt_add_trace(
          recorder, frame, op_index, op->key,
          op->has_trace_mode
              ? op->trace_mode
              : hrt_hal_module_options(recorder->state->hal)->trace_mode,
          op->operand_count, op->operands, op->counts, op->steps, 1);
    case HRT_OP_BARRIER:
      return hrt_hal_command_buffer_barrier(command_buffer);
    case HRT_OP_CALL:
      return hrt_status_annotate(hrt_record_call(recorder, frame, op_index),
                                 "call '%s'", op->callee);
  }
  return HRT_OK;
}

static hrt_status_t hrt_record_frame(hrt_recorder_t* recorder,
                                     const hrt_frame_t* frame) {
  const hrt_function_t* function = frame->function;
  const bool trace_dispatches =
      hrt_hal_module_options(recorder->state->hal)->trace_dispatches;
  for (uint32_t i = 0; i < function->op_count; ++i) {
    hrt_status_t status = hrt_record_op(recorder, frame, i);
    if (status == HRT_OK && trace_dispatches &&
        function->ops[i].kind == HRT_OP_DISPATCH) {
      status = hrt_add_dispatch_trace(recorder, frame, i);
    }
    if (status == HRT_OK) status = hrt_note(recorder, function, i);
    if (status != HRT_OK) {
      return hrt_status_annotate(status, "functions.%s.body[%u]",
                                 strchr(function->qualified_name, '.') + 1, i);
    }
  }
  return HRT_OK;
}

hrt_status_t hrt_program_record_function(hrt_program_state_t* state,
                                         hrt_vm_context_t* context,
                                         const hrt_program_module_t* module,
                                         uint32_t index) {
  const hrt_function_t* function = &module->functions[index];
  hrt_recorded_function_t* out = &state->functions[index];
  out->call_bytes = function->call_bytes;
  for (uint32_t v = 0; v < function->constant_base; ++v) {
    if (function->unused[v]) HRT_RETURN_IF_ERROR(hrt_ensure_placeholder(state));
  }
  uint32_t* slots = NULL;
  HRT_RETURN_IF_ERROR(hrt_arena_allocate(
      &state->arena, (function->value_count + 1) * sizeof(uint32_t), "call",
      (void**)&slots));
  for (uint32_t v = 0; v < function->value_count; ++v) slots[v] = v;
  hrt_recorder_t recorder = {
      .state = state,
      .context = context,
      .module_name = module->base.name,
      .value_count = function->value_count,
      .out = out,
  };
  HRT_RETURN_IF_ERROR(hrt_begin_segment(&recorder));
  const hrt_frame_t frame = {state, function, &module->defs[index], slots};
  HRT_RETURN_IF_ERROR(hrt_record_frame(&recorder, &frame));
  hrt_hal_command_buffer_finalize(recorder.command_buffer);
  return HRT_OK;
}
