#include "hal/cuda/cuda_executable.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "hal/command_buffer.h"
#include "hal/cuda/builtin_ptx.h"
#include "hal/cuda/cuda_device.h"
#include "hal/cuda/cuda_image.h"
#include "hal/cuda/cuda_kernel_cache.h"
#include "hal/cuda/cuda_nvrtc.h"
#include "hal/cuda/cuda_ptx.h"
#include "hal/device.h"

typedef struct hrt_cuda_executable_s {
  hrt_hal_executable_t base;
  hrt_cu_module_t module;
  hrt_cuda_kernel_t* kernels;  // [entry_count], inside this allocation
  hrt_hal_executable_entry_t entries[];  // then the kernels, then the names
} hrt_cuda_executable_t;

static void hrt_cuda_executable_destroy(hrt_hal_executable_t* base) {
  hrt_cuda_executable_t* executable = (hrt_cuda_executable_t*)base;
  // cuModuleUnload may wait for the GPU: the device's thread does it.
  hrt_cuda_device_unload_module(base->device, executable->module);
  hrt_hal_executable_deinitialize(base);
  free(executable);
}

static const hrt_hal_executable_vtable_t hrt_cuda_executable_vtable = {
    .destroy = hrt_cuda_executable_destroy,
};

// A kernel as found in the module, before it is packed into the executable.
typedef struct hrt_cuda_found_s {
  const char* name;    // the entry's name (borrowed: PTX, driver or decl)
  const char* symbol;  // the kernel's name in the module (borrowed)
  uint32_t binding_count;
  uint32_t constant_count;             // 32-bit words
  uint32_t param_count;                // declared layout, or 0
  const hrt_hal_param_type_t* params;  // declared (borrowed), or NULL
  hrt_cu_function_t function;
} hrt_cuda_found_t;

// Takes `decl`'s parameter types as `found`'s layout, within the dispatch
// limits.
static hrt_status_t hrt_cuda_found_declare(const hrt_hal_entry_decl_t* decl,
                                           hrt_cuda_found_t* found) {
  uint32_t buffers = 0, words = 0;
  for (uint32_t i = 0; i < decl->param_count; ++i) {
    const uint32_t n = hrt_hal_param_type_words(decl->params[i]);
    buffers += n == 0;
    words += n;
  }
  if (buffers > HRT_HAL_MAX_DISPATCH_BINDINGS ||
      words > HRT_HAL_MAX_DISPATCH_CONSTANTS) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "kernel '%s' is declared with %u buffers and %u "
                           "constant words; at most %d and %d",
                           decl->name, buffers, words,
                           HRT_HAL_MAX_DISPATCH_BINDINGS,
                           HRT_HAL_MAX_DISPATCH_CONSTANTS);
  }
  found->binding_count = buffers;
  found->constant_count = words;
  found->param_count = decl->param_count;
  found->params = decl->params;
  return HRT_OK;
}

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

// The symbol of declared entry `index`: symbols[index] (a name NVRTC
// lowered), or the entry's own name.
static const char* hrt_cuda_decl_symbol(
    const hrt_hal_executable_params_t* params, const char* const* symbols,
    uint32_t index) {
  return symbols ? symbols[index] : params->entry_decls[index].name;
}

