// Native debug sinks: stdio text, .npy files, tee.
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <math.h>

#include "modules/npy_sink.h"
#include "modules/tensor_stats.h"
#include "modules/stdio_sink.h"
#include "modules/tee_sink.h"
#include "test.h"

static const hrt_trace_info_t kInfo = {7, "mlp.main", 3, 0};

static void stdio_sink_prints_and_elides(void) {
  char* text = NULL;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  CHECK(stream);
  hrt_debug_sink_t sink;
  CHECK_OK(hrt_stdio_sink_create(stream, 4, &sink));
  float small[4] = {1, 2.5f, -3, 0};
  int64_t small_shape[2] = {2, 2};
  int32_t big[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, -9};
  int64_t big_shape[1] = {10};
  hrt_trace_tensor_t tensors[2] = {
      {"h", HRT_HAL_ELEMENT_TYPE_F32, 2, small_shape, small, sizeof(small)},
      {"ids", HRT_HAL_ELEMENT_TYPE_I32, 1, big_shape, big, sizeof(big)},
  };
  CHECK_OK(sink.buffer_view_trace.fn(sink.buffer_view_trace.user_data,
                                     "layer1", &kInfo, 2, tensors));
  sink.release.fn(sink.release.user_data);
  fclose(stream);
  const char* expected =
      "=== layer1 (mlp.main op 3, invocation 7) ===\n"
      "h: 2x2xf32=[1 2.5 -3 0]\n"
      "ids: 10xi32=[0 1 ... (10 elements) ... 8 -9]\n";
  int same = strcmp(text, expected) == 0;
  if (!same) fprintf(stderr, "got:\n%s", text);
  free(text);
  CHECK(same);
}

// Reads a whole file into memory.
static char* read_all(const char* path, size_t* out_length) {
  FILE* file = fopen(path, "rb");
  if (!file) return NULL;
  fseek(file, 0, SEEK_END);
  long length = ftell(file);
  fseek(file, 0, SEEK_SET);
  char* data = malloc((size_t)length + 1);
  if (data && fread(data, 1, (size_t)length, file) != (size_t)length) {
    free(data);
    data = NULL;
  }
  fclose(file);
  if (data) data[length] = 0;
  *out_length = (size_t)length;
  return data;
}

static void npy_sink_writes_valid_files(void) {
  char directory[] = "/tmp/halrt-npy-XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  char nested[128];
  snprintf(nested, sizeof(nested), "%s/a/b", directory);
  hrt_debug_sink_t sink;
  CHECK_OK(hrt_npy_sink_create(nested, &sink));
  double values[6] = {1, 2, 3, 4, 5, 6.5};
  int64_t shape[2] = {2, 3};
  uint8_t flags[3] = {1, 0, 1};
  int64_t flag_shape[1] = {3};
  hrt_trace_tensor_t tensors[2] = {
      {"x", HRT_HAL_ELEMENT_TYPE_F64, 2, shape, values, sizeof(values)},
      {"m", HRT_HAL_ELEMENT_TYPE_BOOL, 1, flag_shape, flags, sizeof(flags)},
  };
  CHECK_OK(sink.buffer_view_trace.fn(sink.buffer_view_trace.user_data,
                                     "after/matmul x", &kInfo, 2, tensors));
  char path[256];
  snprintf(path, sizeof(path), "%s/7_after_matmul_x_0.npy", nested);
  size_t length = 0;
  char* file = read_all(path, &length);
  CHECK(file);
  const char* dict =
      "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
  size_t data_offset =
      10 + (unsigned char)file[8] + 256 * (size_t)(unsigned char)file[9];
  int ok = memcmp(file, "\x93NUMPY\x01\x00", 8) == 0 &&
           data_offset % 64 == 0 && strncmp(file + 10, dict, strlen(dict)) == 0 &&
           length == data_offset + 48 && file[data_offset - 1] == '\n' &&
           memcmp(file + data_offset, values, 48) == 0;
  free(file);
  CHECK(ok);
  snprintf(path, sizeof(path), "%s/7_after_matmul_x_1.npy", nested);
  file = read_all(path, &length);
  CHECK(file);
  data_offset = 10 + (unsigned char)file[8] + 256 * (size_t)(unsigned char)file[9];
  ok = strstr(file + 10, "'descr': '|b1'") && strstr(file + 10, "'shape': (3,)") &&
       length == data_offset + 3 && memcmp(file + data_offset, flags, 3) == 0;
  free(file);
  CHECK(ok);
  sink.release.fn(sink.release.user_data);
  hrt_debug_sink_t unused;
  char file_path[160];
  snprintf(file_path, sizeof(file_path), "%s/7_after_matmul_x_1.npy", nested);
  CHECK_STATUS(hrt_npy_sink_create(file_path, &unused),
               HRT_STATUS_INVALID_ARGUMENT, "is not a directory");
  char command[256];
  snprintf(command, sizeof(command), "rm -rf %s", directory);
  CHECK(system(command) == 0);
}

