// Summary statistics of a traced tensor, computed natively.
//
// NaN and infinite elements are counted and left out of min, max and mean;
// min, max and mean are NaN when no finite element remains (or the tensor is
// empty). Integer and bool tensors never hold NaN or Inf. Pure functions:
// any thread.
#ifndef HRT_MODULES_SINKS_TENSOR_STATS_H_
#define HRT_MODULES_SINKS_TENSOR_STATS_H_

#include <stdbool.h>
#include <stdint.h>

#include "modules/debug_sink.h"

typedef struct hrt_tensor_stats_s {
  uint64_t count;  // elements
  double min;
  double max;
  double mean;
  uint64_t nan_count;
  uint64_t inf_count;
} hrt_tensor_stats_t;

void hrt_tensor_stats_compute(const hrt_trace_tensor_t* tensor,
                              hrt_tensor_stats_t* out_stats);

// The index of the first NaN or infinite element, or false when there is
// none (always false for integer and bool tensors).
bool hrt_tensor_find_nonfinite(const hrt_trace_tensor_t* tensor,
                               uint64_t* out_index);

#endif  // HRT_MODULES_SINKS_TENSOR_STATS_H_
