// src/base: statuses, notifications, threads, dynamic libraries, files and
// streaming copies and deferred frees.
#include <math.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/copy.h"
#include "base/dynlib.h"
#include "base/file.h"
#include "base/half.h"
#include "base/status.h"
#include "base/threads.h"
#include "test.h"

static void status_carries_code_and_formatted_message(void) {
  hrt_status_t status =
      hrt_status_make(HRT_STATUS_NOT_FOUND, "kernel '%s' (%d)", "add", 3);
  CHECK_EQ_INT(hrt_status_code(status), HRT_STATUS_NOT_FOUND);
  CHECK(strcmp(hrt_status_message(status), "kernel 'add' (3)") == 0);
  CHECK(strcmp(hrt_status_code_name(hrt_status_code(status)), "NOT_FOUND") ==
        0);
  hrt_status_t clone = hrt_status_clone(status);
  status = hrt_status_annotate(status, "loading %s", "m");
  CHECK(strcmp(hrt_status_message(status), "loading m: kernel 'add' (3)") ==
        0);
  CHECK(strcmp(hrt_status_message(clone), "kernel 'add' (3)") == 0);
  hrt_status_free(status);
  hrt_status_free(clone);
  CHECK(hrt_status_annotate(HRT_OK, "x") == HRT_OK);
  CHECK_EQ_INT(hrt_status_code(HRT_OK), HRT_STATUS_OK);
  CHECK(strcmp(hrt_status_code_name(HRT_STATUS_DEVICE_LOST), "DEVICE_LOST") ==
        0);
}

static void status_made_with_ok_code_is_internal(void) {
  hrt_status_t status = hrt_status_make(HRT_STATUS_OK, "oops");
  CHECK_EQ_INT(hrt_status_code(status), HRT_STATUS_INTERNAL);
  hrt_status_free(status);
}

static void long_messages_are_kept_whole_up_to_the_limit(void) {
  // A long name in a frame never cuts what follows it (an NVRTC log and its
  // "[log cut]" marker, say), however many annotations come on top.
  char name[4000];
  memset(name, 'x', sizeof(name) - 1);
  name[sizeof(name) - 1] = 0;
  hrt_status_t status = hrt_status_annotate(
      hrt_status_make(HRT_STATUS_INVALID_ARGUMENT, "compiling %s: log [log cut]",
                      name),
      "executable '%s'", name);
  CHECK(strlen(hrt_status_message(status)) == 2 * strlen(name) + 40);
  CHECK(strstr(hrt_status_message(status), "log [log cut]") != NULL);
  CHECK_EQ_INT(hrt_status_code(status), HRT_STATUS_INVALID_ARGUMENT);
  hrt_status_free(status);
  // Beyond HRT_STATUS_MAX_MESSAGE the rest is cut, never overrun.
  char* huge = malloc(HRT_STATUS_MAX_MESSAGE + 100);
  CHECK(huge != NULL);
  if (huge == NULL) return;
  memset(huge, 'y', HRT_STATUS_MAX_MESSAGE + 99);
  huge[HRT_STATUS_MAX_MESSAGE + 99] = 0;
  status = hrt_status_make(HRT_STATUS_INTERNAL, "%s", huge);
  free(huge);
  CHECK(strlen(hrt_status_message(status)) == HRT_STATUS_MAX_MESSAGE);
  hrt_status_free(status);
}

typedef struct {
  hrt_notification_t* notification;
  atomic_int woke;
} waiter_t;

static void* wait_for_notification(void* arg) {
  waiter_t* waiter = arg;
  if (hrt_notification_wait_until(waiter->notification,
                                  HRT_TIME_INFINITE_FUTURE)) {
    atomic_fetch_add(&waiter->woke, 1);
  }
  return NULL;
}

