#include "napi/js_instance.h"

#include <stdlib.h>

#include "napi/js_args.h"
#include "napi/js_device.h"
#include "napi/js_wrap.h"
#include "vm/instance.h"

static void hrt_js_instance_release(void* handle) {
  hrt_vm_instance_release((hrt_vm_instance_t*)handle);
}

const hrt_js_class_t hrt_js_instance_class = {
    .name = "Instance",
    .release = hrt_js_instance_release,
};

// new Instance()
static napi_value hrt_js_instance_construct(napi_env env,
                                            napi_callback_info info) {
  napi_value this_arg = NULL;
  napi_value new_target = NULL;
  HRT_NAPI_CALL(env, napi_get_cb_info(env, info, NULL, NULL, &this_arg, NULL));
  HRT_NAPI_CALL(env, napi_get_new_target(env, info, &new_target));
  if (new_target == NULL) {
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                 "Instance: the constructor must be called with `new`");
    return NULL;
  }
  hrt_vm_instance_t* instance = NULL;
  HRT_JS_THROW_IF_ERROR(env, "new Instance", hrt_vm_instance_create(&instance));
  if (!hrt_js_wrap_attach(env, this_arg, &hrt_js_instance_class, instance)) {
    return NULL;
  }
  return this_arg;
}

// instance.createDevice(uri = 'auto') -> Device
static napi_value hrt_js_instance_create_device(napi_env env,
                                                napi_callback_info info) {
  static const char* const method = "instance.createDevice";
  napi_value argv[1];
  napi_value this_arg = NULL;
  hrt_js_wrap_t* wrap = NULL;
  char* uri = NULL;
  if (!hrt_js_args_get(env, info, 1, argv, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, this_arg, &hrt_js_instance_class, method, NULL,
                         false, &wrap) ||
      !hrt_js_arg_string(env, argv[0], method, "uri", "auto", &uri)) {
    return NULL;
  }
  hrt_hal_device_t* device = NULL;
  hrt_status_t status = hrt_vm_instance_create_device(
      (hrt_vm_instance_t*)wrap->handle, uri, &device);
  free(uri);
  HRT_JS_THROW_IF_ERROR(env, method, status);
  return hrt_js_device_new(env, device);
}

// instance.close(): drops the runtime reference. Idempotent. Devices already
// created stay usable (a device does not depend on its instance).
static napi_value hrt_js_instance_close(napi_env env, napi_callback_info info) {
  return hrt_js_close_method(env, info, &hrt_js_instance_class,
                             "instance.close");
}

napi_value hrt_js_instance_define(napi_env env, hrt_js_env_t* state) {
  (void)state;
  const napi_property_descriptor properties[] = {
      HRT_JS_METHOD("createDevice", hrt_js_instance_create_device),
      HRT_JS_METHOD("close", hrt_js_instance_close),
  };
  return hrt_js_define_class(env, "Instance", hrt_js_instance_construct,
                             properties,
                             sizeof(properties) / sizeof(properties[0]), NULL);
}
