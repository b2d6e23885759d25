#include "hal/element_format.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"

// Enough for the exact decimal expansion of any double (at most 767
// significant digits) with its sign, point and exponent.
#define HRT_EXACT_TEXT_CAPACITY 800

// `value` rounded to the float element `type` (ties to even), as a double.
static double hrt_round_to_type(hrt_hal_element_type_t type, double value) {
  switch (type) {
    case HRT_HAL_ELEMENT_TYPE_F16:
      return hrt_f16_to_f32(hrt_f64_to_f16(value));
    case HRT_HAL_ELEMENT_TYPE_BF16:
      return hrt_bf16_to_f32(hrt_f64_to_bf16(value));
    case HRT_HAL_ELEMENT_TYPE_F32:
      return (float)value;
    default:
      return value;
  }
}

// The exact decimal expansion of `magnitude` (finite, > 0) as its
// significant digits (ASCII, at least 18 of them, trailing zeros kept) and
// the power of ten of the first: magnitude = d0.d1d2... * 10^exponent.
// glibc prints every digit exactly; asking for as many digits as the
// expansion can have makes the digits exact, not rounded. Only ASCII digits
// are taken, so the locale's decimal point does not matter.
static int hrt_exact_digits(double magnitude,
                            char digits[HRT_EXACT_TEXT_CAPACITY]) {
  // magnitude = m * 2^e with an integer m < 2^53 (e >= -1074): its decimal
  // expansion has at most 17 + 0.7 * -e significant digits when e < 0 (those
  // of m * 5^-e), and at most 0.302 * (e + 53) + 1 when e >= 0.
  int binary_exponent;
  frexp(magnitude, &binary_exponent);
  int e = binary_exponent - 53 < -1074 ? -1074 : binary_exponent - 53;
  int precision =
      e < 0 ? 18 + (int)(-e * 0.69898) : (int)((e + 53) * 0.30103) + 18;
  char text[HRT_EXACT_TEXT_CAPACITY];
  snprintf(text, sizeof(text), "%.*e", precision, magnitude);
  int count = 0;
  const char* c = text;
  for (; *c != 'e'; ++c) {
    if (*c >= '0' && *c <= '9') digits[count++] = *c;
  }
  digits[count] = '\0';
  return (int)strtol(c + 1, NULL, 10);
}

// Writes `negative`, the `count` significant digits and the power of ten of
// the first as JavaScript's Number#toString lays them out.
static void hrt_layout_decimal(bool negative, const char* digits, int count,
                               int exponent, char* out) {
  int point = exponent + 1;  // digits before the decimal point
  char* p = out;
  if (negative) *p++ = '-';
  if (count <= point && point <= 21) {
    memcpy(p, digits, (size_t)count);
    p += count;
    for (int i = count; i < point; ++i) *p++ = '0';
  } else if (0 < point && point <= 21) {
    memcpy(p, digits, (size_t)point);
    p += point;
    *p++ = '.';
    memcpy(p, digits + point, (size_t)(count - point));
    p += count - point;
  } else if (-6 < point && point <= 0) {
    *p++ = '0';
    *p++ = '.';
    for (int i = point; i < 0; ++i) *p++ = '0';
    memcpy(p, digits, (size_t)count);
    p += count;
  } else {
    *p++ = digits[0];
    if (count > 1) {
      *p++ = '.';
      memcpy(p, digits + 1, (size_t)(count - 1));
      p += count - 1;
    }
    p += sprintf(p, "e%c%d", exponent < 0 ? '-' : '+', abs(exponent));
  }
  *p = '\0';
}

static void hrt_format_float(hrt_hal_element_type_t type, double value,
                             char out[HRT_HAL_ELEMENT_TEXT_CAPACITY]) {
  if (isnan(value)) {
    strcpy(out, "NaN");
    return;
  }
  bool negative = signbit(value) != 0;
  double magnitude = fabs(value);
  if (magnitude == 0 || isinf(magnitude)) {
    strcpy(out, magnitude == 0 ? (negative ? "-0" : "0")
                               : (negative ? "-Infinity" : "Infinity"));
    return;
  }
  char exact[HRT_EXACT_TEXT_CAPACITY];
  int exact_exponent = hrt_exact_digits(magnitude, exact);
  // 17 significant digits always read back, so the loop ends by then.
  for (int count = 1;; ++count) {
    // Ties away from zero: up when the first digit dropped is 5 or more.
    char rounded[17];
    memcpy(rounded, exact, (size_t)count);
    int exponent = exact_exponent;
    if (exact[count] >= '5') {
      int i = count - 1;
      for (; i >= 0 && rounded[i] == '9'; --i) rounded[i] = '0';
      if (i >= 0) {
        ++rounded[i];
      } else {
        rounded[0] = '1';
        ++exponent;
      }
    }
    // Read back as digits * 10^k: no decimal point, so no locale.
    char candidate[40];
    snprintf(candidate, sizeof(candidate), "%.*se%d", count, rounded,
             exponent - count + 1);
    if (count == 17 ||
        hrt_round_to_type(type, strtod(candidate, NULL)) == magnitude) {
      hrt_layout_decimal(negative, rounded, count, exponent, out);
      return;
    }
  }
}

