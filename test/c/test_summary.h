// Tensor summaries for the tests: element data of every dtype with the
// special values, an independent host computation of what a summary must
// be, the comparison, and the scenario every device kind runs alike
// (test_summary.c, test_cuda.c).
#ifndef HRT_TEST_TEST_SUMMARY_H_
#define HRT_TEST_TEST_SUMMARY_H_

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/half.h"
#include "hal/command_buffer.h"
#include "hal/element_type.h"
#include "hal/tensor_summary.h"
#include "test_submit.h"

// Element i of the test data, as the double it encodes (before rounding to
// the type): for float types NaN, +inf, -inf, -0 and +0 at fixed strides,
// else multiples of 1/8 in [-125, 125] (sums of them are exact in double);
// integers spread over their range with zeros, and the 64-bit extremes at
// 5 and 6. `all_nan`: NaN everywhere (float types).
static inline void summary_store(hrt_hal_element_type_t type, void* data,
                                 uint64_t i, bool all_nan) {
  const int64_t spread = (int64_t)((i * 7919u) % 2001u) - 1000;
  char* at = (char*)data + i * hrt_hal_element_type_size(type);
  double f = spread / 8.0;
  if (all_nan || i % 97 == 3) {
    f = NAN;
  } else if (i % 89 == 5) {
    f = INFINITY;
  } else if (i % 83 == 7) {
    f = -INFINITY;
  } else if (i % 13 == 0) {
    f = -0.0;
  } else if (i % 17 == 0) {
    f = 0.0;
  }
  const bool zero = i % 13 == 0 || i % 17 == 0;
#define STORE(ctype, value)      \
  do {                           \
    ctype v_ = (value);          \
    memcpy(at, &v_, sizeof(v_)); \
  } while (0)
  switch (type) {
    case HRT_HAL_ELEMENT_TYPE_F16:
      STORE(uint16_t, hrt_f64_to_f16(f));
      break;
    case HRT_HAL_ELEMENT_TYPE_BF16:
      STORE(uint16_t, hrt_f64_to_bf16(f));
      break;
    case HRT_HAL_ELEMENT_TYPE_F32:
      STORE(float, (float)f);
      break;
    case HRT_HAL_ELEMENT_TYPE_F64:
      STORE(double, f);
      break;
    case HRT_HAL_ELEMENT_TYPE_I8:
      STORE(int8_t, zero ? 0 : (int8_t)(spread % 128));
      break;
    case HRT_HAL_ELEMENT_TYPE_U8:
      STORE(uint8_t, zero ? 0 : (uint8_t)((i * 7919u) % 251u));
      break;
    case HRT_HAL_ELEMENT_TYPE_I16:
      STORE(int16_t, zero ? 0 : (int16_t)(spread * 32));
      break;
    case HRT_HAL_ELEMENT_TYPE_U16:
      STORE(uint16_t, zero ? 0 : (uint16_t)((i * 7919u) % 65521u));
      break;
    case HRT_HAL_ELEMENT_TYPE_I32:
      STORE(int32_t, zero ? 0 : (int32_t)(spread * 2000003));
      break;
    case HRT_HAL_ELEMENT_TYPE_U32:
      STORE(uint32_t, zero ? 0 : (uint32_t)((i * 7919u) % 2001u) * 2000003u);
      break;
    case HRT_HAL_ELEMENT_TYPE_I64:
      STORE(int64_t, i == 5   ? INT64_MAX
                     : i == 6 ? INT64_MIN
                     : zero   ? 0
                              : spread * 1000000007LL);
      break;
    case HRT_HAL_ELEMENT_TYPE_U64:
      STORE(uint64_t, i == 5 ? UINT64_MAX
                      : zero ? 0
                             : (uint64_t)(spread + 1000) * 3000000019ULL);
      break;
    case HRT_HAL_ELEMENT_TYPE_BOOL:
      STORE(uint8_t, i % 3 == 0);
      break;
    default:
      break;
  }
#undef STORE
}

// What a summary of `count` elements of `type` at `data` must be, computed
// one element at a time through hrt_hal_element_load, and the sums of |v|
// and v^2 that bound the rounding of the sums.
typedef struct {
  hrt_hal_tensor_summary_t summary;
  double abs_sum;
} summary_expected_t;

