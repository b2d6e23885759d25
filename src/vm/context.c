#include "vm/context.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/live.h"
#include "base/ref.h"

typedef struct hrt_vm_linked_module_s {
  hrt_vm_module_t* module;  // retained
  void* state;              // owned; NULL until linked
} hrt_vm_linked_module_t;

struct hrt_vm_context_s {
  hrt_ref_t ref;
  hrt_vm_instance_t* instance;  // retained
  uint32_t linked_count;        // modules whose state exists
  // The sequence number of the last call that started (0: none yet).
  atomic_uint_fast64_t last_sequence;
  uint32_t module_count;
  hrt_vm_linked_module_t modules[];
};

// One call in flight: keeps the context alive until `done` has run.
typedef struct hrt_vm_invocation_s {
  hrt_vm_context_t* context;
  hrt_vm_invocation_done_t done;
} hrt_vm_invocation_t;

// The id of the last invocation in the process (ids are never reused).
static atomic_uint_fast64_t hrt_vm_last_invocation_id;

static void hrt_vm_context_destroy(hrt_vm_context_t* context) {
  // States go in reverse link order: a module may use the states of the
  // modules it imported from.
  for (uint32_t i = context->linked_count; i-- > 0;) {
    hrt_vm_module_t* module = context->modules[i].module;
    module->vtable->free_state(module, context->modules[i].state);
  }
  for (uint32_t i = 0; i < context->module_count; ++i) {
    hrt_vm_module_release(context->modules[i].module);
  }
  hrt_vm_instance_release(context->instance);
  free(context);
  hrt_live_add(HRT_LIVE_CONTEXT, -1);
}

hrt_status_t hrt_vm_context_create(hrt_vm_instance_t* instance,
                                   hrt_vm_module_t* const* modules,
                                   uint32_t module_count,
                                   hrt_vm_context_t** out_context) {
  for (uint32_t i = 0; i < module_count; ++i) {
    for (uint32_t j = 0; j < i; ++j) {
      if (strcmp(modules[i]->name, modules[j]->name) == 0) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "modules %u and %u are both named '%s'", j, i,
                               modules[i]->name);
      }
    }
  }
  hrt_vm_context_t* context = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(
      sizeof(*context) + module_count * sizeof(context->modules[0]), "context",
      (void**)&context));
  hrt_ref_init(&context->ref);
  atomic_init(&context->last_sequence, 0);
  context->instance = instance;
  hrt_vm_instance_retain(instance);
  context->module_count = module_count;
  for (uint32_t i = 0; i < module_count; ++i) {
    context->modules[i].module = modules[i];
    hrt_vm_module_retain(modules[i]);
  }
  hrt_live_add(HRT_LIVE_CONTEXT, 1);
  for (uint32_t i = 0; i < module_count; ++i) {
    hrt_vm_module_t* module = modules[i];
    hrt_status_t status = module->vtable->create_state(
        module, context, &context->modules[i].state);
    if (status != HRT_OK) {
      hrt_vm_context_destroy(context);
      return hrt_status_annotate(status, "linking module '%s'", module->name);
    }
    context->linked_count = i + 1;
  }
  *out_context = context;
  return HRT_OK;
}

void hrt_vm_context_retain(hrt_vm_context_t* context) {
  if (context) hrt_ref_retain(&context->ref);
}

void hrt_vm_context_release(hrt_vm_context_t* context) {
  if (context && hrt_ref_release(&context->ref))
    hrt_vm_context_destroy(context);
}

hrt_status_t hrt_vm_context_find_module(const hrt_vm_context_t* context,
                                        const char* name,
                                        hrt_vm_module_t** out_module,
                                        void** out_state) {
  for (uint32_t i = 0; i < context->linked_count; ++i) {
    if (strcmp(context->modules[i].module->name, name) == 0) {
      *out_module = context->modules[i].module;
      *out_state = context->modules[i].state;
      return HRT_OK;
    }
  }
  if (hrt_vm_context_module_named(context, name)) {
    return hrt_status_make(HRT_STATUS_NOT_FOUND,
                           "module '%s' is linked after this one (a module "
                           "uses only modules linked before it)",
                           name);
  }
  return hrt_status_make(HRT_STATUS_NOT_FOUND,
                         "no module named '%s' is linked before this one",
                         name);
}

const hrt_vm_module_t* hrt_vm_context_module_named(
    const hrt_vm_context_t* context, const char* name) {
  for (uint32_t i = 0; i < context->module_count; ++i) {
    if (strcmp(context->modules[i].module->name, name) == 0) {
      return context->modules[i].module;
    }
  }
  return NULL;
}

hrt_status_t hrt_vm_context_lookup_function(const hrt_vm_context_t* context,
                                            const char* qualified_name,
                                            hrt_vm_function_t* out_function) {
  const char* dot = strchr(qualified_name, '.');
  if (!dot || dot == qualified_name || !dot[1]) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "function name '%s' must be 'module.function'",
                           qualified_name);
  }
  size_t module_length = (size_t)(dot - qualified_name);
  for (uint32_t i = 0; i < context->linked_count; ++i) {
    hrt_vm_module_t* module = context->modules[i].module;
    if (strlen(module->name) != module_length ||
        strncmp(module->name, qualified_name, module_length) != 0) {
      continue;
    }
    uint32_t ordinal = 0;
    HRT_RETURN_IF_ERROR(
        hrt_vm_module_lookup_function(module, dot + 1, &ordinal));
    *out_function = (hrt_vm_function_t){module, ordinal};
    return HRT_OK;
  }
  return hrt_status_make(HRT_STATUS_NOT_FOUND,
                         "no module '%.*s' in the context (looking up '%s')",
                         (int)module_length, qualified_name, qualified_name);
}

