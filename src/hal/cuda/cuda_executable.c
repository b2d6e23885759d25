#include "hal/cuda/cuda_executable.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "hal/command_buffer.h"
#include "hal/cuda/builtin_ptx.h"
#include "hal/cuda/cuda_image.h"
#include "hal/cuda/cuda_kernel_cache.h"
#include "hal/cuda/cuda_nvrtc.h"
#include "hal/cuda/cuda_ptx.h"
#include "hal/device.h"

typedef struct hrt_cuda_executable_s {
  hrt_hal_executable_t base;
  const hrt_cuda_symbols_t* symbols;
  hrt_cu_context_t context;  // the device's; the device outlives us
  hrt_cu_module_t module;
  hrt_cuda_kernel_t* kernels;  // [entry_count], inside this allocation
  hrt_hal_executable_entry_t entries[];  // then the kernels, then the names
} hrt_cuda_executable_t;

static void hrt_cuda_executable_destroy(hrt_hal_executable_t* base) {
  hrt_cuda_executable_t* executable = (hrt_cuda_executable_t*)base;
  const hrt_cuda_symbols_t* cu = executable->symbols;
  // Unloading only fails on a lost context, and there is no one to tell.
  if (cu->cuCtxPushCurrent_v2(executable->context) == HRT_CUDA_SUCCESS) {
    (void)cu->cuModuleUnload(executable->module);
    hrt_cu_context_t popped = NULL;
    (void)cu->cuCtxPopCurrent_v2(&popped);
  }
  hrt_hal_executable_deinitialize(base);
  free(executable);
}

static const hrt_hal_executable_vtable_t hrt_cuda_executable_vtable = {
    .destroy = hrt_cuda_executable_destroy,
};

// A kernel as found in the module, before it is packed into the executable.
typedef struct hrt_cuda_found_s {
  const char* name;  // borrowed from the PTX entries or the driver
  uint32_t binding_count;
  uint32_t constant_count;
  hrt_cu_function_t function;
} hrt_cuda_found_t;

static hrt_status_t hrt_cuda_load_module(const hrt_cuda_symbols_t* cu,
                                         const void* image, const char* what,
                                         hrt_cu_module_t* out_module) {
  char log[4096] = "";
  int options[2] = {HRT_CU_JIT_ERROR_LOG_BUFFER,
                    HRT_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[2] = {log, (void*)(uintptr_t)sizeof(log)};
  hrt_status_t status = HRT_CUDA_CALL(cu, cuModuleLoadDataEx,
                                      (out_module, image, 2, options, values));
  if (status == HRT_OK) return HRT_OK;
  log[sizeof(log) - 1] = 0;
  hrt_status_t annotated = hrt_status_make(
      hrt_status_code(status), "loading %s: %s%s%s", what,
      hrt_status_message(status), log[0] ? "; JIT log: " : "", log);
  hrt_status_free(status);
  return annotated;
}

// Resolves `count` PTX entries to functions of `module`.
static hrt_status_t hrt_cuda_resolve_ptx(const hrt_cuda_symbols_t* cu,
                                         hrt_cu_module_t module,
                                         const hrt_cuda_ptx_entry_t* entries,
                                         uint32_t count,
                                         hrt_cuda_found_t* found) {
  for (uint32_t i = 0; i < count; ++i) {
    found[i] = (hrt_cuda_found_t){entries[i].name, entries[i].binding_count,
                                  entries[i].constant_count, NULL};
    hrt_status_t status = HRT_CUDA_CALL(
        cu, cuModuleGetFunction, (&found[i].function, module, entries[i].name));
    if (status != HRT_OK) {
      return hrt_status_annotate(status, "kernel '%s'", entries[i].name);
    }
  }
  return HRT_OK;
}

// Counts the parameters of `found->function` by size (the cubin rule in
// cuda_executable.h).
static hrt_status_t hrt_cuda_count_params(const hrt_cuda_symbols_t* cu,
                                          hrt_cuda_found_t* found) {
  const size_t limit =
      HRT_HAL_MAX_DISPATCH_BINDINGS + HRT_HAL_MAX_DISPATCH_CONSTANTS;
  for (size_t index = 0; index <= limit; ++index) {
    size_t offset = 0, size = 0;
    hrt_cu_result_t result =
        cu->cuFuncGetParamInfo(found->function, index, &offset, &size);
    // Past the last parameter the driver answers INVALID_VALUE.
    if (result == HRT_CUDA_ERROR_INVALID_VALUE) return HRT_OK;
    HRT_RETURN_IF_ERROR(
        hrt_cuda_result_status(cu, result, "cuFuncGetParamInfo"));
    if (index == limit || (size != 8 && size != 4) ||
        (size == 8 && found->constant_count > 0)) {
      return hrt_status_make(
          HRT_STATUS_INVALID_ARGUMENT,
          "kernel '%s': parameter %zu is %zu bytes; halrt passes bindings as "
          "8-byte device pointers, then constants as 4-byte values (at most "
          "%d and %d)",
          found->name, index, size, HRT_HAL_MAX_DISPATCH_BINDINGS,
          HRT_HAL_MAX_DISPATCH_CONSTANTS);
    }
    if (size == 8) {
      if (++found->binding_count > HRT_HAL_MAX_DISPATCH_BINDINGS) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "kernel '%s' takes more than %d pointers",
                               found->name, HRT_HAL_MAX_DISPATCH_BINDINGS);
      }
    } else if (++found->constant_count > HRT_HAL_MAX_DISPATCH_CONSTANTS) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "kernel '%s' takes more than %d constants",
                             found->name, HRT_HAL_MAX_DISPATCH_CONSTANTS);
    }
  }
  return HRT_OK;
}