static inline summary_expected_t summary_expect(hrt_hal_trace_mode_t mode,
                                                hrt_hal_element_type_t type,
                                                const void* data,
                                                uint64_t count) {
  summary_expected_t e;
  memset(&e, 0, sizeof(e));
  hrt_hal_tensor_summary_t* s = &e.summary;
  s->count = count;
  bool any_finite = false;
  for (uint64_t i = 0; i < count; ++i) {
    double v = hrt_hal_element_load(type, data, i);
    if (isnan(v)) {
      s->nan_count++;
    } else if (isinf(v)) {
      if (v > 0) {
        s->pos_inf_count++;
      } else {
        s->neg_inf_count++;
      }
    } else {
      if (v == 0) s->zero_count++;
      if (!any_finite || v < s->min) s->min = v;
      if (!any_finite || v > s->max) s->max = v;
      any_finite = true;
      s->sum += v;
      s->sum_squares += v * v;
      e.abs_sum += fabs(v);
    }
  }
  if (!any_finite) s->min = s->max = NAN;
  if (mode == HRT_HAL_TRACE_HEALTH) {
    s->zero_count = 0;
    s->min = s->max = s->sum = s->sum_squares = NAN;
  }
  return e;
}

// Whether two doubles are equal, NaN equal to NaN.
static inline bool summary_same(double a, double b) {
  return (isnan(a) && isnan(b)) || a == b;
}

// Whether `got` is `want`: counts, min and max exact (a zero min or max
// +0), sum within 1e-11 of the sum of |v|, sum_squares within 1e-11 of
// itself (NaN as NaN). Prints the difference, naming `what`, otherwise.
static inline bool summary_matches(const hrt_hal_tensor_summary_t* got,
                                   const summary_expected_t* want,
                                   const char* what) {
  const hrt_hal_tensor_summary_t* w = &want->summary;
  bool ok = got->count == w->count && got->nan_count == w->nan_count &&
            got->pos_inf_count == w->pos_inf_count &&
            got->neg_inf_count == w->neg_inf_count &&
            got->zero_count == w->zero_count &&
            summary_same(got->min, w->min) && summary_same(got->max, w->max) &&
            !(got->min == 0 && signbit(got->min)) &&
            !(got->max == 0 && signbit(got->max));
  if (isnan(w->sum)) {
    ok = ok && isnan(got->sum) && isnan(got->sum_squares);
  } else {
    ok = ok && fabs(got->sum - w->sum) <= 1e-11 * want->abs_sum &&
         fabs(got->sum_squares - w->sum_squares) <= 1e-11 * w->sum_squares;
  }
  if (!ok) {
    fprintf(
        stderr,
        "%s: got count %llu nan %llu +inf %llu -inf %llu zero %llu min "
        "%.17g max %.17g sum %.17g sumsq %.17g; want %llu %llu %llu %llu "
        "%llu %.17g %.17g %.17g %.17g\n",
        what, (unsigned long long)got->count,
        (unsigned long long)got->nan_count,
        (unsigned long long)got->pos_inf_count,
        (unsigned long long)got->neg_inf_count,
        (unsigned long long)got->zero_count, got->min, got->max, got->sum,
        got->sum_squares, (unsigned long long)w->count,
        (unsigned long long)w->nan_count, (unsigned long long)w->pos_inf_count,
        (unsigned long long)w->neg_inf_count, (unsigned long long)w->zero_count,
        w->min, w->max, w->sum, w->sum_squares);
  }
  return ok;
}

// The sources of the device scenario, in one buffer of each dtype: 1000
// elements with every special value (whole, and a sub-range), an empty
// range, 100 NaNs (floats; integers: the same data again), and 3 MiB.
enum {
  SUMMARY_MIXED = 1000,
  SUMMARY_SUB_OFFSET = 3,
  SUMMARY_SUB = 500,
  SUMMARY_NAN = 100,
  SUMMARY_LARGE_BYTES = 3 << 20,
  SUMMARY_SOURCES = 5,
};

typedef struct {
  int calls;
  uint64_t lengths[SUMMARY_SOURCES];
  hrt_hal_tensor_summary_t summaries[SUMMARY_SOURCES];
} summary_log_t;

static inline hrt_status_t summary_log_trace(void* user_data,
                                             void* submission_context,
                                             uint32_t count,
                                             const void* const* data,
                                             const uint64_t* lengths,
                                             hrt_hal_buffer_t* const* buffers) {
  (void)buffers;
  (void)submission_context;
  summary_log_t* log = user_data;
  log->calls++;
  for (uint32_t i = 0; i < count && i < SUMMARY_SOURCES; ++i) {
    log->lengths[i] = lengths[i];
    if (lengths[i] == sizeof(hrt_hal_tensor_summary_t)) {
      memcpy(&log->summaries[i], data[i], sizeof(hrt_hal_tensor_summary_t));
    }
  }
  return HRT_OK;
}

