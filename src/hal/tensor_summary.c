#include "hal/tensor_summary.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/half.h"

static const char* const hrt_trace_mode_names[HRT_HAL_TRACE_MODE_COUNT_] = {
    "full", "summary", "health"};

const char* hrt_hal_trace_mode_name(hrt_hal_trace_mode_t mode) {
  if ((unsigned)mode >= HRT_HAL_TRACE_MODE_COUNT_) return "unknown";
  return hrt_trace_mode_names[mode];
}

hrt_status_t hrt_hal_trace_mode_parse(const char* name,
                                      hrt_hal_trace_mode_t* out) {
  for (int i = 0; i < HRT_HAL_TRACE_MODE_COUNT_; ++i) {
    if (name && strcmp(name, hrt_trace_mode_names[i]) == 0) {
      *out = (hrt_hal_trace_mode_t)i;
      return HRT_OK;
    }
  }
  return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                         "unknown trace mode '%s' (expected one of full, "
                         "summary, health)",
                         name ? name : "(null)");
}

double hrt_hal_tensor_summary_mean(const hrt_hal_tensor_summary_t* s) {
  uint64_t finite =
      s->count - s->nan_count - s->pos_inf_count - s->neg_inf_count;
  return finite ? s->sum / (double)finite : NAN;
}

double hrt_hal_tensor_summary_l2(const hrt_hal_tensor_summary_t* s) {
  return sqrt(s->sum_squares);
}

void hrt_hal_tensor_summary_init(hrt_hal_tensor_summary_t* partial) {
  *partial = (hrt_hal_tensor_summary_t){.min = INFINITY, .max = -INFINITY};
}

// Folds one element known to be finite into `s`: counted as zero or not,
// folded into min, max and the sums (adding +0 turns -0 into +0).
static inline void hrt_fold_finite(hrt_hal_tensor_summary_t* s, double v) {
  v += 0.0;
  s->zero_count += v == 0;
  s->min = v < s->min ? v : s->min;
  s->max = v > s->max ? v : s->max;
  s->sum += v;
  s->sum_squares += v * v;
}

// Counts one element's class if it is NaN or an infinity (HEALTH); whether
// it was.
static inline bool hrt_fold_health(hrt_hal_tensor_summary_t* s, double v) {
  if (v != v) {
    ++s->nan_count;
  } else if (v == INFINITY) {
    ++s->pos_inf_count;
  } else if (v == -INFINITY) {
    ++s->neg_inf_count;
  } else {
    return false;
  }
  return true;
}

// Folds one element (as a double) into `s`: a non-finite one is counted,
// a finite one folded.
static inline void hrt_fold(hrt_hal_tensor_summary_t* s, double v) {
  if (!hrt_fold_health(s, v)) hrt_fold_finite(s, v);
}

// Loops `fold` over the elements into `acc`, each read as `ctype`
// (unaligned-safe) and converted by `convert` (an expression of `raw`).
#define HRT_SUMMARY_LOOP(fold, ctype, convert)              \
  for (uint64_t i = 0; i < count; ++i) {                    \
    ctype raw;                                              \
    memcpy(&raw, bytes + i * sizeof(ctype), sizeof(ctype)); \
    (void)fold(&acc, (convert));                            \
  }

#define HRT_SUMMARY_TYPES(fold)                                       \
  switch (type) {                                                     \
    case HRT_HAL_ELEMENT_TYPE_F16:                                    \
      HRT_SUMMARY_LOOP(fold, uint16_t, (double)hrt_f16_to_f32(raw));  \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_BF16:                                   \
      HRT_SUMMARY_LOOP(fold, uint16_t, (double)hrt_bf16_to_f32(raw)); \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_F32:                                    \
      HRT_SUMMARY_LOOP(fold, float, (double)raw);                     \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_F64:                                    \
      HRT_SUMMARY_LOOP(fold, double, raw);                            \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_I8:                                     \
      HRT_SUMMARY_LOOP(fold, int8_t, (double)raw);                    \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_U8:                                     \
      HRT_SUMMARY_LOOP(fold, uint8_t, (double)raw);                   \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_I16:                                    \
      HRT_SUMMARY_LOOP(fold, int16_t, (double)raw);                   \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_U16:                                    \
      HRT_SUMMARY_LOOP(fold, uint16_t, (double)raw);                  \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_I32:                                    \
      HRT_SUMMARY_LOOP(fold, int32_t, (double)raw);                   \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_U32:                                    \
      HRT_SUMMARY_LOOP(fold, uint32_t, (double)raw);                  \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_I64:                                    \
      HRT_SUMMARY_LOOP(fold, int64_t, (double)raw);                   \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_U64:                                    \
      HRT_SUMMARY_LOOP(fold, uint64_t, (double)raw);                  \
      break;                                                          \
    case HRT_HAL_ELEMENT_TYPE_BOOL:                                   \
      HRT_SUMMARY_LOOP(fold, uint8_t, raw != 0 ? 1.0 : 0.0);          \
      break;                                                          \
    default:                                                          \
      break;                                                          \
  }

