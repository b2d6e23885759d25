// src/hal/tensor_summary: the host computation of tensor summaries, trace
// modes, the summary trace command's validation, and summary traces on the
// local devices (CUDA: test_cuda.c).
#include "test_summary.h"

#include "test.h"

static void trace_modes_have_names(void) {
  static const char* const names[] = {"full", "summary", "health"};
  for (int i = 0; i < 3; ++i) {
    hrt_hal_trace_mode_t mode;
    CHECK_OK(hrt_hal_trace_mode_parse(names[i], &mode));
    CHECK_EQ_INT(mode, i);
    CHECK(strcmp(hrt_hal_trace_mode_name(mode), names[i]) == 0);
  }
  CHECK(strcmp(hrt_hal_trace_mode_name((hrt_hal_trace_mode_t)7), "unknown") ==
        0);
  hrt_hal_trace_mode_t mode;
  CHECK_STATUS(hrt_hal_trace_mode_parse("stats", &mode),
               HRT_STATUS_INVALID_ARGUMENT,
               "unknown trace mode 'stats' (expected one of full, summary, "
               "health)");
}

// The host computation over 200000 elements (several chunks) of every dtype
// with every special value, in both modes, equals the element-by-element
// one.
static void host_summaries_match_an_element_by_element_fold(void) {
  enum { N = 200000 };
  static char data[N * 8];
  for (int t = 0; t < HRT_HAL_ELEMENT_TYPE_COUNT_; ++t) {
    const hrt_hal_element_type_t type = (hrt_hal_element_type_t)t;
    for (uint64_t i = 0; i < N; ++i) summary_store(type, data, i, false);
    for (int m = HRT_HAL_TRACE_SUMMARY; m <= HRT_HAL_TRACE_HEALTH; ++m) {
      const hrt_hal_trace_mode_t mode = (hrt_hal_trace_mode_t)m;
      for (uint64_t n = 0; n <= N; n += N / 4 + 1) {
        hrt_hal_tensor_summary_t got;
        hrt_hal_tensor_summary_compute(mode, type, data + 8, n, &got);
        summary_expected_t want = summary_expect(mode, type, data + 8, n);
        char what[64];
        snprintf(what, sizeof(what), "%s %s n=%llu",
                 hrt_hal_element_type_name(type), hrt_hal_trace_mode_name(mode),
                 (unsigned long long)n);
        CHECK(summary_matches(&got, &want, what));
      }
    }
  }
}

// One NaN (either sign) or infinity among finite elements of the largest
// magnitude is found wherever it sits, at any length and alignment (the
// quick scan works on wide registers with a scalar tail); finite elements
// alone have no non-finite count.
static void one_nonfinite_element_is_found_anywhere(void) {
  static const hrt_hal_element_type_t types[] = {
      HRT_HAL_ELEMENT_TYPE_F16, HRT_HAL_ELEMENT_TYPE_BF16,
      HRT_HAL_ELEMENT_TYPE_F32, HRT_HAL_ELEMENT_TYPE_F64};
  // Largest finite magnitudes, then NaN, -NaN, +inf, -inf, per type.
  static const uint64_t bits[4][6] = {
      {0x7BFF, 0xFBFF, 0x7E00, 0xFE00, 0x7C00, 0xFC00},
      {0x7F7F, 0xFF7F, 0x7FC0, 0xFFC0, 0x7F80, 0xFF80},
      {0x7F7FFFFF, 0xFF7FFFFF, 0x7FC00000, 0xFFC00001, 0x7F800000,
       0xFF800000},
      {0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x7FF8000000000000,
       0xFFF0000000000001, 0x7FF0000000000000, 0xFFF0000000000000}};
  static char data[160 * 8 + 1];
  int wrong = 0;
  for (int t = 0; t < 4; ++t) {
    const size_t size = hrt_hal_element_type_size(types[t]);
    for (uint64_t n = 1; n <= 150; ++n) {
      for (int offset = 0; offset <= 1; ++offset) {
        char* at = data + offset;
        for (uint64_t i = 0; i < n; ++i) {
          memcpy(at + i * size, &bits[t][i % 2], size);  // little endian
        }
        hrt_hal_tensor_summary_t s;
        hrt_hal_tensor_summary_compute(HRT_HAL_TRACE_HEALTH, types[t], at, n,
                                       &s);
        wrong += s.nan_count + s.pos_inf_count + s.neg_inf_count != 0;
        for (uint64_t p = 0; p < n; ++p) {
          for (int special = 2; special < 6; ++special) {
            memcpy(at + p * size, &bits[t][special], size);
            hrt_hal_tensor_summary_compute(HRT_HAL_TRACE_HEALTH, types[t], at,
                                           n, &s);
            wrong += s.count != n ||
                     s.nan_count != (uint64_t)(special < 4) ||
                     s.pos_inf_count != (uint64_t)(special == 4) ||
                     s.neg_inf_count != (uint64_t)(special == 5);
          }
          memcpy(at + p * size, &bits[t][p % 2], size);
        }
      }
    }
  }
  CHECK_EQ_INT(wrong, 0);
}