// On `device`: a summary and a health trace of the scenario's sources of
// every dtype report what summary_expect computes over the same bytes.
static inline void check_trace_summaries(hrt_hal_device_t* device) {
  for (int t = 0; t < HRT_HAL_ELEMENT_TYPE_COUNT_; ++t) {
    const hrt_hal_element_type_t type = (hrt_hal_element_type_t)t;
    const size_t size = hrt_hal_element_type_size(type);
    const uint64_t large = SUMMARY_LARGE_BYTES / size;
    const uint64_t total = SUMMARY_MIXED + SUMMARY_NAN + large;
    char* host = malloc(total * size);
    CHECK(host);
    for (uint64_t i = 0; i < SUMMARY_MIXED; ++i) {
      summary_store(type, host, i, false);
    }
    const bool is_float = hrt_hal_element_type_is_float(type);
    for (uint64_t i = 0; i < SUMMARY_NAN; ++i) {
      summary_store(type, host + SUMMARY_MIXED * size, i, is_float);
    }
    for (uint64_t i = 0; i < large; ++i) {
      summary_store(type, host + (SUMMARY_MIXED + SUMMARY_NAN) * size, i,
                    false);
    }
    hrt_hal_buffer_t* buffer = NULL;
    hrt_status_t status =
        hrt_hal_device_allocate_buffer(device, total * size, host, &buffer);
    if (status != HRT_OK) free(host);
    CHECK_OK(status);
    const uint64_t offsets[SUMMARY_SOURCES] = {0, SUMMARY_SUB_OFFSET,
                                               SUMMARY_MIXED, SUMMARY_MIXED,
                                               SUMMARY_MIXED + SUMMARY_NAN};
    const uint64_t counts[SUMMARY_SOURCES] = {SUMMARY_MIXED, SUMMARY_SUB, 0,
                                              SUMMARY_NAN, large};
    hrt_hal_buffer_ref_t sources[SUMMARY_SOURCES];
    hrt_hal_element_type_t types[SUMMARY_SOURCES];
    for (int i = 0; i < SUMMARY_SOURCES; ++i) {
      sources[i] = (hrt_hal_buffer_ref_t){buffer, 0, offsets[i] * size,
                                          counts[i] * size};
      types[i] = type;
    }
    summary_log_t logs[2];
    memset(logs, 0, sizeof(logs));
    hrt_hal_command_buffer_t* cb = NULL;
    status = hrt_hal_command_buffer_create(device, &cb);
    if (status == HRT_OK) {
      status = hrt_hal_command_buffer_trace_mode(
          cb, HRT_HAL_TRACE_SUMMARY, sources, types, SUMMARY_SOURCES,
          summary_log_trace, &logs[0]);
    }
    if (status == HRT_OK) {
      status = hrt_hal_command_buffer_trace_mode(
          cb, HRT_HAL_TRACE_HEALTH, sources, types, SUMMARY_SOURCES,
          summary_log_trace, &logs[1]);
    }
    if (cb) {
      hrt_hal_command_buffer_finalize(cb);
      if (status == HRT_OK) status = run(device, cb, NULL, 0);
      hrt_hal_command_buffer_release(cb);
    }
    hrt_hal_buffer_release(buffer);
    if (status != HRT_OK) free(host);
    CHECK_OK(status);
    bool ok = true;
    for (int m = 0; m < 2 && ok; ++m) {
      const hrt_hal_trace_mode_t mode =
          m == 0 ? HRT_HAL_TRACE_SUMMARY : HRT_HAL_TRACE_HEALTH;
      ok = logs[m].calls == 1;
      for (int i = 0; i < SUMMARY_SOURCES && ok; ++i) {
        summary_expected_t want =
            summary_expect(mode, type, host + offsets[i] * size, counts[i]);
        char what[96];
        snprintf(what, sizeof(what), "%s %s source %d",
                 hrt_hal_element_type_name(type), hrt_hal_trace_mode_name(mode),
                 i);
        ok = logs[m].lengths[i] == sizeof(hrt_hal_tensor_summary_t) &&
             summary_matches(&logs[m].summaries[i], &want, what);
      }
    }
    free(host);
    CHECK(ok);
  }
}

#endif  // HRT_TEST_TEST_SUMMARY_H_
