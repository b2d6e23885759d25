// The per-context state of a program module: its executables loaded on the
// device of the HAL module linked before it, its constants uploaded there,
// and each function recorded into one reusable command buffer
// (program_record.h).
//
// Threads: created on the thread that creates the context and freed on the
// one that destroys it (possibly a device completion thread, see
// vm/module.h); calls (program_call.h) read it, never write it, on the
// invoking and completion threads. The state owns its executables, constant
// buffers, command buffers and arena; it borrows the HAL module and the program modules it
// calls (their states' executables), which the context frees after it.
#ifndef HRT_MODULES_PROGRAM_PROGRAM_STATE_H_
#define HRT_MODULES_PROGRAM_PROGRAM_STATE_H_

#include <stdint.h>

#include "base/arena.h"
#include "hal/command_buffer.h"
#include "hal/device.h"
#include "hal/executable.h"
#include "modules/program/program_internal.h"
#include "vm/context.h"
#include "vm/module.h"

typedef struct hrt_program_state_s hrt_program_state_t;

// Where a command of a recorded function came from: op `op_index` of
// `function` (the function itself, or a callee inlined at a call op).
typedef struct hrt_command_origin_s {
  const hrt_function_t* function;
  uint32_t op_index;
} hrt_command_origin_t;

// A call of a callback module's function after a segment
// (program_record.h): its inputs are slots of the call, its outputs land in
// staging slots that the next segment copies to the results.
typedef struct hrt_host_step_s {
  hrt_vm_module_t* module;  // borrowed: linked before the caller
  void* state;              // the module's, borrowed likewise
  uint32_t ordinal;
  const hrt_vm_function_def_t* def;  // the callee's signature
  const char* callee;                // "module.function"
  const hrt_function_t* caller;      // the function whose op it is
  uint32_t op_index;
  const uint32_t* arg_slots;      // [def->input_count]
  const uint32_t* staging_slots;  // [def->output_count]
} hrt_host_step_t;

// The dispatches of a program module's function inlined at a call op, for
// the call's own timing event (profile): from the start of its first
// dispatch command to the end of its last.
typedef struct hrt_call_span_s {
  uint32_t first;  // command indices in the segment
  uint32_t last;
  const hrt_function_t* caller;  // the function whose op it is
  uint32_t op_index;
  const char* callee;  // "module.function"
} hrt_call_span_t;

// Commands submitted together, then the host call that follows (NULL for
// the last segment).
typedef struct hrt_segment_s {
  hrt_hal_command_buffer_t* command_buffer;  // owned
  hrt_command_origin_t* origins;             // [commands], owned (malloc)
  const hrt_host_step_t* host_call;          // in the state's arena
  uint32_t span_count;
  hrt_call_span_t* spans;  // [span_count], owned (malloc), inner ones first
} hrt_segment_t;

// Extra slots of this size are bound at run time (host call outputs).
#define HRT_SLOT_BOUND_LATER UINT64_MAX

// One function, recorded (program_record.h).
typedef struct hrt_recorded_function_s {
  uint32_t segment_count;
  hrt_segment_t* segments;  // [segment_count], owned (malloc)
  uint32_t max_span_count;  // the most spans of one segment
  uint32_t extra_count;     // slots after the function's values
  uint64_t* extra_bytes;    // [extra_count], owned (malloc)
  // What one call allocates: outputs, locals and extra slots (saturating).
  uint64_t call_bytes;
} hrt_recorded_function_t;

struct hrt_program_state_s {
  hrt_vm_module_t* hal;      // borrowed: linked before us, freed after us
  hrt_hal_device_t* device;  // the HAL module's
  hrt_hal_executable_t** executables;  // [executable_count]
  // [module constant_count]: the module's constants on the device, read by
  // every call (commands bind them directly, not through slots)
  hrt_hal_buffer_t** constants;
  hrt_recorded_function_t* functions;  // [function_count]
  // Bound to staging slots until a host call's outputs replace it, and to
  // locals no op uses.
  hrt_hal_buffer_t* placeholder;
  hrt_arena_t arena;  // trace sites, callee slot maps, host steps
};

// The vtable's create_state and free_state of program modules.
hrt_status_t hrt_program_state_create(hrt_vm_module_t* base,
                                      hrt_vm_context_t* context,
                                      void** out_state) HRT_MUST_USE;
void hrt_program_state_free(hrt_vm_module_t* base, void* opaque);

#endif  // HRT_MODULES_PROGRAM_PROGRAM_STATE_H_
