// Native debug sinks: stdio text, .npy files, tee.
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modules/sinks/npy_sink.h"
#include "modules/sinks/stdio_sink.h"
#include "modules/sinks/tee_sink.h"
#include "modules/sinks/tensor_stats.h"
#include "test.h"

static const hrt_trace_info_t kInfo = {7, "mlp.main", 3,
                                       0, 70,         HRT_HAL_TRACE_FULL, false, NULL, false};

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
      {"h", HRT_HAL_ELEMENT_TYPE_F32, 2, small_shape, small, sizeof(small),
       NULL, NULL},
      {"ids", HRT_HAL_ELEMENT_TYPE_I32, 1, big_shape, big, sizeof(big), NULL,
       NULL},
  };
  CHECK_OK(sink.buffer_view_trace.fn(sink.buffer_view_trace.user_data,
                                     "layer1", &kInfo, 2, tensors));
  sink.release.fn(sink.release.user_data);
  fclose(stream);
  const char* expected =
      "=== layer1 (mlp.main op 3, invocation 7) ===\n"
      "h: 2x2xf32=[[1 2.5] [-3 0]]\n"
      "ids: 10xi32=[0 1 2 ... 7 8 -9]\n";
  int same = strcmp(text, expected) == 0;
  if (!same) fprintf(stderr, "got:\n%s", text);
  free(text);
  CHECK(same);
}

