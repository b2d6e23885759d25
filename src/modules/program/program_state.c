#include "modules/program/program_state.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "modules/hal_module.h"
#include "modules/program/program_executables.h"
#include "modules/program/program_internal.h"
#include "modules/program/program_record.h"

void hrt_program_state_free(hrt_vm_module_t* base, void* opaque) {
  hrt_program_module_t* module = (hrt_program_module_t*)base;
  hrt_program_state_t* state = opaque;
  if (!state) return;
  for (uint32_t i = 0; i < base->function_count; ++i) {
    hrt_recorded_function_t* function = &state->functions[i];
    for (uint32_t s = 0; s < function->segment_count; ++s) {
      hrt_hal_command_buffer_release(function->segments[s].command_buffer);
      free(function->segments[s].origins);
      free(function->segments[s].spans);
    }
    free(function->segments);
    free(function->extra_bytes);
  }
  if (state->placeholder) hrt_hal_buffer_release(state->placeholder);
  for (uint32_t i = 0; i < module->constant_count; ++i) {
    if (state->constants[i]) hrt_hal_buffer_release(state->constants[i]);
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
  HRT_RETURN_IF_ERROR(hrt_hal_module_import(context, base, &hal));
  hrt_program_state_t* state = NULL;
  size_t size = sizeof(*state) +
                module->executable_count * sizeof(hrt_hal_executable_t*) +
                base->function_count * sizeof(hrt_recorded_function_t) +
                module->constant_count * sizeof(hrt_hal_buffer_t*);
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(size, "program state", (void**)&state));
  state->hal = hal;
  state->device = hrt_hal_module_device(hal);
  state->functions = (hrt_recorded_function_t*)(state + 1);
  state->executables =
      (hrt_hal_executable_t**)(state->functions + base->function_count);
  state->constants = (hrt_hal_buffer_t**)(state->executables +
                                          module->executable_count);
  hrt_status_t status = HRT_OK;
  for (uint32_t i = 0; i < module->constant_count && status == HRT_OK; ++i) {
    const hrt_module_constant_t* constant = &module->constants[i];
    status = hrt_status_annotate(
        hrt_hal_device_allocate_buffer(state->device, constant->byte_length,
                                       constant->data, &state->constants[i]),
        "constants.%s", constant->type.name);
  }
  for (uint32_t i = 0; i < module->executable_count && status == HRT_OK; ++i) {
    status = hrt_program_load_executable(state->device, &module->executables[i],
                                         &state->executables[i]);
  }
  for (uint32_t i = 0; i < base->function_count && status == HRT_OK; ++i) {
    status = hrt_program_record_function(state, context, module, i);
  }
  if (status != HRT_OK) {
    hrt_program_state_free(base, state);
    return status;
  }
  *out_state = state;
  return HRT_OK;
}