// Enumerates the kernels of a cubin or fatbin module. On success `*out_found`
// is a heap array of `*out_count` kernels whose names the driver owns.
static hrt_status_t hrt_cuda_enumerate(const hrt_cuda_symbols_t* cu,
                                       hrt_cu_module_t module, const char* what,
                                       uint32_t* out_count,
                                       hrt_cuda_found_t** out_found) {
  if (!cu->cuModuleGetFunctionCount || !cu->cuModuleEnumerateFunctions ||
      !cu->cuFuncGetName || !cu->cuFuncGetParamInfo) {
    return hrt_status_make(HRT_STATUS_UNIMPLEMENTED,
                           "%s executables need a CUDA 12.4+ driver, which "
                           "can list a module's kernels and their parameters "
                           "(cuModuleEnumerateFunctions, cuFuncGetParamInfo); "
                           "use PTX with this driver",
                           what);
  }
  unsigned int count = 0;
  HRT_RETURN_IF_ERROR(
      HRT_CUDA_CALL(cu, cuModuleGetFunctionCount, (&count, module)));
  if (count == 0) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT, "the %s has no kernels",
                           what);
  }
  hrt_cu_function_t* functions = NULL;
  hrt_cuda_found_t* found = NULL;
  hrt_status_t status =
      hrt_allocate(count * sizeof(*functions), "kernels", (void**)&functions);
  if (status == HRT_OK) {
    status =
        hrt_allocate_zeroed(count * sizeof(*found), "kernels", (void**)&found);
  }
  if (status == HRT_OK) {
    status = HRT_CUDA_CALL(cu, cuModuleEnumerateFunctions,
                           (functions, count, module));
  }
  for (unsigned int i = 0; i < count && status == HRT_OK; ++i) {
    found[i].function = functions[i];
    status = HRT_CUDA_CALL(cu, cuFuncGetName, (&found[i].name, functions[i]));
    if (status == HRT_OK) status = hrt_cuda_count_params(cu, &found[i]);
  }
  free(functions);
  if (status != HRT_OK) {
    free(found);
    return hrt_status_annotate(status, "%s", what);
  }
  *out_count = count;
  *out_found = found;
  return HRT_OK;
}

// Checks the built-in PTX against the signature table: every kernel must be
// a documented built-in with the documented arity.
static hrt_status_t hrt_cuda_match_builtins(const hrt_cuda_found_t* found,
                                            uint32_t count,
                                            hrt_cuda_kernel_t* kernels) {
  for (uint32_t i = 0; i < count; ++i) {
    const hrt_builtin_signature_t* signature =
        hrt_builtin_signature_find(found[i].name);
    if (!signature || signature->binding_count != found[i].binding_count ||
        signature->constant_count != found[i].constant_count) {
      return hrt_status_make(HRT_STATUS_INTERNAL,
                             "built-in CUDA kernel '%s' does not match the "
                             "built-in signature table (%u bindings, %u "
                             "constants)",
                             found[i].name, found[i].binding_count,
                             found[i].constant_count);
    }
    kernels[i].builtin = signature;
  }
  return HRT_OK;
}

