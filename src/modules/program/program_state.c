#include "modules/program/program_state.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "modules/hal_module.h"
#include "modules/program/program_call.h"
#include "modules/program/program_executables.h"
#include "modules/program/program_internal.h"

static hrt_hal_buffer_ref_t hrt_slot(uint32_t value) {
  return (hrt_hal_buffer_ref_t){NULL, value, 0, HRT_HAL_WHOLE_BUFFER};
}

static hrt_status_t hrt_add_trace(hrt_program_state_t* state,
                                  hrt_hal_command_buffer_t* command_buffer,
                                  const hrt_function_t* function,
                                  uint32_t op_index, const char* key,
                                  hrt_hal_trace_mode_t mode, uint32_t count,
                                  const uint32_t* values, uint32_t every) {
  hrt_trace_site_t* site = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_arena_allocate(&state->arena, sizeof(*site), "trace", (void**)&site));
  *site =
      (hrt_trace_site_t){state, function, op_index, key, values, every, mode};
  hrt_hal_buffer_ref_t sources[HRT_HAL_MAX_TRACE_SOURCES];
  hrt_hal_element_type_t types[HRT_HAL_MAX_TRACE_SOURCES];
  for (uint32_t i = 0; i < count; ++i) {
    sources[i] = hrt_slot(values[i]);
    types[i] = function->types[values[i]].element_type;
  }
  return hrt_hal_command_buffer_trace_mode(command_buffer, mode, sources, types,
                                           count, hrt_program_call_trace, site);
}

// A dispatch's written bindings become one trace's sources.
_Static_assert(HRT_HAL_MAX_DISPATCH_BINDINGS <= HRT_HAL_MAX_TRACE_SOURCES,
               "every binding a dispatch writes fits in one trace");

// Traces what a dispatch writes: the bindings its signature marks written,
// or (user kernels) every binding that is not a function input; only when
// the HAL module's dispatch-trace filters cover the dispatch.
static hrt_status_t hrt_add_dispatch_trace(
    hrt_program_state_t* state, hrt_hal_command_buffer_t* command_buffer,
    const hrt_function_t* function, const hrt_vm_function_def_t* def,
    uint32_t op_index) {
  const hrt_op_t* op = &function->ops[op_index];
  uint32_t* written = NULL;
  HRT_RETURN_IF_ERROR(hrt_arena_allocate(&state->arena,
                                         op->operand_count * sizeof(uint32_t),
                                         "trace", (void**)&written));
  uint32_t count = 0;
  for (uint32_t i = 0; i < op->operand_count; ++i) {
    bool writes = op->signature ? op->signature->bindings[i].written
                                : op->operands[i] >= def->input_count;
    if (writes) written[count++] = op->operands[i];
  }
  if (count == 0) return HRT_OK;
  const char* function_name = strchr(function->qualified_name, '.') + 1;
  if (!hrt_hal_module_traces_dispatch(state->hal, function_name, op->key)) {
    return HRT_OK;
  }
  const hrt_hal_module_options_t* options = hrt_hal_module_options(state->hal);
  return hrt_add_trace(state, command_buffer, function, op_index, op->key,
                       options->trace_mode, count, written,
                       options->trace_every);
}