// The derived values and the edge cases the contract names: no finite
// element (min, max, mean NaN), -0 folded in as +0, bool's false a zero,
// HEALTH's unset fields.
static void summaries_of_edge_cases(void) {
  const float mixed[5] = {1, 2, NAN, INFINITY, -INFINITY};
  hrt_hal_tensor_summary_t s;
  hrt_hal_tensor_summary_compute(HRT_HAL_TRACE_SUMMARY,
                                 HRT_HAL_ELEMENT_TYPE_F32, mixed, 5, &s);
  CHECK_EQ_INT(s.count, 5);
  CHECK_EQ_INT(s.nan_count, 1);
  CHECK_EQ_INT(s.pos_inf_count, 1);
  CHECK_EQ_INT(s.neg_inf_count, 1);
  CHECK(s.min == 1 && s.max == 2 && s.sum == 3 && s.sum_squares == 5);
  CHECK(hrt_hal_tensor_summary_mean(&s) == 1.5);
  CHECK(hrt_hal_tensor_summary_l2(&s) == sqrt(5.0));

  const double zeros[2] = {-0.0, -0.0};
  hrt_hal_tensor_summary_compute(HRT_HAL_TRACE_SUMMARY,
                                 HRT_HAL_ELEMENT_TYPE_F64, zeros, 2, &s);
  CHECK_EQ_INT(s.zero_count, 2);
  CHECK(s.min == 0 && !signbit(s.min) && s.max == 0 && !signbit(s.max));

  const double nans[3] = {NAN, NAN, NAN};
  hrt_hal_tensor_summary_compute(HRT_HAL_TRACE_SUMMARY,
                                 HRT_HAL_ELEMENT_TYPE_F64, nans, 3, &s);
  CHECK_EQ_INT(s.nan_count, 3);
  CHECK(isnan(s.min) && isnan(s.max) && s.sum == 0 && s.sum_squares == 0);
  CHECK(isnan(hrt_hal_tensor_summary_mean(&s)));
  CHECK(hrt_hal_tensor_summary_l2(&s) == 0);

  hrt_hal_tensor_summary_compute(HRT_HAL_TRACE_SUMMARY, HRT_HAL_ELEMENT_TYPE_U8,
                                 NULL, 0, &s);
  CHECK_EQ_INT(s.count, 0);
  CHECK(isnan(s.min) && isnan(s.max) && s.sum == 0);
  CHECK(isnan(hrt_hal_tensor_summary_mean(&s)));

  const uint8_t flags[4] = {0, 1, 1, 0};
  hrt_hal_tensor_summary_compute(HRT_HAL_TRACE_SUMMARY,
                                 HRT_HAL_ELEMENT_TYPE_BOOL, flags, 4, &s);
  CHECK_EQ_INT(s.zero_count, 2);
  CHECK(s.min == 0 && s.max == 1 && s.sum == 2);

  hrt_hal_tensor_summary_compute(HRT_HAL_TRACE_HEALTH, HRT_HAL_ELEMENT_TYPE_F32,
                                 mixed, 5, &s);
  CHECK_EQ_INT(s.count, 5);
  CHECK_EQ_INT(s.nan_count, 1);
  CHECK_EQ_INT(s.pos_inf_count, 1);
  CHECK_EQ_INT(s.neg_inf_count, 1);
  CHECK_EQ_INT(s.zero_count, 0);
  CHECK(isnan(s.min) && isnan(s.max) && isnan(s.sum) && isnan(s.sum_squares));
  CHECK(isnan(hrt_hal_tensor_summary_mean(&s)));
  CHECK(isnan(hrt_hal_tensor_summary_l2(&s)));
}

