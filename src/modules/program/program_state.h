// The per-context state of a program module: its executables loaded on the
// device of the HAL module linked before it, and one reusable command buffer
// per function, recorded from the function's ops with their trace commands
// (trace ops, and what the HAL module's traceDispatches and its filters
// cover).
//
// Threads: created on the thread that creates the context and freed on the
// one that destroys it (possibly a device completion thread, see
// vm/module.h); calls (program_call.h) read it, never write it, on the
// invoking and completion threads. The state owns its executables, command
// buffers and arena; it borrows the HAL module, which the context frees
// after it.
#ifndef HRT_MODULES_PROGRAM_PROGRAM_STATE_H_
#define HRT_MODULES_PROGRAM_PROGRAM_STATE_H_

#include <stdint.h>

#include "base/arena.h"
#include "hal/command_buffer.h"
#include "hal/device.h"
#include "hal/executable.h"
#include "vm/context.h"
#include "vm/module.h"

typedef struct hrt_program_state_s hrt_program_state_t;

struct hrt_program_state_s {
  hrt_vm_module_t* hal;      // borrowed: linked before us, freed after us
  hrt_hal_device_t* device;  // the HAL module's
  hrt_hal_executable_t** executables;          // [executable_count]
  hrt_hal_command_buffer_t** command_buffers;  // [function_count]
  uint32_t** command_ops;  // [function_count][commands]: op of each command
  hrt_arena_t arena;       // trace sites and their values, command_ops
};

// The vtable's create_state and free_state of program modules.
hrt_status_t hrt_program_state_create(hrt_vm_module_t* base,
                                      hrt_vm_context_t* context,
                                      void** out_state) HRT_MUST_USE;
void hrt_program_state_free(hrt_vm_module_t* base, void* opaque);

#endif  // HRT_MODULES_PROGRAM_PROGRAM_STATE_H_