static hrt_status_t hrt_record_op(hrt_program_state_t* state,
                                  hrt_hal_command_buffer_t* command_buffer,
                                  const hrt_function_t* function,
                                  uint32_t op_index) {
  const hrt_op_t* op = &function->ops[op_index];
  switch (op->kind) {
    case HRT_OP_DISPATCH: {
      hrt_hal_executable_t* executable = state->executables[op->executable];
      uint32_t ordinal = 0;
      HRT_RETURN_IF_ERROR(
          hrt_hal_executable_lookup(executable, op->entry, &ordinal));
      hrt_hal_buffer_ref_t bindings[HRT_HAL_MAX_DISPATCH_BINDINGS];
      uint32_t read_only = 0;
      for (uint32_t i = 0; i < op->operand_count; ++i) {
        bindings[i] = hrt_slot(op->operands[i]);
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
      return hrt_hal_command_buffer_dispatch(command_buffer, &dispatch);
    }
    case HRT_OP_FILL:
      return hrt_hal_command_buffer_fill(command_buffer,
                                         hrt_slot(op->operands[0]), op->pattern,
                                         op->pattern_length);
    case HRT_OP_COPY:
      return hrt_hal_command_buffer_copy(
          command_buffer, hrt_slot(op->operands[0]), hrt_slot(op->operands[1]));
    case HRT_OP_TRACE:
      return hrt_add_trace(state, command_buffer, function, op_index, op->key,
                           op->has_trace_mode
                               ? op->trace_mode
                               : hrt_hal_module_options(state->hal)->trace_mode,
                           op->operand_count, op->operands, 1);
    case HRT_OP_BARRIER:
      return hrt_hal_command_buffer_barrier(command_buffer);
  }
  return HRT_OK;
}

static hrt_status_t hrt_record_function(hrt_program_state_t* state,
                                        const hrt_program_module_t* module,
                                        uint32_t index) {
  const hrt_function_t* function = &module->functions[index];
  const hrt_vm_function_def_t* def = &module->defs[index];
  bool trace_dispatches = hrt_hal_module_options(state->hal)->trace_dispatches;
  hrt_hal_command_buffer_t* command_buffer = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_hal_command_buffer_create(state->device, &command_buffer));
  state->command_buffers[index] = command_buffer;
  // At most two commands per op (a dispatch and its trace).
  uint32_t* command_ops = NULL;
  HRT_RETURN_IF_ERROR(hrt_arena_allocate(
      &state->arena, (2 * (size_t)function->op_count + 1) * sizeof(uint32_t),
      "command map", (void**)&command_ops));
  state->command_ops[index] = command_ops;
  for (uint32_t i = 0; i < function->op_count; ++i) {
    uint32_t first = hrt_hal_command_buffer_count(command_buffer);
    hrt_status_t status = hrt_record_op(state, command_buffer, function, i);
    if (status == HRT_OK && trace_dispatches &&
        function->ops[i].kind == HRT_OP_DISPATCH) {
      status = hrt_add_dispatch_trace(state, command_buffer, function, def, i);
    }
    if (status != HRT_OK) {
      return hrt_status_annotate(status, "functions.%s.body[%u]", def->name, i);
    }
    uint32_t end = hrt_hal_command_buffer_count(command_buffer);
    for (uint32_t c = first; c < end; ++c) command_ops[c] = i;
  }
  hrt_hal_command_buffer_finalize(command_buffer);
  return HRT_OK;
}

void hrt_program_state_free(hrt_vm_module_t* base, void* opaque) {
  hrt_program_module_t* module = (hrt_program_module_t*)base;
  hrt_program_state_t* state = opaque;
  if (!state) return;
  for (uint32_t i = 0; i < base->function_count; ++i) {
    hrt_hal_command_buffer_release(state->command_buffers[i]);
  }
  for (uint32_t i = 0; i < module->executable_count; ++i) {
    hrt_hal_executable_release(state->executables[i]);
  }
  hrt_arena_deinit(&state->arena);
  free(state);
}

hrt_status_t hrt_program_state_create(hrt_vm_module_t* base,
                                      hrt_vm_context_t* context,
                                      void** out_state) {
  hrt_program_module_t* module = (hrt_program_module_t*)base;
  hrt_vm_module_t* hal = NULL;
  void* hal_state = NULL;
  HRT_RETURN_IF_ERROR(hrt_status_annotate(
      hrt_vm_context_find_module(context, "hal", &hal, &hal_state),
      "module '%s' imports 'hal'", base->name));
  if (!hrt_hal_module_isa(hal)) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "module '%s' imports 'hal', but the module named "
                           "'hal' is not a HAL module",
                           base->name);
  }
  hrt_program_state_t* state = NULL;
  size_t size = sizeof(*state) +
                module->executable_count * sizeof(hrt_hal_executable_t*) +
                base->function_count *
                    (sizeof(hrt_hal_command_buffer_t*) + sizeof(uint32_t*));
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(size, "program state", (void**)&state));
  state->hal = hal;
  state->device = hrt_hal_module_device(hal);
  state->executables = (hrt_hal_executable_t**)(state + 1);
  state->command_buffers =
      (hrt_hal_command_buffer_t**)(state->executables +
                                   module->executable_count);
  state->command_ops =
      (uint32_t**)(state->command_buffers + base->function_count);
  hrt_status_t status = HRT_OK;
  for (uint32_t i = 0; i < module->executable_count && status == HRT_OK; ++i) {
    status = hrt_program_load_executable(state->device, &module->executables[i],
                                         &state->executables[i]);
  }
  for (uint32_t i = 0; i < base->function_count && status == HRT_OK; ++i) {
    status = hrt_record_function(state, module, i);
  }
  if (status != HRT_OK) {
    hrt_program_state_free(base, state);
    return status;
  }
  *out_state = state;
  return HRT_OK;
}
