#include "modules/program/program_constants.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/half.h"
#include "modules/program/program_fields.h"

static uint32_t hrt_f32_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

hrt_status_t hrt_program_fill_pattern(const hrt_json_t* value,
                                      hrt_hal_element_type_t type,
                                      const char* path, uint64_t* out_pattern) {
  double number = 0;
  if (value && value->type == HRT_JSON_BOOL &&
      type == HRT_HAL_ELEMENT_TYPE_BOOL) {
    number = value->boolean;
  } else if (value && value->type == HRT_JSON_NUMBER) {
    number = value->number;
  } else {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "must be a number");
  }
  static const struct {
    double min, max;
  } int_ranges[HRT_HAL_ELEMENT_TYPE_COUNT_] = {
      [HRT_HAL_ELEMENT_TYPE_I8] = {-128, 127},
      [HRT_HAL_ELEMENT_TYPE_U8] = {0, 255},
      [HRT_HAL_ELEMENT_TYPE_I16] = {-32768, 32767},
      [HRT_HAL_ELEMENT_TYPE_U16] = {0, 65535},
      [HRT_HAL_ELEMENT_TYPE_I32] = {-2147483648.0, 2147483647.0},
      [HRT_HAL_ELEMENT_TYPE_U32] = {0, 4294967295.0},
      [HRT_HAL_ELEMENT_TYPE_I64] = {-9007199254740991.0, 9007199254740991.0},
      [HRT_HAL_ELEMENT_TYPE_U64] = {0, 9007199254740991.0},
      [HRT_HAL_ELEMENT_TYPE_BOOL] = {0, 1},
  };
  switch (type) {
    case HRT_HAL_ELEMENT_TYPE_F16:
      *out_pattern = hrt_f64_to_f16(number);
      return HRT_OK;
    case HRT_HAL_ELEMENT_TYPE_BF16:
      *out_pattern = hrt_f64_to_bf16(number);
      return HRT_OK;
    case HRT_HAL_ELEMENT_TYPE_F32:
      *out_pattern = hrt_f32_bits((float)number);
      return HRT_OK;
    case HRT_HAL_ELEMENT_TYPE_F64:
      memcpy(out_pattern, &number, sizeof(number));
      return HRT_OK;
    default:
      break;
  }
  if (number != floor(number) || number < int_ranges[type].min ||
      number > int_ranges[type].max) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "%g is not a %s value", number,
                                   hrt_hal_element_type_name(type));
  }
  *out_pattern = (uint64_t)(int64_t)number;
  return HRT_OK;
}

hrt_status_t hrt_program_parse_constant(const hrt_json_t* value,
                                        hrt_constant_kind_t kind,
                                        const char* kernel, const char* path,
                                        uint32_t* out) {
  const hrt_json_t* number = value;
  bool explicit_f32 = value && value->type == HRT_JSON_OBJECT;
  if (explicit_f32) {
    static const char* const known[] = {"f32"};
    HRT_RETURN_IF_ERROR(hrt_program_check_keys(value, known, 1, path));
    number = hrt_json_get(value, "f32");
    // JSON has no infinities or NaN: {"f32": "inf" | "-inf" | "nan"}.
    static const struct {
      const char* text;
      uint32_t bits;
    } kSpecial[] = {{"inf", 0x7f800000u}, {"-inf", 0xff800000u},
                    {"nan", 0x7fc00000u}};
    for (size_t i = 0; number && number->type == HRT_JSON_STRING && i < 3;
         ++i) {
      if (strcmp(number->string, kSpecial[i].text) != 0) continue;
      if (kind == HRT_CONSTANT_INTEGER) break;
      *out = kSpecial[i].bits;
      return HRT_OK;
    }
  }
  if (!number || number->type != HRT_JSON_NUMBER) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "must be a number or {\"f32\": number | \"inf\" | \"-inf\" | "
        "\"nan\"}");
  }
  bool as_f32 = explicit_f32 || kind == HRT_CONSTANT_F32 ||
                (kind == HRT_CONSTANT_ANY && !number->is_integer);
  if (as_f32) {
    if (kind == HRT_CONSTANT_INTEGER) {
      return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                     "kernel '%s' takes an integer here",
                                     kernel);
    }
    *out = hrt_f32_bits((float)number->number);
    return HRT_OK;
  }
  if (!number->is_integer) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "kernel '%s' takes an integer here (got %g)",
                                   kernel, number->number);
  }
  if (!number->fits_int64 || number->integer < INT32_MIN ||
      number->integer > UINT32_MAX) {
    return hrt_program_field_error(HRT_STATUS_INVALID_ARGUMENT, path,
                                   "%.0f does not fit in 32 bits",
                                   number->number);
  }
  *out = (uint32_t)number->integer;
  return HRT_OK;
}