static atomic_int trace_calls;
static atomic_int release_calls;

static hrt_status_t counting_trace(void* user_data, const char* key,
                                   const hrt_trace_info_t* info, uint32_t count,
                                   const hrt_trace_tensor_t* tensors) {
  (void)key, (void)info, (void)count, (void)tensors;
  atomic_fetch_add(&trace_calls, 1);
  return user_data ? hrt_status_make(HRT_STATUS_ABORTED, "sink %s", (char*)user_data)
                   : HRT_OK;
}

static void counting_release(void* user_data) {
  (void)user_data;
  atomic_fetch_add(&release_calls, 1);
}

static atomic_int timing_calls;

static void counting_timing(void* user_data, const hrt_dispatch_timing_t* events,
                            uint32_t count) {
  (void)user_data, (void)events;
  atomic_fetch_add(&timing_calls, (int)count);
}

static void tee_forwards_to_every_sink(void) {
  atomic_store(&trace_calls, 0);
  atomic_store(&release_calls, 0);
  hrt_debug_sink_t sinks[3];
  const char* names[3] = {NULL, "b", "c"};
  for (int i = 0; i < 3; ++i) {
    sinks[i] = (hrt_debug_sink_t){
        .buffer_view_trace = {counting_trace, (void*)names[i]},
        .dispatch_timing = {i == 2 ? counting_timing : NULL, NULL},
        .release = {counting_release, NULL},
    };
  }
  hrt_debug_sink_t tee;
  CHECK_OK(hrt_tee_sink_create(sinks, 3, &tee));
  CHECK_STATUS(tee.buffer_view_trace.fn(tee.buffer_view_trace.user_data, "k",
                                        &kInfo, 0, NULL),
               HRT_STATUS_ABORTED, "sink b");
  CHECK_EQ_INT(atomic_load(&trace_calls), 3);
  hrt_dispatch_timing_t event = {.kernel = "k.add_f32"};
  tee.dispatch_timing.fn(tee.dispatch_timing.user_data, &event, 1);
  CHECK_EQ_INT(atomic_load(&timing_calls), 1);
  tee.release.fn(tee.release.user_data);
  CHECK_EQ_INT(atomic_load(&release_calls), 3);
  CHECK_STATUS(hrt_tee_sink_create(sinks, 0, &tee),
               HRT_STATUS_INVALID_ARGUMENT, "1 to 16 sinks");
}

static void stats_skip_and_count_nonfinite_values(void) {
  float values[6] = {1, NAN, -2, INFINITY, 4, -INFINITY};
  int64_t shape[1] = {6};
  hrt_trace_tensor_t tensor = {"v", HRT_HAL_ELEMENT_TYPE_F32, 1, shape, values,
                               sizeof(values)};
  hrt_tensor_stats_t stats;
  hrt_tensor_stats_compute(&tensor, &stats);
  CHECK_EQ_INT(stats.count, 6);
  CHECK(stats.min == -2 && stats.max == 4 && stats.mean == 1);
  CHECK_EQ_INT(stats.nan_count, 1);
  CHECK_EQ_INT(stats.inf_count, 2);
  uint64_t index = 0;
  CHECK(hrt_tensor_find_nonfinite(&tensor, &index));
  CHECK_EQ_INT(index, 1);
  uint16_t half[2] = {0x3C00, 0x7C00};  // 1, +inf
  int64_t half_shape[1] = {2};
  hrt_trace_tensor_t f16 = {"h", HRT_HAL_ELEMENT_TYPE_F16, 1, half_shape, half,
                            sizeof(half)};
  CHECK(hrt_tensor_find_nonfinite(&f16, &index) && index == 1);
  int32_t ints[3] = {-5, 7, 1};
  int64_t ints_shape[1] = {3};
  hrt_trace_tensor_t i32 = {
      "i", HRT_HAL_ELEMENT_TYPE_I32, 1, ints_shape, ints, sizeof(ints)};
  hrt_tensor_stats_compute(&i32, &stats);
  CHECK(stats.min == -5 && stats.max == 7 && stats.mean == 1);
  CHECK(!hrt_tensor_find_nonfinite(&i32, &index));
  hrt_trace_tensor_t empty = {"e", HRT_HAL_ELEMENT_TYPE_F32, 1, shape, values, 0};
  hrt_tensor_stats_compute(&empty, &stats);
  CHECK(stats.count == 0 && isnan(stats.mean));
}

TEST_MAIN(TEST_CASE(stdio_sink_prints_and_elides),
          TEST_CASE(npy_sink_writes_valid_files),
          TEST_CASE(tee_forwards_to_every_sink),
          TEST_CASE(stats_skip_and_count_nonfinite_values))