// The entries an executable exposes, when not every kernel of its module:
// entry i is the kernel whose symbol is symbols[i], named names[i].
typedef struct hrt_cuda_selection_s {
  uint32_t count;
  const char* const* names;
  const char* const* symbols;
} hrt_cuda_selection_t;

// Replaces `*found` (`*count` kernels, heap) with the selected kernels, in
// selection order and under their selected names. NOT_FOUND naming an entry
// whose symbol is not a kernel of the module.
static hrt_status_t hrt_cuda_select(const hrt_cuda_selection_t* selection,
                                    uint32_t* count, hrt_cuda_found_t** found) {
  hrt_cuda_found_t* selected = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate(selection->count * sizeof(*selected),
                                   "kernels", (void**)&selected));
  for (uint32_t i = 0; i < selection->count; ++i) {
    uint32_t k = 0;
    while (k < *count && strcmp((*found)[k].name, selection->symbols[i]) != 0) {
      ++k;
    }
    if (k == *count) {
      hrt_status_t status =
          strcmp(selection->names[i], selection->symbols[i]) == 0
              ? hrt_status_make(HRT_STATUS_NOT_FOUND,
                                "entry '%s': no kernel of that name",
                                selection->names[i])
              : hrt_status_make(HRT_STATUS_NOT_FOUND,
                                "entry '%s': no kernel '%s'",
                                selection->names[i], selection->symbols[i]);
      free(selected);
      return status;
    }
    selected[i] = (*found)[k];
    selected[i].name = selection->names[i];
  }
  free(*found);
  *found = selected;
  *count = selection->count;
  return HRT_OK;
}

// Packs the found kernels into a new executable that takes `module`.
static hrt_status_t hrt_cuda_executable_pack(
    hrt_hal_device_t* device, const hrt_cuda_symbols_t* cu,
    hrt_cu_context_t context, hrt_cu_module_t module, const char* name,
    bool builtin, const hrt_cuda_found_t* found, uint32_t count,
    hrt_hal_executable_t** out_executable) {
  size_t names_size = strlen(name) + 1;
  for (uint32_t i = 0; i < count; ++i) names_size += strlen(found[i].name) + 1;
  hrt_cuda_executable_t* executable = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(
      sizeof(*executable) +
          count *
              (sizeof(hrt_hal_executable_entry_t) + sizeof(hrt_cuda_kernel_t)) +
          names_size,
      "executable", (void**)&executable));
  executable->kernels = (hrt_cuda_kernel_t*)(executable->entries + count);
  char* names = (char*)(executable->kernels + count);
  if (builtin) {
    hrt_status_t status =
        hrt_cuda_match_builtins(found, count, executable->kernels);
    if (status != HRT_OK) {
      free(executable);
      return status;
    }
  }
  const size_t name_length = strlen(name) + 1;
  memcpy(names, name, name_length);
  const char* executable_name = names;
  names += name_length;
  for (uint32_t i = 0; i < count; ++i) {
    const size_t length = strlen(found[i].name) + 1;
    memcpy(names, found[i].name, length);
    executable->entries[i] = (hrt_hal_executable_entry_t){
        names, found[i].binding_count, found[i].constant_count};
    executable->kernels[i].function = found[i].function;
    names += length;
  }
  executable->symbols = cu;
  executable->context = context;
  executable->module = module;
  hrt_hal_executable_initialize(&hrt_cuda_executable_vtable, device,
                                executable_name, count, executable->entries,
                                &executable->base);
  *out_executable = &executable->base;
  return HRT_OK;
}

// PTX (built-in or given): load, parse the entries, resolve them.
static hrt_status_t hrt_cuda_executable_create_ptx(
    hrt_hal_device_t* device, const hrt_cuda_symbols_t* cu,
    hrt_cu_context_t context, const char* text, bool builtin,
    const hrt_cuda_selection_t* selection,
    hrt_hal_executable_t** out_executable) {
  const char* name = builtin ? "builtin" : "ptx";
  hrt_cu_module_t module = NULL;
  HRT_RETURN_IF_ERROR(hrt_cuda_load_module(cu, text,
                                           builtin ? "the built-in "
                                                     "PTX"
                                                   : "PTX",
                                           &module));
  uint32_t count = 0;
  hrt_cuda_ptx_entry_t* entries = NULL;
  hrt_cuda_found_t* found = NULL;
  hrt_status_t status = hrt_cuda_ptx_parse_entries(text, &count, &entries);
  if (status == HRT_OK) {
    status = hrt_allocate(count * sizeof(*found), "kernels", (void**)&found);
  }
  if (status == HRT_OK) {
    status = hrt_cuda_resolve_ptx(cu, module, entries, count, found);
  }
  if (status == HRT_OK && selection) {
    status = hrt_cuda_select(selection, &count, &found);
  }
  if (status == HRT_OK) {
    status = hrt_cuda_executable_pack(device, cu, context, module, name,
                                      builtin, found, count, out_executable);
  }
  free(found);
  free(entries);
  if (status != HRT_OK) (void)cu->cuModuleUnload(module);
  return status;
}

