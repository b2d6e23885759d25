#include "modules/program/program_module.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "modules/program/program_call.h"
#include "modules/program/program_internal.h"
#include "modules/program/program_parse.h"
#include "modules/program/program_state.h"

// Frees what creation made, in a module that may be partly made.
static void hrt_program_module_free(hrt_program_module_t* module) {
  for (uint32_t i = 0; i < module->constant_count; ++i) {
    free(module->constants[i].data);
  }
  hrt_arena_deinit(&module->arena);
  hrt_json_document_free(module->document);
  free(module);
}

static void hrt_program_module_destroy(hrt_vm_module_t* base) {
  hrt_vm_module_deinitialize(base);
  hrt_program_module_free((hrt_program_module_t*)base);
}

static const hrt_vm_module_vtable_t hrt_program_module_vtable = {
    .destroy = hrt_program_module_destroy,
    .create_state = hrt_program_state_create,
    .free_state = hrt_program_state_free,
    .begin_call = hrt_program_call_begin,
};

bool hrt_program_module_isa(const hrt_vm_module_t* module) {
  return module->vtable == &hrt_program_module_vtable;
}

const char* const* hrt_program_module_dispatch_keys(
    const hrt_vm_module_t* module, uint32_t* out_count) {
  const hrt_program_module_t* program = (const hrt_program_module_t*)module;
  *out_count = program->dispatch_count;
  return program->dispatch_keys;
}

// Copies each constant's data into the module, checking counts and sizes.
static hrt_status_t hrt_copy_constants(
    hrt_program_module_t* module, const hrt_program_constant_data_t* data,
    uint32_t count) {
  if (count != module->constant_count) {
    return hrt_status_make(
        HRT_STATUS_INVALID_ARGUMENT,
        "constants: the description declares %u constant%s but data was "
        "given for %u",
        module->constant_count, module->constant_count == 1 ? "" : "s",
        count);
  }
  for (uint32_t i = 0; i < count; ++i) {
    hrt_module_constant_t* constant = &module->constants[i];
    if (data[i].byte_length != constant->byte_length) {
      char shape[HRT_HAL_SHAPE_TEXT_MAX];
      hrt_hal_shape_format(constant->type.rank, constant->type.shape, shape);
      return hrt_status_make(
          HRT_STATUS_INVALID_ARGUMENT,
          "constants.%s: its data has %llu bytes, but a %s%s constant has "
          "%llu",
          constant->type.name, (unsigned long long)data[i].byte_length,
          hrt_hal_element_type_name(constant->type.element_type), shape,
          (unsigned long long)constant->byte_length);
    }
    if (constant->byte_length == 0) continue;
    HRT_RETURN_IF_ERROR(hrt_allocate(constant->byte_length, "constant",
                                     &constant->data));
    memcpy(constant->data, data[i].data, constant->byte_length);
  }
  return HRT_OK;
}

hrt_status_t hrt_program_module_create_with_constants(
    const char* json, size_t length, const char* base_dir,
    const hrt_program_constant_data_t* constants, uint32_t constant_count,
    hrt_vm_module_t** out_module) {
  hrt_program_module_t* module = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*module), "module", (void**)&module));
  hrt_status_t status = hrt_json_parse(json, length, &module->document);
  if (status == HRT_OK) {
    hrt_program_parser_t parser = {module, base_dir};
    status = hrt_program_parse_module(&parser, hrt_json_root(module->document));
  }
  if (status == HRT_OK) {
    status = hrt_copy_constants(module, constants, constant_count);
  }
  if (status != HRT_OK) {
    hrt_program_module_free(module);
    return status;
  }
  hrt_vm_module_initialize(&hrt_program_module_vtable, module->base.name,
                           module->base.function_count, module->defs,
                           &module->base);
  *out_module = &module->base;
  return HRT_OK;
}

hrt_status_t hrt_program_module_create(const char* json, size_t length,
                                       const char* base_dir,
                                       hrt_vm_module_t** out_module) {
  return hrt_program_module_create_with_constants(json, length, base_dir, NULL,
                                                  0, out_module);
}
