// docs/cuda.md, "Testing without a GPU: the fake driver": the rules of the
// real driver that the fake enforces. Each case makes the offending call
// itself, through the fake's entry points, where halrt never makes it;
// passing halrt's own cases under these rules is the other half of the
// check. Last, the entry points halrt loads against the installed cuda.h.
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "base/threads.h"
#include "cuda_fixture.h"
#include "hal/cuda/cuda_executable.h"

// A context of the fake's device 1 (halrt's cases use device 0) with a
// stream, a recorded timing event, device and pinned memory, and the test
// kernels; the context stays current on the thread that opened it until
// fixture_close or, at the latest, the end of the case.
typedef struct {
  hrt_cu_context_t context;
  hrt_cu_stream_t stream;
  hrt_cu_event_t event;
  hrt_cu_deviceptr_t memory;  // 64 bytes
  void* host;                 // 64 pinned bytes
  char* ptx;
  hrt_cu_module_t module;
  hrt_cu_function_t function;  // write_index_u32(out, n)
  bool open;                   // opened, and not closed yet
} fixture_t;

enum { FIXTURE_DEVICE = 1, FIXTURE_BYTES = 64 };

// Destroys what fixture_open made, with its context current; returns the
// first error.
static hrt_cu_result_t fixture_close(fixture_t* f) {
  f->open = false;
  hrt_cu_result_t results[7] = {
      g_cu.cuModuleUnload(f->module),    g_cu.cuMemFreeHost(f->host),
      g_cu.cuMemFree_v2(f->memory),      g_cu.cuEventDestroy_v2(f->event),
      g_cu.cuStreamDestroy_v2(f->stream), HRT_CUDA_SUCCESS,
      HRT_CUDA_SUCCESS};
  hrt_cu_context_t popped = NULL;
  results[5] = g_cu.cuCtxPopCurrent_v2(&popped);
  results[6] = g_cu.cuDevicePrimaryCtxRelease_v2(FIXTURE_DEVICE);
  for (int i = 0; i < 7; ++i) {
    if (results[i]) return results[i];
  }
  return HRT_CUDA_SUCCESS;
}

// Closes `arg`, a fixture_t, if it is still open, and frees it.
static void fixture_free(void* arg) {
  fixture_t* f = arg;
  if (f->open) (void)fixture_close(f);
  free(f->ptx);
  free(f);
}

// Makes `*out`, freed when the case ends.
static hrt_cu_result_t fixture_open(fixture_t** out) {
  fixture_t* f = calloc(1, sizeof(*f));
  if (!f) return HRT_CUDA_ERROR_OUT_OF_MEMORY;
  TEST_DEFER(fixture_free, f);
  *out = f;
  f->ptx = read_file("test/gpu/kernels.ptx", NULL);
  if (!f->ptx) return HRT_CUDA_ERROR_NOT_FOUND;
  hrt_cu_result_t r = g_cu.cuInit(0);
  if (!r) r = g_cu.cuDevicePrimaryCtxRetain(&f->context, FIXTURE_DEVICE);
  if (!r) r = g_cu.cuCtxPushCurrent_v2(f->context);
  if (!r) r = g_cu.cuStreamCreate(&f->stream, HRT_CU_STREAM_NON_BLOCKING);
  if (!r) r = g_cu.cuEventCreate(&f->event, 0);
  if (!r) r = g_cu.cuEventRecord(f->event, f->stream);
  if (!r) r = g_cu.cuEventSynchronize(f->event);
  if (!r) r = g_cu.cuMemAlloc_v2(&f->memory, FIXTURE_BYTES);
  if (!r) r = g_cu.cuMemAllocHost_v2(&f->host, FIXTURE_BYTES);
  if (!r) r = g_cu.cuModuleLoadDataEx(&f->module, f->ptx, 0, NULL, NULL);
  if (!r) r = g_cu.cuModuleGetFunction(&f->function, f->module,
                                       "write_index_u32");
  f->open = r == HRT_CUDA_SUCCESS;
  return r;
}

// Launches write_index_u32 over the fixture's memory.
static hrt_cu_result_t fixture_launch(fixture_t* f, const unsigned grid[3],
                                      const unsigned block[3]) {
  uint32_t count = FIXTURE_BYTES / 4;
  void* params[2] = {&f->memory, &count};
  return g_cu.cuLaunchKernel(f->function, grid[0], grid[1], grid[2], block[0],
                             block[1], block[2], 0, f->stream, params, NULL);
}

