#include "napi/js_wrap.h"

#include <stdlib.h>

#include "napi/js_common.h"

// JS thread, from GC or at env teardown.
static void hrt_js_wrap_finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  hrt_js_wrap_t* wrap = (hrt_js_wrap_t*)data;
  hrt_js_wrap_close(wrap);
  free(wrap);
}

bool hrt_js_wrap_attach(napi_env env, napi_value object,
                        const hrt_js_class_t* cls, void* handle) {
  hrt_js_wrap_t* wrap = malloc(sizeof(*wrap));
  if (wrap == NULL) {
    cls->release(handle);
    return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                        "out of host memory wrapping a %s", cls->name);
  }
  wrap->cls = cls;
  wrap->handle = handle;
  napi_status status = napi_type_tag_object(env, object, &cls->tag);
  if (status == napi_ok) {
    status = napi_wrap(env, object, wrap, hrt_js_wrap_finalize, NULL, NULL);
  }
  if (status != napi_ok) {
    hrt_js_wrap_close(wrap);
    free(wrap);
    hrt_js_throw_napi_failure(env, status, "napi_wrap");
    return false;
  }
  return true;
}

bool hrt_js_wrap_is(napi_env env, napi_value value, const hrt_js_class_t* cls) {
  napi_valuetype type = napi_undefined;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_object) {
    return false;
  }
  bool matches = false;
  if (napi_check_object_type_tag(env, value, &cls->tag, &matches) != napi_ok) {
    return false;
  }
  return matches;
}

hrt_js_wrap_t* hrt_js_wrap_get(napi_env env, napi_value object) {
  void* data = NULL;
  HRT_NAPI_CALL(env, napi_unwrap(env, object, &data));
  return (hrt_js_wrap_t*)data;
}

void hrt_js_wrap_close(hrt_js_wrap_t* wrap) {
  void* handle = wrap->handle;
  wrap->handle = NULL;
  if (handle != NULL) wrap->cls->release(handle);
}

bool hrt_js_wrap_new(napi_env env, napi_ref class_ref,
                     const hrt_js_class_t* cls, void* handle,
                     napi_value* out_object) {
  napi_value object = NULL;
  if (!hrt_js_new_internal(env, class_ref, &object)) {
    cls->release(handle);
    return false;
  }
  if (!hrt_js_wrap_attach(env, object, cls, handle)) return false;
  *out_object = object;
  return true;
}
