#include "modules/sinks/tensor_stats.h"

#include <math.h>

static uint64_t hrt_element_count(const hrt_trace_tensor_t* tensor) {
  size_t size = hrt_hal_element_type_size(tensor->element_type);
  return size ? tensor->byte_length / size : 0;
}

void hrt_tensor_stats_compute(const hrt_trace_tensor_t* tensor,
                              hrt_tensor_stats_t* out_stats) {
  hrt_tensor_stats_t stats = {
      hrt_element_count(tensor), INFINITY, -INFINITY, 0, 0, 0};
  double sum = 0;
  uint64_t finite = 0;
  for (uint64_t i = 0; i < stats.count; ++i) {
    double value = hrt_hal_element_load(tensor->element_type, tensor->data, i);
    if (isnan(value)) {
      ++stats.nan_count;
    } else if (isinf(value)) {
      ++stats.inf_count;
    } else {
      if (value < stats.min) stats.min = value;
      if (value > stats.max) stats.max = value;
      sum += value;
      ++finite;
    }
  }
  if (finite == 0) {
    stats.min = stats.max = stats.mean = NAN;
  } else {
    stats.mean = sum / (double)finite;
  }
  *out_stats = stats;
}

bool hrt_tensor_find_nonfinite(const hrt_trace_tensor_t* tensor,
                               uint64_t* out_index) {
  if (!hrt_hal_element_type_is_float(tensor->element_type)) return false;
  uint64_t count = hrt_element_count(tensor);
  for (uint64_t i = 0; i < count; ++i) {
    if (!isfinite(
            hrt_hal_element_load(tensor->element_type, tensor->data, i))) {
      *out_index = i;
      return true;
    }
  }
  return false;
}