// Every call that works in a context, made on a thread with none current;
// destroying calls last, so that a double that wrongly obeys them breaks
// nothing the others use.
enum { CONTEXT_CALLS = 24 };
static const char* const kContextCalls[CONTEXT_CALLS] = {
    "cuMemAlloc_v2",        "cuMemAllocHost_v2",
    "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2",
    "cuMemsetD8Async",      "cuStreamCreate",
    "cuStreamSynchronize",  "cuEventCreate",
    "cuEventRecord",        "cuEventSynchronize",
    "cuEventElapsedTime",   "cuModuleLoadDataEx",
    "cuModuleGetFunction",  "cuModuleGetFunctionCount",
    "cuFuncGetName",        "cuFuncGetParamInfo",
    "cuLaunchKernel",       "cuStreamWaitEvent",
    "cuMemAllocAsync",      "cuMemFree_v2",
    "cuMemFreeAsync",       "cuMemFreeHost",
    "cuEventDestroy_v2",    "cuModuleUnload"};

typedef struct {
  fixture_t* fixture;
  hrt_cu_result_t results[CONTEXT_CALLS];
  hrt_cu_result_t stream_destroy;
} context_calls_t;

static void* make_calls_without_context(void* arg) {
  context_calls_t* calls = arg;
  fixture_t* f = calls->fixture;
  hrt_cu_result_t* r = calls->results;
  hrt_cu_deviceptr_t memory = 0;
  void* host = NULL;
  hrt_cu_stream_t stream = NULL;
  hrt_cu_event_t event = NULL;
  hrt_cu_module_t module = NULL;
  hrt_cu_function_t function = NULL;
  unsigned int count = 0;
  const char* name = NULL;
  size_t offset = 0, size = 0;
  float milliseconds = 0;
  const unsigned one[3] = {1, 1, 1};
  r[0] = g_cu.cuMemAlloc_v2(&memory, 16);
  r[1] = g_cu.cuMemAllocHost_v2(&host, 16);
  r[2] = g_cu.cuMemcpyHtoDAsync_v2(f->memory, f->host, 4, f->stream);
  r[3] = g_cu.cuMemcpyDtoHAsync_v2(f->host, f->memory, 4, f->stream);
  r[4] = g_cu.cuMemsetD8Async(f->memory, 0, 4, f->stream);
  r[5] = g_cu.cuStreamCreate(&stream, 0);
  r[6] = g_cu.cuStreamSynchronize(f->stream);
  r[7] = g_cu.cuEventCreate(&event, 0);
  r[8] = g_cu.cuEventRecord(f->event, f->stream);
  r[9] = g_cu.cuEventSynchronize(f->event);
  r[10] = g_cu.cuEventElapsedTime(&milliseconds, f->event, f->event);
  r[11] = g_cu.cuModuleLoadDataEx(&module, f->ptx, 0, NULL, NULL);
  r[12] = g_cu.cuModuleGetFunction(&function, f->module, "write_index_u32");
  r[13] = g_cu.cuModuleGetFunctionCount(&count, f->module);
  r[14] = g_cu.cuFuncGetName(&name, f->function);
  r[15] = g_cu.cuFuncGetParamInfo(f->function, 0, &offset, &size);
  r[16] = fixture_launch(f, one, one);
  r[17] = g_cu.cuStreamWaitEvent(f->stream, f->event, 0);
  r[18] = g_cu.cuMemAllocAsync(&memory, 16, f->stream);
  r[19] = g_cu.cuMemFree_v2(f->memory);
  r[20] = g_cu.cuMemFreeAsync(f->memory, f->stream);
  r[21] = g_cu.cuMemFreeHost(f->host);
  r[22] = g_cu.cuEventDestroy_v2(f->event);
  r[23] = g_cu.cuModuleUnload(f->module);
  calls->stream_destroy = g_cu.cuStreamDestroy_v2(f->stream);
  return NULL;
}

static void fake_refuses_calls_without_a_current_context(void) {
  FAKE_ONLY();
  fixture_t* f = NULL;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  context_calls_t calls = {.fixture = f};
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, make_calls_without_context, &calls) ==
        0);
  pthread_join(thread, NULL);
  int wrong = 0;
  for (int i = 0; i < CONTEXT_CALLS; ++i) {
    if (calls.results[i] != HRT_CUDA_ERROR_INVALID_CONTEXT) {
      fprintf(stderr, "  %s without a context returned %d\n",
              kContextCalls[i], calls.results[i]);
      ++wrong;
    }
  }
  CHECK_EQ_INT(wrong, 0);
  CHECK_EQ_INT(calls.stream_destroy, HRT_CUDA_ERROR_INVALID_CONTEXT);
  // Refused calls changed nothing: everything is still there to destroy.
  CHECK_EQ_INT(fixture_close(f), HRT_CUDA_SUCCESS);
}