static void notification_wakes_every_waiter_once_set(void) {
  hrt_notification_t notification;
  hrt_notification_init(&notification);
  waiter_t waiter = {&notification, 0};
  hrt_thread_t threads[4];
  for (int i = 0; i < 4; ++i) {
    CHECK_OK(hrt_thread_create("waiter", wait_for_notification, &waiter,
                               &threads[i]));
  }
  CHECK(!hrt_notification_wait_until(&notification,
                                     hrt_time_now_ns() + 1000000));
  hrt_notification_set(&notification);
  for (int i = 0; i < 4; ++i) hrt_thread_join(&threads[i]);
  CHECK_EQ_INT(atomic_load(&waiter.woke), 4);
  CHECK(hrt_notification_is_set(&notification));
  CHECK(hrt_notification_wait_until(&notification, 0));
  hrt_notification_deinit(&notification);
}

typedef struct {
  hrt_thread_t thread;
  hrt_notification_t created;  // `thread` has been written
  int is_current;
} self_check_t;

static void* record_self(void* arg) {
  self_check_t* state = arg;
  hrt_notification_wait_until(&state->created, HRT_TIME_INFINITE_FUTURE);
  state->is_current = hrt_thread_is_current(&state->thread);
  return NULL;
}

static void thread_knows_itself(void) {
  self_check_t state = {.is_current = 0};
  hrt_notification_init(&state.created);
  CHECK_OK(hrt_thread_create("self", record_self, &state, &state.thread));
  hrt_notification_set(&state.created);
  hrt_thread_join(&state.thread);
  hrt_notification_deinit(&state.created);
  CHECK_EQ_INT(state.is_current, 1);
  CHECK(!hrt_thread_is_current(&state.thread));
}

static void timed_wait_returns_after_deadline(void) {
  hrt_mutex_t mutex;
  hrt_cond_t cond;
  hrt_mutex_init(&mutex);
  hrt_cond_init(&cond);
  int64_t start = hrt_time_now_ns();
  hrt_mutex_lock(&mutex);
  // A true return is a spurious wake-up: wait again for the timeout.
  while (hrt_cond_wait_until(&cond, &mutex, start + 20000000)) {
  }
  hrt_mutex_unlock(&mutex);
  int64_t elapsed = hrt_time_now_ns() - start;
  hrt_cond_deinit(&cond);
  hrt_mutex_deinit(&mutex);
  CHECK(elapsed >= 20000000);
}

static void dynlib_missing_library_is_unavailable(void) {
  const char* paths[] = {"/nonexistent/libnothing.so", "libnothing-halrt.so"};
  hrt_dynlib_t* library = NULL;
  CHECK_STATUS(hrt_dynlib_open(paths, 2, &library), HRT_STATUS_UNAVAILABLE,
               "libnothing-halrt.so");
  CHECK(library == NULL);
}

// cos in `library`, through hrt_dynlib_symbol.
static void* symbol_of_cos(hrt_dynlib_t* library) {
  void* symbol = NULL;
  hrt_status_free(hrt_dynlib_symbol(library, "cos", &symbol));
  return symbol;
}

static void dynlib_opens_first_loadable_and_finds_symbols(void) {
  const char* paths[] = {"/nonexistent/libm.so", "libm.so.6"};
  hrt_dynlib_t* library = NULL;
  CHECK_OK(hrt_dynlib_open(paths, 2, &library));
  CHECK(strcmp(hrt_dynlib_path(library), "libm.so.6") == 0);
  void* symbol = NULL;
  hrt_status_t status = hrt_dynlib_symbol(library, "cos", &symbol);
  int found = status == HRT_OK && symbol != NULL;
  hrt_status_free(status);
  status = hrt_dynlib_symbol(library, "no_such_symbol_halrt", &symbol);
  int missing = hrt_status_code(status) == HRT_STATUS_NOT_FOUND &&
                strstr(hrt_status_message(status), "no_such_symbol_halrt");
  hrt_status_free(status);
  const int finds = hrt_dynlib_find(library, "cos") == symbol_of_cos(library) &&
                    hrt_dynlib_find(library, "no_such_symbol_halrt") == NULL;
  hrt_dynlib_close(library);
  CHECK(found);
  CHECK(missing);
  CHECK(finds);
}

static void allocation_failure_is_resource_exhausted(void) {
  void* ptr = NULL;
  CHECK_STATUS(hrt_allocate(SIZE_MAX / 2, "a test", &ptr),
               HRT_STATUS_RESOURCE_EXHAUSTED, "a test");
  CHECK(ptr == NULL);
}

