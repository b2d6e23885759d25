#include "modules/program/program_fields.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void hrt_program_path_format(char* out, const char* format, ...)
    HRT_PRINTF(2, 3);
void hrt_program_path_format(char* out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(out, HRT_PATH_MAX, format, args);
  va_end(args);
}

hrt_status_t hrt_program_field_error(hrt_status_code_t code, const char* path,
                                     const char* format, ...) HRT_PRINTF(3, 4);
hrt_status_t hrt_program_field_error(hrt_status_code_t code, const char* path,
                                     const char* format, ...) {
  va_list args;
  va_start(args, format);
  hrt_status_t status = hrt_status_makev(code, format, args);
  va_end(args);
  return hrt_status_annotate(status, "%s", path);
}

hrt_status_t hrt_program_expect(const hrt_json_t* value, hrt_json_type_t type,
                                const char* path) {
  if (!value || value->type != type) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path, "must be %s %s%s%s",
        type == HRT_JSON_ARRAY || type == HRT_JSON_OBJECT ? "an" : "a",
        hrt_json_type_name(type), value ? ", got " : "",
        value ? hrt_json_type_name(value->type) : " (missing)");
  }
  return HRT_OK;
}

hrt_status_t hrt_program_check_keys(const hrt_json_t* object,
                                    const char* const* known, int count,
                                    const char* path) {
  for (size_t i = 0; i < object->length; ++i) {
    bool found = false;
    for (int k = 0; k < count && !found; ++k) {
      found = strcmp(object->keys[i], known[k]) == 0;
    }
    if (!found) {
      return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                     "unknown field '%s'", object->keys[i]);
    }
  }
  return HRT_OK;
}

bool hrt_program_is_identifier(const char* text) {
  if (!text[0] || (text[0] >= '0' && text[0] <= '9')) return false;
  for (const char* c = text; *c; ++c) {
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
          (*c >= '0' && *c <= '9') || *c == '_')) {
      return false;
    }
  }
  return true;
}

hrt_status_t hrt_program_expect_identifier(const hrt_json_t* value,
                                           const char* path) {
  HRT_RETURN_IF_ERROR(hrt_program_expect(value, HRT_JSON_STRING, path));
  if (!hrt_program_is_identifier(value->string)) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "'%s' is not a name (letters, digits, '_'; not "
        "starting with a digit)",
        value->string);
  }
  return HRT_OK;
}

bool hrt_program_is_value_name(const char* text) {
  size_t length = 0;
  for (const unsigned char* c = (const unsigned char*)text; *c; ++c) {
    if (*c < 0x20 || *c == 0x7f) return false;
    ++length;
  }
  return length > 0 && length <= HRT_PROGRAM_MAX_VALUE_NAME;
}

hrt_status_t hrt_program_expect_value_name(const hrt_json_t* value,
                                           const char* path) {
  HRT_RETURN_IF_ERROR(hrt_program_expect(value, HRT_JSON_STRING, path));
  if (!hrt_program_is_value_name(value->string)) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "'%s' is not a value name (1 to %d bytes, no control characters)",
        value->string, HRT_PROGRAM_MAX_VALUE_NAME);
  }
  return HRT_OK;
}

hrt_status_t hrt_program_expect_integer(const hrt_json_t* value, int64_t min,
                                        int64_t max, const char* path,
                                        int64_t* out) {
  if (!value || value->type != HRT_JSON_NUMBER || !value->fits_int64 ||
      value->integer < min || value->integer > max) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "must be an integer in [%lld, %lld]",
                                   (long long)min, (long long)max);
  }
  *out = value->integer;
  return HRT_OK;
}

hrt_status_t hrt_program_string_field(const hrt_json_t* object,
                                      const char* path, const char* name,
                                      char field[HRT_PATH_MAX],
                                      const hrt_json_t** out) {
  hrt_program_path_format(field, "%s.%s", path, name);
  *out = hrt_json_get(object, name);
  return hrt_program_expect(*out, HRT_JSON_STRING, field);
}
