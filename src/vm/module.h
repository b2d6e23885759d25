// VM modules: named, immutable sets of functions with tensor signatures.
//
// A module is created once and may be linked into several contexts; what a
// module needs per context (imports, loaded executables, recorded command
// buffers) lives in a state object created when the context links it.
//
// Threads: create_state and free_state run on the thread that creates or
// destroys the context (free_state may run on a device completion thread
// when that thread drops the context's last reference). begin_call runs on
// the invoking thread; its `done` callback runs on the device's completion
// thread. Modules are reference counted; contexts retain their modules.
#ifndef HRT_VM_MODULE_H_
#define HRT_VM_MODULE_H_

#include <stdint.h>

#include "base/ref.h"
#include "base/status.h"
#include "hal/buffer_view.h"

typedef struct hrt_vm_context_s hrt_vm_context_t;
typedef struct hrt_vm_module_s hrt_vm_module_t;

// A dense tensor type with a static shape.
typedef struct hrt_vm_tensor_type_s {
  const char* name;  // the value's name, for messages
  hrt_hal_element_type_t element_type;
  uint32_t rank;
  int64_t shape[HRT_HAL_MAX_RANK];
} hrt_vm_tensor_type_t;

typedef struct hrt_vm_function_def_s {
  const char* name;
  uint32_t input_count;
  uint32_t output_count;
  const hrt_vm_tensor_type_t* inputs;
  const hrt_vm_tensor_type_t* outputs;
} hrt_vm_function_def_t;

// How a call ends. Runs exactly once on the device's completion thread. It
// takes ownership of `status` and of one reference to each output view
// (`outputs` is NULL and `output_count` 0 on failure); the array itself is
// only valid during the call.
typedef struct hrt_vm_invocation_done_s {
  void (*fn)(void* user_data, hrt_status_t status,
             hrt_hal_buffer_view_t* const* outputs, uint32_t output_count);
  void* user_data;
} hrt_vm_invocation_done_t;

typedef struct hrt_vm_call_s {
  uint32_t function_ordinal;
  hrt_hal_buffer_view_t* const* inputs;  // already checked against the def
  uint32_t input_count;
  // NULL, or [output_count] views (NULL entries allowed, borrowed during
  // begin_call) that a module may write an output into instead of a new
  // buffer, returning the view itself (hrt_vm_invoke_in_place).
  hrt_hal_buffer_view_t* const* outputs;
  // Reported with the call's traces and timings (hrt_vm_invoke_async).
  uint64_t sequence;    // the call's number in its context: 1, 2, ...
  uint64_t invocation;  // the call's id, unique in the process
  // Opaque to the runtime: the caller's (hrt_vm_invoke_async), passed on to
  // every call the invocation makes, host calls included
  // (hrt_host_call_info_t).
  void* route;
  hrt_vm_invocation_done_t done;
} hrt_vm_call_t;

typedef struct hrt_vm_module_vtable_s {
  void (*destroy)(hrt_vm_module_t* module);
  // Links the module into `context`, whose earlier modules are already
  // linked (see hrt_vm_context_find_module for imports). The state must not
  // be NULL.
  hrt_status_t (*create_state)(hrt_vm_module_t* module,
                               hrt_vm_context_t* context, void** out_state);
  // Contexts free their states in reverse link order, all before any module
  // is released, so a state may borrow the modules and states it imported
  // (and use them from its calls' completion threads) for its whole life.
  void (*free_state)(hrt_vm_module_t* module, void* state);
  // Starts a call. On HRT_OK `done` will run exactly once; on error it
  // never runs and nothing was retained.
  hrt_status_t (*begin_call)(hrt_vm_module_t* module, void* state,
                             const hrt_vm_call_t* call);
} hrt_vm_module_vtable_t;

struct hrt_vm_module_s {
  hrt_ref_t ref;
  const hrt_vm_module_vtable_t* vtable;
  const char* name;  // owned by the implementation
  uint32_t function_count;
  const hrt_vm_function_def_t* functions;  // owned by the implementation
};

// For implementations: one reference, the live count, the common fields.
void hrt_vm_module_initialize(const hrt_vm_module_vtable_t* vtable,
                              const char* name, uint32_t function_count,
                              const hrt_vm_function_def_t* functions,
                              hrt_vm_module_t* module);
// For implementations: the matching live-count decrement in destroy.
void hrt_vm_module_deinitialize(hrt_vm_module_t* module);

void hrt_vm_module_retain(hrt_vm_module_t* module);
void hrt_vm_module_release(hrt_vm_module_t* module);

// NOT_FOUND naming the function and module when absent.
hrt_status_t hrt_vm_module_lookup_function(const hrt_vm_module_t* module,
                                           const char* name,
                                           uint32_t* out_ordinal) HRT_MUST_USE;

#endif  // HRT_VM_MODULE_H_