// Chooses the PTX entries to expose: with no declarations every entry, with
// its inferred layout; otherwise the declared entries, each found in the PTX
// by its symbol (hrt_cuda_decl_symbol) and checked against it. `found` has
// room for max(count, declarations).
static hrt_status_t hrt_cuda_select_ptx(
    const hrt_cuda_ptx_entry_t* entries, uint32_t count,
    const hrt_hal_executable_params_t* params, const char* const* symbols,
    hrt_cuda_found_t* found, uint32_t* out_count) {
  if (params->entry_decl_count == 0) {
    for (uint32_t i = 0; i < count; ++i) {
      found[i] = (hrt_cuda_found_t){.name = entries[i].name,
                                    .symbol = entries[i].name};
      HRT_RETURN_IF_ERROR(hrt_cuda_ptx_infer(
          &entries[i], &found[i].binding_count, &found[i].constant_count));
    }
    *out_count = count;
    return HRT_OK;
  }
  for (uint32_t d = 0; d < params->entry_decl_count; ++d) {
    const hrt_hal_entry_decl_t* decl = &params->entry_decls[d];
    const char* symbol = hrt_cuda_decl_symbol(params, symbols, d);
    const hrt_cuda_ptx_entry_t* entry = NULL;
    for (uint32_t i = 0; i < count && !entry; ++i) {
      if (strcmp(entries[i].name, symbol) == 0) entry = &entries[i];
    }
    if (!entry && symbol == decl->name) {
      return hrt_status_make(HRT_STATUS_NOT_FOUND,
                             "the PTX has no entry '%s' (declared in the "
                             "module's entries)",
                             decl->name);
    }
    if (!entry) {
      return hrt_status_make(HRT_STATUS_NOT_FOUND,
                             "entry '%s': the PTX has no kernel '%s'",
                             decl->name, symbol);
    }
    found[d] = (hrt_cuda_found_t){.name = decl->name, .symbol = entry->name};
    if (decl->typed) {
      HRT_RETURN_IF_ERROR(
          hrt_cuda_ptx_check(entry, decl->param_count, decl->params));
      HRT_RETURN_IF_ERROR(hrt_cuda_found_declare(decl, &found[d]));
    } else {
      HRT_RETURN_IF_ERROR(hrt_cuda_ptx_infer(entry, &found[d].binding_count,
                                             &found[d].constant_count));
    }
  }
  *out_count = params->entry_decl_count;
  return HRT_OK;
}

// Resolves the `count` chosen kernels to functions of `module`.
static hrt_status_t hrt_cuda_resolve(const hrt_cuda_symbols_t* cu,
                                     hrt_cu_module_t module, uint32_t count,
                                     hrt_cuda_found_t* found) {
  for (uint32_t i = 0; i < count; ++i) {
    hrt_status_t status = HRT_CUDA_CALL(
        cu, cuModuleGetFunction, (&found[i].function, module, found[i].symbol));
    if (status != HRT_OK) {
      return hrt_status_annotate(status, "kernel '%s'", found[i].symbol);
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

// Checks `decl`'s types against the sizes the driver reports for
// `found->function`'s parameters (8 bytes for a buffer or a 64-bit scalar,
// 4 for a 32-bit one), and takes them as its layout.
static hrt_status_t hrt_cuda_check_sizes(const hrt_cuda_symbols_t* cu,
                                         const char* what,
                                         const hrt_hal_entry_decl_t* decl,
                                         hrt_cuda_found_t* found) {
  for (uint32_t index = 0; index <= decl->param_count; ++index) {
    size_t offset = 0, size = 0;
    hrt_cu_result_t result =
        cu->cuFuncGetParamInfo(found->function, index, &offset, &size);
    const bool past_last = result == HRT_CUDA_ERROR_INVALID_VALUE;
    if (!past_last) {
      HRT_RETURN_IF_ERROR(
          hrt_cuda_result_status(cu, result, "cuFuncGetParamInfo"));
    }
    if (past_last != (index == decl->param_count)) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "kernel '%s': the module declares %u parameters "
                             "but the %s has %s",
                             found->name, decl->param_count, what,
                             past_last ? "fewer" : "more");
    }
    if (past_last) break;
    const hrt_hal_param_type_t type = decl->params[index];
    const size_t expected = hrt_hal_param_type_words(type) == 1 ? 4 : 8;
    if (size != expected) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "kernel '%s': parameter %u is declared '%s' (%zu "
                             "bytes) but is %zu bytes in the %s",
                             found->name, index, hrt_hal_param_type_name(type),
                             expected, size, what);
    }
  }
  return hrt_cuda_found_declare(decl, found);
}