static hrt_status_t hrt_cuda_executable_create_image(
    hrt_hal_device_t* device, const hrt_cuda_symbols_t* cu,
    hrt_cu_context_t context, const void* image, const char* what,
    const hrt_cuda_selection_t* selection,
    hrt_hal_executable_t** out_executable) {
  hrt_cu_module_t module = NULL;
  HRT_RETURN_IF_ERROR(hrt_cuda_load_module(cu, image, what, &module));
  uint32_t count = 0;
  hrt_cuda_found_t* found = NULL;
  hrt_status_t status = hrt_cuda_enumerate(cu, module, what, &count, &found);
  if (status == HRT_OK && selection) {
    status = hrt_cuda_select(selection, &count, &found);
  }
  if (status == HRT_OK) {
    status = hrt_cuda_executable_pack(device, cu, context, module, what, false,
                                      found, count, out_executable);
  }
  free(found);
  if (status != HRT_OK) (void)cu->cuModuleUnload(module);
  return status;
}

// What NVRTC makes of `source` for `device`: the kernel cache's entry when
// it has one, else a compile, which is then stored (a cache that cannot be
// written is ignored).
static hrt_status_t hrt_cuda_compile_source(
    hrt_hal_device_t* device, const hrt_hal_executable_params_t* params,
    const char* source, const char* source_name, uint32_t expression_count,
    const char* const* expressions, hrt_nvrtc_output_t** out_output) {
  const hrt_nvrtc_t* nvrtc = NULL;
  HRT_RETURN_IF_ERROR(hrt_nvrtc_load(&nvrtc));
  HRT_RETURN_IF_ERROR(
      hrt_nvrtc_check_options(params->option_count, params->options));
  const hrt_hal_device_info_t* info = hrt_hal_device_info(device);
  hrt_nvrtc_target_t target;
  HRT_RETURN_IF_ERROR(hrt_nvrtc_pick_target(nvrtc, info->compute_capability[0],
                                            info->compute_capability[1],
                                            &target));
  hrt_cuda_kernel_cache_key_t key;
  HRT_RETURN_IF_ERROR(hrt_cuda_kernel_cache_key_initialize(
      source_name, source, strlen(source), params->option_count,
      params->options, expression_count, expressions, nvrtc->version_major,
      nvrtc->version_minor, target.option, &key));
  char* directory = NULL;
  hrt_status_t status = hrt_cuda_kernel_cache_directory(&directory);
  hrt_status_free(status);  // no folder: compile without the cache
  hrt_nvrtc_output_t* cached = NULL;
  if (directory && hrt_cuda_kernel_cache_load(directory, &key, &cached) &&
      cached->lowered_count == expression_count) {
    *out_output = cached;
    status = HRT_OK;
  } else {
    free(cached);
    status = hrt_nvrtc_compile(nvrtc, source, source_name, params->option_count,
                               params->options, expression_count, expressions,
                               &target, out_output);
    if (status == HRT_OK && directory) {
      hrt_status_free(
          hrt_cuda_kernel_cache_store(directory, &key, *out_output));
    }
  }
  free(directory);
  hrt_cuda_kernel_cache_key_deinitialize(&key);
  return status;
}