void hrt_hal_element_format(hrt_hal_element_type_t type, const void* data,
                            uint64_t index,
                            char out[HRT_HAL_ELEMENT_TEXT_CAPACITY]) {
  if (type == HRT_HAL_ELEMENT_TYPE_I64 || type == HRT_HAL_ELEMENT_TYPE_U64) {
    uint64_t bits;
    memcpy(&bits, (const char*)data + index * 8, 8);
    if (type == HRT_HAL_ELEMENT_TYPE_I64) {
      snprintf(out, HRT_HAL_ELEMENT_TEXT_CAPACITY, "%" PRId64, (int64_t)bits);
    } else {
      snprintf(out, HRT_HAL_ELEMENT_TEXT_CAPACITY, "%" PRIu64, bits);
    }
    return;
  }
  double value = hrt_hal_element_load(type, data, index);
  if (type == HRT_HAL_ELEMENT_TYPE_BOOL) {
    strcpy(out, value != 0 ? "true" : "false");
  } else if (hrt_hal_element_type_is_float(type)) {
    hrt_format_float(type, value, out);
  } else {
    snprintf(out, HRT_HAL_ELEMENT_TEXT_CAPACITY, "%" PRId64, (int64_t)value);
  }
}

// Writes dimension `dim` of the tensor from element `offset` on; false at
// the first write that fails, which ends the text: each further write would
// fail again (a memory stream out of memory, slowly and without ferror).
static bool hrt_format_dimension(hrt_hal_element_type_t type, uint32_t rank,
                                 const int64_t* shape, const void* data,
                                 bool summarise, uint32_t dim, uint64_t offset,
                                 FILE* stream) {
  uint64_t stride = 1;
  for (uint32_t d = dim + 1; d < rank; ++d) stride *= (uint64_t)shape[d];
  uint64_t length = (uint64_t)shape[dim];
  bool elide = summarise && length > 2 * HRT_HAL_FORMAT_EDGE;
  if (fputc('[', stream) == EOF) return false;
  for (uint64_t i = 0; i < length; ++i) {
    if (i && fputc(' ', stream) == EOF) return false;
    if (elide && i == HRT_HAL_FORMAT_EDGE) {
      if (fputs("... ", stream) == EOF) return false;
      i = length - HRT_HAL_FORMAT_EDGE;
    }
    if (dim + 1 == rank) {
      char text[HRT_HAL_ELEMENT_TEXT_CAPACITY];
      hrt_hal_element_format(type, data, offset + i, text);
      if (fputs(text, stream) == EOF) return false;
    } else if (!hrt_format_dimension(type, rank, shape, data, summarise,
                                     dim + 1, offset + i * stride, stream)) {
      return false;
    }
  }
  return fputc(']', stream) != EOF;
}

// Whether more than `max_elements` innermost entries would be written: the
// product of the dimensions before the first 0 (all of them when none is),
// which is the element count of a tensor that is not empty and the count of
// innermost `[]` of one that is. Without overflow for any shape.
static bool hrt_tensor_is_summarised(uint32_t rank, const int64_t* shape,
                                     uint64_t max_elements) {
  uint64_t entries = 1;
  for (uint32_t d = 0; d < rank && shape[d] != 0; ++d) {
    if ((uint64_t)shape[d] > max_elements / entries) return true;
    entries *= (uint64_t)shape[d];
  }
  return false;
}

void hrt_hal_tensor_format(hrt_hal_element_type_t type, uint32_t rank,
                           const int64_t* shape, const void* data,
                           uint64_t max_elements, FILE* stream) {
  if (rank == 0) {
    char text[HRT_HAL_ELEMENT_TEXT_CAPACITY];
    hrt_hal_element_format(type, data, 0, text);
    fputs(text, stream);
    return;
  }
  (void)hrt_format_dimension(
      type, rank, shape, data,
      hrt_tensor_is_summarised(rank, shape, max_elements), 0, 0, stream);
}