// Finds the declared kernels of a cubin or fatbin module by symbol
// (hrt_cuda_decl_symbol). Without the driver's parameter introspection
// (CUDA 12.4) typed declarations are trusted, and untyped ones cannot be
// laid out (UNIMPLEMENTED).
static hrt_status_t hrt_cuda_find_declared(
    const hrt_cuda_symbols_t* cu, hrt_cu_module_t module, const char* what,
    const hrt_hal_executable_params_t* params, const char* const* symbols,
    hrt_cuda_found_t* found) {
  for (uint32_t d = 0; d < params->entry_decl_count; ++d) {
    const hrt_hal_entry_decl_t* decl = &params->entry_decls[d];
    found[d] = (hrt_cuda_found_t){
        .name = decl->name, .symbol = hrt_cuda_decl_symbol(params, symbols, d)};
    hrt_status_t status = hrt_cuda_resolve(cu, module, 1, &found[d]);
    if (status != HRT_OK && found[d].symbol != decl->name) {
      return hrt_status_annotate(status, "entry '%s'", decl->name);
    }
    HRT_RETURN_IF_ERROR(status);
    if (decl->typed && !cu->cuFuncGetParamInfo) {
      HRT_RETURN_IF_ERROR(hrt_cuda_found_declare(decl, &found[d]));
    } else if (decl->typed) {
      HRT_RETURN_IF_ERROR(hrt_cuda_check_sizes(cu, what, decl, &found[d]));
    } else if (!cu->cuFuncGetParamInfo) {
      return hrt_status_make(HRT_STATUS_UNIMPLEMENTED,
                             "kernel '%s': the module does not declare its "
                             "parameters, and this driver cannot list them "
                             "(cuFuncGetParamInfo, CUDA 12.4+); declare them "
                             "or use PTX",
                             decl->name);
    } else {
      HRT_RETURN_IF_ERROR(hrt_cuda_count_params(cu, &found[d]));
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
    found[i].symbol = found[i].name;
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

// Packs the found kernels into a new executable that takes `module`.
static hrt_status_t hrt_cuda_executable_pack(
    hrt_hal_device_t* device, hrt_cu_module_t module, const char* name,
    bool builtin, const hrt_cuda_found_t* found, uint32_t count,
    hrt_hal_executable_t** out_executable) {
  size_t names_size = strlen(name) + 1;
  size_t param_count = 0;
  for (uint32_t i = 0; i < count; ++i) {
    names_size += strlen(found[i].name) + 1;
    param_count += found[i].param_count;
  }
  hrt_cuda_executable_t* executable = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(
      sizeof(*executable) +
          count *
              (sizeof(hrt_hal_executable_entry_t) + sizeof(hrt_cuda_kernel_t)) +
          param_count * sizeof(hrt_hal_param_type_t) + names_size,
      "executable", (void**)&executable));
  executable->kernels = (hrt_cuda_kernel_t*)(executable->entries + count);
  hrt_hal_param_type_t* params =
      (hrt_hal_param_type_t*)(executable->kernels + count);
  char* names = (char*)(params + param_count);
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
        names, found[i].binding_count, found[i].constant_count,
        found[i].param_count, found[i].params ? params : NULL};
    if (found[i].param_count) {
      memcpy(params, found[i].params, found[i].param_count * sizeof(*params));
      params += found[i].param_count;
    }
    executable->kernels[i].function = found[i].function;
    names += length;
  }
  executable->module = module;
  hrt_hal_executable_initialize(&hrt_cuda_executable_vtable, device,
                                executable_name, count, executable->entries,
                                &executable->base);
  *out_executable = &executable->base;
  return HRT_OK;
}

// Leaves out of the built-in PTX's entries the device's own kernels
// (HRT_CUDA_INTERNAL_KERNEL_PREFIX), keeping the others in order; returns
// how many are kept.
static uint32_t hrt_cuda_drop_internal(hrt_cuda_ptx_entry_t* entries,
                                       uint32_t count) {
  const size_t prefix = strlen(HRT_CUDA_INTERNAL_KERNEL_PREFIX);
  uint32_t kept = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (strncmp(entries[i].name, HRT_CUDA_INTERNAL_KERNEL_PREFIX, prefix)) {
      entries[kept++] = entries[i];
    }
  }
  return kept;
}