// CUDA source: compiled (or taken from the kernel cache), then loaded as the
// PTX or cubin it became, exposing the declared entries (each under its
// declared name, found by its symbol: the name itself, or what NVRTC
// lowered its expression to), or every kernel when none is declared.
static hrt_status_t hrt_cuda_executable_create_source(
    hrt_hal_device_t* device, const hrt_cuda_symbols_t* cu,
    hrt_cu_context_t context, const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) {
  if (!params->data || params->data_length == 0) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "a CUDA source executable needs source text");
  }
  const char* source_name =
      params->source_name ? params->source_name : "source.cu";
  const uint32_t count = params->entry_decl_count;
  // The source with a NUL; the entries' names, symbols and expressions.
  char* source = NULL;
  const char** names = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate(params->data_length + 1, "CUDA source", (void**)&source));
  hrt_status_t status = hrt_allocate((3 * (size_t)count + 1) * sizeof(char*),
                                     "entry names", (void**)&names);
  if (status != HRT_OK) {
    free(source);
    return status;
  }
  memcpy(source, params->data, params->data_length);
  source[params->data_length] = 0;
  const char** symbols = names + count;
  const char** expressions = symbols + count;
  uint32_t expression_count = 0;
  for (uint32_t i = 0; i < count; ++i) {
    names[i] = params->entry_decls[i].name;
    symbols[i] = params->entry_decls[i].name;
    if (params->entry_decls[i].expression) {
      expressions[expression_count++] = params->entry_decls[i].expression;
    }
  }
  hrt_nvrtc_output_t* output = NULL;
  status = hrt_cuda_compile_source(device, params, source, source_name,
                                   expression_count, expressions, &output);
  if (status == HRT_OK) {
    for (uint32_t i = 0, e = 0; i < count; ++i) {
      if (params->entry_decls[i].expression) {
        symbols[i] = output->lowered_names[e++];
      }
    }
    const hrt_cuda_selection_t selection = {count, names, symbols};
    const hrt_cuda_selection_t* selected = count ? &selection : NULL;
    if (output->cubin) {
      status = hrt_cuda_image_check_cubin(output->image, output->image_length);
      if (status == HRT_OK) {
        status =
            hrt_cuda_executable_create_image(device, cu, context, output->image,
                                             "cubin", selected, out_executable);
      }
    } else {
      status = hrt_cuda_executable_create_ptx(
          device, cu, context, output->image, false, selected, out_executable);
    }
    status = hrt_status_annotate(status, "%s compiled by NVRTC", source_name);
  }
  free(output);
  free(names);
  free(source);
  return status;
}

hrt_status_t hrt_cuda_executable_create(
    hrt_hal_device_t* device, const hrt_cuda_symbols_t* symbols,
    hrt_cu_context_t context, const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) {
  switch (params->format) {
    case HRT_HAL_EXECUTABLE_FORMAT_BUILTIN:
      return hrt_cuda_executable_create_ptx(device, symbols, context,
                                            hrt_cuda_builtin_ptx, true, NULL,
                                            out_executable);
    case HRT_HAL_EXECUTABLE_FORMAT_PTX: {
      if (!params->data || params->data_length == 0) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "a PTX executable needs PTX text");
      }
      // The driver reads PTX up to a NUL, which the caller need not supply.
      char* text = NULL;
      HRT_RETURN_IF_ERROR(
          hrt_allocate(params->data_length + 1, "PTX text", (void**)&text));
      memcpy(text, params->data, params->data_length);
      text[params->data_length] = 0;
      hrt_status_t status = hrt_cuda_executable_create_ptx(
          device, symbols, context, text, false, NULL, out_executable);
      free(text);
      return status;
    }
    case HRT_HAL_EXECUTABLE_FORMAT_CUBIN:
    case HRT_HAL_EXECUTABLE_FORMAT_FATBIN:
      if (!params->data || params->data_length == 0) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "a cubin or fatbin executable needs an image");
      }
      // The driver reads as far as the image's headers say.
      HRT_RETURN_IF_ERROR(
          params->format == HRT_HAL_EXECUTABLE_FORMAT_CUBIN
              ? hrt_cuda_image_check_cubin(params->data, params->data_length)
              : hrt_cuda_image_check_fatbin(params->data,
                                            params->data_length));
      return hrt_cuda_executable_create_image(
          device, symbols, context, params->data,
          params->format == HRT_HAL_EXECUTABLE_FORMAT_CUBIN ? "cubin"
                                                            : "fatbin",
          NULL, out_executable);
    case HRT_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE:
      return hrt_cuda_executable_create_source(device, symbols, context, params,
                                               out_executable);
    default:
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "CUDA devices run built-in kernels, PTX, cubin, "
                             "fatbin or CUDA source, not CPU kernel "
                             "libraries");
  }
}

const hrt_cuda_kernel_t* hrt_cuda_executable_kernel(
    const hrt_hal_executable_t* executable, uint32_t ordinal) {
  return &((const hrt_cuda_executable_t*)executable)->kernels[ordinal];
}