// The largest integer a JSON number gives exactly in JavaScript, 2^53 - 1.
#define HRT_PROGRAM_MAX_SAFE_INTEGER INT64_C(9007199254740991)

// A decimal integer string ("-12", "18446744073709551615") in the range of
// i64 (`is_signed`, stored as two's complement) or u64; false otherwise.
static bool hrt_parse_decimal(const char* text, bool is_signed, uint64_t* out) {
  const bool negative = is_signed && text[0] == '-';
  const char* c = text + negative;
  if (!*c) return false;
  // Magnitude limits: 2^63 (negative), 2^63 - 1, 2^64 - 1.
  const uint64_t limit = !is_signed ? UINT64_MAX
                         : negative ? (uint64_t)INT64_MAX + 1
                                    : (uint64_t)INT64_MAX;
  uint64_t value = 0;
  for (; *c; ++c) {
    if (*c < '0' || *c > '9') return false;
    const uint64_t digit = (uint64_t)(*c - '0');
    if (value > (limit - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *out = negative ? (uint64_t)0 - value : value;
  return true;
}

hrt_status_t hrt_program_parse_typed_constant(const hrt_json_t* value,
                                              hrt_hal_param_type_t type,
                                              const char* kernel,
                                              const char* path, uint32_t* out) {
  const char* name = hrt_hal_param_type_name(type);
  const char* article = name[0] == 'u' ? "a" : "an";
  if (type == HRT_HAL_PARAM_F32) {
    return hrt_program_parse_constant(value, HRT_CONSTANT_F32, kernel, path,
                                      out);
  }
  const bool wide = hrt_hal_param_type_words(type) == 2;
  if (wide && type != HRT_HAL_PARAM_F64 && value->type == HRT_JSON_STRING) {
    uint64_t bits = 0;
    if (!hrt_parse_decimal(value->string, type == HRT_HAL_PARAM_I64, &bits)) {
      return hrt_program_field_error(
          HRT_STATUS_INVALID_ARGUMENT, path,
          "kernel '%s' takes %s %s here: '%s' is not a "
          "decimal %s integer",
          kernel, article, name, value->string, name);
    }
    out[0] = (uint32_t)bits;
    out[1] = (uint32_t)(bits >> 32);
    return HRT_OK;
  }
  if (value->type != HRT_JSON_NUMBER) {
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "kernel '%s' takes %s %s here: must be a number%s", kernel, article,
        name, wide && type != HRT_HAL_PARAM_F64 ? " or a decimal string" : "");
  }
  if (type == HRT_HAL_PARAM_F64) {
    uint64_t bits = 0;
    memcpy(&bits, &value->number, sizeof(bits));
    out[0] = (uint32_t)bits;
    out[1] = (uint32_t)(bits >> 32);
    return HRT_OK;
  }
  int64_t min = 0, max = 0;
  switch (type) {
    case HRT_HAL_PARAM_U32:
      max = UINT32_MAX;
      break;
    case HRT_HAL_PARAM_I32:
      min = INT32_MIN;
      max = INT32_MAX;
      break;
    case HRT_HAL_PARAM_U64:
      max = HRT_PROGRAM_MAX_SAFE_INTEGER;
      break;
    default:  // I64
      min = -HRT_PROGRAM_MAX_SAFE_INTEGER;
      max = HRT_PROGRAM_MAX_SAFE_INTEGER;
      break;
  }
  if (!value->is_integer || !value->fits_int64 || value->integer < min ||
      value->integer > max) {
    // An integer as written (a double would round 2^53 + 1).
    char text[32];
    if (value->fits_int64) {
      snprintf(text, sizeof(text), "%lld", (long long)value->integer);
    } else {
      snprintf(text, sizeof(text), "%.17g", value->number);
    }
    return hrt_program_field_error(
        HRT_STATUS_INVALID_ARGUMENT, path,
        "kernel '%s' takes %s %s here: %s is not an integer in [%lld, %lld]%s",
        kernel, article, name, text, (long long)min, (long long)max,
        wide ? " (a decimal string takes the whole 64-bit range)" : "");
  }
  const uint64_t bits = (uint64_t)value->integer;
  out[0] = (uint32_t)bits;
  if (wide) out[1] = (uint32_t)(bits >> 32);
  return HRT_OK;
}
