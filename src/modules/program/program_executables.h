// The executables of a program module: the "executables" section of its
// description, parsed at creation (errors name the field, see
// program_fields.h), and the executable of one spec loaded on a device when
// a context links the module.
//
// Threads: parsing runs on the creating thread, loading on the thread that
// links the module into a context (it reads kernel files and opens
// libraries). The specs belong to the module (program_internal.h); a loaded
// executable belongs to the caller.
#ifndef HRT_MODULES_PROGRAM_PROGRAM_EXECUTABLES_H_
#define HRT_MODULES_PROGRAM_PROGRAM_EXECUTABLES_H_

#include "base/json.h"
#include "hal/device.h"
#include "hal/executable.h"
#include "modules/program/program_internal.h"

// Fills the parser's module->executables from the "executables" object.
hrt_status_t hrt_program_parse_executables(
    hrt_program_parser_t* parser, const hrt_json_t* executables) HRT_MUST_USE;

// The entry `entry` of `spec` as its CUDA kind declares it: NULL when it
// declares none; NOT_FOUND (at `path`) when it declares others only.
hrt_status_t hrt_program_find_entry_decl(
    const hrt_executable_spec_t* spec, const char* entry, const char* path,
    const hrt_hal_entry_decl_t** out) HRT_MUST_USE;

// The executable of `spec` for `device`'s kind; NOT_FOUND when the spec
// gives none for it. Errors are annotated "executables.<name>".
hrt_status_t hrt_program_load_executable(
    hrt_hal_device_t* device, const hrt_executable_spec_t* spec,
    hrt_hal_executable_t** out) HRT_MUST_USE;

#endif  // HRT_MODULES_PROGRAM_PROGRAM_EXECUTABLES_H_
