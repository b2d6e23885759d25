// Callback modules: VM modules whose functions are host callbacks (the
// host functions of DESIGN.md; the Node binding's HostModule implements one
// in src/napi/js_host_module.c).
//
// The contract has the debug sink's shape (debug_sink.h): by-value {fn,
// user_data} callbacks that the module copies at creation, and `release`,
// called exactly once when the module is destroyed, on whatever thread
// drops its last reference (not if creation fails: the caller still owns
// user_data then).
//
// A call (invoked directly, or by a program's call op) first reads its
// inputs to host memory on the device of the HAL module linked before the
// module; then `call.fn` runs on that device's completion thread (for a
// function without inputs, on the thread that began the call) with host
// tensors valid until the call is finished. `call.fn` must not block: it
// hands the call on, and whoever has it finishes it, exactly once, from any
// thread, with hrt_host_call_finish(). The outputs are then uploaded, and
// the invocation's `done` runs on the completion thread. No thread ever
// waits for a callback. A call in flight retains its module and device.
#ifndef HRT_MODULES_CALLBACK_MODULE_H_
#define HRT_MODULES_CALLBACK_MODULE_H_

#include <stdint.h>

#include "base/status.h"
#include "modules/debug_sink.h"
#include "vm/module.h"

typedef struct hrt_host_call_s hrt_host_call_t;

// What a call reports with its inputs (ids as in hrt_vm_call_t).
typedef struct hrt_host_call_info_s {
  uint32_t function;     // the function's ordinal in the module
  uint64_t sequence;     // the invocation's number in its context
  uint64_t invocation;   // the invocation's id, unique in the process
  void* route;           // the invocation's (hrt_vm_call_t)
} hrt_host_call_info_t;

typedef struct hrt_callback_module_callbacks_s {
  struct {
    // `inputs[i].data` holds input i (full host bytes), valid until `call`
    // is finished.
    void (*fn)(void* user_data, hrt_host_call_t* call,
               const hrt_host_call_info_t* info, uint32_t count,
               const hrt_trace_tensor_t* inputs);
    void* user_data;
  } call;
  struct {
    void (*fn)(void* user_data);
    void* user_data;
  } release;
} hrt_callback_module_callbacks_t;

// A module named `name` (a name, not "hal") exporting `functions` (copied,
// names and types included). INVALID_ARGUMENT for a bad name or a function
// named twice.
hrt_status_t hrt_callback_module_create(
    const char* name, uint32_t function_count,
    const hrt_vm_function_def_t* functions,
    hrt_callback_module_callbacks_t callbacks,
    hrt_vm_module_t** out_module) HRT_MUST_USE;

bool hrt_callback_module_isa(const hrt_vm_module_t* module);

// The id of the invocation `call` belongs to (hrt_host_call_info_t).
uint64_t hrt_host_call_invocation(const hrt_host_call_t* call);

// INVALID_ARGUMENT unless the function of `call` has `count` outputs and
// output `index` is `byte_length` bytes. Any thread, before finishing.
hrt_status_t hrt_host_call_check_output(const hrt_host_call_t* call,
                                        uint32_t index, uint32_t count,
                                        uint64_t byte_length) HRT_MUST_USE;

// Ends `call` (any thread, exactly once): HRT_OK with `outputs[i]` the
// host bytes of output i (exactly its declared byte length; copied before
// this returns), or an error status (consumed), which fails the invocation.
void hrt_host_call_finish(hrt_host_call_t* call, hrt_status_t status,
                          const void* const* outputs);

#endif  // HRT_MODULES_CALLBACK_MODULE_H_
