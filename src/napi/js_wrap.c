#include "napi/js_wrap.h"

#include <stdint.h>
#include <stdlib.h>

#include "napi/js_common.h"

// JS thread, from GC or at env teardown. A pinned object is reachable from
// the running call, so it is not collected; the check only keeps the rule
// local.
static void hrt_js_wrap_finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  hrt_js_wrap_t* wrap = (hrt_js_wrap_t*)data;
  hrt_js_wrap_close(wrap);
  if (wrap->pins == 0) {
    free(wrap);
  } else {
    wrap->finalized = true;
  }
}

bool hrt_js_wrap_attach(napi_env env, napi_value object,
                        const hrt_js_class_t* cls, void* handle) {
  hrt_js_wrap_t* wrap = malloc(sizeof(*wrap));
  if (wrap == NULL) {
    cls->release(handle);
    return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                        "out of host memory wrapping a %s", cls->name);
  }
  *wrap = (hrt_js_wrap_t){.cls = cls, .handle = handle};
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
  wrap->closed = true;
  if (wrap->pins > 0) return;
  void* handle = wrap->handle;
  wrap->handle = NULL;
  if (handle != NULL) wrap->cls->release(handle);
}

bool hrt_js_wrap_pin(napi_env env, hrt_js_wrap_t* wrap) {
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL) return false;
  if (state->pin_count == state->pin_capacity) {
    size_t capacity = state->pin_capacity ? 2 * state->pin_capacity : 16;
    hrt_js_wrap_t** pins = realloc(state->pins, capacity * sizeof(*pins));
    if (pins == NULL) {
      return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                          "out of host memory using a %s", wrap->cls->name);
    }
    state->pins = pins;
    state->pin_capacity = capacity;
  }
  state->pins[state->pin_count++] = wrap;
  ++wrap->pins;
  return true;
}

static void hrt_js_wrap_unpin(hrt_js_wrap_t* wrap) {
  if (--wrap->pins > 0) return;
  if (wrap->closed) hrt_js_wrap_close(wrap);
  if (wrap->finalized) free(wrap);
}

napi_value hrt_js_wrap_call(napi_env env, napi_callback_info info) {
  void* data = NULL;
  void* state_data = NULL;
  if (napi_get_cb_info(env, info, NULL, NULL, NULL, &data) != napi_ok ||
      napi_get_instance_data(env, &state_data) != napi_ok ||
      state_data == NULL) {
    hrt_js_throw_napi_failure(env, napi_generic_failure, "napi_get_cb_info");
    return NULL;
  }
  hrt_js_env_t* state = state_data;
  size_t mark = state->pin_count;
  napi_value result = ((napi_callback)(intptr_t)data)(env, info);
  // Inner calls have already dropped theirs, so exactly this call's pins lie
  // above the mark.
  while (state->pin_count > mark)
    hrt_js_wrap_unpin(state->pins[--state->pin_count]);
  return result;
}

void hrt_js_wrap_pins_free(hrt_js_env_t* state) {
  free(state->pins);
  state->pins = NULL;
  state->pin_count = state->pin_capacity = 0;
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
