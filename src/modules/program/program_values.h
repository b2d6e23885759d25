// The values of a program function (inputs, outputs and locals) as its
// description declares them, the module's constants, and op operands that
// name them. Runs on the creating thread; errors name the field
// (program_fields.h). What is parsed goes into the module's arena
// (program_internal.h).
#ifndef HRT_MODULES_PROGRAM_PROGRAM_VALUES_H_
#define HRT_MODULES_PROGRAM_PROGRAM_VALUES_H_

#include "base/json.h"
#include "modules/program/program_internal.h"

// The module's "constants" object (name -> {dtype, shape} and where the
// creator finds the bytes: data, file, offset) into module->constants,
// without their bytes (program_module.c copies those).
hrt_status_t hrt_program_parse_constants(hrt_program_parser_t* parser,
                                         const hrt_json_t* constants)
    HRT_MUST_USE;

// Parses inputs, outputs and locals into one array, names unique, followed
// by the module's constants (parsed before the functions).
hrt_status_t hrt_program_parse_values(hrt_program_parser_t* parser,
                                      const hrt_json_t* function,
                                      const char* path, hrt_function_t* out,
                                      uint32_t* out_input_count,
                                      uint32_t* out_output_count) HRT_MUST_USE;

// The index of the value that the string `name` names; NOT_FOUND if none.
hrt_status_t hrt_program_find_value(const hrt_function_t* function,
                                    const hrt_json_t* name, const char* path,
                                    uint32_t* out_index) HRT_MUST_USE;

// An array of value names (1 to `max`): op->operands, op->operand_count.
hrt_status_t hrt_program_parse_value_list(hrt_program_parser_t* parser,
                                          const hrt_function_t* function,
                                          const hrt_json_t* list, uint32_t max,
                                          const char* path,
                                          hrt_op_t* op) HRT_MUST_USE;

#endif  // HRT_MODULES_PROGRAM_PROGRAM_VALUES_H_