static hrt_status_t never_called(void* user_data, void* submission_context,
                                 uint32_t count, const void* const* data,
                                 const uint64_t* lengths,
                                 hrt_hal_buffer_t* const* buffers) {
  (void)buffers;
  (void)user_data;
  (void)submission_context;
  (void)count;
  (void)data;
  (void)lengths;
  return hrt_status_make(HRT_STATUS_INTERNAL, "unexpected trace");
}

// Bad modes, element types and ranges fail at record, naming the source;
// a slot source's range at submit, naming the command and the source.
static void summary_traces_check_their_arguments(void) {
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("local-sync", &device));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(hrt_hal_device_allocate_buffer(device, 64, NULL, &buffer));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  const hrt_hal_element_type_t f32s[2] = {HRT_HAL_ELEMENT_TYPE_F32,
                                          HRT_HAL_ELEMENT_TYPE_F32};
  const hrt_hal_element_type_t bad_type[2] = {HRT_HAL_ELEMENT_TYPE_F32,
                                              HRT_HAL_ELEMENT_TYPE_COUNT_};
  hrt_hal_buffer_ref_t good[2] = {whole(buffer), {buffer, 0, 8, 16}};
  hrt_hal_buffer_ref_t ragged[2] = {whole(buffer), {buffer, 0, 8, 10}};
  hrt_hal_buffer_ref_t misaligned[2] = {whole(buffer), {buffer, 0, 2, 16}};
  CHECK_STATUS(
      hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_MODE_COUNT_, good,
                                        f32s, 2, never_called, NULL),
      HRT_STATUS_INVALID_ARGUMENT,
      "trace mode 3 is not one of full, summary, health");
  CHECK_STATUS(hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_HEALTH, good,
                                                 NULL, 2, never_called, NULL),
               HRT_STATUS_INVALID_ARGUMENT,
               "a health trace needs the element type of each source");
  CHECK_STATUS(
      hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_SUMMARY, good,
                                        bad_type, 2, never_called, NULL),
      HRT_STATUS_INVALID_ARGUMENT,
      "trace source 1: element type 13 is not a dtype");
  CHECK_STATUS(
      hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_SUMMARY, ragged, f32s,
                                        2, never_called, NULL),
      HRT_STATUS_INVALID_ARGUMENT,
      "trace source 1 has 10 bytes, not a multiple of the 4-byte f32 "
      "element");
  CHECK_STATUS(
      hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_SUMMARY, misaligned,
                                        f32s, 2, never_called, NULL),
      HRT_STATUS_INVALID_ARGUMENT,
      "trace source 1 starts at byte 2 of its buffer, not at a "
      "multiple of the 4-byte f32 element");
  CHECK_STATUS(
      hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_SUMMARY, good, f32s,
                                        0, never_called, NULL),
      HRT_STATUS_INVALID_ARGUMENT, "1 to 32 sources");
  // A full trace takes any range and no element types.
  CHECK_OK(hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_FULL, ragged,
                                             NULL, 2, never_called, NULL));
  CHECK_EQ_INT(hrt_hal_command_buffer_count(cb), 1);
  const hrt_hal_command_t* full = hrt_hal_command_buffer_at(cb, 0);
  CHECK(full->trace.mode == HRT_HAL_TRACE_FULL && !full->trace.element_types);
  hrt_hal_command_buffer_release(cb);

  // A slot source is checked at submit, against the binding.
  const hrt_hal_element_type_t types[2] = {HRT_HAL_ELEMENT_TYPE_F32,
                                           HRT_HAL_ELEMENT_TYPE_F64};
  hrt_hal_buffer_ref_t slots[2] = {whole(buffer),
                                   {NULL, 0, 0, HRT_HAL_WHOLE_BUFFER}};
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  CHECK_OK(hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_SUMMARY, slots,
                                             types, 2, never_called, NULL));
  hrt_hal_command_buffer_finalize(cb);
  const hrt_hal_buffer_ref_t twelve[1] = {{buffer, 0, 0, 12}};
  CHECK_STATUS(hrt_hal_command_buffer_validate_bindings(cb, twelve, 1),
               HRT_STATUS_INVALID_ARGUMENT,
               "command 0 trace source 1 has 12 bytes, not a multiple of the "
               "8-byte f64 element");
  const hrt_hal_buffer_ref_t shifted[1] = {{buffer, 0, 4, 16}};
  CHECK_STATUS(hrt_hal_command_buffer_validate_bindings(cb, shifted, 1),
               HRT_STATUS_INVALID_ARGUMENT,
               "command 0 trace source 1 starts at byte 4 of its buffer");
  const hrt_hal_buffer_ref_t fits[1] = {{buffer, 0, 8, 16}};
  CHECK_OK(hrt_hal_command_buffer_validate_bindings(cb, fits, 1));
  hrt_hal_command_buffer_release(cb);
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
}

