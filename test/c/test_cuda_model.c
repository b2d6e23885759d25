// The CUDA model of test/support/cuda_model: the host build of
// src/hal/cuda/kernels/builtin.cu has every kernel of the embedded PTX with
// the PTX's parameters, and the model keeps CUDA's rules for the test
// kernels of cuda_model/kernels.cu (built-in variables, shared memory per
// block, barriers) and reports the barriers no GPU could pass.
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>

#include "../support/cuda_model/cuda_model_launch.h"
#include "hal/cuda/builtin_ptx.h"
#include "hal/cuda/cuda_ptx.h"
#include "test.h"

// cuda_model/kernels.cc
const hrt_model_kernel_t* model_test_kernel(const char* name);

// Launches `name` of the test kernels with `count` parameters, each 8 bytes
// (a pointer or a uint64_t) or 4 (a uint32_t) as the kernel declares;
// 0 or -1 with `message`.
static int launch(const char* name, uint32_t gx, uint32_t gy, uint32_t gz,
                  uint32_t bx, uint32_t by, uint32_t bz, const uint64_t* params,
                  char* message, size_t size) {
  const hrt_model_kernel_t* kernel = model_test_kernel(name);
  if (!kernel) {
    snprintf(message, size, "no kernel %s", name);
    return -1;
  }
  uint8_t data[HRT_MODEL_MAX_PARAMS * 8];
  uint16_t offsets[HRT_MODEL_MAX_PARAMS];
  uint16_t at = 0;
  for (uint32_t i = 0; i < kernel->param_count; ++i) {
    const uint32_t narrow = (uint32_t)params[i];
    memcpy(data + at, kernel->param_sizes[i] == 8 ? (const void*)&params[i]
                                                  : (const void*)&narrow,
           kernel->param_sizes[i]);
    offsets[i] = at;
    at = (uint16_t)(at + kernel->param_sizes[i]);
  }
  const hrt_model_shape_t shape = {{gx, gy, gz}, {bx, by, bz}};
  message[0] = '\0';
  return kernel->run(data, offsets, &shape, message, size);
}

static uint64_t address(const void* p) { return (uint64_t)(uintptr_t)p; }

// The byte size of a PTX scalar parameter type (0: not a scalar).
static uint32_t ptx_size(const char* type) {
  static const char* kEight[] = {".u64", ".b64", ".s64", ".f64"};
  static const char* kFour[] = {".u32", ".b32", ".s32", ".f32"};
  for (int i = 0; i < 4; ++i) {
    if (strcmp(type, kEight[i]) == 0) return 8;
    if (strcmp(type, kFour[i]) == 0) return 4;
  }
  return 0;
}

static void every_builtin_ptx_entry_has_a_host_build(void) {
  uint32_t count = 0;
  hrt_cuda_ptx_entry_t* entries = NULL;
  CHECK_OK(hrt_cuda_ptx_parse_entries(hrt_cuda_builtin_ptx, &count, &entries));
  TEST_DEFER(free, entries);
  CHECK(count >= 19);
  for (uint32_t e = 0; e < count; ++e) {
    const hrt_cuda_ptx_entry_t* entry = &entries[e];
    const hrt_model_kernel_t* kernel = hrt_model_builtin_kernel(entry->name);
    if (!kernel) fprintf(stderr, "no host build of %s\n", entry->name);
    CHECK(kernel != NULL);
    CHECK_EQ_INT(kernel->param_count, entry->param_count);
    for (uint32_t i = 0; i < entry->param_count; ++i) {
      const uint32_t size = ptx_size(entry->params[i].type);
      if (size != kernel->param_sizes[i] ||
          (kernel->param_pointers[i] && size != 8)) {
        fprintf(stderr, "%s parameter %u: PTX %s, host build %u bytes\n",
                entry->name, i, entry->params[i].type,
                kernel->param_sizes[i]);
      }
      CHECK_EQ_INT(kernel->param_sizes[i], size);
    }
  }
  CHECK(hrt_model_builtin_kernel("no_such_kernel") == NULL);
}

// A shared-memory tree per block over a 3-D grid: each block sums its own
// inputs, whatever the others hold.
static void blocks_have_their_own_shared_memory(void) {
  enum { BLOCKS = 2 * 3 * 2, THREADS = 128 };
  static uint32_t in[BLOCKS * THREADS], out[BLOCKS];
  for (uint32_t i = 0; i < BLOCKS * THREADS; ++i) in[i] = i;
  char message[256];
  const uint64_t params[] = {address(in), address(out)};
  CHECK_EQ_INT(launch("block_sum_u32", 2, 3, 2, THREADS, 1, 1, params, message,
                      sizeof(message)),
               0);
  for (uint32_t b = 0; b < BLOCKS; ++b) {
    const uint32_t first = b * THREADS, last = first + THREADS - 1;
    CHECK_EQ_INT(out[b], (uint64_t)(first + last) * THREADS / 2);
  }
}

