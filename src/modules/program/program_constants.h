// Numbers of a module description as the bits a command takes: fill
// patterns and dispatch constants (32-bit words). Pure functions of their
// arguments (any thread); errors name the field (program_fields.h).
#ifndef HRT_MODULES_PROGRAM_PROGRAM_CONSTANTS_H_
#define HRT_MODULES_PROGRAM_PROGRAM_CONSTANTS_H_

#include <stdint.h>

#include "base/json.h"
#include "hal/buffer_view.h"
#include "hal/executable.h"

// The fill pattern of `value` stored as `type`.
hrt_status_t hrt_program_fill_pattern(const hrt_json_t* value,
                                      hrt_hal_element_type_t type,
                                      const char* path,
                                      uint64_t* out_pattern) HRT_MUST_USE;

// How a constant's number becomes 32 bits.
typedef enum hrt_constant_kind_e {
  HRT_CONSTANT_ANY,      // user kernel: integer text as u32/i32, else f32
  HRT_CONSTANT_INTEGER,  // built-in integer constant: u32 or i32
  HRT_CONSTANT_F32,      // built-in f32 constant: any number, as f32 bits
} hrt_constant_kind_t;

// A constant: a number, or {"f32": number} for an explicit f32. Integers are
// stored as u32 (negative ones as two's complement i32), f32 as its bits.
hrt_status_t hrt_program_parse_constant(const hrt_json_t* value,
                                        hrt_constant_kind_t kind,
                                        const char* kernel, const char* path,
                                        uint32_t* out) HRT_MUST_USE;

// A constant for a declared scalar parameter of type `type`, stored as its
// 1 or 2 words (low word first): u32/i32 integers in range; f32 a number or
// {"f32": number}; f64 a number; u64/i64 an integer within +-(2^53 - 1) or
// a decimal string over the type's whole range.
hrt_status_t hrt_program_parse_typed_constant(const hrt_json_t* value,
                                              hrt_hal_param_type_t type,
                                              const char* kernel,
                                              const char* path,
                                              uint32_t* out) HRT_MUST_USE;

#endif  // HRT_MODULES_PROGRAM_PROGRAM_CONSTANTS_H_