static void local_devices_summarize_traces(void) {
  static const char* const uris[] = {"local-sync", "local-task?workers=4"};
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(uris[d], &device));
    check_trace_summaries(device);
    hrt_hal_device_release(device);
    if (hrt_test_failed_) return;
  }
}

// A local-task device's summary of many chunks, computed by its workers,
// is the serial computation's, bit for bit: partials merged in chunk order.
// The data makes the order matter: chunk 0 sums to 2^53 and each of the 11
// others to 1, so 2^53 + 1 + ... + 1 rounds to 2^53 at each step, while
// any other order adds some ones first and ends above 2^53.
static void local_task_summaries_are_the_serial_computation(void) {
  enum { CHUNKS = 12, N = CHUNKS * HRT_HAL_TENSOR_SUMMARY_CHUNK };
  static double values[N];
  memset(values, 0, sizeof(values));
  values[0] = 9007199254740992.0;  // 2^53
  for (int k = 1; k < CHUNKS; ++k) {
    values[k * HRT_HAL_TENSOR_SUMMARY_CHUNK] = 1;
  }
  hrt_hal_tensor_summary_t want;
  hrt_hal_tensor_summary_compute(HRT_HAL_TRACE_SUMMARY,
                                 HRT_HAL_ELEMENT_TYPE_F64, values, N, &want);
  CHECK(want.sum == 9007199254740992.0);
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("local-task?workers=4", &device));
  hrt_hal_buffer_t* buffer = NULL;
  CHECK_OK(
      hrt_hal_device_allocate_buffer(device, sizeof(values), values, &buffer));
  hrt_hal_command_buffer_t* cb = NULL;
  CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
  summary_log_t log;
  memset(&log, 0, sizeof(log));
  hrt_hal_buffer_ref_t source = whole(buffer);
  const hrt_hal_element_type_t f64 = HRT_HAL_ELEMENT_TYPE_F64;
  CHECK_OK(hrt_hal_command_buffer_trace_mode(cb, HRT_HAL_TRACE_SUMMARY, &source,
                                             &f64, 1, summary_log_trace, &log));
  CHECK_OK(run_recorded(device, cb, HRT_OK));
  hrt_hal_buffer_release(buffer);
  hrt_hal_device_release(device);
  CHECK_EQ_INT(log.calls, 1);
  CHECK(memcmp(&log.summaries[0], &want, sizeof(want)) == 0);
}

TEST_MAIN(TEST_CASE(trace_modes_have_names),
          TEST_CASE(host_summaries_match_an_element_by_element_fold),
          TEST_CASE(one_nonfinite_element_is_found_anywhere),
          TEST_CASE(summaries_of_edge_cases),
          TEST_CASE(summary_traces_check_their_arguments),
          TEST_CASE(local_devices_summarize_traces),
          TEST_CASE(local_task_summaries_are_the_serial_computation),
          TEST_CASE(every_object_is_destroyed))
