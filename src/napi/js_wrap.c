#include "napi/js_wrap.h"

#include <stdint.h>
#include <stdlib.h>

#include "napi/js_common.h"

// The wraps this addon made on this thread and not yet freed: an open-
// addressing set of pointers (linear probing, at most half full, at least
// an eighth full once past its first size), freed when it empties.
// Initial-exec: no call into the dynamic loader per access, and no link to it.
static _Thread_local __attribute__((tls_model("initial-exec"))) struct {
  hrt_js_wrap_t** slots;
  size_t mask;  // capacity - 1; capacity a power of two
  size_t count;
} hrt_js_wraps;

static size_t hrt_js_wraps_home(const hrt_js_wrap_t* wrap) {
  return (size_t)((((uintptr_t)wrap >> 4) * 0x9e3779b97f4a7c15ULL) >> 32) &
         hrt_js_wraps.mask;
}

// The slot holding `wrap`, or the empty slot where it would go.
static size_t hrt_js_wraps_slot(const hrt_js_wrap_t* wrap) {
  size_t i = hrt_js_wraps_home(wrap);
  while (hrt_js_wraps.slots[i] != NULL && hrt_js_wraps.slots[i] != wrap) {
    i = (i + 1) & hrt_js_wraps.mask;
  }
  return i;
}

static bool hrt_js_wraps_has(const void* data) {
  return hrt_js_wraps.count > 0 &&
         hrt_js_wraps.slots[hrt_js_wraps_slot(data)] ==
             (const hrt_js_wrap_t*)data;
}

static size_t hrt_js_wraps_capacity(void) {
  return hrt_js_wraps.slots ? hrt_js_wraps.mask + 1 : 0;
}

// Moves the entries into a table of `capacity` slots; false (nothing
// changed) when out of memory.
static bool hrt_js_wraps_resize(size_t capacity) {
  const size_t old_capacity = hrt_js_wraps_capacity();
  hrt_js_wrap_t** old = hrt_js_wraps.slots;
  hrt_js_wrap_t** slots = calloc(capacity, sizeof(*slots));
  if (slots == NULL) return false;
  hrt_js_wraps.slots = slots;
  hrt_js_wraps.mask = capacity - 1;
  for (size_t i = 0; i < old_capacity; ++i) {
    if (old[i] != NULL) slots[hrt_js_wraps_slot(old[i])] = old[i];
  }
  free(old);
  return true;
}

static bool hrt_js_wraps_add(hrt_js_wrap_t* wrap) {
  const size_t capacity = hrt_js_wraps_capacity();
  if (2 * (hrt_js_wraps.count + 1) > capacity &&
      !hrt_js_wraps_resize(capacity ? 2 * capacity : 64)) {
    return false;
  }
  hrt_js_wraps.slots[hrt_js_wraps_slot(wrap)] = wrap;
  ++hrt_js_wraps.count;
  return true;
}

// Removes `wrap` (listed), moving back the entries after it that would no
// longer be found.
static void hrt_js_wraps_remove(const hrt_js_wrap_t* wrap) {
  size_t hole = hrt_js_wraps_slot(wrap);
  size_t mask = hrt_js_wraps.mask;
  for (size_t i = (hole + 1) & mask; hrt_js_wraps.slots[i] != NULL;
       i = (i + 1) & mask) {
    // Entry i may fill the hole when its home is not after the hole on the
    // way round to i.
    size_t home = hrt_js_wraps_home(hrt_js_wraps.slots[i]);
    if (((i - home) & mask) >= ((i - hole) & mask)) {
      hrt_js_wraps.slots[hole] = hrt_js_wraps.slots[i];
      hole = i;
    }
  }
  hrt_js_wraps.slots[hole] = NULL;
  const size_t capacity = mask + 1;
  if (--hrt_js_wraps.count == 0) {
    free(hrt_js_wraps.slots);
    hrt_js_wraps.slots = NULL;
    hrt_js_wraps.mask = 0;
  } else if (capacity > 64 && 8 * hrt_js_wraps.count < capacity) {
    (void)hrt_js_wraps_resize(capacity / 4);  // kept as it is without memory
  }
}

static void hrt_js_wrap_free(hrt_js_wrap_t* wrap) {
  hrt_js_wraps_remove(wrap);
  free(wrap);
}

// JS thread, from GC or at env teardown. A pinned object is reachable from
// the running call, so it is not collected; the check only keeps the rule
// local.
static void hrt_js_wrap_finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  hrt_js_wrap_t* wrap = (hrt_js_wrap_t*)data;
  hrt_js_wrap_close(wrap);
  if (wrap->pins == 0 && wrap->holds == 0) {
    hrt_js_wrap_free(wrap);
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
  if (!hrt_js_wraps_add(wrap)) {
    hrt_js_wrap_close(wrap);
    free(wrap);
    return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                        "out of host memory wrapping a %s", cls->name);
  }
  napi_status status =
      napi_wrap(env, object, wrap, hrt_js_wrap_finalize, NULL, NULL);
  if (status != napi_ok) {
    hrt_js_wrap_close(wrap);
    hrt_js_wrap_free(wrap);
    hrt_js_throw_napi_failure(env, status, "napi_wrap");
    return false;
  }
  return true;
}

hrt_js_wrap_t* hrt_js_wrap_find(napi_env env, napi_value value,
                                const hrt_js_class_t* cls) {
  napi_valuetype type = napi_undefined;
  void* data = NULL;
  if (napi_typeof(env, value, &type) != napi_ok || type != napi_object ||
      napi_unwrap(env, value, &data) != napi_ok || !hrt_js_wraps_has(data)) {
    return NULL;
  }
  hrt_js_wrap_t* wrap = data;
  return cls == NULL || wrap->cls == cls ? wrap : NULL;
}

void hrt_js_wrap_close(hrt_js_wrap_t* wrap) {
  wrap->closed = true;
  if (wrap->pins > 0) return;
  void* handle = wrap->handle;
  wrap->handle = NULL;
  if (handle != NULL) wrap->cls->release(handle);
}

void hrt_js_wrap_hold(hrt_js_wrap_t* wrap) { ++wrap->holds; }

void hrt_js_wrap_unhold(hrt_js_wrap_t* wrap) {
  if (--wrap->holds == 0 && wrap->finalized && wrap->pins == 0) {
    hrt_js_wrap_free(wrap);
  }
}

bool hrt_js_wrap_replace(hrt_js_wrap_t* wrap, void* handle) {
  if (wrap->closed || wrap->pins > 0 || wrap->handle == NULL) return false;
  if (handle == wrap->handle) {
    wrap->cls->release(handle);  // the same object: one reference too many
    return true;
  }
  void* old = wrap->handle;
  wrap->handle = handle;
  wrap->cls->release(old);
  return true;
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
  if (wrap->finalized && wrap->holds == 0) hrt_js_wrap_free(wrap);
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

napi_value hrt_js_wrap_is_closed(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value value = NULL, result = NULL;
  HRT_NAPI_CALL(env, napi_get_cb_info(env, info, &argc, &value, NULL, NULL));
  const hrt_js_wrap_t* wrap =
      argc < 1 ? NULL : hrt_js_wrap_find(env, value, NULL);
  HRT_NAPI_CALL(env,
                napi_get_boolean(env, wrap != NULL && wrap->closed, &result));
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