static void half_floats_round_trip_and_round_to_even(void) {
  CHECK_EQ_INT(hrt_f64_to_f16(1.0f), 0x3C00);
  CHECK_EQ_INT(hrt_f64_to_f16(-2.0f), 0xC000);
  CHECK_EQ_INT(hrt_f64_to_f16(65504.0f), 0x7BFF);
  CHECK_EQ_INT(hrt_f64_to_f16(65520.0f), 0x7C00);  // rounds up to inf
  CHECK_EQ_INT(hrt_f64_to_f16(5.9604645e-8f), 0x0001);  // smallest subnormal
  CHECK_EQ_INT(hrt_f64_to_f16(2.9e-8f), 0x0000);
  CHECK_EQ_INT(hrt_f64_to_f16(1.0f + 1.0f / 2048), 0x3C00);  // tie to even
  CHECK_EQ_INT(hrt_f64_to_f16(1.0f + 3.0f / 2048), 0x3C02);  // tie to even
  CHECK_EQ_INT(hrt_f64_to_f16(NAN) & 0x7E00, 0x7E00);
  CHECK_EQ_INT(hrt_f64_to_bf16(1.0f), 0x3F80);
  CHECK_EQ_INT(hrt_f64_to_bf16(1.00390625f), 0x3F80);  // tie to even
  CHECK_EQ_INT(hrt_f64_to_bf16(1.01171875f), 0x3F82);  // tie to even
  CHECK(hrt_bf16_to_f32(0xC000) == -2.0f);
  int mismatches = 0;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7C00) == 0x7C00 && (bits & 0x3FF)) continue;  // NaN
    if (hrt_f64_to_f16(hrt_f16_to_f32((uint16_t)bits)) != bits) ++mismatches;
  }
  CHECK_EQ_INT(mismatches, 0);
}

static void file_read_returns_exactly_the_bytes_and_a_nul(void) {
  char dir[] = "/tmp/halrt-file-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[64];
  snprintf(path, sizeof(path), "%s/image", dir);
  static const char kBytes[7] = {'a', 'b', 0, 'c', 'd', 'e', 'f'};
  FILE* file = fopen(path, "wb");
  CHECK(file != NULL);
  CHECK(fwrite(kBytes, 1, sizeof(kBytes), file) == sizeof(kBytes));
  CHECK(fclose(file) == 0);

  char* data = NULL;
  size_t length = 0;
  hrt_status_t status = hrt_file_read(path, 7, "a test file", &data, &length);
  const bool exact = status == HRT_OK && length == 7 &&
                     memcmp(data, kBytes, 7) == 0 && data[7] == 0;
  hrt_status_free(status);
  free(data);
  // One byte over the cap: refused before anything is read, naming the
  // path, the size and the cap.
  data = NULL;
  char message[160];
  snprintf(message, sizeof(message),
           "'%s' is 7 bytes, over the limit of 6 bytes for a test file", path);
  status = hrt_file_read(path, 6, "a test file", &data, &length);
  const bool refused =
      hrt_status_code(status) == HRT_STATUS_RESOURCE_EXHAUSTED &&
      strcmp(hrt_status_message(status), message) == 0 && data == NULL;
  hrt_status_free(status);
  remove(path);
  rmdir(dir);
  CHECK(exact);
  CHECK(refused);
}