// Folds the bits of each of the `count` elements of `ctype` at `bytes`
// (`raw`) into `acc` as `fold` says, without a branch per element so that
// the compiler can vectorize it, and returns `result`.
#define HRT_SCAN_BITS(ctype, fold, result)                     \
  do {                                                         \
    ctype acc = 0;                                             \
    for (uint64_t i = 0; i < count; ++i) {                     \
      ctype raw;                                               \
      memcpy(&raw, bytes + i * sizeof(ctype), sizeof(ctype));  \
      acc = (fold);                                            \
    }                                                          \
    return (result);                                           \
  } while (0)

// Whether any element has all of `exponent`'s bits set (NaN or an
// infinity): a health check is then about as fast as reading the tensor
// once.
#define HRT_ANY_NONFINITE(ctype, exponent)                                \
  HRT_SCAN_BITS(ctype, acc | (ctype)((raw & (exponent)) == (exponent)), \
                acc != 0)

// The same test as the largest magnitude's bits against `exponent` (an
// element is NaN or infinite exactly when its bits without the sign are at
// least those of an infinity): an unsigned max, which vectorizes to wide
// registers with AVX2 and AVX-512 (SSE2 has none for 32 bits).
#define HRT_MAGNITUDE(ctype, raw) \
  ((ctype)((raw) & (ctype)((ctype)~(ctype)0 >> 1)))
#define HRT_MAX_MAGNITUDE_NONFINITE(ctype, exponent)                        \
  HRT_SCAN_BITS(ctype,                                                      \
                HRT_MAGNITUDE(ctype, raw) > acc ? HRT_MAGNITUDE(ctype, raw) \
                                                : acc,                      \
                acc >= (exponent))

#define HRT_NONFINITE_TYPES(test)                  \
  switch (type) {                                  \
    case HRT_HAL_ELEMENT_TYPE_F16:                 \
      test(uint16_t, 0x7C00u);                     \
    case HRT_HAL_ELEMENT_TYPE_BF16:                \
      test(uint16_t, 0x7F80u);                     \
    case HRT_HAL_ELEMENT_TYPE_F32:                 \
      test(uint32_t, 0x7F800000u);                 \
    case HRT_HAL_ELEMENT_TYPE_F64:                 \
      test(uint64_t, 0x7FF0000000000000ull);       \
    default:                                       \
      return false; /* integers and bool: none */  \
  }

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512bw"))) static bool
hrt_any_nonfinite_avx512(hrt_hal_element_type_t type, const char* bytes,
                         uint64_t count) {
  HRT_NONFINITE_TYPES(HRT_MAX_MAGNITUDE_NONFINITE)
}
__attribute__((target("avx2"))) static bool hrt_any_nonfinite_avx2(
    hrt_hal_element_type_t type, const char* bytes, uint64_t count) {
  HRT_NONFINITE_TYPES(HRT_MAX_MAGNITUDE_NONFINITE)
}
#endif

bool hrt_hal_tensor_any_nonfinite(hrt_hal_element_type_t type,
                                  const void* data, uint64_t count) {
  const char* bytes = data;
#if defined(__x86_64__) && defined(__GNUC__)
  // __builtin_cpu_supports also checks that the OS saves the registers.
  if (__builtin_cpu_supports("avx512bw")) {
    return hrt_any_nonfinite_avx512(type, bytes, count);
  }
  if (__builtin_cpu_supports("avx2")) {
    return hrt_any_nonfinite_avx2(type, bytes, count);
  }
#endif
  HRT_NONFINITE_TYPES(HRT_ANY_NONFINITE)
}

