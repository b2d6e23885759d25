#include "modules/callback_module.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "modules/hal_module.h"
#include "modules/program/program_fields.h"
#include "vm/context.h"

typedef struct hrt_callback_module_s {
  hrt_vm_module_t base;
  hrt_callback_module_callbacks_t callbacks;  // released once, in destroy
  hrt_vm_function_def_t* defs;  // in `arena`, with their names and types
  hrt_arena_t arena;
} hrt_callback_module_t;

// A call in flight: the host context of its read and upload submissions.
struct hrt_host_call_s {
  hrt_callback_module_t* module;  // retained
  hrt_hal_device_t* device;       // retained
  hrt_vm_invocation_done_t done;
  hrt_host_call_info_t info;
  hrt_status_t status;  // how the call ends (finish)
  uint32_t input_count;
  uint32_t output_count;
  hrt_trace_tensor_t* inputs;       // [input_count], data malloc'd
  hrt_hal_buffer_view_t** outputs;  // [output_count], owned until done
  // [the def's output count]: the caller's views to write the outputs into
  // (hrt_vm_invoke_in_place), retained until finish hands them on, or NULL.
  hrt_hal_buffer_view_t** given;
  uint32_t given_count;
};

static void hrt_host_call_free(hrt_host_call_t* call) {
  for (uint32_t i = 0; i < call->input_count; ++i) {
    free((void*)call->inputs[i].data);
  }
  for (uint32_t i = 0; i < call->output_count; ++i) {
    hrt_hal_buffer_view_release(call->outputs[i]);
  }
  for (uint32_t i = 0; i < call->given_count; ++i) {
    hrt_hal_buffer_view_release(call->given[i]);
  }
  hrt_status_free(call->status);
  hrt_hal_device_release(call->device);
  hrt_vm_module_release(&call->module->base);
  free(call);
}

// Hands the call's end to its invocation and frees it.
static void hrt_host_call_done(void* user_data, hrt_status_t status) {
  hrt_host_call_t* call = user_data;
  if (status == HRT_OK) {
    status = call->status;
    call->status = HRT_OK;
  }
  hrt_vm_invocation_done_t done = call->done;
  if (status == HRT_OK) {
    // The outputs' references go to `done`.
    uint32_t count = call->output_count;
    call->output_count = 0;
    done.fn(done.user_data, HRT_OK, call->outputs, count);
  } else {
    done.fn(done.user_data, status, NULL, 0);
  }
  hrt_host_call_free(call);
}

// Runs `commands` (finalized; may be empty) on the call's device and ends
// the call from its completion; when the device refuses it, ends it here.
static void hrt_host_call_submit(hrt_host_call_t* call,
                                 hrt_hal_command_buffer_t* commands,
                                 void (*then)(void*, hrt_status_t)) {
  hrt_hal_submission_t submission = {
      .command_buffer = commands,
      .completion = {then, call},
      .host_context = call,
  };
  hrt_status_t status = hrt_hal_device_queue_submit(call->device, &submission);
  hrt_hal_command_buffer_release(commands);
  if (status != HRT_OK) hrt_host_call_done(call, status);
}

// The inputs are on the host: the callback takes the call.
static void hrt_host_call_started(void* user_data, hrt_status_t status) {
  hrt_host_call_t* call = user_data;
  if (status != HRT_OK) {
    hrt_host_call_done(call, status);
    return;
  }
  const hrt_callback_module_callbacks_t* callbacks = &call->module->callbacks;
  callbacks->call.fn(callbacks->call.user_data, call, &call->info,
                     call->input_count, call->inputs);
}

uint64_t hrt_host_call_invocation(const hrt_host_call_t* call) {
  return call->info.invocation;
}

hrt_status_t hrt_host_call_check_output(const hrt_host_call_t* call,
                                        uint32_t index, uint32_t count,
                                        uint64_t byte_length) {
  const hrt_vm_function_def_t* def = &call->module->defs[call->info.function];
  if (count != def->output_count || index >= count) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "%s.%s gives %u outputs (got %u)",
                           call->module->base.name, def->name,
                           def->output_count, count);
  }
  const hrt_vm_tensor_type_t* type = &def->outputs[index];
  uint64_t bytes = 0;
  HRT_RETURN_IF_ERROR(hrt_hal_shape_byte_length(type->element_type, type->rank,
                                                type->shape, &bytes));
  if (bytes != byte_length) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "output '%s' of %s.%s is %llu bytes (got %llu)",
                           type->name, call->module->base.name, def->name,
                           (unsigned long long)bytes,
                           (unsigned long long)byte_length);
  }
  return HRT_OK;
}