// Summary and health traces print each tensor's summary: min and max as
// elements of its dtype, mean and l2 as f64, counts exact; health only the
// counts.
static void stdio_sink_prints_summaries(void) {
  char* text = NULL;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  CHECK(stream);
  hrt_debug_sink_t sink;
  CHECK_OK(hrt_stdio_sink_create(stream, 4, &sink));
  int64_t shape[2] = {2, 3};
  // f32 0.1 is 0.100000001490116...: printed as f32, it is 0.1.
  const hrt_hal_tensor_summary_t summary = {.count = 6,
                                            .nan_count = 1,
                                            .pos_inf_count = 0,
                                            .neg_inf_count = 2,
                                            .zero_count = 1,
                                            .min = (double)0.1f,
                                            .max = 3,
                                            .sum = 2.5,
                                            .sum_squares = 16};
  const hrt_hal_tensor_summary_t counts = {.count = 9,
                                           .nan_count = 0,
                                           .pos_inf_count = 4,
                                           .neg_inf_count = 0,
                                           .min = NAN,
                                           .max = NAN,
                                           .sum = NAN,
                                           .sum_squares = NAN};
  const int64_t ids_shape[1] = {9};
  hrt_trace_tensor_t summarised[2] = {
      {.name = "h",
       .element_type = HRT_HAL_ELEMENT_TYPE_F32,
       .rank = 2,
       .shape = shape,
       .byte_length = 24,
       .summary = &summary},
      {.name = "ids",
       .element_type = HRT_HAL_ELEMENT_TYPE_I64,
       .rank = 2,
       .shape = shape,
       .byte_length = 48,
       .summary = &summary},
  };
  hrt_trace_tensor_t health = {.name = "g",
                               .element_type = HRT_HAL_ELEMENT_TYPE_F16,
                               .rank = 1,
                               .shape = ids_shape,
                               .byte_length = 18,
                               .summary = &counts};
  hrt_trace_info_t info = kInfo;
  info.mode = HRT_HAL_TRACE_SUMMARY;
  CHECK_OK(sink.buffer_view_trace.fn(sink.buffer_view_trace.user_data, "s",
                                     &info, 2, summarised));
  info.mode = HRT_HAL_TRACE_HEALTH;
  CHECK_OK(sink.buffer_view_trace.fn(sink.buffer_view_trace.user_data, "c",
                                     &info, 1, &health));
  sink.release.fn(sink.release.user_data);
  fclose(stream);
  const char* expected =
      "=== s (mlp.main op 3, invocation 7) ===\n"
      "h: 2x3xf32 summary: count=6 nan=1 +inf=0 -inf=2 zero=1 min=0.1 max=3 "
      "mean=0.8333333333333334 l2=4\n"
      "ids: 2x3xi64 summary: count=6 nan=1 +inf=0 -inf=2 zero=1 "
      "min=0.10000000149011612 max=3 mean=0.8333333333333334 l2=4\n"
      "=== c (mlp.main op 3, invocation 7) ===\n"
      "g: 9xf16 health: count=9 nan=0 +inf=4 -inf=0\n";
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

// Makes a fresh folder under /tmp (removed by remove_tree).
static bool make_temporary_folder(char directory[32]) {
  snprintf(directory, 32, "/tmp/halrt-npy-XXXXXX");
  return mkdtemp(directory) != NULL;
}

// A fresh folder (as make_temporary_folder) with an npy sink writing to it.
static hrt_status_t make_folder_with_sink(char directory[32],
                                          hrt_debug_sink_t* out_sink) {
  if (!make_temporary_folder(directory)) {
    return hrt_status_make(HRT_STATUS_UNAVAILABLE, "mkdtemp: %s",
                           strerror(errno));
  }
  return hrt_npy_sink_create(directory, out_sink);
}

// The whole of `directory`/index.jsonl (to free), or NULL.
static char* read_index(const char* directory) {
  char path[160];
  snprintf(path, sizeof(path), "%s/index.jsonl", directory);
  size_t length = 0;
  return read_all(path, &length);
}

static void remove_tree(const char* directory) {
  char command[256];
  snprintf(command, sizeof(command), "rm -rf '%s'", directory);
  if (system(command) != 0) fprintf(stderr, "cannot remove %s\n", directory);
}

// A summary trace has no tensor to write: no file, no index line.
static void npy_sink_skips_summary_traces(void) {
  char directory[32];
  hrt_debug_sink_t sink;
  CHECK_OK(make_folder_with_sink(directory, &sink));
  const hrt_hal_tensor_summary_t summary = {.count = 1, .min = 1, .max = 1};
  static const int64_t shape[1] = {1};
  hrt_trace_tensor_t tensor = {.name = "x",
                               .element_type = HRT_HAL_ELEMENT_TYPE_F32,
                               .rank = 1,
                               .shape = shape,
                               .byte_length = 4,
                               .summary = &summary};
  hrt_trace_info_t info = kInfo;
  info.mode = HRT_HAL_TRACE_HEALTH;
  hrt_status_t status = sink.buffer_view_trace.fn(
      sink.buffer_view_trace.user_data, "k", &info, 1, &tensor);
  sink.release.fn(sink.release.user_data);
  char* index = read_index(directory);
  char command[128];
  snprintf(command, sizeof(command), "test \"$(ls -A '%s')\" = index.jsonl",
           directory);
  int only_index = system(command) == 0;
  remove_tree(directory);
  CHECK_OK(status);
  CHECK(index != NULL && index[0] == 0);
  free(index);
  CHECK(only_index);
}

// Traces one f32 tensor [1] holding `value` under `key` with `sequence`.
static hrt_status_t trace_one(hrt_debug_sink_t* sink, const char* key,
                              uint64_t sequence, float value) {
  static const int64_t shape[1] = {1};
  hrt_trace_info_t info = {sequence, "m.f", 0, 0, sequence, HRT_HAL_TRACE_FULL, false, NULL, false};
  hrt_trace_tensor_t tensor = {
      "t", HRT_HAL_ELEMENT_TYPE_F32, 1, shape, &value, sizeof(value), NULL,
      NULL};
  return sink->buffer_view_trace.fn(sink->buffer_view_trace.user_data, key,
                                    &info, 1, &tensor);
}

// The f32 stored in a one-element .npy file written by the sink, or NAN.
static float read_one(const char* directory, const char* name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", directory, name);
  size_t length = 0;
  char* file = read_all(path, &length);
  float value = NAN;
  size_t data_offset =
      file && length >= 10
          ? 10 + (unsigned char)file[8] + 256 * (size_t)(unsigned char)file[9]
          : 0;
  if (data_offset == 128 && length == 132) memcpy(&value, file + 128, 4);
  free(file);
  return value;
}

// Whether the names in `directory`, sorted bytewise, each followed by a
// space, are `expected`; prints them when not.
static bool folder_holds(const char* directory, const char* expected) {
  char command[256];
  snprintf(command, sizeof(command),
           "ls -A '%s' | LC_ALL=C sort | tr '\\n' ' '", directory);
  char listing[2048];
  FILE* pipe = popen(command, "r");
  size_t length = pipe ? fread(listing, 1, sizeof(listing) - 1, pipe) : 0;
  listing[length] = 0;
  if (pipe) pclose(pipe);
  bool same = strcmp(listing, expected) == 0;
  if (!same) fprintf(stderr, "%s holds: %s\n", directory, listing);
  return same;
}

static void npy_sink_writes_valid_files(void) {
  char directory[32];
  CHECK(make_temporary_folder(directory));
  char nested[128];
  snprintf(nested, sizeof(nested), "%s/a/b", directory);
  hrt_debug_sink_t sink;
  CHECK_OK(hrt_npy_sink_create(nested, &sink));
  double values[6] = {1, 2, 3, 4, 5, 6.5};
  int64_t shape[2] = {2, 3};
  uint8_t flags[3] = {1, 0, 1};
  int64_t flag_shape[1] = {3};
  hrt_trace_tensor_t tensors[2] = {
      {"x", HRT_HAL_ELEMENT_TYPE_F64, 2, shape, values, sizeof(values), NULL,
       NULL},
      {"m", HRT_HAL_ELEMENT_TYPE_BOOL, 1, flag_shape, flags, sizeof(flags),
       NULL, NULL},
  };
  CHECK_OK(sink.buffer_view_trace.fn(sink.buffer_view_trace.user_data,
                                     "after/matmul x", &kInfo, 2, tensors));
  char path[256];
  snprintf(path, sizeof(path), "%s/7_after_matmul_x-ecb08616_0.npy", nested);
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
  snprintf(path, sizeof(path), "%s/7_after_matmul_x-ecb08616_1.npy", nested);
  file = read_all(path, &length);
  CHECK(file);
  data_offset = 10 + (unsigned char)file[8] + 256 * (size_t)(unsigned char)file[9];
  ok = strstr(file + 10, "'descr': '|b1'") && strstr(file + 10, "'shape': (3,)") &&
       length == data_offset + 3 && memcmp(file + data_offset, flags, 3) == 0;
  free(file);
  CHECK(ok);
  sink.release.fn(sink.release.user_data);
  CHECK(folder_holds(nested,
                     "7_after_matmul_x-ecb08616_0.npy "
                     "7_after_matmul_x-ecb08616_1.npy index.jsonl "));
  file = read_index(nested);
  CHECK(file);
  const char* expected =
      "{\"file\":\"7_after_matmul_x-ecb08616_0.npy\",\"key\":\"after/matmul "
      "x\",\"sequence\":7,\"function\":\"mlp.main\",\"op\":3,\"tensor\":0,"
      "\"name\":\"x\",\"dtype\":\"f64\",\"shape\":[2,3]}\n"
      "{\"file\":\"7_after_matmul_x-ecb08616_1.npy\",\"key\":\"after/matmul "
      "x\",\"sequence\":7,\"function\":\"mlp.main\",\"op\":3,\"tensor\":1,"
      "\"name\":\"m\",\"dtype\":\"bool\",\"shape\":[3]}\n";
  ok = strcmp(file, expected) == 0;
  if (!ok) fprintf(stderr, "index.jsonl:\n%s", file);
  free(file);
  CHECK(ok);
  hrt_debug_sink_t unused;
  char file_path[160];
  snprintf(file_path, sizeof(file_path), "%s/index.jsonl", nested);
  CHECK_STATUS(hrt_npy_sink_create(file_path, &unused),
               HRT_STATUS_INVALID_ARGUMENT, "is not a directory");
  remove_tree(directory);
}

// Keys that differ only in bytes the file name cannot show, a key traced
// twice in one invocation and a second run into the same folder each get a
// file of their own; index.jsonl maps every file back to its exact key.
static void npy_sink_gives_every_trace_its_own_file(void) {
  static const char* const keys[] = {"a/b", "a_b", "a?b", "\xc3\xa9",
                                     "\xc3\xbc"};
  char directory[32];
  hrt_debug_sink_t sink;
  CHECK_OK(make_folder_with_sink(directory, &sink));
  for (int i = 0; i < 5; ++i) CHECK_OK(trace_one(&sink, keys[i], 3, (float)i));
  CHECK_OK(trace_one(&sink, "a/b", 3, 10));  // the same key again
  sink.release.fn(sink.release.user_data);
  CHECK_OK(hrt_npy_sink_create(directory, &sink));  // a second run
  CHECK_OK(trace_one(&sink, "a/b", 3, 20));
  sink.release.fn(sink.release.user_data);
  CHECK(folder_holds(
      directory,
      "3___-119dd44a_0.npy 3___-1e9de8c1_0.npy 3_a_b-1ab552d1_0.npy "
      "3_a_b-1ba46871_0.npy 3_a_b-3a8e75c1_0.1.npy 3_a_b-3a8e75c1_0.2.npy "
      "3_a_b-3a8e75c1_0.npy index.jsonl "));
  CHECK(read_one(directory, "3_a_b-3a8e75c1_0.npy") == 0);
  CHECK(read_one(directory, "3_a_b-1ba46871_0.npy") == 1);
  CHECK(read_one(directory, "3_a_b-1ab552d1_0.npy") == 2);
  CHECK(read_one(directory, "3___-1e9de8c1_0.npy") == 3);
  CHECK(read_one(directory, "3___-119dd44a_0.npy") == 4);
  CHECK(read_one(directory, "3_a_b-3a8e75c1_0.1.npy") == 10);
  CHECK(read_one(directory, "3_a_b-3a8e75c1_0.2.npy") == 20);
  char* index = read_index(directory);
  CHECK(index);
  const char* expected_files[] = {
      "3_a_b-3a8e75c1_0.npy\",\"key\":\"a/b\"",
      "3_a_b-1ba46871_0.npy\",\"key\":\"a_b\"",
      "3_a_b-1ab552d1_0.npy\",\"key\":\"a?b\"",
      "3___-1e9de8c1_0.npy\",\"key\":\"\xc3\xa9\"",
      "3___-119dd44a_0.npy\",\"key\":\"\xc3\xbc\"",
      "3_a_b-3a8e75c1_0.1.npy\",\"key\":\"a/b\"",
      "3_a_b-3a8e75c1_0.2.npy\",\"key\":\"a/b\"",
  };
  const char* line = index;
  int lines_ok = 0;
  for (int i = 0; i < 7 && line; ++i) {
    lines_ok +=
        strncmp(line, "{\"file\":\"", 9) == 0 &&
        strncmp(line + 9, expected_files[i], strlen(expected_files[i])) == 0;
    line = strchr(line, '\n');
    if (line) ++line;
  }
  int ended = line && *line == 0;
  if (lines_ok != 7 || !ended) fprintf(stderr, "index.jsonl:\n%s", index);
  free(index);
  CHECK_EQ_INT(lines_ok, 7);
  CHECK(ended);
  remove_tree(directory);
}

// A key of any length gives a short name; the index keeps the whole key,
// escaped as JSON (bytes that are not UTF-8 as \udcXX).
static void npy_sink_caps_names_and_escapes_keys(void) {
  char directory[32];
  hrt_debug_sink_t sink;
  CHECK_OK(make_folder_with_sink(directory, &sink));
  char long_key[4001];
  memset(long_key, 'k', 4000);
  long_key[4000] = 0;
  CHECK_OK(trace_one(&sink, long_key + 3750, 1, 1));  // 250 characters
  CHECK_OK(trace_one(&sink, long_key, 1, 2));
  CHECK_OK(trace_one(&sink, "q\"\\\n\xff\xc3\xa9\x01\xed\xa0\x80", 1, 3));
  sink.release.fn(sink.release.user_data);
  char prefix[65];
  memset(prefix, 'k', 64);
  prefix[64] = 0;
  char expected[1024];
  snprintf(
      expected, sizeof(expected),
      "1_%s-dbece11b_0.npy 1_%s-f3f4fba5_0.npy 1_q__________-5337f2ff_0.npy "
      "index.jsonl ",
      prefix, prefix);
  CHECK(folder_holds(directory, expected));
  char* index = read_index(directory);
  CHECK(index);
  const char* last = strstr(index, "{\"file\":\"1_q");
  const char* escaped =
      "{\"file\":\"1_q__________-5337f2ff_0.npy\",\"key\":\"q\\\"\\\\\\u000a"
      "\\udcff\xc3\xa9\\u0001\\udced\\udca0\\udc80\",\"sequence\":1,";
  int ok = last && strncmp(last, escaped, strlen(escaped)) == 0 &&
           strstr(index, long_key) != NULL;
  if (!ok) fprintf(stderr, "index.jsonl:\n%s", index);
  free(index);
  CHECK(ok);
  remove_tree(directory);
}

// Symlinks planted in the folder (at the temporary name the sink used to
// write, at its next temporary name, at the final name, at index.jsonl) are
// never followed and never replaced; the file outside stays as it was.
static void npy_sink_never_writes_through_planted_symlinks(void) {
  char directory[32];
  CHECK(make_temporary_folder(directory));
  char folder[64], outside[64], link_path[192];
  snprintf(folder, sizeof(folder), "%s/dump", directory);
  snprintf(outside, sizeof(outside), "%s/outside.txt", directory);
  CHECK(mkdir(folder, 0777) == 0);
  FILE* victim = fopen(outside, "w");
  CHECK(victim);
  fputs("precious", victim);
  fclose(victim);
  const char* planted[] = {"5_y_0.npy.tmp", "5_y-fc0c4ef4_0.npy", NULL};
  char next_temporary[64];
  snprintf(next_temporary, sizeof(next_temporary), ".halrt-%ld-0.tmp",
           (long)getpid());
  planted[2] = next_temporary;
  for (int i = 0; i < 3; ++i) {
    snprintf(link_path, sizeof(link_path), "%s/%s", folder, planted[i]);
    CHECK(symlink(outside, link_path) == 0);
  }
  hrt_debug_sink_t sink;
  CHECK_OK(hrt_npy_sink_create(folder, &sink));
  CHECK_OK(trace_one(&sink, "y", 5, 42));
  sink.release.fn(sink.release.user_data);
  size_t length = 0;
  char* text = read_all(outside, &length);
  CHECK(text);
  int untouched = strcmp(text, "precious") == 0;
  free(text);
  CHECK(untouched);
  for (int i = 0; i < 3; ++i) {
    struct stat info;
    snprintf(link_path, sizeof(link_path), "%s/%s", folder, planted[i]);
    CHECK(lstat(link_path, &info) == 0 && S_ISLNK(info.st_mode));
  }
  CHECK(read_one(folder, "5_y-fc0c4ef4_0.1.npy") == 42);
  char expected[512];
  snprintf(expected, sizeof(expected),
           "%s 5_y-fc0c4ef4_0.1.npy 5_y-fc0c4ef4_0.npy 5_y_0.npy.tmp "
           "index.jsonl ",
           next_temporary);
  CHECK(folder_holds(folder, expected));
  // index.jsonl itself as a symlink: the sink is not created.
  char index_path[128];
  snprintf(index_path, sizeof(index_path), "%s/index.jsonl", folder);
  CHECK(unlink(index_path) == 0);
  CHECK(symlink(outside, index_path) == 0);
  hrt_debug_sink_t refused;
  CHECK_STATUS(hrt_npy_sink_create(folder, &refused), HRT_STATUS_UNAVAILABLE,
               "index.jsonl");
  text = read_all(outside, &length);
  CHECK(text);
  untouched = strcmp(text, "precious") == 0;
  free(text);
  CHECK(untouched);
  remove_tree(directory);
}

// The folder is the one opened at creation: once it is gone, traces fail
// with DATA_LOSS naming the path, and nothing lands in a folder put in its
// place.
static void npy_sink_writes_only_into_the_folder_it_opened(void) {
  char directory[32];
  CHECK(make_temporary_folder(directory));
  char folder[64], moved[64];
  snprintf(folder, sizeof(folder), "%s/dump", directory);
  snprintf(moved, sizeof(moved), "%s/moved", directory);
  hrt_debug_sink_t sink;
  CHECK_OK(hrt_npy_sink_create(folder, &sink));
  CHECK(rename(folder, moved) == 0);
  CHECK(mkdir(folder, 0777) == 0);
  CHECK_OK(trace_one(&sink, "y", 1, 1));
  CHECK(read_one(moved, "1_y-fc0c4ef4_0.npy") == 1);
  remove_tree(moved);
  CHECK_STATUS(trace_one(&sink, "y", 2, 2), HRT_STATUS_DATA_LOSS, folder);
  sink.release.fn(sink.release.user_data);
  CHECK(folder_holds(folder, ""));
  remove_tree(directory);
}

// Several threads tracing the same key at once into one sink (and so into
// one folder) each get files of their own and index lines of their own.
typedef struct {
  hrt_debug_sink_t* sink;
  int thread;
  int failures;
} concurrent_tracer_t;

static void* trace_concurrently(void* argument) {
  concurrent_tracer_t* tracer = argument;
  for (int i = 0; i < 25; ++i) {
    hrt_status_t status =
        trace_one(tracer->sink, "same", 9, (float)(tracer->thread * 100 + i));
    if (status != HRT_OK) ++tracer->failures;
    hrt_status_free(status);
  }
  return NULL;
}

static void npy_sink_traced_from_several_threads_loses_nothing(void) {
  char directory[32];
  hrt_debug_sink_t sink;
  CHECK_OK(make_folder_with_sink(directory, &sink));
  pthread_t threads[4];
  concurrent_tracer_t tracers[4];
  for (int t = 0; t < 4; ++t) {
    tracers[t] = (concurrent_tracer_t){&sink, t, 0};
    CHECK(pthread_create(&threads[t], NULL, trace_concurrently, &tracers[t]) ==
          0);
  }
  int failures = 0;
  for (int t = 0; t < 4; ++t) {
    pthread_join(threads[t], NULL);
    failures += tracers[t].failures;
  }
  sink.release.fn(sink.release.user_data);
  CHECK_EQ_INT(failures, 0);
  // 100 files, named "9_same-<hash>_0.npy" and ".1" to ".99", holding every
  // value once; 100 index lines, each naming a different file.
  bool seen[400] = {false};
  int files = 0;
  for (int n = 0; n < 100; ++n) {
    char name[64];
    if (n == 0) {
      snprintf(name, sizeof(name), "9_same-cd0c4a3b_0.npy");
    } else {
      snprintf(name, sizeof(name), "9_same-cd0c4a3b_0.%d.npy", n);
    }
    float value = read_one(directory, name);
    int v = (int)value;
    if (value == (float)v && v >= 0 && v < 400 && v % 100 < 25 && !seen[v]) {
      seen[v] = true;
      ++files;
    }
  }
  CHECK_EQ_INT(files, 100);
  char* index = read_index(directory);
  CHECK(index);
  int lines = 0;
  for (char* c = index; *c; ++c) lines += *c == '\n';
  bool distinct = strstr(index, "\"9_same-cd0c4a3b_0.99.npy\"") != NULL &&
                  strstr(index, "\"9_same-cd0c4a3b_0.npy\"") != NULL;
  free(index);
  CHECK_EQ_INT(lines, 100);
  CHECK(distinct);
  remove_tree(directory);
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

static atomic_int flush_calls;

static void counting_flush(void* user_data) {
  (void)user_data;
  atomic_fetch_add(&flush_calls, 1);
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
        .flush = {i == 0 ? NULL : counting_flush, NULL},
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
  tee.flush.fn(tee.flush.user_data);
  CHECK_EQ_INT(atomic_load(&flush_calls), 2);
  tee.release.fn(tee.release.user_data);
  CHECK_EQ_INT(atomic_load(&release_calls), 3);
  CHECK_STATUS(hrt_tee_sink_create(sinks, 0, &tee),
               HRT_STATUS_INVALID_ARGUMENT, "1 to 16 sinks");
}

static void stats_skip_and_count_nonfinite_values(void) {
  float values[6] = {1, NAN, -2, INFINITY, 4, -INFINITY};
  int64_t shape[1] = {6};
  hrt_trace_tensor_t tensor = {"v",    HRT_HAL_ELEMENT_TYPE_F32, 1,    shape,
                               values, sizeof(values),           NULL, NULL};
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
  hrt_trace_tensor_t f16 = {
      "h", HRT_HAL_ELEMENT_TYPE_F16, 1, half_shape, half, sizeof(half), NULL,
      NULL};
  CHECK(hrt_tensor_find_nonfinite(&f16, &index) && index == 1);
  int32_t ints[3] = {-5, 7, 1};
  int64_t ints_shape[1] = {3};
  hrt_trace_tensor_t i32 = {
      "i", HRT_HAL_ELEMENT_TYPE_I32, 1, ints_shape, ints, sizeof(ints), NULL,
      NULL};
  hrt_tensor_stats_compute(&i32, &stats);
  CHECK(stats.min == -5 && stats.max == 7 && stats.mean == 1);
  CHECK(!hrt_tensor_find_nonfinite(&i32, &index));
  hrt_trace_tensor_t empty = {
      "e", HRT_HAL_ELEMENT_TYPE_F32, 1, shape, values, 0, NULL, NULL};
  hrt_tensor_stats_compute(&empty, &stats);
  CHECK(stats.count == 0 && isnan(stats.mean));
}

TEST_MAIN(TEST_CASE(stdio_sink_prints_and_elides),
          TEST_CASE(stdio_sink_prints_summaries),
          TEST_CASE(npy_sink_writes_valid_files),
          TEST_CASE(npy_sink_skips_summary_traces),
          TEST_CASE(npy_sink_gives_every_trace_its_own_file),
          TEST_CASE(npy_sink_caps_names_and_escapes_keys),
          TEST_CASE(npy_sink_never_writes_through_planted_symlinks),
          TEST_CASE(npy_sink_writes_only_into_the_folder_it_opened),
          TEST_CASE(npy_sink_traced_from_several_threads_loses_nothing),
          TEST_CASE(tee_forwards_to_every_sink),
          TEST_CASE(stats_skip_and_count_nonfinite_values))
