// Recording a program function into its reusable command buffer: each op
// becomes commands on binding slots, with the trace commands of trace ops
// and of the HAL module's traceDispatches, and each call op is replaced by
// the callee's own ops (inlined, recursively), so a call between program
// modules costs no more than the callee's commands.
//
// Slots: the function's values first (inputs, outputs, locals), then the
// "extra" slots that calls add: the callees' locals, and callee outputs
// that cannot be written in place (a result that is also an argument of
// the same call). Every call of the function allocates the extra slots as
// it allocates its locals (program_call.c).
//
// Threads: runs on the thread that links the context (inside
// hrt_program_state_create); the result is read-only afterwards.
#ifndef HRT_MODULES_PROGRAM_PROGRAM_RECORD_H_
#define HRT_MODULES_PROGRAM_PROGRAM_RECORD_H_

#include <stdint.h>

#include "modules/program/program_internal.h"
#include "modules/program/program_state.h"

// Records function `index` of `module` for `state` (linked into `context`)
// into state->functions[index]. Errors name the op
// ("functions.main.body[2]: call 'lib.f': ...").
hrt_status_t hrt_program_record_function(hrt_program_state_t* state,
                                         hrt_vm_context_t* context,
                                         const hrt_program_module_t* module,
                                         uint32_t index) HRT_MUST_USE;

#endif  // HRT_MODULES_PROGRAM_PROGRAM_RECORD_H_