void hrt_host_call_finish(hrt_host_call_t* call, hrt_status_t status,
                          const void* const* outputs) {
  const hrt_vm_function_def_t* def = &call->module->defs[call->info.function];
  // The submission that ends the call writes the outputs given in place, in
  // queue order; the others are new buffers.
  hrt_hal_command_buffer_t* commands = NULL;
  hrt_status_t made = hrt_hal_command_buffer_create(call->device, &commands);
  if (made != HRT_OK) {
    hrt_status_free(status);
    hrt_host_call_done(call, made);
    return;
  }
  for (uint32_t i = 0; status == HRT_OK && i < def->output_count; ++i) {
    const hrt_vm_tensor_type_t* type = &def->outputs[i];
    uint64_t bytes = 0;
    status = hrt_hal_shape_byte_length(type->element_type, type->rank,
                                       type->shape, &bytes);
    hrt_hal_buffer_view_t* given =
        i < call->given_count ? call->given[i] : NULL;
    if (status == HRT_OK && given != NULL) {
      status = hrt_hal_command_buffer_update(commands, outputs[i], bytes,
                                             hrt_hal_buffer_view_ref(given));
      if (status == HRT_OK) {
        call->outputs[i] = given;
        call->given[i] = NULL;
        call->output_count = i + 1;
      }
      continue;
    }
    hrt_hal_buffer_t* buffer = NULL;
    if (status == HRT_OK) {
      status = hrt_hal_device_allocate_buffer(call->device, bytes, outputs[i],
                                              &buffer);
    }
    if (status == HRT_OK) {
      status = hrt_hal_buffer_view_create(buffer, 0, type->element_type,
                                          type->rank, type->shape,
                                          &call->outputs[i]);
      hrt_hal_buffer_release(buffer);  // the view holds it
      if (status == HRT_OK) call->output_count = i + 1;
    }
  }
  call->status = status;
  hrt_hal_command_buffer_finalize(commands);
  hrt_host_call_submit(call, commands, hrt_host_call_done);
}

static hrt_status_t hrt_callback_begin_call(hrt_vm_module_t* base,
                                            void* state,
                                            const hrt_vm_call_t* vm_call) {
  hrt_callback_module_t* module = (hrt_callback_module_t*)base;
  hrt_hal_device_t* device = state;
  const hrt_vm_function_def_t* def = &module->defs[vm_call->function_ordinal];
  hrt_host_call_t* call = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(
      sizeof(*call) + def->input_count * sizeof(hrt_trace_tensor_t) +
          2 * def->output_count * sizeof(hrt_hal_buffer_view_t*),
      "host call", (void**)&call));
  call->inputs = (hrt_trace_tensor_t*)(call + 1);
  call->outputs = (hrt_hal_buffer_view_t**)(call->inputs + def->input_count);
  call->given = call->outputs + def->output_count;
  for (uint32_t i = 0; vm_call->outputs && i < def->output_count; ++i) {
    hrt_hal_buffer_view_t* view = vm_call->outputs[i];
    if (view == NULL || hrt_hal_buffer_view_buffer(view)->device != device) {
      continue;
    }
    const hrt_vm_tensor_type_t* type = &def->outputs[i];
    uint64_t bytes = 0;
    hrt_status_t size = hrt_hal_shape_byte_length(
        type->element_type, type->rank, type->shape, &bytes);
    if (size == HRT_OK && hrt_hal_buffer_view_byte_length(view) == bytes) {
      hrt_hal_buffer_view_retain(view);
      call->given[i] = view;
    }
    hrt_status_free(size);
  }
  call->given_count = def->output_count;
  call->module = module;
  hrt_vm_module_retain(base);
  call->device = device;
  hrt_hal_device_retain(device);
  call->done = vm_call->done;
  call->info =
      (hrt_host_call_info_t){vm_call->function_ordinal, vm_call->sequence,
                             vm_call->invocation, vm_call->route};
  hrt_hal_command_buffer_t* commands = NULL;
  hrt_status_t status = hrt_hal_command_buffer_create(device, &commands);
  for (uint32_t i = 0; i < def->input_count && status == HRT_OK; ++i) {
    hrt_hal_buffer_view_t* view = vm_call->inputs[i];
    const hrt_vm_tensor_type_t* type = &def->inputs[i];
    if (hrt_hal_buffer_view_buffer(view)->device != device) {
      status = hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "input %u ('%s') is on another device than the "
                               "context's HAL module (%s)",
                               i, type->name, hrt_hal_device_info(device)->uri);
      break;
    }
    const uint64_t bytes = hrt_hal_buffer_view_byte_length(view);
    void* data = NULL;
    status = hrt_allocate((size_t)bytes, "host call input", &data);
    if (status != HRT_OK) break;
    call->inputs[i] = (hrt_trace_tensor_t){
        .name = type->name,
        .element_type = type->element_type,
        .rank = type->rank,
        .shape = type->shape,
        .data = data,
        .byte_length = bytes,
    };
    call->input_count = i + 1;
    status = hrt_hal_command_buffer_read(commands,
                                         hrt_hal_buffer_view_ref(view), data);
  }
  if (status != HRT_OK || def->input_count == 0) {
    hrt_hal_command_buffer_release(commands);
    if (status != HRT_OK) {
      hrt_host_call_free(call);
      return status;
    }
    // Nothing to read: the callback starts here.
    hrt_host_call_started(call, HRT_OK);
    return HRT_OK;
  }
  hrt_hal_command_buffer_finalize(commands);
  hrt_hal_submission_t submission = {
      .command_buffer = commands,
      .completion = {hrt_host_call_started, call},
      .host_context = call,
  };
  status = hrt_hal_device_queue_submit(device, &submission);
  hrt_hal_command_buffer_release(commands);
  if (status != HRT_OK) hrt_host_call_free(call);
  return status;
}