// PTX (built-in or given): load, parse the entries, choose and resolve
// them.
static hrt_status_t hrt_cuda_executable_create_ptx(
    hrt_hal_device_t* device, const hrt_cuda_symbols_t* cu, const char* text,
    bool builtin, const hrt_hal_executable_params_t* params,
    const char* const* symbols, hrt_hal_executable_t** out_executable) {
  const char* name = builtin ? "builtin" : "ptx";
  hrt_cu_module_t module = NULL;
  HRT_RETURN_IF_ERROR(hrt_cuda_load_module(cu, text,
                                           builtin ? "the built-in "
                                                     "PTX"
                                                   : "PTX",
                                           &module));
  uint32_t count = 0, chosen = 0;
  hrt_cuda_ptx_entry_t* entries = NULL;
  hrt_cuda_found_t* found = NULL;
  hrt_status_t status = hrt_cuda_ptx_parse_entries(text, &count, &entries);
  if (status == HRT_OK && builtin) {
    count = hrt_cuda_drop_internal(entries, count);
  }
  if (status == HRT_OK) {
    const uint32_t room =
        count > params->entry_decl_count ? count : params->entry_decl_count;
    status = hrt_allocate(room * sizeof(*found), "kernels", (void**)&found);
  }
  if (status == HRT_OK) {
    status =
        hrt_cuda_select_ptx(entries, count, params, symbols, found, &chosen);
  }
  if (status == HRT_OK) status = hrt_cuda_resolve(cu, module, chosen, found);
  if (status == HRT_OK) {
    status = hrt_cuda_executable_pack(device, module, name, builtin, found,
                                      chosen, out_executable);
  }
  free(found);
  free(entries);
  if (status != HRT_OK) hrt_cuda_device_unload_module(device, module);
  return status;
}

static hrt_status_t hrt_cuda_executable_create_image(
    hrt_hal_device_t* device, const hrt_cuda_symbols_t* cu, const void* image,
    const char* what, const hrt_hal_executable_params_t* params,
    const char* const* symbols, hrt_hal_executable_t** out_executable) {
  hrt_cu_module_t module = NULL;
  HRT_RETURN_IF_ERROR(hrt_cuda_load_module(cu, image, what, &module));
  uint32_t count = params->entry_decl_count;
  hrt_cuda_found_t* found = NULL;
  hrt_status_t status = HRT_OK;
  if (count == 0) {
    status = hrt_cuda_enumerate(cu, module, what, &count, &found);
  } else {
    status = hrt_allocate(count * sizeof(*found), "kernels", (void**)&found);
    if (status == HRT_OK) {
      status = hrt_status_annotate(
          hrt_cuda_find_declared(cu, module, what, params, symbols, found),
          "%s", what);
    }
  }
  if (status == HRT_OK) {
    status = hrt_cuda_executable_pack(device, module, what, false, found, count,
                                      out_executable);
  }
  free(found);
  if (status != HRT_OK) hrt_cuda_device_unload_module(device, module);
  return status;
}

