// Tensor summaries: what a summary or health trace reports of each source
// instead of its bytes, and the host (CPU reference) computation of them.
//
// A summary folds a tensor's elements, each converted to double first
// (f16/bf16 exactly; 64-bit integers beyond 2^53 rounded to nearest; bool
// 0 or 1), into counts and f64 accumulators. The host computation works in
// chunks of HRT_HAL_TENSOR_SUMMARY_CHUNK elements: each chunk folds its
// elements in order into a partial, and the partials are merged in chunk
// order, so the result does not depend on which threads computed the
// chunks (local devices use it; CUDA devices reduce per thread, per block
// and then in one final block, docs/cuda.md). Counts, min and max are exact
// either way; sum and sum_squares agree to rounding.
//
// Threads: pure functions of their arguments; any thread.
#ifndef HRT_HAL_TENSOR_SUMMARY_H_
#define HRT_HAL_TENSOR_SUMMARY_H_

#include <stdint.h>

#include "base/status.h"
#include "hal/element_type.h"

// How a trace command reports its sources.
typedef enum hrt_hal_trace_mode_e {
  HRT_HAL_TRACE_FULL = 0,  // host copies of the bytes (today's trace)
  HRT_HAL_TRACE_SUMMARY,   // an hrt_hal_tensor_summary_t per source, all fields
  HRT_HAL_TRACE_HEALTH,    // counts only: count, nan/pos_inf/neg_inf counts
  HRT_HAL_TRACE_MODE_COUNT_,
} hrt_hal_trace_mode_t;

// Summary of one tensor (one traced source), computed on its device.
// Counts are exact. min, max, sum and sum_squares cover the finite elements
// only (NaN and +/-inf are counted, never folded in); min and max are NaN
// when there is no finite element, and a zero min or max is +0 (-0 is
// folded in as +0). Elements are converted to double first (f16/bf16
// exactly; 64-bit integers beyond 2^53 rounded to nearest); sums accumulate
// in double. In HEALTH mode zero_count is 0 and min, max, sum, sum_squares
// are NaN.
typedef struct hrt_hal_tensor_summary_s {
  uint64_t count;  // elements
  uint64_t nan_count;
  uint64_t pos_inf_count;
  uint64_t neg_inf_count;
  uint64_t zero_count;  // elements equal to zero (+0 and -0; false for bool)
  double min;
  double max;
  double sum;
  double sum_squares;
} hrt_hal_tensor_summary_t;

// mean = sum / finite count (NaN when none); l2 = sqrt(sum_squares)
// (NaN in HEALTH mode).
double hrt_hal_tensor_summary_mean(const hrt_hal_tensor_summary_t* s);
double hrt_hal_tensor_summary_l2(const hrt_hal_tensor_summary_t* s);

// Name of a mode: "full", "summary", "health" ("unknown" out of range);
// parse takes the same names (INVALID_ARGUMENT naming the value and listing
// the valid ones).
const char* hrt_hal_trace_mode_name(hrt_hal_trace_mode_t mode);
hrt_status_t hrt_hal_trace_mode_parse(const char* name,
                                      hrt_hal_trace_mode_t* out) HRT_MUST_USE;

// Elements per chunk of the host computation (see above).
#define HRT_HAL_TENSOR_SUMMARY_CHUNK ((uint64_t)64 * 1024)

// The host computation, in steps. A partial is an hrt_hal_tensor_summary_t
// whose min and max are +inf and -inf while it has no finite element.
//
// An empty partial.
void hrt_hal_tensor_summary_init(hrt_hal_tensor_summary_t* partial);
// Folds `count` elements of `type` at `data` (any alignment) into
// `partial`, in order. HEALTH mode counts only (count and the non-finite
// counts); FULL is not a summary mode and folds like SUMMARY.
void hrt_hal_tensor_summary_accumulate(hrt_hal_tensor_summary_t* partial,
                                       hrt_hal_trace_mode_t mode,
                                       hrt_hal_element_type_t type,
                                       const void* data, uint64_t count);
// Folds partial `from` into `into` (the elements of `from` come after).
void hrt_hal_tensor_summary_merge(hrt_hal_tensor_summary_t* into,
                                  const hrt_hal_tensor_summary_t* from);
// Turns a partial into the summary the trace reports in `mode` (min and max
// NaN without a finite element; HEALTH's unset fields).
void hrt_hal_tensor_summary_finish(hrt_hal_tensor_summary_t* partial,
                                   hrt_hal_trace_mode_t mode);
// The partial of chunk `chunk` (< hrt_hal_tensor_summary_chunk_count) of
// the `count` elements at `data`: elements [chunk * CHUNK, + CHUNK) folded
// in order into an empty partial. Chunks may be computed on any threads;
// merging their partials in chunk order then finishing gives exactly
// hrt_hal_tensor_summary_compute's result.
uint64_t hrt_hal_tensor_summary_chunk_count(uint64_t count);
void hrt_hal_tensor_summary_chunk(hrt_hal_trace_mode_t mode,
                                  hrt_hal_element_type_t type, const void* data,
                                  uint64_t count, uint64_t chunk,
                                  hrt_hal_tensor_summary_t* out_partial);
// Whether any of the `count` elements of `type` at `data` (any alignment)
// is NaN or infinite (false for integers and bool): one vectorised pass.
bool hrt_hal_tensor_any_nonfinite(hrt_hal_element_type_t type,
                                  const void* data, uint64_t count);

// The whole computation over `count` elements, one chunk after the other.
void hrt_hal_tensor_summary_compute(hrt_hal_trace_mode_t mode,
                                    hrt_hal_element_type_t type,
                                    const void* data, uint64_t count,
                                    hrt_hal_tensor_summary_t* out);

#endif  // HRT_HAL_TENSOR_SUMMARY_H_
