// traceDispatches.keys: a JavaScript RegExp that selects, by key, the
// dispatches a HAL module traces.
//
// Dispatch keys ("function:op:entry") are fixed when a context links a
// program module, so the RegExp is tested there, in JavaScript, with its own
// semantics (every flag): `new Context` tests it against every dispatch key
// of the program modules it links (hrt_js_trace_keys_test) before it touches
// a native object, and the link only looks the answers up
// (hrt_js_trace_keys_filter). Each test is `re.test(key)` on a RegExp made
// from the given one's source and flags when the HalModule was made (so the
// filter is fixed then), with `lastIndex` set to 0 first (so 'g' and 'y'
// behave as on a fresh RegExp: 'y' anchors at the key's start).
//
// Ownership: a HalModule handle owns its filter; the filter owns the
// answers handed to it. Threads: JS thread of the owning env only (the
// native filter runs inside hrt_vm_context_create, called there).
#ifndef HRT_NAPI_JS_TRACE_KEYS_H_
#define HRT_NAPI_JS_TRACE_KEYS_H_

#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "modules/hal_module.h"
#include "vm/module.h"

typedef struct hrt_js_trace_keys_s hrt_js_trace_keys_t;
// The answers for the dispatch keys of one link.
typedef struct hrt_js_trace_verdicts_s hrt_js_trace_verdicts_t;

// Reads `value` (a RegExp; options.traceDispatches.keys of `method`) into a
// new filter. False with a pending exception (a HalrtError naming the
// option when it is no RegExp).
bool hrt_js_trace_keys_read(napi_env env, napi_value value, const char* method,
                            hrt_js_trace_keys_t** out_keys);
void hrt_js_trace_keys_free(hrt_js_trace_keys_t* keys);

// The HAL module option that asks `keys` (user_data: keys, which must
// outlive every link of the module).
hrt_trace_key_filter_t hrt_js_trace_keys_filter(hrt_js_trace_keys_t* keys);

// Tests the filter against every dispatch key of the program modules among
// `modules`. Runs user code (a RegExp.prototype.exec that was replaced): the
// caller must hold what it uses. A test that throws is ABORTED naming the
// filter and key, the thrown value as `cause`. False with a pending
// exception on failure.
bool hrt_js_trace_keys_test(napi_env env, const hrt_js_trace_keys_t* keys,
                            hrt_vm_module_t* const* modules, uint32_t count,
                            const char* method,
                            hrt_js_trace_verdicts_t** out_verdicts);
void hrt_js_trace_verdicts_free(hrt_js_trace_verdicts_t* verdicts);

// Hands `verdicts` (owned from now on; NULL: none) to the filter for the
// link about to run, dropping those it had. A key the filter has no answer
// for is not traced.
void hrt_js_trace_keys_set_verdicts(hrt_js_trace_keys_t* keys,
                                    hrt_js_trace_verdicts_t* verdicts);

#endif  // HRT_NAPI_JS_TRACE_KEYS_H_