static void built_in_variables_follow_cuda(void) {
  enum { GX = 2, GY = 1, GZ = 3, BX = 4, BY = 3, BZ = 2 };
  enum { THREADS = GX * GY * GZ * BX * BY * BZ };
  static uint32_t out[6 * THREADS], dims[6];
  memset(out, 0xFF, sizeof(out));
  char message[256];
  const uint64_t params[] = {address(out), address(dims)};
  CHECK_EQ_INT(launch("indices_u32", GX, GY, GZ, BX, BY, BZ, params, message,
                      sizeof(message)),
               0);
  const uint32_t want_dims[6] = {BX, BY, BZ, GX, GY, GZ};
  CHECK(memcmp(dims, want_dims, sizeof(dims)) == 0);
  uint32_t i = 0;
  for (uint32_t bz = 0; bz < GZ; ++bz)
    for (uint32_t by = 0; by < GY; ++by)
      for (uint32_t bx = 0; bx < GX; ++bx)
        for (uint32_t tz = 0; tz < BZ; ++tz)
          for (uint32_t ty = 0; ty < BY; ++ty)
            for (uint32_t tx = 0; tx < BX; ++tx, ++i) {
              const uint32_t want[6] = {tx, ty, tz, bx, by, bz};
              CHECK(memcmp(&out[6 * i], want, sizeof(want)) == 0);
            }
}

// Threads run in one order until the first barrier and in the other after
// it: with the barriers every thread reads its neighbours' writes; without
// them it reads what the slot held before, both for the next thread and
// for the previous one. (Under ThreadSanitizer the launch without barriers
// is a race report instead: a_missing_barrier_is_a_data_race.)
static void a_missing_barrier_shows_in_either_direction(void) {
  enum { THREADS = 64 };
  static uint32_t out[2 * THREADS];
  char message[256];
#ifdef __SANITIZE_THREAD__
  const int runs = 1;
#else
  const int runs = 2;
#endif
  for (int run = 0; run < runs; ++run) {
    const uint32_t barriers = run == 0;
    const uint64_t params[] = {address(out), barriers};
    CHECK_EQ_INT(launch("neighbours_u32", 1, 1, 1, THREADS, 1, 1, params,
                        message, sizeof(message)),
                 0);
    uint32_t next_seen = 0, previous_seen = 0;
    for (uint32_t t = 0; t < THREADS; ++t) {
      next_seen += out[2 * t] == 100 + (t + 1) % THREADS;
      previous_seen += out[2 * t + 1] == 200 + (t + THREADS - 1) % THREADS;
    }
    if (barriers) {
      CHECK_EQ_INT(next_seen, THREADS);
      CHECK_EQ_INT(previous_seen, THREADS);
    } else {
      // The first thread to run reads before its neighbour has written.
      CHECK(next_seen < THREADS);
      CHECK(previous_seen < THREADS);
    }
  }
}

// Under ThreadSanitizer the model orders a block's threads only where CUDA
// does, so neighbours_u32 without its barriers is a data race report. The
// racy launch runs in a child (this binary again, with
// HRT_MODEL_RACE_CHILD set), whose report and exit status are checked.
static void a_missing_barrier_is_a_data_race(void) {
#ifndef __SANITIZE_THREAD__
  printf("  (skipped: needs the ThreadSanitizer build)\n");
#else
  static uint32_t out[2 * 64];
  char message[256];
  if (getenv("HRT_MODEL_RACE_CHILD")) {
    const uint64_t params[] = {address(out), 0};
    CHECK_EQ_INT(launch("neighbours_u32", 1, 1, 1, 64, 1, 1, params, message,
                        sizeof(message)),
                 0);
    return;
  }
  char self[512], command[640];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK(n > 0);
  self[n] = '\0';
  snprintf(command, sizeof(command),
           "HRT_MODEL_RACE_CHILD=1 '%s' a_missing_barrier_is_a_data_race 2>&1",
           self);
  FILE* child = popen(command, "r");
  CHECK(child != NULL);
  static char output[1 << 16];
  const size_t length = fread(output, 1, sizeof(output) - 1, child);
  output[length] = '\0';
  const int status = pclose(child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 66);
  CHECK(strstr(output, "WARNING: ThreadSanitizer: data race") != NULL);
  CHECK(strstr(output, "in neighbours_u32") != NULL);
  const char* summary = strstr(output, "SUMMARY: ThreadSanitizer");
  printf("  the child reported: %.*s\n",
         summary ? (int)strcspn(summary, "\n") : 0, summary ? summary : "");
#endif
}