// The state is the device of the HAL module linked before (borrowed: the
// context frees the HAL module after this state).
static hrt_status_t hrt_callback_create_state(hrt_vm_module_t* base,
                                              hrt_vm_context_t* context,
                                              void** out_state) {
  hrt_vm_module_t* hal = NULL;
  HRT_RETURN_IF_ERROR(hrt_hal_module_import(context, base, &hal));
  *out_state = hrt_hal_module_device(hal);
  return HRT_OK;
}

static void hrt_callback_free_state(hrt_vm_module_t* base, void* state) {
  (void)base;
  (void)state;
}

static void hrt_callback_module_destroy(hrt_vm_module_t* base) {
  hrt_callback_module_t* module = (hrt_callback_module_t*)base;
  module->callbacks.release.fn(module->callbacks.release.user_data);
  hrt_vm_module_deinitialize(base);
  hrt_arena_deinit(&module->arena);
  free(module);
}

static const hrt_vm_module_vtable_t hrt_callback_module_vtable = {
    .destroy = hrt_callback_module_destroy,
    .create_state = hrt_callback_create_state,
    .free_state = hrt_callback_free_state,
    .begin_call = hrt_callback_begin_call,
};

bool hrt_callback_module_isa(const hrt_vm_module_t* module) {
  return module->vtable == &hrt_callback_module_vtable;
}

// Copies `count` tensor types (and their names) into `arena`.
static hrt_vm_tensor_type_t* hrt_copy_types(hrt_arena_t* arena, uint32_t count,
                                            const hrt_vm_tensor_type_t* types) {
  hrt_vm_tensor_type_t* copy =
      hrt_arena_alloc(arena, (count + 1) * sizeof(*copy));
  for (uint32_t i = 0; copy && i < count; ++i) {
    copy[i] = types[i];
    copy[i].name = hrt_arena_strndup(arena, types[i].name,
                                     strlen(types[i].name));
    if (!copy[i].name) return NULL;
  }
  return copy;
}

// The module's own copy of `functions`; INVALID_ARGUMENT for a bad name.
static hrt_status_t hrt_copy_defs(hrt_callback_module_t* module,
                                  uint32_t count,
                                  const hrt_vm_function_def_t* functions) {
  hrt_arena_t* arena = &module->arena;
  module->defs = hrt_arena_alloc(arena, (count + 1) * sizeof(*module->defs));
  if (!module->defs) goto oom;
  for (uint32_t i = 0; i < count; ++i) {
    const hrt_vm_function_def_t* def = &functions[i];
    if (!hrt_program_is_identifier(def->name)) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "function name '%s' is not a name (letters, "
                             "digits and '_', not starting with a digit)",
                             def->name);
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (strcmp(functions[j].name, def->name) == 0) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "function '%s' is declared twice", def->name);
      }
    }
    hrt_vm_function_def_t* copy = &module->defs[i];
    *copy = *def;
    copy->name = hrt_arena_strndup(arena, def->name, strlen(def->name));
    copy->inputs = hrt_copy_types(arena, def->input_count, def->inputs);
    copy->outputs = hrt_copy_types(arena, def->output_count, def->outputs);
    if (!copy->name || !copy->inputs || !copy->outputs) goto oom;
  }
  return HRT_OK;
oom:
  return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                         "out of host memory copying the functions of a "
                         "callback module");
}

hrt_status_t hrt_callback_module_create(
    const char* name, uint32_t function_count,
    const hrt_vm_function_def_t* functions,
    hrt_callback_module_callbacks_t callbacks, hrt_vm_module_t** out_module) {
  if (!hrt_program_is_identifier(name) || strcmp(name, "hal") == 0) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "module name '%s' is not a name other than 'hal' "
                           "(letters, digits and '_', not starting with a "
                           "digit)",
                           name);
  }
  hrt_callback_module_t* module = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*module), "module", (void**)&module));
  hrt_status_t status = hrt_copy_defs(module, function_count, functions);
  char* copied_name = status == HRT_OK
                          ? hrt_arena_strndup(&module->arena, name, strlen(name))
                          : NULL;
  if (status == HRT_OK && !copied_name) {
    status = hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                             "out of host memory copying a module name");
  }
  if (status != HRT_OK) {
    hrt_arena_deinit(&module->arena);
    free(module);
    return status;
  }
  module->callbacks = callbacks;
  hrt_vm_module_initialize(&hrt_callback_module_vtable, copied_name,
                           function_count, module->defs, &module->base);
  *out_module = &module->base;
  return HRT_OK;
}