// /dev/zero never ends and opening a FIFO waits for a writer: both, and a
// directory, are refused by name without blocking (this test would hang on
// the FIFO otherwise).
static void file_read_refuses_devices_fifos_and_directories(void) {
  char dir[] = "/tmp/halrt-file-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char fifo[64];
  snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
  CHECK(mkfifo(fifo, 0600) == 0);
  const struct {
    const char* path;
    const char* kind;
  } kCases[] = {
      {"/dev/zero", "a character device"},
      {fifo, "a FIFO"},
      {dir, "a directory"},
  };
  int wrong = 0;
  for (size_t i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    char message[160];
    snprintf(message, sizeof(message), "'%s' is %s, not a regular file",
             kCases[i].path, kCases[i].kind);
    char* data = NULL;
    size_t length = 0;
    hrt_status_t read =
        hrt_file_read(kCases[i].path, 1u << 30, "a test file", &data, &length);
    hrt_status_t check = hrt_file_check(kCases[i].path, 1u << 30, "a file");
    if (hrt_status_code(read) != HRT_STATUS_INVALID_ARGUMENT ||
        strcmp(hrt_status_message(read), message) != 0 ||
        hrt_status_code(check) != HRT_STATUS_INVALID_ARGUMENT ||
        strcmp(hrt_status_message(check), message) != 0 || data != NULL) {
      fprintf(stderr, "%s: got %s / %s\n", kCases[i].path,
              hrt_status_message(read), hrt_status_message(check));
      ++wrong;
    }
    hrt_status_free(read);
    hrt_status_free(check);
  }
  char missing[64];
  snprintf(missing, sizeof(missing), "%s/missing", dir);
  hrt_status_t status = hrt_file_check(missing, 1, "a file");
  const bool not_found = hrt_status_code(status) == HRT_STATUS_NOT_FOUND &&
                         strstr(hrt_status_message(status), missing) != NULL;
  hrt_status_free(status);
  remove(fifo);
  rmdir(dir);
  CHECK_EQ_INT(wrong, 0);
  CHECK(not_found);
}

// hrt_copy_streaming writes exactly the bytes memcpy would, at every
// alignment of source and destination, for lengths around the streaming
// threshold and the 64-byte lines, and nothing outside them.
static void streaming_copy_matches_memcpy(void) {
  const size_t max = HRT_COPY_STREAMING_MIN_BYTES * 4 + 256;
  unsigned char* src = malloc(max + 64);
  unsigned char* dst = malloc(max + 128);
  CHECK(src != NULL && dst != NULL);
  for (size_t i = 0; i < max + 64; ++i) src[i] = (unsigned char)(i * 131 + 7);
  const size_t lengths[] = {0,
                            1,
                            63,
                            64,
                            HRT_COPY_STREAMING_MIN_BYTES - 1,
                            HRT_COPY_STREAMING_MIN_BYTES,
                            HRT_COPY_STREAMING_MIN_BYTES + 1,
                            HRT_COPY_STREAMING_MIN_BYTES + 63,
                            max};
  int wrong = 0;
  for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); ++k) {
    for (size_t from = 0; from < 64; from += 7) {
      for (size_t to = 1; to < 65; to += 9) {
        const size_t n = lengths[k];
        memset(dst, 0xEE, max + 128);
        hrt_copy_streaming(dst + to, src + from, n);
        bool ok = memcmp(dst + to, src + from, n) == 0;
        for (size_t i = 0; i < to; ++i) ok = ok && dst[i] == 0xEE;
        for (size_t i = to + n; i < max + 128; ++i) ok = ok && dst[i] == 0xEE;
        if (!ok) {
          fprintf(stderr, "length %zu from +%zu to +%zu differs\n", n, from,
                  to);
          ++wrong;
        }
      }
    }
  }
  free(src);
  free(dst);
  CHECK_EQ_INT(wrong, 0);
}

// hrt_free_deferred from other threads while this one allocates: every
// block is freed once, by an allocating thread, and a block handed out is
// never written by the list (its pattern survives).
typedef struct {
  void** blocks;
  size_t count;
} deferring_t;

static void* defer_blocks(void* arg) {
  deferring_t* work = arg;
  for (size_t i = 0; i < work->count; ++i) hrt_free_deferred(work->blocks[i]);
  return NULL;
}

static void* recycle_blocks(void* arg) {
  void** blocks = arg;
  for (size_t i = 0; i < 3000; ++i) hrt_free_recycled(blocks[i]);
  return NULL;
}

