// Reading the fields of a module description (parsed JSON, base/json.h):
// each check that fails returns a status whose message starts with the
// field's path, e.g. `functions.main.body[2].bindings[1]: unknown value 'z'`.
// Pure functions of their arguments, callable on any thread.
#ifndef HRT_MODULES_PROGRAM_PROGRAM_FIELDS_H_
#define HRT_MODULES_PROGRAM_PROGRAM_FIELDS_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/json.h"
#include "base/status.h"

// Field paths in messages ("functions.main.body[2].bindings[1]"): buffers of
// HRT_PATH_MAX bytes, longer paths truncated.
#define HRT_PATH_MAX 512
void hrt_program_path_format(char* out, const char* format, ...)
    HRT_PRINTF(2, 3);

// A status `code` with the message "<path>: <formatted message>".
hrt_status_t hrt_program_field_error(hrt_status_code_t code, const char* path,
                                     const char* format, ...)
    HRT_PRINTF(3, 4) HRT_MUST_USE;

// `value` is present and of `type`.
hrt_status_t hrt_program_expect(const hrt_json_t* value, hrt_json_type_t type,
                                const char* path) HRT_MUST_USE;

// Member `name` of `object`, which must be a string: `field` receives its
// path ("<path>.<name>"), for messages about its value.
hrt_status_t hrt_program_string_field(const hrt_json_t* object,
                                      const char* path, const char* name,
                                      char field[HRT_PATH_MAX],
                                      const hrt_json_t** out) HRT_MUST_USE;

// Rejects members not in `known`, so typos do not pass silently.
hrt_status_t hrt_program_check_keys(const hrt_json_t* object,
                                    const char* const* known, int count,
                                    const char* path) HRT_MUST_USE;

// Letters, digits and '_', not starting with a digit.
bool hrt_program_is_identifier(const char* text);

// A string that hrt_program_is_identifier() accepts.
hrt_status_t hrt_program_expect_identifier(const hrt_json_t* value,
                                           const char* path) HRT_MUST_USE;

// A value's or constant's name: any non-empty string of at most
// HRT_PROGRAM_MAX_VALUE_NAME bytes without control characters (names from
// other formats, such as ONNX's "onnx::Flatten_0", are kept as they are).
#define HRT_PROGRAM_MAX_VALUE_NAME 255
bool hrt_program_is_value_name(const char* text);
hrt_status_t hrt_program_expect_value_name(const hrt_json_t* value,
                                           const char* path) HRT_MUST_USE;

// An integer in [min, max].
hrt_status_t hrt_program_expect_integer(const hrt_json_t* value, int64_t min,
                                        int64_t max, const char* path,
                                        int64_t* out) HRT_MUST_USE;

#endif  // HRT_MODULES_PROGRAM_PROGRAM_FIELDS_H_
