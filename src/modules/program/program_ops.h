// One op of a program function's body (dispatch, fill, copy, trace,
// barrier, call), parsed and checked against the function's values, the
// module's executables, built-in kernel signatures and declared entries.
// Module constants are read-only: only a user kernel's dispatch may bind
// one where it could write. Runs on the creating thread; errors name the
// field (program_fields.h). What is parsed goes into the module's arena
// (program_internal.h).
#ifndef HRT_MODULES_PROGRAM_PROGRAM_OPS_H_
#define HRT_MODULES_PROGRAM_PROGRAM_OPS_H_

#include "base/json.h"
#include "modules/program/program_internal.h"

// The op `json` of `function` (whose values are parsed) at `path`. Leaves
// op->key of a dispatch to the caller.
hrt_status_t hrt_program_parse_op(hrt_program_parser_t* parser,
                                  const hrt_function_t* function,
                                  const hrt_json_t* json, const char* path,
                                  hrt_op_t* op) HRT_MUST_USE;

// Sets function->overwritten and function->unused (allocated here) for
// each value from `first_value` up to the module's constants: whether the
// first op that uses it writes every byte of it and reads none (a fill of
// it, a copy into it from another value, or a built-in dispatch that binds
// it only as outputs its constants size to the whole value), so a call need
// not zero it before the op; and, for locals (from `first_local` on),
// whether no op uses it at all. Sets function->call_bytes: the outputs'
// and used locals' bytes (saturating).
hrt_status_t hrt_program_mark_overwritten(hrt_program_parser_t* parser,
                                          hrt_function_t* function,
                                          uint32_t first_value,
                                          uint32_t first_local) HRT_MUST_USE;

#endif  // HRT_MODULES_PROGRAM_PROGRAM_OPS_H_