void hrt_hal_tensor_summary_accumulate(hrt_hal_tensor_summary_t* partial,
                                       hrt_hal_trace_mode_t mode,
                                       hrt_hal_element_type_t type,
                                       const void* data, uint64_t count) {
  const char* bytes = data;
  partial->count += count;
  // Elements are classified one by one only where a quick scan found a NaN
  // or an infinity.
  const bool nonfinite = hrt_hal_tensor_any_nonfinite(type, bytes, count);
  if (mode == HRT_HAL_TRACE_HEALTH && !nonfinite) return;
  // Folded into a copy that nothing else can reach, so that the compiler
  // keeps it in registers rather than storing it after every element.
  hrt_hal_tensor_summary_t acc = *partial;
  if (mode == HRT_HAL_TRACE_HEALTH) {
    HRT_SUMMARY_TYPES(hrt_fold_health);
  } else if (!nonfinite) {
    HRT_SUMMARY_TYPES(hrt_fold_finite);
  } else {
    HRT_SUMMARY_TYPES(hrt_fold);
  }
  *partial = acc;
}

void hrt_hal_tensor_summary_merge(hrt_hal_tensor_summary_t* into,
                                  const hrt_hal_tensor_summary_t* from) {
  into->count += from->count;
  into->nan_count += from->nan_count;
  into->pos_inf_count += from->pos_inf_count;
  into->neg_inf_count += from->neg_inf_count;
  into->zero_count += from->zero_count;
  if (from->min < into->min) into->min = from->min;
  if (from->max > into->max) into->max = from->max;
  into->sum += from->sum;
  into->sum_squares += from->sum_squares;
}

void hrt_hal_tensor_summary_finish(hrt_hal_tensor_summary_t* partial,
                                   hrt_hal_trace_mode_t mode) {
  if (mode == HRT_HAL_TRACE_HEALTH) {
    partial->zero_count = 0;
    partial->min = partial->max = partial->sum = partial->sum_squares = NAN;
    return;
  }
  if (partial->min > partial->max) partial->min = partial->max = NAN;
}

uint64_t hrt_hal_tensor_summary_chunk_count(uint64_t count) {
  return (count + HRT_HAL_TENSOR_SUMMARY_CHUNK - 1) /
         HRT_HAL_TENSOR_SUMMARY_CHUNK;
}

void hrt_hal_tensor_summary_chunk(hrt_hal_trace_mode_t mode,
                                  hrt_hal_element_type_t type, const void* data,
                                  uint64_t count, uint64_t chunk,
                                  hrt_hal_tensor_summary_t* out_partial) {
  const uint64_t begin = chunk * HRT_HAL_TENSOR_SUMMARY_CHUNK;
  const uint64_t n = count - begin < HRT_HAL_TENSOR_SUMMARY_CHUNK
                         ? count - begin
                         : HRT_HAL_TENSOR_SUMMARY_CHUNK;
  hrt_hal_tensor_summary_init(out_partial);
  hrt_hal_tensor_summary_accumulate(
      out_partial, mode, type,
      (const char*)data + begin * hrt_hal_element_type_size(type), n);
}

void hrt_hal_tensor_summary_compute(hrt_hal_trace_mode_t mode,
                                    hrt_hal_element_type_t type,
                                    const void* data, uint64_t count,
                                    hrt_hal_tensor_summary_t* out) {
  hrt_hal_tensor_summary_init(out);
  const uint64_t chunks = hrt_hal_tensor_summary_chunk_count(count);
  for (uint64_t chunk = 0; chunk < chunks; ++chunk) {
    hrt_hal_tensor_summary_t partial;
    hrt_hal_tensor_summary_chunk(mode, type, data, count, chunk, &partial);
    hrt_hal_tensor_summary_merge(out, &partial);
  }
  hrt_hal_tensor_summary_finish(out, mode);
}
