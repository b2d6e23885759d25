#include "napi/js_nvrtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/cuda/cuda_nvrtc.h"
#include "napi/js_args.h"
#include "napi/js_common.h"

#define HRT_JS_NVRTC_METHOD "halrt.nvrtc.compile"
#define HRT_JS_NVRTC_MAX_OPTIONS 256

// The options Array's strings, each malloc'd; false with an exception
// pending (what was read stays in `options` for the caller to free).
static bool hrt_js_nvrtc_options(napi_env env, napi_value array,
                                 char** options, uint32_t* out_count) {
  uint32_t length = 0;
  if (!hrt_js_arg_array(env, array, HRT_JS_NVRTC_METHOD, "options.options",
                        &length)) {
    return false;
  }
  if (length > HRT_JS_NVRTC_MAX_OPTIONS) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: options.options has %u entries, over the limit "
                        "of %d",
                        HRT_JS_NVRTC_METHOD, length, HRT_JS_NVRTC_MAX_OPTIONS);
  }
  for (uint32_t i = 0; i < length; ++i) {
    napi_value element = NULL;
    HRT_NAPI_CALL_BOOL(env, napi_get_element(env, array, i, &element));
    char name[32];
    snprintf(name, sizeof(name), "options.options[%u]", i);
    if (!hrt_js_arg_string(env, element, HRT_JS_NVRTC_METHOD, name, NULL,
                           &options[i])) {
      return false;
    }
    *out_count = i + 1;
  }
  const int arch = hrt_nvrtc_arch_option(length, (const char* const*)options);
  if (arch >= 0) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: options.options[%d] '%s': name the architecture "
                        "as options.arch",
                        HRT_JS_NVRTC_METHOD, arch, options[arch]);
  }
  return true;
}

// Throws the compile's error with `log` (may be NULL) as its `log`.
static void hrt_js_nvrtc_throw(napi_env env, hrt_status_t status,
                               const char* log) {
  napi_value error = hrt_js_error_from_status(
      env, hrt_status_annotate(status, "%s", HRT_JS_NVRTC_METHOD));
  if (error == NULL) return;
  napi_value text = NULL;
  if (log && napi_create_string_utf8(env, log, NAPI_AUTO_LENGTH, &text) ==
                 napi_ok) {
    (void)napi_set_named_property(env, error, "log", text);
  }
  napi_throw(env, error);
}

napi_value hrt_js_nvrtc_compile(napi_env env, napi_callback_info info) {
  napi_value argv[4] = {NULL, NULL, NULL, NULL};
  if (!hrt_js_args_get(env, info, 4, argv, NULL, NULL)) return NULL;
  char* source = NULL;
  char* name = NULL;
  char* arch = NULL;
  char* options[HRT_JS_NVRTC_MAX_OPTIONS] = {NULL};
  uint32_t option_count = 0;
  hrt_nvrtc_output_t* output = NULL;
  char* log = NULL;
  napi_value result = NULL;
  const hrt_nvrtc_t* nvrtc = NULL;
  hrt_nvrtc_target_t target;
  if (!hrt_js_arg_string(env, argv[0], HRT_JS_NVRTC_METHOD, "source", NULL,
                         &source) ||
      !hrt_js_arg_string(env, argv[1], HRT_JS_NVRTC_METHOD, "options.name",
                         NULL, &name) ||
      !hrt_js_nvrtc_options(env, argv[2], options, &option_count) ||
      (!hrt_js_arg_is_undefined(env, argv[3]) &&
       !hrt_js_arg_string(env, argv[3], HRT_JS_NVRTC_METHOD, "options.arch",
                          NULL, &arch))) {
    goto done;
  }
  hrt_status_t status = hrt_nvrtc_load(&nvrtc);
  if (status == HRT_OK) {
    status = hrt_status_annotate(hrt_nvrtc_parse_arch(nvrtc, arch, &target),
                                 "options.arch");
  }
  if (status == HRT_OK) {
    status = hrt_nvrtc_compile_check(nvrtc, source, name, option_count,
                                     (const char* const*)options, &target,
                                     &output, &log);
  }
  if (status != HRT_OK) {
    hrt_js_nvrtc_throw(env, status, log);
    goto done;
  }
  char version[32];
  snprintf(version, sizeof(version), "%d.%d", nvrtc->version_major,
           nvrtc->version_minor);
  const char* chosen = target.option + strlen("--gpu-architecture=");
  napi_status created = napi_create_object(env, &result);
  if (created != napi_ok) hrt_js_throw_napi_failure(env, created, "napi_create_object");
  if (created != napi_ok ||
      !hrt_js_set_string(env, result, "ptx", (const char*)output->image) ||
      !hrt_js_set_string(env, result, "log", log) ||
      !hrt_js_set_string(env, result, "arch", chosen) ||
      !hrt_js_set_string(env, result, "version", version)) {
    result = NULL;
  }
done:
  free(source);
  free(name);
  free(arch);
  for (uint32_t i = 0; i < option_count; ++i) free(options[i]);
  free(output);
  free(log);
  return result;
}
