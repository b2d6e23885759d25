#include "vm/module.h"

#include <string.h>

#include "base/live.h"

void hrt_vm_module_initialize(const hrt_vm_module_vtable_t* vtable,
                              const char* name, uint32_t function_count,
                              const hrt_vm_function_def_t* functions,
                              hrt_vm_module_t* module) {
  hrt_ref_init(&module->ref);
  module->vtable = vtable;
  module->name = name;
  module->function_count = function_count;
  module->functions = functions;
  hrt_live_add(HRT_LIVE_MODULE, 1);
}

void hrt_vm_module_deinitialize(hrt_vm_module_t* module) {
  (void)module;
  hrt_live_add(HRT_LIVE_MODULE, -1);
}

void hrt_vm_module_retain(hrt_vm_module_t* module) {
  if (module) hrt_ref_retain(&module->ref);
}

void hrt_vm_module_release(hrt_vm_module_t* module) {
  if (module && hrt_ref_release(&module->ref)) module->vtable->destroy(module);
}

hrt_status_t hrt_vm_module_lookup_function(const hrt_vm_module_t* module,
                                           const char* name,
                                           uint32_t* out_ordinal) {
  for (uint32_t i = 0; i < module->function_count; ++i) {
    if (strcmp(module->functions[i].name, name) == 0) {
      *out_ordinal = i;
      return HRT_OK;
    }
  }
  return hrt_status_make(HRT_STATUS_NOT_FOUND,
                         "module '%s' has no function '%s'", module->name,
                         name);
}