static void a_thread_returning_before_a_barrier_is_reported(void) {
  static uint32_t out[32];
  char message[512];
  const uint64_t params[] = {address(out), 5};
  CHECK_EQ_INT(launch("early_return", 3, 1, 1, 32, 1, 1, params, message,
                      sizeof(message)),
               -1);
  printf("  %s\n", message);
  CHECK(strstr(message, "block (0,0,0): barrier divergence at the block's "
                        "barrier 1: thread (0,0,0) waits at ") != NULL);
  CHECK(strstr(message, "kernels.cu:") != NULL);
  CHECK(strstr(message, "while thread (5,0,0) has returned") != NULL);
}

static void threads_at_different_barriers_are_reported(void) {
  static uint32_t out[16];
  char message[512];
  const uint64_t params[] = {address(out)};
  CHECK_EQ_INT(launch("split_barriers", 1, 1, 1, 16, 1, 1, params, message,
                      sizeof(message)),
               -1);
  printf("  %s\n", message);
  CHECK(strstr(message, "thread (0,0,0) waits at ") != NULL);
  CHECK(strstr(message, "while thread (1,0,0) waits at ") != NULL);
}

// After a failed launch, the fibers left at a barrier start afresh: the
// next launch on the thread runs in full.
static void a_failed_launch_leaves_the_model_usable(void) {
  static uint32_t out[256];
  char message[512];
  for (int round = 0; round < 3; ++round) {
    const uint64_t bad[] = {address(out), 0};
    CHECK_EQ_INT(launch("early_return", 1, 1, 1, 256, 1, 1, bad, message,
                        sizeof(message)),
                 -1);
    memset(out, 0, sizeof(out));
    const uint64_t good[] = {address(out), 256};
    CHECK_EQ_INT(launch("early_return", 1, 1, 1, 256, 1, 1, good, message,
                        sizeof(message)),
                 0);
    for (int t = 0; t < 256; ++t) CHECK_EQ_INT(out[t], 1);
  }
}

typedef struct {
  uint32_t in[8 * 256];
  uint32_t out[8];
  int result;
} sum_job_t;

static void* run_sum_job(void* arg) {
  sum_job_t* job = arg;
  char message[256];
  const uint64_t params[] = {address(job->in), address(job->out)};
  for (int i = 0; i < 20 && job->result == 0; ++i) {
    job->result = launch("block_sum_u32", 8, 1, 1, 256, 1, 1, params, message,
                         sizeof(message));
  }
  return NULL;
}

// Launches on two host threads at once (two fake streams) do not share
// fibers or shared memory.
static void launches_on_two_threads_are_independent(void) {
  static sum_job_t jobs[2];
  for (int j = 0; j < 2; ++j) {
    for (uint32_t i = 0; i < 8 * 256; ++i) jobs[j].in[i] = j ? 2 * i : i;
  }
  pthread_t threads[2];
  for (int j = 0; j < 2; ++j) {
    CHECK_EQ_INT(pthread_create(&threads[j], NULL, run_sum_job, &jobs[j]), 0);
  }
  for (int j = 0; j < 2; ++j) pthread_join(threads[j], NULL);
  for (int j = 0; j < 2; ++j) {
    CHECK_EQ_INT(jobs[j].result, 0);
    for (uint32_t b = 0; b < 8; ++b) {
      const uint64_t sum = (uint64_t)(b * 256 + b * 256 + 255) * 256 / 2;
      CHECK_EQ_INT(jobs[j].out[b], j ? 2 * sum : sum);
    }
  }
}

TEST_MAIN(TEST_CASE(every_builtin_ptx_entry_has_a_host_build),
          TEST_CASE(blocks_have_their_own_shared_memory),
          TEST_CASE(built_in_variables_follow_cuda),
          TEST_CASE(a_missing_barrier_shows_in_either_direction),
          TEST_CASE(a_missing_barrier_is_a_data_race),
          TEST_CASE(a_thread_returning_before_a_barrier_is_reported),
          TEST_CASE(threads_at_different_barriers_are_reported),
          TEST_CASE(a_failed_launch_leaves_the_model_usable),
          TEST_CASE(launches_on_two_threads_are_independent))
