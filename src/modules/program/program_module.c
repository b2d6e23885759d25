#include "modules/program/program_module.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "modules/program/program_call.h"
#include "modules/program/program_internal.h"
#include "modules/program/program_parse.h"
#include "modules/program/program_state.h"

static void hrt_program_module_destroy(hrt_vm_module_t* base) {
  hrt_program_module_t* module = (hrt_program_module_t*)base;
  hrt_vm_module_deinitialize(base);
  hrt_arena_deinit(&module->arena);
  hrt_json_document_free(module->document);
  free(module);
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

hrt_status_t hrt_program_module_create(const char* json, size_t length,
                                       const char* base_dir,
                                       hrt_vm_module_t** out_module) {
  hrt_program_module_t* module = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*module), "module", (void**)&module));
  hrt_status_t status = hrt_json_parse(json, length, &module->document);
  if (status == HRT_OK) {
    hrt_program_parser_t parser = {module, base_dir};
    status = hrt_program_parse_module(&parser, hrt_json_root(module->document));
  }
  if (status != HRT_OK) {
    hrt_arena_deinit(&module->arena);
    hrt_json_document_free(module->document);
    free(module);
    return status;
  }
  hrt_vm_module_initialize(&hrt_program_module_vtable, module->base.name,
                           module->base.function_count, module->defs,
                           &module->base);
  *out_module = &module->base;
  return HRT_OK;
}