const hrt_vm_function_def_t* hrt_vm_function_def(
    const hrt_vm_function_t* function) {
  return &function->module->functions[function->ordinal];
}

static hrt_status_t hrt_check_inputs(const hrt_vm_function_def_t* def,
                                     hrt_hal_buffer_view_t* const* inputs,
                                     uint32_t input_count) {
  if (input_count != def->input_count) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "takes %u inputs (got %u)", def->input_count,
                           input_count);
  }
  for (uint32_t i = 0; i < input_count; ++i) {
    const hrt_vm_tensor_type_t* type = &def->inputs[i];
    const hrt_hal_buffer_view_t* view = inputs[i];
    if (!view) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "input %u ('%s') is missing", i, type->name);
    }
    hrt_hal_element_type_t element_type =
        hrt_hal_buffer_view_element_type(view);
    if (element_type != type->element_type) {
      return hrt_status_make(
          HRT_STATUS_INVALID_ARGUMENT, "input %u ('%s') must be %s (got %s)", i,
          type->name, hrt_hal_element_type_name(type->element_type),
          hrt_hal_element_type_name(element_type));
    }
    uint32_t rank = hrt_hal_buffer_view_rank(view);
    const int64_t* shape = hrt_hal_buffer_view_shape(view);
    bool same = rank == type->rank;
    for (uint32_t d = 0; same && d < rank; ++d)
      same = shape[d] == type->shape[d];
    if (!same) {
      char want[HRT_HAL_SHAPE_TEXT_MAX], got[HRT_HAL_SHAPE_TEXT_MAX];
      hrt_hal_shape_format(type->rank, type->shape, want);
      hrt_hal_shape_format(rank, shape, got);
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "input %u ('%s') must have shape %s (got %s)", i,
                             type->name, want, got);
    }
  }
  return HRT_OK;
}

hrt_status_t hrt_vm_function_check_inputs(const hrt_vm_function_t* function,
                                          hrt_hal_buffer_view_t* const* inputs,
                                          uint32_t input_count) {
  const hrt_vm_function_def_t* def = hrt_vm_function_def(function);
  return hrt_status_annotate(hrt_check_inputs(def, inputs, input_count),
                             "%s.%s", function->module->name, def->name);
}

static void hrt_vm_invocation_done(void* user_data, hrt_status_t status,
                                   hrt_hal_buffer_view_t* const* outputs,
                                   uint32_t output_count) {
  hrt_vm_invocation_t* invocation = user_data;
  invocation->done.fn(invocation->done.user_data, status, outputs,
                      output_count);
  hrt_vm_context_release(invocation->context);
  hrt_free_recycled(invocation);  // made on the invoking thread
  hrt_live_add(HRT_LIVE_INVOCATION, -1);
}

hrt_status_t hrt_vm_invoke_async(hrt_vm_context_t* context,
                                 const hrt_vm_function_t* function,
                                 hrt_hal_buffer_view_t* const* inputs,
                                 uint32_t input_count, void* route,
                                 hrt_vm_invocation_done_t done,
                                 hrt_vm_invocation_ids_t* out_ids) {
  return hrt_vm_invoke_in_place(context, function, inputs, input_count, NULL,
                                route, done, out_ids);
}

hrt_status_t hrt_vm_invoke_in_place(hrt_vm_context_t* context,
                                    const hrt_vm_function_t* function,
                                    hrt_hal_buffer_view_t* const* inputs,
                                    uint32_t input_count,
                                    hrt_hal_buffer_view_t* const* outputs,
                                    void* route, hrt_vm_invocation_done_t done,
                                    hrt_vm_invocation_ids_t* out_ids) {
  hrt_vm_module_t* module = function->module;
  void* state = NULL;
  for (uint32_t i = 0; i < context->linked_count && !state; ++i) {
    if (context->modules[i].module == module) state = context->modules[i].state;
  }
  if (!state || function->ordinal >= module->function_count) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "the function does not belong to this context");
  }
  HRT_RETURN_IF_ERROR(
      hrt_vm_function_check_inputs(function, inputs, input_count));
  hrt_vm_invocation_t* invocation = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_recycled(sizeof(*invocation), "invocation",
                                            (void**)&invocation));
  invocation->context = context;
  invocation->done = done;
  hrt_vm_context_retain(context);
  hrt_live_add(HRT_LIVE_INVOCATION, 1);
  const hrt_vm_invocation_ids_t ids = {
      .sequence = atomic_fetch_add(&context->last_sequence, 1) + 1,
      .invocation = atomic_fetch_add(&hrt_vm_last_invocation_id, 1) + 1,
  };
  if (out_ids) *out_ids = ids;
  hrt_vm_call_t call = {
      .function_ordinal = function->ordinal,
      .inputs = inputs,
      .input_count = input_count,
      .outputs = outputs,
      .sequence = ids.sequence,
      .invocation = ids.invocation,
      .route = route,
      .done = {hrt_vm_invocation_done, invocation},
  };
  hrt_status_t status = module->vtable->begin_call(module, state, &call);
  if (status != HRT_OK) {
    // The number goes back unless a later call has taken the next one.
    uint_fast64_t taken = ids.sequence;
    atomic_compare_exchange_strong(&context->last_sequence, &taken,
                                   ids.sequence - 1);
    hrt_vm_context_release(context);
    hrt_free_recycled(invocation);
    hrt_live_add(HRT_LIVE_INVOCATION, -1);
  }
  return status;
}
