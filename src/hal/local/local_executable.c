#include "hal/local/local_executable.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/dynlib.h"
#include "hal/command_buffer.h"
#include "hal/local/builtin_kernels.h"

typedef struct hrt_local_executable_s {
  hrt_hal_executable_t base;
  hrt_dynlib_t* library;  // NULL for the built-in kernels
  const halrt_kernel_library_t* table;
  hrt_hal_executable_entry_t entries[];
} hrt_local_executable_t;

static void hrt_local_executable_destroy(hrt_hal_executable_t* base) {
  hrt_local_executable_t* executable = (hrt_local_executable_t*)base;
  hrt_hal_executable_deinitialize(base);
  hrt_dynlib_close(executable->library);
  free(executable);
}

static const hrt_hal_executable_vtable_t hrt_local_executable_vtable = {
    .destroy = hrt_local_executable_destroy,
};

static hrt_status_t hrt_check_table(const halrt_kernel_library_t* table,
                                    const char* origin) {
  if (!table) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "kernel library '%s' returned no table for ABI "
                           "version %u",
                           origin, HALRT_KERNEL_ABI_VERSION);
  }
  if (table->abi_version < 1 || table->abi_version > HALRT_KERNEL_ABI_VERSION) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "kernel library '%s' uses ABI version %u; this "
                           "halrt supports 1 to %u",
                           origin, table->abi_version,
                           HALRT_KERNEL_ABI_VERSION);
  }
  if (table->kernel_count == 0 || !table->kernels) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "kernel library '%s' has no kernels", origin);
  }
  for (uint32_t i = 0; i < table->kernel_count; ++i) {
    const halrt_kernel_entry_t* entry = &table->kernels[i];
    if (!entry->name || !entry->name[0] || !entry->fn) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "kernel library '%s': kernel %u has no name or "
                             "no function",
                             origin, i);
    }
    if (entry->binding_count > HRT_HAL_MAX_DISPATCH_BINDINGS ||
        entry->constant_count > HRT_HAL_MAX_DISPATCH_CONSTANTS) {
      return hrt_status_make(
          HRT_STATUS_INVALID_ARGUMENT,
          "kernel library '%s': kernel '%s' takes %u "
          "bindings and %u constants (limits %d and %d)",
          origin, entry->name, entry->binding_count, entry->constant_count,
          HRT_HAL_MAX_DISPATCH_BINDINGS, HRT_HAL_MAX_DISPATCH_CONSTANTS);
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (strcmp(table->kernels[j].name, entry->name) == 0) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "kernel library '%s' names kernel '%s' twice",
                               origin, entry->name);
      }
    }
  }
  return HRT_OK;
}

// Opens `path` and queries its table. On success the caller owns the library.
static hrt_status_t hrt_open_library(const char* path,
                                     hrt_dynlib_t** out_library,
                                     const halrt_kernel_library_t** out_table) {
  hrt_dynlib_t* library = NULL;
  HRT_RETURN_IF_ERROR(hrt_dynlib_open(&path, 1, &library));
  void* symbol = NULL;
  hrt_status_t status =
      hrt_dynlib_symbol(library, HALRT_KERNEL_LIBRARY_QUERY_SYMBOL, &symbol);
  const halrt_kernel_library_t* table = NULL;
  if (status == HRT_OK) {
    halrt_kernel_library_query_fn_t query;
    memcpy(&query, &symbol, sizeof(query));
    table = query(HALRT_KERNEL_ABI_VERSION);
    status = hrt_check_table(table, path);
  }
  if (status != HRT_OK) {
    hrt_dynlib_close(library);
    return status;
  }
  *out_library = library;
  *out_table = table;
  return HRT_OK;
}

hrt_status_t hrt_local_executable_create(
    hrt_hal_device_t* device, const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) {
  hrt_dynlib_t* library = NULL;
  const halrt_kernel_library_t* table = NULL;
  switch (params->format) {
    case HRT_HAL_EXECUTABLE_FORMAT_BUILTIN:
      table = hrt_local_builtin_kernel_library();
      break;
    case HRT_HAL_EXECUTABLE_FORMAT_CPU_LIBRARY:
      if (!params->path || !params->path[0]) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "a CPU kernel library needs a path");
      }
      HRT_RETURN_IF_ERROR(hrt_open_library(params->path, &library, &table));
      break;
    default:
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "CPU devices run built-in kernels or kernel "
                             "libraries, not PTX, cubin or fatbin");
  }
  hrt_local_executable_t* executable = NULL;
  hrt_status_t status = hrt_allocate_zeroed(
      sizeof(*executable) +
          table->kernel_count * sizeof(executable->entries[0]),
      "executable", (void**)&executable);
  if (status != HRT_OK) {
    hrt_dynlib_close(library);
    return status;
  }
  for (uint32_t i = 0; i < table->kernel_count; ++i) {
    executable->entries[i] = (hrt_hal_executable_entry_t){
        .name = table->kernels[i].name,
        .binding_count = table->kernels[i].binding_count,
        .constant_count = table->kernels[i].constant_count};
  }
  executable->library = library;
  executable->table = table;
  hrt_hal_executable_initialize(
      &hrt_local_executable_vtable, device,
      library ? hrt_dynlib_path(library)
              : (table->name ? table->name : "builtin"),
      table->kernel_count, executable->entries, &executable->base);
  *out_executable = &executable->base;
  return HRT_OK;
}

const halrt_kernel_entry_t* hrt_local_executable_kernel(
    const hrt_hal_executable_t* executable, uint32_t ordinal) {
  return &((const hrt_local_executable_t*)executable)->table->kernels[ordinal];
}