static void deferred_frees_run_on_allocating_threads(void) {
  enum { kPerThread = 20000, kThreads = 2 };
  void** blocks = malloc(sizeof(void*) * kPerThread * kThreads);
  CHECK(blocks != NULL);
  for (size_t i = 0; i < (size_t)kPerThread * kThreads; ++i) {
    CHECK_OK(hrt_allocate(24 + i % 200, "deferred block", &blocks[i]));
  }
  deferring_t work[kThreads];
  pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    work[t] = (deferring_t){blocks + (size_t)t * kPerThread, kPerThread};
    CHECK_EQ_INT(pthread_create(&threads[t], NULL, defer_blocks, &work[t]), 0);
  }
  int wrong = 0;
  for (int i = 0; i < 20000; ++i) {
    unsigned char* block = NULL;
    CHECK_OK(hrt_allocate_zeroed(64, "block", (void**)&block));
    memset(block, 0x5A, 64);
    for (int k = 0; k < 64; ++k) wrong += block[k] != 0x5A;
    free(block);
  }
  for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  void* last = NULL;
  CHECK_OK(hrt_allocate(8, "last", &last));  // frees what is left
  free(last);
  hrt_free_deferred(NULL);
  free(blocks);
  CHECK_EQ_INT(wrong, 0);
}

// A recycled block comes back to the next allocation of its size class,
// reading as zero; blocks too large to keep are freed; released on other
// threads, blocks are reused here.
static void recycled_blocks_come_back_zeroed(void) {
  unsigned char* first = NULL;
  CHECK_OK(hrt_allocate_recycled(100, "first", (void**)&first));
  memset(first, 0x5A, 100);
  hrt_free_recycled(first);
  unsigned char* again = NULL;
  CHECK_OK(hrt_allocate_recycled(128, "again", (void**)&again));
  // The same class (65 to 128 bytes), unless sanitized.
  CHECK(again == first || HRT_RECYCLE_KEEP == 0);
  int nonzero = 0;
  for (int i = 0; i < 128; ++i) nonzero += again[i] != 0;
  CHECK_EQ_INT(nonzero, 0);
  hrt_free_recycled(again);
  void* large = NULL;
  CHECK_OK(hrt_allocate_recycled((size_t)1 << 20, "large", &large));
  memset(large, 1, (size_t)1 << 20);
  hrt_free_recycled(large);
  void* impossible = NULL;
  hrt_status_t status =
      hrt_allocate_recycled(SIZE_MAX, "impossible", &impossible);
  CHECK(hrt_status_code(status) == HRT_STATUS_RESOURCE_EXHAUSTED &&
        impossible == NULL);
  hrt_status_free(status);
  hrt_free_recycled(NULL);
  enum { kBlocks = 3000 };
  void** blocks = malloc(sizeof(void*) * kBlocks);
  CHECK(blocks != NULL);
  for (int round = 0; blocks && round < 4; ++round) {
    for (size_t i = 0; i < kBlocks; ++i) {
      CHECK_OK(hrt_allocate_recycled(24 + i % 300, "block", &blocks[i]));
      memset(blocks[i], 0x33, 24 + i % 300);
    }
    pthread_t thread;
    CHECK_EQ_INT(pthread_create(&thread, NULL, recycle_blocks, blocks), 0);
    pthread_join(thread, NULL);
  }
  free(blocks);
}

TEST_MAIN(TEST_CASE(status_carries_code_and_formatted_message),
          TEST_CASE(status_made_with_ok_code_is_internal),
          TEST_CASE(long_messages_are_kept_whole_up_to_the_limit),
          TEST_CASE(notification_wakes_every_waiter_once_set),
          TEST_CASE(thread_knows_itself),
          TEST_CASE(timed_wait_returns_after_deadline),
          TEST_CASE(dynlib_missing_library_is_unavailable),
          TEST_CASE(dynlib_opens_first_loadable_and_finds_symbols),
          TEST_CASE(allocation_failure_is_resource_exhausted),
          TEST_CASE(file_read_returns_exactly_the_bytes_and_a_nul),
          TEST_CASE(file_read_refuses_devices_fifos_and_directories),
          TEST_CASE(half_floats_round_trip_and_round_to_even),
          TEST_CASE(streaming_copy_matches_memcpy),
          TEST_CASE(deferred_frees_run_on_allocating_threads),
          TEST_CASE(recycled_blocks_come_back_zeroed))
