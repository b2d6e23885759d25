// The top level of a module description: format, name, executables,
// constants and functions (values and body), parsed into the parser's module
// (program_internal.h). Runs on the creating thread; every error names the
// field (program_fields.h).
#ifndef HRT_MODULES_PROGRAM_PROGRAM_PARSE_H_
#define HRT_MODULES_PROGRAM_PROGRAM_PARSE_H_

#include "base/json.h"
#include "modules/program/program_internal.h"

// Fills in the module from `root`, with base.name and base.function_count,
// and the dispatch keys.
hrt_status_t hrt_program_parse_module(hrt_program_parser_t* parser,
                                      const hrt_json_t* root) HRT_MUST_USE;

#endif  // HRT_MODULES_PROGRAM_PROGRAM_PARSE_H_