// Every error cuda.h calls unrecoverable ("any further CUDA work will return
// the same error", "must be terminated and relaunched"), ASSERT and the
// fake's CONTEXT_IS_DESTROYED: once a launch fails with it, every later call
// in the context returns it, destroying calls included; a new primary
// context (after the last release) is healthy.
static void sticky_errors_stay_with_the_context(void) {
  FAKE_ONLY();
  static const hrt_cu_result_t kSticky[] = {226, 700, 702, 709, 710, 714,
                                            715, 716, 717, 718, 719, 721,
                                            810, 911};
  const unsigned one[3] = {1, 1, 1};
  for (size_t k = 0; k < sizeof(kSticky) / sizeof(kSticky[0]); ++k) {
    const hrt_cu_result_t code = kSticky[k];
    fixture_t* f = NULL;
    CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
    g_cuda.fail_next_launch(code);
    CHECK_EQ_INT(fixture_launch(f, one, one), code);
    hrt_cu_deviceptr_t memory = 0;
    hrt_cu_function_t function = NULL;
    unsigned int count = 0;
    size_t offset = 0, size = 0;
    float milliseconds = 0;
    const hrt_cu_result_t later[] = {
        g_cu.cuMemAlloc_v2(&memory, 16),
        g_cu.cuMemsetD8Async(f->memory, 0, 4, f->stream),
        g_cu.cuEventRecord(f->event, f->stream),
        g_cu.cuEventSynchronize(f->event),
        g_cu.cuEventElapsedTime(&milliseconds, f->event, f->event),
        g_cu.cuStreamSynchronize(f->stream),
        g_cu.cuModuleGetFunction(&function, f->module, "write_index_u32"),
        g_cu.cuModuleGetFunctionCount(&count, f->module),
        g_cu.cuFuncGetParamInfo(f->function, 0, &offset, &size),
        fixture_launch(f, one, one),
    };
    for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); ++i) {
      if (later[i] != code) {
        fprintf(stderr, "  after %d, call %zu returned %d\n", code, i,
                later[i]);
      }
      CHECK_EQ_INT(later[i], code);
    }
    // The destroying calls destroy and still answer with the error.
    CHECK_EQ_INT(fixture_close(f), code);
  }
  fixture_t* fresh = NULL;
  CHECK_EQ_INT(fixture_open(&fresh), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(fixture_launch(fresh, one, one), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuStreamSynchronize(fresh->stream), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(fixture_close(fresh), HRT_CUDA_SUCCESS);
}

// sleep_ms(unused, ms), the kernel that keeps a stream busy (the fake runs
// its own; test/cuda-memory.test.js has the PTX that spins on a GPU).
static const char kSleepPtx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry sleep_ms(.param .u64 unused, .param .u32 ms)\n"
    "{\n  ret;\n}\n";

// A stream-ordered free keeps its place in the stream on a lost context
// too: work the stream took before the loss may still be running on the
// memory, so the memory goes back to the pool (where a trim or any
// synchronisation may free it) only once that work has ended. The fake
// used to give it back at the call, and a trim on another thread then
// freed memory that an upload's copy was still writing.
static void lost_context_frees_in_stream_order(void) {
  FAKE_ONLY();
  wait_for_no_devices();  // the contexts destroyed below are the fixture's
  fixture_t* f = NULL;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  const int serial = g_cuda.streams_created();  // the fixture's stream
  hrt_cu_module_t module = NULL;
  hrt_cu_function_t sleep = NULL;
  hrt_cu_mempool_t pool = NULL;
  hrt_cu_deviceptr_t memory = 0;
  CHECK_EQ_INT(g_cu.cuModuleLoadDataEx(&module, kSleepPtx, 0, NULL, NULL),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuModuleGetFunction(&sleep, module, "sleep_ms"),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuDeviceGetDefaultMemPool(&pool, FIXTURE_DEVICE),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuMemAllocAsync(&memory, 64, f->stream),
               HRT_CUDA_SUCCESS);
  const long long live = fake_memory().allocations;
  uint32_t ms = 500;
  void* params[2] = {&memory, &ms};
  CHECK_EQ_INT(g_cu.cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, f->stream,
                                   params, NULL),
               HRT_CUDA_SUCCESS);
  const int64_t deadline = hrt_time_now_ns() + 5000000000LL;
  while (g_cuda.queued_operations() > 0 && hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  CHECK_EQ_INT(g_cuda.queued_operations(), 0);  // the kernel is running
  g_cuda.destroy_contexts();
  CHECK_EQ_INT(g_cu.cuMemFreeAsync(memory, f->stream),
               HRT_CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CHECK_EQ_INT(g_cu.cuMemPoolTrimTo(pool, 0), HRT_CUDA_SUCCESS);
  const long long during = fake_memory().allocations;
  fakecuda_stream_state_t state;
  g_cuda.stream_state(serial, &state);
  // Read after the count: the free had not run when it was taken.
  CHECK(state.unfinished > 0);
  CHECK_EQ_INT(during, live);
  CHECK_EQ_INT(g_cu.cuStreamSynchronize(f->stream),
               HRT_CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CHECK_EQ_INT(fake_memory().allocations, live - 1);
  CHECK_EQ_INT(g_cu.cuModuleUnload(module),
               HRT_CUDA_ERROR_CONTEXT_IS_DESTROYED);
  CHECK_EQ_INT(fixture_close(f), HRT_CUDA_ERROR_CONTEXT_IS_DESTROYED);
}

// cuda.h: cuEventElapsedTime on an event created with
// CU_EVENT_DISABLE_TIMING is CUDA_ERROR_INVALID_HANDLE, even once both were
// reached; two timing events give a time.
static void elapsed_time_needs_timing_events(void) {
  FAKE_ONLY();
  fixture_t* f = NULL;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  hrt_cu_event_t untimed = NULL, timed = NULL;
  CHECK_EQ_INT(g_cu.cuEventCreate(&untimed, HRT_CU_EVENT_BLOCKING_SYNC |
                                                HRT_CU_EVENT_DISABLE_TIMING),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventCreate(&timed, HRT_CU_EVENT_BLOCKING_SYNC),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventRecord(untimed, f->stream), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventRecord(timed, f->stream), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventSynchronize(timed), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventSynchronize(untimed), HRT_CUDA_SUCCESS);
  float milliseconds = -1;
  CHECK_EQ_INT(g_cu.cuEventElapsedTime(&milliseconds, untimed, timed),
               HRT_CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ_INT(g_cu.cuEventElapsedTime(&milliseconds, f->event, untimed),
               HRT_CUDA_ERROR_INVALID_HANDLE);
  CHECK(milliseconds == -1);  // untouched
  CHECK_EQ_INT(g_cu.cuEventElapsedTime(&milliseconds, f->event, timed),
               HRT_CUDA_SUCCESS);
  CHECK(milliseconds >= 0);
  CHECK_EQ_INT(g_cu.cuEventDestroy_v2(untimed), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuEventDestroy_v2(timed), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(fixture_close(f), HRT_CUDA_SUCCESS);
}

// cuLaunchKernel's limits: grid x <= 2^31-1, y and z <= 65535; block x and
// y <= 1024, z <= 64, and at most 1024 threads; anything past them is
// CUDA_ERROR_INVALID_VALUE, and the limits themselves launch.
static void launches_past_the_grid_and_block_limits_are_invalid(void) {
  FAKE_ONLY();
  fixture_t* f = NULL;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  static const struct {
    unsigned grid[3], block[3];
    hrt_cu_result_t result;
  } kLaunches[] = {
      {{2147483647u, 1, 1}, {1, 1, 1}, HRT_CUDA_SUCCESS},
      {{1, 65535, 65535}, {1, 1, 1}, HRT_CUDA_SUCCESS},
      {{1, 1, 1}, {1024, 1, 1}, HRT_CUDA_SUCCESS},
      {{1, 1, 1}, {1, 1024, 1}, HRT_CUDA_SUCCESS},
      {{1, 1, 1}, {16, 1, 64}, HRT_CUDA_SUCCESS},
      {{2147483648u, 1, 1}, {1, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 65536, 1}, {1, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 70000, 1}, {16, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 1, 65536}, {1, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 1, 1}, {1025, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 1, 1}, {1, 1025, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 1, 1}, {1, 1, 65}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 1, 1}, {32, 32, 2}, HRT_CUDA_ERROR_INVALID_VALUE},
      {{1, 0, 1}, {1, 1, 1}, HRT_CUDA_ERROR_INVALID_VALUE},
  };
  for (size_t i = 0; i < sizeof(kLaunches) / sizeof(kLaunches[0]); ++i) {
    hrt_cu_result_t result =
        fixture_launch(f, kLaunches[i].grid, kLaunches[i].block);
    if (result != kLaunches[i].result) {
      fprintf(stderr, "  grid %ux%ux%u block %ux%ux%u: %d\n",
              kLaunches[i].grid[0], kLaunches[i].grid[1],
              kLaunches[i].grid[2], kLaunches[i].block[0],
              kLaunches[i].block[1], kLaunches[i].block[2], result);
    }
    CHECK_EQ_INT(result, kLaunches[i].result);
  }
  // A rejected launch is not sticky.
  CHECK_EQ_INT(g_cu.cuStreamSynchronize(f->stream), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(fixture_close(f), HRT_CUDA_SUCCESS);
}

// Through halrt (and on a GPU too): a workgroup count past CUDA's grid
// limit is refused when recorded; a workgroup size past the block limits
// that halrt does not check itself (z <= 64, for every device) fails its
// submission with the driver's reason, naming the kernel, grid and block;
// the device keeps working either way.
static void dispatch_past_the_launch_limits_fails_cleanly(void) {
  CUDA_SETUP();
  write_index_t* w = NULL;
  CHECK_OK(write_index_open(&w));
  w->dispatch.workgroup_count[1] = 70000;
  CHECK_STATUS(write_index_record(w), HRT_STATUS_INVALID_ARGUMENT,
               "kernel 'write_index_u32': workgroup count[1] = 70000 must be "
               "in [1, 65535]");
  w->dispatch.workgroup_count[1] = 1;
  w->dispatch.workgroup_size[0] = 1;
  w->dispatch.workgroup_size[2] = 65;
  CHECK_OK(write_index_record(w));
  hrt_status_t status = run(w->device, w->cb, NULL, 0);
  printf("  %s\n", hrt_status_message(status));
  CHECK_STATUS(status, HRT_STATUS_INVALID_ARGUMENT,
               "command 0 (dispatch): kernel 'write_index_u32' of executable "
               "'ptx' (grid 1x1x1, block 1x1x65): cuLaunchKernel failed: "
               "CUDA_ERROR_INVALID_VALUE");
  w->dispatch.workgroup_size[0] = 16;
  w->dispatch.workgroup_size[2] = 1;
  CHECK_OK(write_index_record(w));
  CHECK_OK(write_index_run(w));
}

// The driver tells images apart by their first bytes and reads a cubin (an
// ELF file) and a fatbin (magic 0xBA55ED50) by their headers, not as PTX:
// the committed images load, with each kernel's parameters from the image;
// a corrupt header, or one whose sizes cut the image short, is
// CUDA_ERROR_INVALID_IMAGE; a fatbin without code for the GPU is
// CUDA_ERROR_NO_BINARY_FOR_GPU.
static void images_are_read_by_their_headers(void) {
  FAKE_ONLY();
  fixture_t* f = NULL;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  size_t lengths[2] = {0, 0};
  char* images[2] = {read_file("test/gpu/kernels_sm90.cubin", &lengths[0]),
                     read_file("test/gpu/kernels_sm90.fatbin", &lengths[1])};
  TEST_DEFER(free, images[0]);
  TEST_DEFER(free, images[1]);
  CHECK(images[0] && images[1]);
  for (int i = 0; i < 2; ++i) {
    hrt_cu_module_t module = NULL;
    hrt_cu_function_t function = NULL;
    unsigned int count = 0;
    size_t offset = 0, size = 0;
    CHECK_EQ_INT(g_cu.cuModuleLoadDataEx(&module, images[i], 0, NULL, NULL),
                 HRT_CUDA_SUCCESS);
    CHECK_EQ_INT(g_cu.cuModuleGetFunctionCount(&count, module),
                 HRT_CUDA_SUCCESS);
    CHECK_EQ_INT(count, 4);
    CHECK_EQ_INT(
        g_cu.cuModuleGetFunction(&function, module, "write_index_u32"),
        HRT_CUDA_SUCCESS);
    CHECK_EQ_INT(g_cu.cuFuncGetParamInfo(function, 0, &offset, &size),
                 HRT_CUDA_SUCCESS);
    CHECK(offset == 0 && size == 8);
    CHECK_EQ_INT(g_cu.cuFuncGetParamInfo(function, 1, &offset, &size),
                 HRT_CUDA_SUCCESS);
    CHECK(offset == 8 && size == 4);
    CHECK_EQ_INT(g_cu.cuFuncGetParamInfo(function, 2, &offset, &size),
                 HRT_CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_INT(g_cu.cuModuleUnload(module), HRT_CUDA_SUCCESS);
  }
  // Offsets: the cubin's ELF header; the fatbin's header (16 bytes), then
  // its first entry, the sm_90 cubin (kind, version, header size, payload
  // size, ..., SM at byte 28).
  static const struct {
    const char* what;
    int image;  // 0 cubin, 1 fatbin
    size_t offset, bytes;
    uint64_t value;
    hrt_cu_result_t result;
  } kDamage[] = {
      {"32-bit ELF", 0, 4, 1, 1, HRT_CUDA_ERROR_INVALID_IMAGE},
      {"big-endian ELF", 0, 5, 1, 2, HRT_CUDA_ERROR_INVALID_IMAGE},
      {"x86-64 ELF", 0, 18, 2, 62, HRT_CUDA_ERROR_INVALID_IMAGE},
      {"ELF section header size 40", 0, 58, 2, 40,
       HRT_CUDA_ERROR_INVALID_IMAGE},
      {"ELF section names out of range", 0, 62, 2, 200,
       HRT_CUDA_ERROR_INVALID_IMAGE},
      {"fatbin version 2", 1, 4, 2, 2, HRT_CUDA_ERROR_INVALID_IMAGE},
      {"fatbin header size 8", 1, 6, 2, 8, HRT_CUDA_ERROR_INVALID_IMAGE},
      {"fatbin cut inside its cubin", 1, 8, 8, 1000,
       HRT_CUDA_ERROR_INVALID_IMAGE},
      {"cubin entry cut before its section table", 1, 24, 8, 4000,
       HRT_CUDA_ERROR_INVALID_IMAGE},
      {"fatbin for sm_80 only", 1, 44, 4, 80,
       HRT_CUDA_ERROR_NO_BINARY_FOR_GPU},
  };
  for (size_t k = 0; k < sizeof(kDamage) / sizeof(kDamage[0]); ++k) {
    const int i = kDamage[k].image;
    char* copy = malloc(lengths[i]);
    CHECK(copy != NULL);
    memcpy(copy, images[i], lengths[i]);
    memcpy(copy + kDamage[k].offset, &kDamage[k].value, kDamage[k].bytes);
    hrt_cu_module_t module = NULL;
    hrt_cu_result_t result =
        g_cu.cuModuleLoadDataEx(&module, copy, 0, NULL, NULL);
    free(copy);
    if (result != kDamage[k].result) {
      fprintf(stderr, "  %s: %d\n", kDamage[k].what, result);
      if (!result) (void)g_cu.cuModuleUnload(module);
    }
    CHECK_EQ_INT(result, kDamage[k].result);
  }
  CHECK_EQ_INT(fixture_close(f), HRT_CUDA_SUCCESS);
}

// Parameter sizes come from the image, as the driver reports them through
// cuFuncGetParamInfo: a cubin whose write_index_u32 takes its count as a
// 12-byte struct by value (its EIATTR_KPARAM_INFO edited) is reported so,
// and halrt, which passes only 8-byte pointers and 4-byte constants,
// refuses the executable naming the parameter instead of launching it.
static void by_value_params_are_sized_as_the_image_says(void) {
  FAKE_ONLY();
  size_t length = 0;
  char* cubin = read_file("test/gpu/kernels_sm90.cubin", &length);
  CHECK(cubin != NULL);
  TEST_DEFER(free, cubin);
  // write_index_u32's parameter 1 (.nv.info.write_index_u32 at 0xd24):
  // attribute 0x17, 12 bytes: index 0, ordinal 1, offset 8, size 4 << 18.
  static const uint8_t kParam1[16] = {0x04, 0x17, 0x0c, 0x00, 0, 0, 0, 0,
                                      0x01, 0x00, 0x08, 0x00, 0x00, 0xf0,
                                      0x11, 0x00};
  const size_t at = 0xd2c;
  CHECK(length > at + 16 && memcmp(cubin + at, kParam1, 16) == 0);
  const uint32_t twelve = (12u << 18) | 0xf000u;
  memcpy(cubin + at + 12, &twelve, 4);
  fixture_t* f = NULL;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  hrt_cu_module_t module = NULL;
  hrt_cu_function_t function = NULL;
  size_t offset = 0, size = 0;
  CHECK_EQ_INT(g_cu.cuModuleLoadDataEx(&module, cubin, 0, NULL, NULL),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuModuleGetFunction(&function, module, "write_index_u32"),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuFuncGetParamInfo(function, 1, &offset, &size),
               HRT_CUDA_SUCCESS);
  CHECK(offset == 8 && size == 12);
  CHECK_EQ_INT(g_cu.cuModuleUnload(module), HRT_CUDA_SUCCESS);
  // PTX parameters are sized by their types, arrays by their length.
  static const char kPtx[] =
      ".version 7.0\n.target sm_90\n.address_size 64\n"
      ".visible .entry write_index_u32(.param .u64 .ptr .align 8 out,\n"
      "  .param .align 4 .b8 s[12], .param .f64 a, .param .u16 h)\n{ ret; }\n";
  CHECK_EQ_INT(g_cu.cuModuleLoadDataEx(&module, kPtx, 0, NULL, NULL),
               HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(g_cu.cuModuleGetFunction(&function, module, "write_index_u32"),
               HRT_CUDA_SUCCESS);
  static const size_t kSizes[4] = {8, 12, 8, 2};
  for (size_t i = 0, at = 0; i < 4; at += kSizes[i++]) {
    CHECK_EQ_INT(g_cu.cuFuncGetParamInfo(function, i, &offset, &size),
                 HRT_CUDA_SUCCESS);
    CHECK(offset == at && size == kSizes[i]);
  }
  CHECK_EQ_INT(g_cu.cuModuleUnload(module), HRT_CUDA_SUCCESS);
  CHECK_EQ_INT(fixture_close(f), HRT_CUDA_SUCCESS);
  hrt_hal_device_t* device = NULL;
  CHECK_OK(case_device("cuda", &device));
  hrt_hal_executable_params_t params = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_CUBIN,
      .data = cubin,
      .data_length = length};
  hrt_hal_executable_t* executable = NULL;
  hrt_status_t status =
      hrt_hal_device_create_executable(device, &params, &executable);
  printf("  %s\n", hrt_status_message(status));
  CHECK_STATUS(status, HRT_STATUS_INVALID_ARGUMENT,
               "kernel 'write_index_u32': parameter 1 is 12 bytes");
  // Declared, the struct mismatches its 'u32'.
  params.entry_decl_count = 1;
  params.entry_decls = &kTestKernelDecls[1];  // write_index_u32
  CHECK_STATUS(hrt_hal_device_create_executable(device, &params, &executable),
               HRT_STATUS_INVALID_ARGUMENT,
               "cubin: kernel 'write_index_u32': parameter 1 is declared "
               "'u32' (4 bytes) but is 12 bytes in the cubin");
  // A driver without cuFuncGetParamInfo (before CUDA 12.4) cannot check:
  // the declaration is trusted, and an undeclared layout is UNIMPLEMENTED.
  const hrt_cuda_symbols_t* loaded = NULL;
  CHECK_OK(hrt_cuda_symbols_load(&loaded));
  hrt_cuda_symbols_t old = *loaded;
  old.cuFuncGetParamInfo = NULL;
  CHECK_EQ_INT(fixture_open(&f), HRT_CUDA_SUCCESS);
  CHECK_OK(hrt_cuda_executable_create(device, &old, &params,
                                      &executable));
  TEST_DEFER(release_executable_, executable);
  CHECK_EQ_INT(executable->entries[0].binding_count, 1);
  CHECK_EQ_INT(executable->entries[0].constant_count, 1);
  const hrt_hal_entry_decl_t untyped = {"write_index_u32", NULL, false, 0,
                                        NULL};
  params.entry_decls = &untyped;
  CHECK_STATUS(
      hrt_cuda_executable_create(device, &old, &params, &executable),
      HRT_STATUS_UNIMPLEMENTED,
      "kernel 'write_index_u32': the module does not declare its "
      "parameters, and this driver cannot list them");
  CHECK_EQ_INT(fixture_close(f), HRT_CUDA_SUCCESS);
}

// The names halrt loads are those cuda.h maps each API to (`#define cuX
// cuX_v2`, per-stream variants unwrapped: halrt uses the legacy default
// stream), read from the installed header at test time: an entry loaded
// under an older name than the header's would get the old ABI from a new
// driver. An older name may stay only beside the new one, as a fallback.
// The name `#define api TARGET` in `header` maps `api` to (TARGET with
// __CUDA_API_PTSZ/PTDS unwrapped), copied to `out`; or `api` itself.
static void header_name(const char* header, const char* api, char* out,
                        size_t size) {
  snprintf(out, size, "%s", api);
  const size_t length = strlen(api);
  for (const char* line = header; line; line = strchr(line, '\n')) {
    line += *line == '\n';
    const char* c = line + strspn(line, " \t");
    if (strncmp(c, "#define", 7) != 0) continue;
    c += 7;
    c += strspn(c, " \t");
    if (strncmp(c, api, length) != 0 || (c[length] != ' ' && c[length] != '\t')) {
      continue;
    }
    c += length;
    c += strspn(c, " \t");
    if (strncmp(c, "__CUDA_API_PTSZ(", 16) == 0 ||
        strncmp(c, "__CUDA_API_PTDS(", 16) == 0) {
      c += 16;
    }
    size_t n = strcspn(c, " \t\r\n)");
    if (n >= size) n = size - 1;
    memcpy(out, c, n);
    out[n] = 0;
    return;
  }
}

static void symbol_names_match_cuda_h(void) {
  const char* path = getenv("HRT_TEST_CUDA_HEADER");
  if (!path) path = "/usr/local/cuda/include/cuda.h";
  FILE* file = fopen(path, "rb");
  if (!file) {
    printf("  (skipped: no CUDA header at %s; set HRT_TEST_CUDA_HEADER)\n",
           path);
    return;
  }
  fseek(file, 0, SEEK_END);
  long length = ftell(file);
  fseek(file, 0, SEEK_SET);
  char* header = malloc((size_t)length + 1);
  size_t got = header ? fread(header, 1, (size_t)length, file) : 0;
  fclose(file);
  CHECK(header != NULL);
  header[got] = 0;
  static const char* const kTable[] = {
#define TABLE_NAME(name, params) #name,
#define TABLE_EITHER(field, newer, older, params) #newer, #older,
      HRT_CUDA_SYMBOLS(TABLE_NAME, TABLE_NAME, TABLE_EITHER)
#undef TABLE_EITHER
#undef TABLE_NAME
  };
  const size_t count = sizeof(kTable) / sizeof(kTable[0]);
  int wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    // The API: the entry's name without a _vN suffix.
    char api[128];
    snprintf(api, sizeof(api), "%s", kTable[i]);
    char* suffix = strstr(api, "_v");
    if (suffix && suffix[2] >= '0' && suffix[2] <= '9' &&
        strspn(suffix + 2, "0123456789") == strlen(suffix + 2)) {
      *suffix = 0;
    }
    char declared[160];
    snprintf(declared, sizeof(declared), "CUDAAPI %s(", api);
    if (!strstr(header, declared)) {
      fprintf(stderr, "  %s: cuda.h declares no %s\n", kTable[i], api);
      ++wrong;
      continue;
    }
    char expected[128];
    header_name(header, api, expected, sizeof(expected));
    if (strcmp(kTable[i], expected) == 0) continue;
    bool fallback = false;
    for (size_t j = 0; j < count; ++j) {
      fallback = fallback || strcmp(kTable[j], expected) == 0;
    }
    if (fallback && strcmp(kTable[i], api) == 0) continue;
    fprintf(stderr, "  halrt loads %s; cuda.h maps %s to %s\n", kTable[i],
            api, expected);
    ++wrong;
  }
  printf("  %zu entries checked against %s\n", count, path);
  free(header);
  CHECK_EQ_INT(wrong, 0);
}

TEST_SUITE(cuda_fake_driver,
           TEST_CASE(fake_refuses_calls_without_a_current_context),
           TEST_CASE(sticky_errors_stay_with_the_context),
           TEST_CASE(lost_context_frees_in_stream_order),
           TEST_CASE(elapsed_time_needs_timing_events),
           TEST_CASE(launches_past_the_grid_and_block_limits_are_invalid),
           TEST_CASE(dispatch_past_the_launch_limits_fails_cleanly),
           TEST_CASE(images_are_read_by_their_headers),
           TEST_CASE(by_value_params_are_sized_as_the_image_says),
           TEST_CASE(symbol_names_match_cuda_h));
