// VM contexts: an ordered set of linked modules, and asynchronous invocation
// of their functions.
//
// Linking: modules are linked in the given order; each may import from the
// modules before it (hrt_vm_context_find_module). Two modules with one name
// are an error. A context retains its modules and owns their states.
//
// Threads and lifetime: any thread may look functions up and invoke. Each
// invocation retains the context until its `done` has run, so the context
// (and every module in it, including a HAL module's debug sink) outlives its
// work; the last release may therefore happen on a completion thread.
#ifndef HRT_VM_CONTEXT_H_
#define HRT_VM_CONTEXT_H_

#include <stdint.h>

#include "base/status.h"
#include "vm/instance.h"
#include "vm/module.h"

// Valid while the context it was looked up in lives.
typedef struct hrt_vm_function_s {
  hrt_vm_module_t* module;  // borrowed from the context
  uint32_t ordinal;
} hrt_vm_function_t;

hrt_status_t hrt_vm_context_create(hrt_vm_instance_t* instance,
                                   hrt_vm_module_t* const* modules,
                                   uint32_t module_count,
                                   hrt_vm_context_t** out_context) HRT_MUST_USE;
void hrt_vm_context_retain(hrt_vm_context_t* context);
void hrt_vm_context_release(hrt_vm_context_t* context);

// During create_state: a module linked before the caller, with its state
// (both borrowed). NOT_FOUND names the missing module.
hrt_status_t hrt_vm_context_find_module(const hrt_vm_context_t* context,
                                        const char* name,
                                        hrt_vm_module_t** out_module,
                                        void** out_state) HRT_MUST_USE;

// During create_state: the module named `name` wherever it is in the
// context (borrowed; NULL if none), for messages about modules linked after
// the caller.
const hrt_vm_module_t* hrt_vm_context_module_named(
    const hrt_vm_context_t* context, const char* name);

// Finds "module.function". NOT_FOUND names what is missing.
hrt_status_t hrt_vm_context_lookup_function(
    const hrt_vm_context_t* context, const char* qualified_name,
    hrt_vm_function_t* out_function) HRT_MUST_USE;

const hrt_vm_function_def_t* hrt_vm_function_def(
    const hrt_vm_function_t* function);

// How hrt_vm_invoke_async numbered a call.
typedef struct hrt_vm_invocation_ids_s {
  // The call's number in its context: the context's first call that started
  // is 1, the next 2, and so on, over all its functions. Taken once the
  // inputs have passed the checks; a call that then fails to start gives
  // its number back (unless another thread's call has taken the next one
  // meanwhile). So on one thread the numbers have no gaps.
  uint64_t sequence;
  // Unique among all calls in the process (never 0).
  uint64_t invocation;
} hrt_vm_invocation_ids_t;

// Checks `inputs` against the function's signature (count, dtype, shape):
// INVALID_ARGUMENT naming the function and the input ("m.f: input 1 ('b')
// must be f32 (got i32)"), as hrt_vm_invoke_async does.
hrt_status_t hrt_vm_function_check_inputs(const hrt_vm_function_t* function,
                                          hrt_hal_buffer_view_t* const* inputs,
                                          uint32_t input_count) HRT_MUST_USE;

// Checks `inputs` against the function's signature (count, dtype, shape;
// INVALID_ARGUMENT naming the input) and starts the call. On HRT_OK `done`
// runs exactly once on the completion thread; on error it never runs.
// `*out_ids` (out_ids may be NULL) receives the call's numbers, as reported
// with its traces, just before the call starts, so that `done` may read
// them; they mean nothing when this returns an error. `route` is opaque
// (hrt_vm_call_t): the N-API binding passes the channel the invocation's
// completion travels through, so that a host call's message follows the
// traces before it.
// The input views are borrowed only during this call; the device keeps their
// buffers until the call completes. A program may write into its inputs
// (fill, copy or dispatch targets), which changes the caller's tensors.
hrt_status_t hrt_vm_invoke_async(hrt_vm_context_t* context,
                                 const hrt_vm_function_t* function,
                                 hrt_hal_buffer_view_t* const* inputs,
                                 uint32_t input_count, void* route,
                                 hrt_vm_invocation_done_t done,
                                 hrt_vm_invocation_ids_t* out_ids) HRT_MUST_USE;

// hrt_vm_invoke_async that writes outputs into `outputs` ([output count]
// views of the signature's dtypes and shapes, NULL entries allowed) instead
// of new buffers, and hands back that view (another reference) as the
// output: program and callback (host) modules do so for every view on the
// call's device of the output's byte length, in queue order (a program
// zeroes first an output its first op does not write whole); any other
// output is a new buffer as usual. The views are borrowed only during this
// call.
hrt_status_t hrt_vm_invoke_in_place(
    hrt_vm_context_t* context, const hrt_vm_function_t* function,
    hrt_hal_buffer_view_t* const* inputs, uint32_t input_count,
    hrt_hal_buffer_view_t* const* outputs, void* route,
    hrt_vm_invocation_done_t done,
    hrt_vm_invocation_ids_t* out_ids) HRT_MUST_USE;

#endif  // HRT_VM_CONTEXT_H_