// What NVRTC makes of `source` for `device`: the kernel cache's entry when
// it has one, else a compile, which is then stored (a cache that cannot be
// written is ignored; a source whose includes cannot all be followed is
// never cached).
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
  hrt_cuda_includes_t* includes = NULL;
  HRT_RETURN_IF_ERROR(hrt_cuda_includes_find(
      source, source_name[0] == '/' ? source_name : NULL, params->option_count,
      params->options, &includes));
  hrt_cuda_kernel_cache_key_t key;
  hrt_status_t status = hrt_cuda_kernel_cache_key_initialize(
      source_name, source, strlen(source), params->option_count,
      params->options, expression_count, expressions, nvrtc->identity,
      target.option, includes, &key);
  const bool cacheable = includes->cacheable;
  hrt_cuda_includes_free(includes);
  HRT_RETURN_IF_ERROR(status);
  char* directory = NULL;
  status = cacheable ? hrt_cuda_kernel_cache_directory(&directory) : HRT_OK;
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
    const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) {
  // The text, without the NUL that may end it. NVRTC reads up to a NUL: one
  // inside the text would drop the rest unseen.
  const char* text = params->data;
  size_t length = text ? params->data_length : 0;
  if (length > 0 && text[length - 1] == 0) --length;
  if (length == 0) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "a CUDA source executable needs source text");
  }
  const char* source_name =
      params->source_name ? params->source_name : "source.cu";
  const char* nul = memchr(text, 0, length);
  if (nul) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "CUDA source %s has a NUL byte at offset %zu; "
                           "source is text",
                           source_name, (size_t)(nul - text));
  }
  const uint32_t count = params->entry_decl_count;
  // The source with a NUL; the entries' symbols and expressions.
  char* source = NULL;
  const char** symbols = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate(length + 1, "CUDA source", (void**)&source));
  hrt_status_t status = hrt_allocate((2 * (size_t)count + 1) * sizeof(char*),
                                     "entry symbols", (void**)&symbols);
  if (status != HRT_OK) {
    free(source);
    return status;
  }
  memcpy(source, text, length);
  source[length] = 0;
  const char** expressions = symbols + count;
  uint32_t expression_count = 0;
  for (uint32_t i = 0; i < count; ++i) {
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
    if (output->cubin) {
      status = hrt_cuda_image_check_cubin(output->image, output->image_length);
      if (status == HRT_OK) {
        status =
            hrt_cuda_executable_create_image(device, cu, output->image, "cubin",
                                             params, symbols, out_executable);
      }
    } else {
      status = hrt_cuda_executable_create_ptx(device, cu, output->image, false,
                                              params, symbols, out_executable);
    }
    status = hrt_status_annotate(status, "%s compiled by NVRTC", source_name);
  }
  free(output);
  free(symbols);
  free(source);
  return status;
}

// Dispatches find entries by name: two declarations of one name would leave
// the second unreachable.
static hrt_status_t hrt_cuda_check_decl_names(
    const hrt_hal_executable_params_t* params) {
  for (uint32_t i = 0; i < params->entry_decl_count; ++i) {
    for (uint32_t j = i + 1; j < params->entry_decl_count; ++j) {
      if (strcmp(params->entry_decls[i].name, params->entry_decls[j].name) ==
          0) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "declared entries %u and %u are both named "
                               "'%s'",
                               i, j, params->entry_decls[i].name);
      }
    }
  }
  return HRT_OK;
}

hrt_status_t hrt_cuda_executable_create(
    hrt_hal_device_t* device, const hrt_cuda_symbols_t* symbols,
    const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) {
  if (params->format != HRT_HAL_EXECUTABLE_FORMAT_BUILTIN) {
    HRT_RETURN_IF_ERROR(hrt_cuda_check_decl_names(params));
  }
  switch (params->format) {
    case HRT_HAL_EXECUTABLE_FORMAT_BUILTIN: {
      // Every built-in kernel, whatever the caller declares.
      const hrt_hal_executable_params_t all = {.format = params->format};
      return hrt_cuda_executable_create_ptx(device, symbols,
                                            hrt_cuda_builtin_ptx, true, &all,
                                            NULL, out_executable);
    }
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
          device, symbols, text, false, params, NULL, out_executable);
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
              : hrt_cuda_image_check_fatbin(params->data, params->data_length));
      return hrt_cuda_executable_create_image(
          device, symbols, params->data,
          params->format == HRT_HAL_EXECUTABLE_FORMAT_CUBIN ? "cubin"
                                                            : "fatbin",
          params, NULL, out_executable);
    case HRT_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE:
      return hrt_cuda_executable_create_source(device, symbols, params,
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
